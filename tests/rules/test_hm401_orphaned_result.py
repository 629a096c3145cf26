"""HM401 (pydantic-ai 2.68 ``_drop_orphaned_tool_results``): an orphaned result is re-paired with
the only open call of its tool, else dropped, written whole into its change."""

from __future__ import annotations

import copy
from typing import Any

from histmig.api import validate
from histmig.options import Options
from histmig.rules.base import Change, Finding
from tests.rules.conftest import call, check_found, check_noop, check_transformed, migrate, opening, result, run

ASK = {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "go"}]}
DONE = {"kind": "response", "parts": [{"part_kind": "text", "content": "done"}]}


def _returned(name: str, call_id: str, content: str = "x") -> dict[str, Any]:
    return {"part_kind": "tool-return", "tool_name": name, "content": content, "tool_call_id": call_id}


def _orphan(message: int, part: int, name: str, call_id: str) -> Finding:
    return Finding("HM401", message, part, f"tool-return {name!r} ({call_id}) answers no call", "orphaned", "exact")


def test_hm401_only_reports_without_unsafe_fixes() -> None:
    messages = [
        {"kind": "response", "parts": [call("t", "a")]},
        {"kind": "request", "parts": [result("tool-return", "t", "zz")]},
    ]
    assert run(messages, "HM401") == []
    assert messages[1]["parts"][0]["tool_call_id"] == "zz"


def test_hm401_re_pairs_the_only_candidate_and_keeps_its_content() -> None:
    orphan = result("tool-return", "t", "zz") | {"content": "12 C"}
    messages = [
        opening(),
        {"kind": "response", "parts": [call("t", "a"), call("u", "b")]},
        {"kind": "request", "parts": [result("tool-return", "u", "b"), dict(orphan)]},
    ]
    changes = migrate(messages, Options(select=("HM401",), unsafe_fixes=True))
    assert [(c.rule, c.message, c.part, c.before, c.after, c.evidence, c.certainty) for c in changes] == [
        ("HM401", 2, 1, "tool-return", "tool-return", "only-open-call", "derived")
    ]
    assert (
        changes[0].removed == orphan
        and changes[0].tool_call_id == "a"
        and messages[2]["parts"][1] == orphan | {"tool_call_id": "a"}
    )


def test_hm401_drops_what_it_cannot_re_pair() -> None:
    two_open = [
        opening(),
        {"kind": "response", "parts": [call("t", "a"), call("t", "b")]},
        {"kind": "request", "parts": [result("tool-return", "t", "zz")]},
    ]
    assert run(two_open, "HM401", unsafe_fixes=True) == [("HM401", 2, 0, "orphaned")]
    assert two_open[2]["parts"] == []  # the last request stays, emptied, as 2.68 keeps it
    rivals = [
        opening(),
        {"kind": "response", "parts": [call("t", "a")]},
        {"kind": "request", "parts": [result("tool-return", "t", "y"), result("tool-return", "t", "z")]},
        {"kind": "response", "parts": []},
    ]
    assert run(rivals, "HM401", unsafe_fixes=True) == [
        ("HM401", 2, 0, "orphaned"),
        ("HM401", 2, 1, "orphaned"),
        ("HM401", 2, None, "emptied"),
    ]
    assert rivals == [opening(), {"kind": "response", "parts": [call("t", "a")]}, {"kind": "response", "parts": []}]


def test_hm401_drops_nothing_in_a_fragment() -> None:
    """A record whose first request holds a result (a deferred tool's result starting the next
    run, stored apart; or a context that evicted the call) or that starts with a response is a
    piece of a conversation: its results are kept, whatever the fixes, each a warning of
    certainty ``fragment``."""
    resumed = [
        {"kind": "request", "parts": [result("tool-return", "t", "zz"), {"part_kind": "user-prompt", "content": "hi"}]},
        {"kind": "response", "parts": [{"part_kind": "text", "content": "ok"}]},
    ]
    starts_with_response = [
        {"kind": "response", "parts": [call("t", "a")]},
        {"kind": "request", "parts": [result("tool-return", "t", "zz")]},
    ]
    for fragment in (resumed, starts_with_response):
        kept = copy.deepcopy(fragment)
        assert run(fragment, "HM401", unsafe_fixes=True) == [] and fragment == kept
        found = validate(fragment, Options(select=("HM401",)))
        assert [(f.code, f.certainty, f.severity) for f in found] == [("HM401", "fragment", "warning")]


