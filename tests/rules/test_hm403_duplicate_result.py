"""HM403 (2.68's ordered matching walk): a second result for one call is reported, never fixed."""

from __future__ import annotations

from typing import Any

from histmig.api import validate
from histmig.options import Options
from histmig.rules.base import Finding
from tests.rules.conftest import call, check_found, check_noop, result, run

PROMPT = {"part_kind": "user-prompt", "content": "go"}
DONE = {"kind": "response", "parts": [{"part_kind": "text", "content": "done"}]}


def _returned(name: str, call_id: str, content: str = "x") -> dict[str, Any]:
    return {"part_kind": "tool-return", "tool_name": name, "content": content, "tool_call_id": call_id}


def _second(message: int, part: int, at: str, name: str = "t", call_id: str = "a") -> Finding:
    text = f"tool-return {name!r} ({call_id}) answers the call at {at}, which an earlier result answered"
    return Finding("HM403", message, part, text, "duplicate", "exact")


def test_hm403_reports_the_second_result_and_where_the_call_is() -> None:
    messages = [
        {"kind": "response", "parts": [call("t", "a"), call("t", "a")]},
        {
            "kind": "request",
            "parts": [
                result("tool-return", "t", "a"),
                result("tool-return", "t", "a"),
                result("tool-return", "t", "a"),
            ],
        },
    ]
    found = validate(messages, Options(select=("HM403",)))
    assert [(f.code, f.message, f.part, f.text) for f in found] == [
        (
            "HM403",
            1,
            2,
            "tool-return 't' (a) answers the call at messages[0].parts[1], which an earlier result answered",
        )
    ]
    assert run(messages, "HM403", unsafe_fixes=True) == []


def test_hm403_reports_a_second_result_in_the_same_request() -> None:
    history = [
        {"kind": "request", "parts": [PROMPT]},
        {"kind": "response", "parts": [call("t", "a")]},
        {"kind": "request", "parts": [_returned("t", "a", "12 C"), _returned("t", "a", "13 C")]},
        DONE,
    ]
    check_found("HM403", history, [_second(2, 1, "messages[1].parts[0]")])


def test_hm403_reports_a_second_result_in_a_later_request() -> None:
    history = [
        {"kind": "request", "parts": [PROMPT]},
        {"kind": "response", "parts": [call("t", "a")]},
        {"kind": "request", "parts": [_returned("t", "a")]},
        {"kind": "response", "parts": [{"part_kind": "text", "content": "waiting"}]},
        {"kind": "request", "parts": [_returned("t", "a")]},
        DONE,
    ]
    check_found("HM403", history, [_second(4, 0, "messages[1].parts[0]")])


def test_hm403_has_no_fix_even_with_unsafe_fixes() -> None:
    history = [
        {"kind": "request", "parts": [PROMPT]},
        {"kind": "response", "parts": [call("t", "a")]},
        {"kind": "request", "parts": [_returned("t", "a"), _returned("t", "a")]},
        DONE,
    ]
    check_found("HM403", history, [_second(2, 1, "messages[1].parts[0]")], unsafe_fixes=True)


def test_hm403_leaves_one_result_a_call_alone() -> None:
    history = [
        {"kind": "request", "parts": [PROMPT]},
        {"kind": "response", "parts": [call("t", "a"), call("t", "b")]},
        {"kind": "request", "parts": [_returned("t", "a"), _returned("t", "b")]},
        DONE,
    ]
    check_noop("HM403", history)


def test_hm403_leaves_two_calls_sharing_an_id_each_answered_once_alone() -> None:
    history = [
        {"kind": "request", "parts": [PROMPT]},
        {"kind": "response", "parts": [call("t", "a"), call("t", "a")]},
        {"kind": "request", "parts": [_returned("t", "a"), _returned("t", "a")]},
        DONE,
    ]
    check_noop("HM403", history)


def test_hm403_leaves_a_result_answering_no_call_to_hm401() -> None:
    history = [
        {"kind": "request", "parts": [PROMPT]},
        {"kind": "response", "parts": [call("t", "a")]},
        {"kind": "request", "parts": [_returned("t", "a"), _returned("t", "zz")]},
        DONE,
    ]
    check_noop("HM403", history)


def test_hm403_leaves_an_early_result_to_hm402() -> None:
    history = [
        {"kind": "request", "parts": [PROMPT, _returned("t", "a")]},
        {"kind": "response", "parts": [call("t", "a")]},
        {"kind": "request", "parts": [_returned("t", "a")]},
        DONE,
    ]
    check_noop("HM403", history)
