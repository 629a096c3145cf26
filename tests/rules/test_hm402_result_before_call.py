"""HM402 (pydantic-ai 2.68 ``_drop_orphaned_tool_results``): a result placed before its call is
dropped, as 2.68 drops it before sending; HM406 then answers the call."""

from __future__ import annotations

import copy
from typing import Any

from histmig.rules.base import Change, Finding
from tests.rules.conftest import call, check_found, check_noop, check_transformed, opening, result, run

PROMPT = {"part_kind": "user-prompt", "content": "go"}
DONE = {"kind": "response", "parts": [{"part_kind": "text", "content": "done"}]}


def _returned(call_id: str, content: str = "x") -> dict[str, Any]:
    return {"part_kind": "tool-return", "tool_name": "t", "content": content, "tool_call_id": call_id}


def _early(message: int, part: int, call_id: str) -> Finding:
    return Finding(
        "HM402", message, part, f"tool-return 't' ({call_id}) comes before its call", "result-before-call", "exact"
    )


def test_hm402_drops_an_early_result_and_hm406_answers_its_call() -> None:
    early = result("tool-return", "t", "a")
    messages = [
        opening(),
        {"kind": "response", "parts": []},
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "now"}, early]},
        {"kind": "response", "parts": [call("t", "a")], "timestamp": "2025-05-01T10:00:00Z"},
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "and?"}]},
        {"kind": "response", "parts": []},
    ]
    assert run(messages, "HM402", "HM406") == [("HM406", 4, 0, "dangling")]  # without --unsafe-fixes only the safe fix
    assert messages[2]["parts"][1] == early
    once = copy.deepcopy(messages)
    assert run(messages, "HM402", "HM406", unsafe_fixes=True) == [
        ("HM402", 4, 0, "synthesized"),  # the safe run's interrupted return is no result: lifted, then made again
        ("HM402", 2, 1, "result-before-call"),
        ("HM406", 4, 0, "dangling"),
    ]
    assert messages[2]["parts"] == [{"part_kind": "user-prompt", "content": "now"}]
    del once[4]["parts"][0]
    run(once, "HM402", "HM406", unsafe_fixes=True)
    assert messages == once


def test_hm402_is_not_an_orphan() -> None:
    messages = [
        {"kind": "request", "parts": [result("tool-return", "t", "a")]},
        {"kind": "response", "parts": [call("t", "a")]},
    ]
    assert run(messages, "HM401", unsafe_fixes=True) == []


def _history(*early: dict[str, Any]) -> list[dict[str, Any]]:
    """A run that opens with a prompt (a whole history, not a fragment), then holds ``early``
    in its second request, before the call they answer."""
    return [
        opening(),
        {"kind": "response", "parts": [{"part_kind": "text", "content": "On it."}]},
        {"kind": "request", "parts": [PROMPT, *early]},
        {"kind": "response", "parts": [call("t", "a")]},
        {"kind": "request", "parts": [_returned("a", "12 C")]},
        DONE,
    ]


def test_hm402_reports_an_early_result_without_unsafe_fixes() -> None:
    check_found("HM402", _history(_returned("a")), [_early(2, 1, "a")])


def test_hm402_drops_an_early_result_and_writes_it_whole_into_the_change() -> None:
    early = _returned("a", "too soon")
    check_transformed(
        "HM402",
        _history(early),
        _history(),
        [Change("HM402", 2, 1, "tool-return", "absent", "result-before-call", "exact", removed=early)],
        unsafe_fixes=True,
    )


def test_hm402_drops_every_early_result_of_a_request() -> None:
    first, second = _returned("a", "one"), _returned("a", "two")
    check_transformed(
        "HM402",
        _history(first, second),
        _history(),
        [
            Change("HM402", 2, 1, "tool-return", "absent", "result-before-call", "exact", removed=first),
            Change("HM402", 2, 2, "tool-return", "absent", "result-before-call", "exact", removed=second),
        ],
        unsafe_fixes=True,
    )


def test_hm402_leaves_results_after_their_calls_alone() -> None:
    check_noop("HM402", _history(), unsafe_fixes=True)


def test_hm402_leaves_a_result_no_call_ever_has_to_hm401() -> None:
    check_noop("HM402", _history(_returned("zz")), unsafe_fixes=True)


def test_hm402_leaves_a_result_in_the_request_after_its_call_alone() -> None:
    history = [
        opening(),
        {"kind": "response", "parts": [call("t", "a")]},
        {"kind": "request", "parts": [PROMPT, _returned("a")]},
        DONE,
    ]
    check_noop("HM402", history, unsafe_fixes=True)


def test_hm402_only_warns_of_an_early_result_of_a_fragment() -> None:
    fragment = _history(_returned("a"))[2:]  # a record that opens on the request holding the early result
    finding = Finding(
        "HM402", 0, 1, "tool-return 't' (a) comes before its call", "result-before-call", "fragment", "warning"
    )
    check_found("HM402", fragment, [finding], unsafe_fixes=True)
