"""HM301 (framework-facts §3.3)."""

from __future__ import annotations

from tests.rules.conftest import run


def test_hm301_unwraps_args_json_and_args_dict_only() -> None:
    parts = [
        {"part_kind": "tool-call", "tool_name": "a", "args": {"args_json": '{"x": 1}'}},
        {"part_kind": "tool-call", "tool_name": "a", "args": {"args_dict": {"x": 1}}},
        {"part_kind": "tool-call", "tool_name": "a", "args": {"args_json": {"x": 1}}},
        {"part_kind": "tool-call", "tool_name": "a", "args": {"args_dict": {"x": 1}, "other": 2}},
    ]
    messages = [{"kind": "response", "parts": parts}]
    assert run(messages, "HM301") == [("HM301", 0, 0, "args_json"), ("HM301", 0, 1, "args_dict")]
    assert [p["args"] for p in parts] == [
        '{"x": 1}',
        {"x": 1},
        {"args_json": {"x": 1}},
        {"args_dict": {"x": 1}, "other": 2},
    ]


def test_hm301_leaves_builtin_calls_alone() -> None:
    messages = [
        {
            "kind": "response",
            "parts": [{"part_kind": "builtin-tool-call", "tool_name": "web_search", "args": {"args_json": "{}"}}],
        }
    ]
    assert run(messages, "HM301") == []