def test_hm401_takes_a_tool_bound_retry_prompt_as_a_result() -> None:
    messages = [
        {
            "kind": "request",
            "parts": [
                result("retry-prompt", "t", "zz"),
                {"part_kind": "retry-prompt", "content": "again", "tool_name": None},
            ],
        }
    ]
    assert [
        (f.code, f.message, f.part)
        for f in Options(select=("HM401",)).rules[0].check(messages, Options().plan().context)
    ] == [("HM401", 0, 0)]


def test_hm401_reports_an_orphan_where_it_stands_without_unsafe_fixes() -> None:
    history = [
        ASK,
        {"kind": "response", "parts": [call("t", "a")]},
        {"kind": "request", "parts": [_returned("t", "zz")]},
        DONE,
    ]
    check_found("HM401", history, [_orphan(2, 0, "t", "zz")])


def test_hm401_re_pairs_an_orphan_with_the_only_open_call_of_its_tool() -> None:
    orphan = _returned("t", "zz", "12 C")
    check_transformed(
        "HM401",
        [ASK, {"kind": "response", "parts": [call("t", "a")]}, {"kind": "request", "parts": [orphan]}, DONE],
        [
            ASK,
            {"kind": "response", "parts": [call("t", "a")]},
            {"kind": "request", "parts": [orphan | {"tool_call_id": "a"}]},
            DONE,
        ],
        [Change("HM401", 2, 0, "tool-return", "tool-return", "only-open-call", "derived", None, "a", orphan)],
        unsafe_fixes=True,
    )


def test_hm401_drops_an_orphan_of_a_tool_no_open_call_has() -> None:
    paired = [_returned("t", "a"), _returned("t", "b")]
    orphan = _returned("u", "zz")
    calls = {"kind": "response", "parts": [call("t", "a"), call("t", "b")]}
    check_transformed(
        "HM401",
        [ASK, calls, {"kind": "request", "parts": [*paired, orphan]}, DONE],
        [ASK, calls, {"kind": "request", "parts": paired}, DONE],
        [Change("HM401", 2, 2, "tool-return", "absent", "orphaned", "exact", removed=orphan)],
        unsafe_fixes=True,
    )


def test_hm401_leaves_results_paired_by_id_alone() -> None:
    check_noop(
        "HM401",
        [
            ASK,
            {"kind": "response", "parts": [call("t", "a")]},
            {"kind": "request", "parts": [_returned("t", "a")]},
            DONE,
        ],
        unsafe_fixes=True,
    )


def test_hm401_leaves_a_result_answering_a_call_two_messages_back_alone() -> None:
    history = [
        ASK,
        {"kind": "response", "parts": [call("t", "a"), call("u", "b")]},
        {"kind": "request", "parts": [_returned("u", "b")]},
        {"kind": "response", "parts": [{"part_kind": "text", "content": "waiting"}]},
        {"kind": "request", "parts": [_returned("t", "a")]},
        DONE,
    ]
    check_noop("HM401", history, unsafe_fixes=True)


def test_hm401_drops_an_orphan_rather_than_give_it_another_tools_open_call() -> None:
    orphan = _returned("u", "zz")
    calls = {"kind": "response", "parts": [call("t", "a")]}
    check_transformed(
        "HM401",
        [ASK, calls, {"kind": "request", "parts": [orphan]}, DONE],
        [ASK, calls, DONE],  # the emptied request between two responses goes, as 2.68 drops it
        [
            Change("HM401", 2, 0, "tool-return", "absent", "orphaned", "exact", removed=orphan),
            Change("HM401", 2, None, "request", "absent", "emptied", "exact", removed={"kind": "request", "parts": []}),
        ],
        unsafe_fixes=True,
    )
