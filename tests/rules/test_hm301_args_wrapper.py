"""HM301 (docs/framework.md §3.3)."""

from __future__ import annotations

from typing import Any

from histmig.rules.base import Change
from tests.rules.conftest import check_noop, check_transformed, run


def _call(args: Any, call_id: str = "call_1") -> dict[str, Any]:
    return {"part_kind": "tool-call", "tool_name": "get_weather", "args": args, "tool_call_id": call_id}


def _response(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"kind": "response", "parts": list(parts), "model_name": "gpt-4o"}]


def _unwrapped(part: int, key: str) -> Change:
    return Change("HM301", 0, part, "tool-call", "tool-call", key, "exact")


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


def test_hm301_args_json_becomes_the_json_text() -> None:
    check_transformed(
        "HM301",
        _response(_call({"args_json": '{"city": "Oslo"}'})),
        _response(_call('{"city": "Oslo"}')),
        [_unwrapped(0, "args_json")],
    )


def test_hm301_args_dict_becomes_the_object() -> None:
    check_transformed(
        "HM301",
        _response(_call({"args_dict": {"city": "Oslo", "days": 3}})),
        _response(_call({"city": "Oslo", "days": 3})),
        [_unwrapped(0, "args_dict")],
    )


def test_hm301_unwraps_each_call_of_a_response() -> None:
    check_transformed(
        "HM301",
        _response(
            _call({"args_dict": {}}, "call_1"),
            {"part_kind": "text", "content": "x"},
            _call({"args_json": "{}"}, "call_2"),
        ),
        _response(_call({}, "call_1"), {"part_kind": "text", "content": "x"}, _call("{}", "call_2")),
        [_unwrapped(0, "args_dict"), _unwrapped(2, "args_json")],
    )


def test_hm301_leaves_bare_arguments_alone() -> None:
    check_noop("HM301", _response(_call({"city": "Oslo"}), _call('{"city": "Oslo"}', "call_2"), _call(None, "call_3")))


def test_hm301_leaves_an_argument_named_like_a_wrapper_of_the_other_type_alone() -> None:
    check_noop("HM301", _response(_call({"args_dict": "not an object"}), _call({"args_json": ["x"]}, "call_2")))


def test_hm301_leaves_a_tool_call_part_of_a_request_alone() -> None:
    check_noop("HM301", [{"kind": "request", "parts": [_call({"args_dict": {"city": "Oslo"}})]}])
