"""HM401 (pydantic-ai 2.68 ``_drop_orphaned_tool_results``): an orphaned result is re-paired with
the only open call of its tool, else dropped, written whole into its change."""

from __future__ import annotations

from histmig.api import migrate
from histmig.options import Options
from tests.rules.conftest import call, result, run


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
        {"kind": "response", "parts": [call("t", "a"), call("u", "b")]},
        {"kind": "request", "parts": [result("tool-return", "u", "b"), dict(orphan)]},
    ]
    changes = migrate(messages, Options(select=("HM401",), unsafe_fixes=True))
    assert [(c.rule, c.message, c.part, c.before, c.after, c.evidence, c.certainty) for c in changes] == [
        ("HM401", 1, 1, "tool-return", "tool-return", "only-open-call", "derived")
    ]
    assert (
        changes[0].removed == orphan
        and changes[0].tool_call_id == "a"
        and messages[1]["parts"][1] == orphan | {"tool_call_id": "a"}
    )


def test_hm401_drops_what_it_cannot_re_pair() -> None:
    two_open = [
        {"kind": "response", "parts": [call("t", "a"), call("t", "b")]},
        {"kind": "request", "parts": [result("tool-return", "t", "zz")]},
    ]
    assert run(two_open, "HM401", unsafe_fixes=True) == [("HM401", 1, 0, "orphaned")]
    assert two_open[1]["parts"] == []  # the last request stays, emptied, as 2.68 keeps it
    rivals = [
        {"kind": "response", "parts": [call("t", "a")]},
        {"kind": "request", "parts": [result("tool-return", "t", "y"), result("tool-return", "t", "z")]},
        {"kind": "response", "parts": []},
    ]
    assert run(rivals, "HM401", unsafe_fixes=True) == [
        ("HM401", 1, 0, "orphaned"),
        ("HM401", 1, 1, "orphaned"),
        ("HM401", 1, None, "emptied"),
    ]
    assert rivals == [{"kind": "response", "parts": [call("t", "a")]}, {"kind": "response", "parts": []}]
    evicted = [
        {"kind": "request", "parts": [result("tool-return", "t", "zz"), {"part_kind": "user-prompt", "content": "hi"}]}
    ]
    assert run(evicted, "HM401", unsafe_fixes=True) == [("HM401", 0, 0, "orphaned")]
    assert evicted[0]["parts"] == [{"part_kind": "user-prompt", "content": "hi"}]


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
