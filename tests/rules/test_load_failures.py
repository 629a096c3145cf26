"""HM201–HM204 (framework-facts §2 load failures, §3.3)."""

from __future__ import annotations

from histmig.pipeline import Options, migrate, select_rules
from histmig.rules.load_failures import derived_tool_call_id


def run(messages: list, *codes: str) -> list[tuple]:
    changes = migrate(messages, Options(rules=select_rules(codes)))
    return [(c.rule, c.message, c.part, c.evidence) for c in changes]


def call(name: str, call_id: object = None) -> dict:
    return {"part_kind": "tool-call", "tool_name": name, "args": {}, "tool_call_id": call_id}


def result(kind: str, name: str, call_id: object = None) -> dict:
    return {"part_kind": kind, "tool_name": name, "content": "x", "tool_call_id": call_id}


def test_hm201_pairs_null_ids_in_order() -> None:
    messages = [
        {"kind": "response", "parts": [call("a"), call("a")]},
        {"kind": "request", "parts": [result("retry-prompt", "a"), result("tool-return", "a")]},
        {"kind": "response", "parts": [call("a")]},
        {"kind": "request", "parts": [result("tool-return", "a")]},
    ]
    changes = run(messages, "HM201")
    first, second, third = derived_tool_call_id(0, 0, "a"), derived_tool_call_id(0, 1, "a"), derived_tool_call_id(2, 0, "a")
    assert [p["tool_call_id"] for m in messages for p in m["parts"]] == [first, second, first, second, third, third]
    assert first.startswith("pyd_ai_") and len(first) == 39 and len({first, second, third}) == 3
    assert [c[3] for c in changes] == ["position", "position", "paired-call", "paired-call", "position", "paired-call"]


def test_hm201_skips_calls_already_answered_by_id() -> None:
    messages = [
        {"kind": "response", "parts": [call("a", "c1"), call("a", "c2")]},
        {"kind": "request", "parts": [result("tool-return", "a", "c1"), {"part_kind": "retry-prompt", "tool_name": "a", "content": "x"}]},
    ]
    run(messages, "HM201")
    assert messages[1]["parts"][1]["tool_call_id"] == "c2"


def test_hm201_a_result_without_a_call_gets_its_own_id() -> None:
    messages = [{"kind": "request", "parts": [result("tool-return", "a")]}]
    assert run(messages, "HM201") == [("HM201", 0, 0, "position:no-call")]
    assert messages[0]["parts"][0]["tool_call_id"] == derived_tool_call_id(0, 0, "a")


def test_hm201_leaves_absent_ids_on_calls_and_tool_less_retries() -> None:
    messages = [
        {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "a", "args": {}}]},
        {"kind": "request", "parts": [{"part_kind": "retry-prompt", "content": "x", "tool_name": None, "tool_call_id": None}]},
    ]
    assert run(messages, "HM201") == []


def test_hm202_removes_null_timestamps_where_they_fail() -> None:
    messages = [
        {"kind": "request", "timestamp": None, "parts": [{"part_kind": "user-prompt", "content": "x", "timestamp": None}]},
        {"kind": "response", "timestamp": None, "parts": [{"part_kind": "text", "content": "y", "timestamp": None}]},
    ]
    assert run(messages, "HM202") == [("HM202", 1, None, "null-timestamp"), ("HM202", 0, 0, "null-timestamp")]
    assert messages == [
        {"kind": "request", "timestamp": None, "parts": [{"part_kind": "user-prompt", "content": "x"}]},
        {"kind": "response", "parts": [{"part_kind": "text", "content": "y", "timestamp": None}]},
    ]


def test_hm203_inserts_input_after_msg() -> None:
    messages = [{"kind": "request", "parts": [{"part_kind": "retry-feedback", "retry": {"cause": "validation_error"}, "content": [{"type": "t", "loc": [], "msg": "m", "ctx": {}}, {"type": "t", "loc": [], "msg": "m", "input": 1}]}]}]
    assert run(messages, "HM203") == [("HM203", 0, 0, "missing-input:1")]
    assert list(messages[0]["parts"][0]["content"][0]) == ["type", "loc", "msg", "input", "ctx"]


def test_hm204_joins_existing_instructions_and_keeps_unmovable_parts() -> None:
    messages = [
        {
            "kind": "request",
            "instructions": "Be kind.",
            "parts": [
                {"part_kind": "instruction", "content": "Be concise."},
                {"part_kind": "instruction", "content": "Dynamic.", "dynamic": True},
                {"part_kind": "instruction", "content": "Cite.", "name": None},
            ],
        }
    ]
    assert run(messages, "HM204") == [("HM204", 0, 0, "instruction-part"), ("HM204", 0, 2, "instruction-part")]
    assert messages[0]["instructions"] == "Be kind.\n\nBe concise.\n\nCite."
    assert messages[0]["parts"] == [{"part_kind": "instruction", "content": "Dynamic.", "dynamic": True}]


def test_hm204_moves_the_part_as_the_framework_dumps_it() -> None:
    dumped = {"content": "Be concise.", "dynamic": False, "on_change": "rewrite", "name": None, "id": None, "part_kind": "instruction"}
    messages = [{"parts": [{"content": "hi", "part_kind": "user-prompt"}, dumped], "instructions": None, "kind": "request"}]
    assert run(messages, "HM204") == [("HM204", 0, 1, "instruction-part")]
    assert messages == [{"parts": [{"content": "hi", "part_kind": "user-prompt"}], "instructions": "Be concise.", "kind": "request"}]
