"""HM404 (2.68 ``_open_tool_calls``): an id reused by a call of a later response while the
earlier call is open shadows it; reported, and the shadowed call is dangling (HM406)."""

from __future__ import annotations

from typing import Any

from histmig.api import validate
from histmig.options import Options
from histmig.rules.base import Finding
from tests.rules.conftest import call, check_found, check_noop, opening, result, run

PROMPT = {"part_kind": "user-prompt", "content": "go"}
DONE = {"kind": "response", "parts": [{"part_kind": "text", "content": "done"}]}


def _returned(name: str, call_id: str, content: str = "x") -> dict[str, Any]:
    return {"part_kind": "tool-return", "tool_name": name, "content": content, "tool_call_id": call_id}


def _reused(message: int, part: int, at: str, name: str = "t", call_id: str = "a") -> Finding:
    text = f"tool-call {name!r} ({call_id}) reuses the id of the unanswered call at {at}"
    return Finding("HM404", message, part, text, "reused-id", "exact")


def test_hm404_reports_the_reusing_call_and_hm406_closes_the_shadowed_one() -> None:
    messages = [
        opening(),
        {"kind": "response", "parts": [call("t", "call_1")], "timestamp": "2025-05-01T10:00:00Z"},
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "go on"}]},
        {"kind": "response", "parts": [call("u", "call_1")]},
        {"kind": "request", "parts": [result("tool-return", "u", "call_1")]},
    ]
    found = validate(messages, Options(select=("HM404", "HM406")))
    assert [(f.code, f.message, f.part) for f in found] == [("HM406", 1, 0), ("HM404", 3, 0)]
    assert found[1].text == "tool-call 'u' (call_1) reuses the id of the unanswered call at messages[1].parts[0]"
    assert run(messages, "HM404", "HM406", unsafe_fixes=True) == [("HM406", 2, 0, "dangling")]


def test_hm404_within_one_response_is_fifo_not_reuse() -> None:
    messages = [
        {"kind": "response", "parts": [call("t", "a"), call("t", "a")]},
        {"kind": "request", "parts": [result("tool-return", "t", "a"), result("tool-return", "t", "a")]},
    ]
    assert validate(messages) == []


def test_hm404_reports_a_later_call_reusing_an_open_calls_id() -> None:
    history = [
        {"kind": "request", "parts": [PROMPT]},
        {"kind": "response", "parts": [call("t", "a")]},
        {"kind": "request", "parts": [PROMPT]},
        {"kind": "response", "parts": [call("t", "a")]},
        {"kind": "request", "parts": [_returned("t", "a")]},
        DONE,
    ]
    check_found("HM404", history, [_reused(3, 0, "messages[1].parts[0]")])


def test_hm404_names_the_shadowed_call_of_another_tool() -> None:
    history = [
        {"kind": "request", "parts": [PROMPT]},
        {"kind": "response", "parts": [call("t", "a"), call("s", "b")]},
        {"kind": "request", "parts": [_returned("s", "b")]},
        {"kind": "response", "parts": [call("u", "a")]},
        {"kind": "request", "parts": [_returned("u", "a")]},
        DONE,
    ]
    check_found("HM404", history, [_reused(3, 0, "messages[1].parts[0]", "u")], unsafe_fixes=True)


def test_hm404_leaves_an_id_reused_after_its_call_was_answered_alone() -> None:
    history = [
        {"kind": "request", "parts": [PROMPT]},
        {"kind": "response", "parts": [call("t", "a")]},
        {"kind": "request", "parts": [_returned("t", "a")]},
        {"kind": "response", "parts": [call("t", "a")]},
        {"kind": "request", "parts": [_returned("t", "a")]},
        DONE,
    ]
    check_noop("HM404", history)


def test_hm404_leaves_distinct_ids_alone() -> None:
    history = [
        {"kind": "request", "parts": [PROMPT]},
        {"kind": "response", "parts": [call("t", "a")]},
        {"kind": "request", "parts": [_returned("t", "a")]},
        {"kind": "response", "parts": [call("t", "b")]},
        {"kind": "request", "parts": [_returned("t", "b")]},
        DONE,
    ]
    check_noop("HM404", history)


def test_hm404_leaves_a_plain_dangling_call_to_hm406() -> None:
    history = [
        {"kind": "request", "parts": [PROMPT]},
        {"kind": "response", "parts": [call("t", "a")]},
        {"kind": "request", "parts": [PROMPT]},
        DONE,
    ]
    check_noop("HM404", history)


def test_hm404_leaves_null_ids_to_hm201() -> None:
    history = [
        {"kind": "request", "parts": [PROMPT]},
        {"kind": "response", "parts": [call("t", None)]},
        {"kind": "request", "parts": [PROMPT]},
        {"kind": "response", "parts": [call("t", None)]},
    ]
    check_noop("HM404", history)
