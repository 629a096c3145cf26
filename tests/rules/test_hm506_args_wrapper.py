"""HM506 (docs/framework.md §3.3)."""

from __future__ import annotations

from typing import Any

from histmig.options import Options
from histmig.rules.base import Change
from tests.rules.conftest import check_noop, check_transformed, migrate


def _response(args: Any) -> list[dict[str, Any]]:
    call = {"part_kind": "tool-call", "tool_name": "get_weather", "args": args, "tool_call_id": None}
    return [{"kind": "response", "parts": [call], "model_name": "gpt-4"}]


def _wrapped(how: str) -> Change:
    return Change("HM506", 0, 0, "tool-call", "tool-call", f"nothing lost; wrapped as {how}", "exact")


def test_hm506_wraps_bare_arguments_as_releases_before_0_0_21_stored_them_and_hm301_undoes_it() -> None:
    calls = [
        {"part_kind": "tool-call", "tool_name": "t", "args": args, "tool_call_id": None}
        for args in ('{"a": 1}', {"a": 1}, None, {"args_dict": {"a": 1}})
    ]
    messages = [{"kind": "response", "parts": [dict(call) for call in calls]}]
    changes = migrate(messages, Options(target="0.0.20"))
    assert [part["args"] for part in messages[0]["parts"]] == [
        {"args_json": '{"a": 1}'},
        {"args_dict": {"a": 1}},
        {"args_dict": {}},
        {"args_dict": {"a": 1}},
    ]
    assert [(c.part, c.evidence) for c in changes] == [
        (0, "nothing lost; wrapped as args_json"),
        (1, "nothing lost; wrapped as args_dict"),
        (2, "nothing lost; wrapped as args_dict"),
    ]
    migrate(messages)
    assert [part["args"] for part in messages[0]["parts"]] == ['{"a": 1}', {"a": 1}, {}, {"a": 1}]


def test_hm506_wraps_an_object_as_args_dict() -> None:
    check_transformed(
        "HM506",
        _response({"city": "Oslo"}),
        _response({"args_dict": {"city": "Oslo"}}),
        [_wrapped("args_dict")],
        target="0.0.20",
    )


def test_hm506_wraps_json_text_as_args_json() -> None:
    check_transformed(
        "HM506",
        _response('{"city": "Oslo"}'),
        _response({"args_json": '{"city": "Oslo"}'}),
        [_wrapped("args_json")],
        target="0.0.13",
    )


def test_hm506_wraps_null_args_as_an_empty_args_dict() -> None:
    check_transformed("HM506", _response(None), _response({"args_dict": {}}), [_wrapped("args_dict")], target="0.0.20")


def test_hm506_leaves_wrapped_args_alone() -> None:
    check_noop("HM506", _response({"args_json": "{}"}), target="0.0.20")
    check_noop("HM506", _response({"args_dict": {"city": "Oslo"}}), target="0.0.20")


def test_hm506_leaves_a_tool_call_of_a_request_alone() -> None:
    call = {"part_kind": "tool-call", "tool_name": "t", "args": {"city": "Oslo"}, "tool_call_id": None}
    check_noop("HM506", [{"kind": "request", "parts": [call]}], target="0.0.20")


def test_hm506_leaves_a_history_without_calls_alone() -> None:
    check_noop("HM506", [{"kind": "response", "parts": [{"part_kind": "text", "content": "x"}]}], target="0.0.20")


def test_hm506_wraps_each_call_of_a_response() -> None:
    first, second = _response({"city": "Oslo"}), _response('{"city": "Bergen"}')
    before = [{**first[0], "parts": [*first[0]["parts"], *second[0]["parts"]]}]
    after = [
        {
            **first[0],
            "parts": [
                first[0]["parts"][0] | {"args": {"args_dict": {"city": "Oslo"}}},
                second[0]["parts"][0] | {"args": {"args_json": '{"city": "Bergen"}'}},
            ],
        }
    ]
    check_transformed(
        "HM506",
        before,
        after,
        [
            _wrapped("args_dict"),
            Change("HM506", 0, 1, "tool-call", "tool-call", "nothing lost; wrapped as args_json", "exact"),
        ],
        target="0.0.20",
    )
