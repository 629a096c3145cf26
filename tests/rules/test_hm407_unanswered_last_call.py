"""HM407 (2.68 ``repair_messages(repair_last_response=True)``): a call of the last response is a
warning; ``--unsafe-fixes`` closes it with the interrupted return."""

from __future__ import annotations

from typing import Any

from histmig.api import validate
from histmig.rules.base import Change, Finding
from histmig.rules.pairing import INTERRUPTED_CONTENT, SYNTHESIZED_KEY
from tests.rules.conftest import call, check_found, check_noop, check_transformed, result, run

PROMPT = {"part_kind": "user-prompt", "content": "go"}
RETURN = {
    "tool_name": "t",
    "content": INTERRUPTED_CONTENT,
    "tool_call_id": "a",
    "tool_kind": None,
    "metadata": {SYNTHESIZED_KEY: True},
    "outcome": "interrupted",
    "retry": None,
    "part_kind": "tool-return",
}
NEW_REQUEST = {
    "timestamp": None,
    "instructions": None,
    "kind": "request",
    "run_id": None,
    "conversation_id": None,
    "metadata": None,
    "state": "complete",
}
"""The fields of the request 2.68 adds after the last response to hold its returns, but ``parts``."""


def _frontier(message: int, part: int, name: str = "t", call_id: str = "a") -> Finding:
    text = f"tool-call {name!r} ({call_id}) of the last response has no result yet"
    return Finding("HM407", message, part, text, "frontier", "exact", "warning")


def _last(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"kind": "request", "parts": [PROMPT]}, {"kind": "response", "parts": list(parts)}]


def test_hm407_is_a_warning_and_its_fix_is_unsafe() -> None:
    messages = [
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "run the job"}]},
        {"kind": "response", "parts": [call("run_job", "c1"), call("log", "c2")], "timestamp": "2025-05-01T10:00:01Z"},
        {"kind": "request", "parts": [result("tool-return", "log", "c2")]},
    ]
    assert [(f.code, f.message, f.part, f.severity) for f in validate(messages)] == [("HM407", 1, 0, "warning")]
    assert run(messages, "HM407") == []
    assert run(messages, "HM407", unsafe_fixes=True) == [("HM407", 2, 1, "frontier")]
    assert [(p["tool_call_id"], p.get("outcome")) for p in messages[2]["parts"]] == [
        ("c2", None),
        ("c1", "interrupted"),
    ]
    assert validate(messages) == []


def test_hm407_warns_of_a_last_call_without_unsafe_fixes() -> None:
    check_found("HM407", _last(call("t", "a")), [_frontier(1, 0)])


def test_hm407_warns_of_each_open_call_of_the_last_response() -> None:
    check_found(
        "HM407",
        _last(call("t", "a"), {"part_kind": "text", "content": "x"}, call("u", "b")),
        [_frontier(1, 0), _frontier(1, 2, "u", "b")],
    )


def test_hm407_closes_the_call_in_a_request_of_its_own_with_unsafe_fixes() -> None:
    check_transformed(
        "HM407",
        _last(call("t", "a")),
        [*_last(call("t", "a")), {"parts": [RETURN], **NEW_REQUEST}],
        [Change("HM407", 2, 0, "absent", "tool-return", "frontier", "exact")],
        unsafe_fixes=True,
    )


def test_hm407_leaves_a_last_response_without_calls_alone() -> None:
    check_noop("HM407", _last({"part_kind": "text", "content": "done"}), unsafe_fixes=True)


def test_hm407_leaves_the_open_calls_of_earlier_responses_to_hm406() -> None:
    history = [*_last(call("t", "a")), {"kind": "request", "parts": [PROMPT]}, {"kind": "response", "parts": []}]
    check_noop("HM407", history, unsafe_fixes=True)


def test_hm407_leaves_a_last_call_answered_in_the_request_after_it_alone() -> None:
    check_noop("HM407", [*_last(call("t", "a")), {"kind": "request", "parts": [result("tool-return", "t", "a")]}])


def test_hm407_closes_only_the_open_calls_of_the_last_response() -> None:
    answered = {"part_kind": "tool-return", "tool_name": "u", "content": "ok", "tool_call_id": "b"}
    history = [*_last(call("t", "a"), call("u", "b")), {"kind": "request", "parts": [answered]}]
    check_transformed(
        "HM407",
        history,
        [*history[:2], {"kind": "request", "parts": [answered, RETURN]}],
        [Change("HM407", 2, 1, "absent", "tool-return", "frontier", "exact")],
        unsafe_fixes=True,
    )
