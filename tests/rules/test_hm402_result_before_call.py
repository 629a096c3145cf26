"""HM402 (pydantic-ai 2.68 ``_drop_orphaned_tool_results``): a result placed before its call is
dropped, as 2.68 drops it before sending; HM406 then answers the call."""

from __future__ import annotations

from tests.rules.conftest import call, opening, result, run


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
    assert run(messages, "HM402", unsafe_fixes=True) == [("HM402", 2, 1, "result-before-call")]
    assert messages[2]["parts"] == [{"part_kind": "user-prompt", "content": "now"}]


def test_hm402_is_not_an_orphan() -> None:
    messages = [
        {"kind": "request", "parts": [result("tool-return", "t", "a")]},
        {"kind": "response", "parts": [call("t", "a")]},
    ]
    assert run(messages, "HM401", unsafe_fixes=True) == []
