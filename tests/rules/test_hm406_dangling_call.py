"""HM406 (2.68 ``_repair_dangling_tool_calls``): a call before the last response without a
result gets 2.68's interrupted return, safely (2.68 adds it before every request anyway)."""

from __future__ import annotations

from typing import Any

import orjson

from histmig.options import Options
from histmig.rules.base import Change
from histmig.rules.pairing import INTERRUPTED_CONTENT, SYNTHESIZED_KEY
from tests.rules.conftest import call, check_noop, check_transformed, migrate, run

PROMPT = {"part_kind": "user-prompt", "content": "go"}
DONE = {"kind": "response", "parts": [{"part_kind": "text", "content": "done"}]}


def _returned(name: str, call_id: str, content: str = "x") -> dict[str, Any]:
    return {"part_kind": "tool-return", "tool_name": name, "content": content, "tool_call_id": call_id}


def _interrupted(name: str, call_id: str, **fields: Any) -> dict[str, Any]:
    """The return 2.68 synthesizes for a call without a result, in its key order."""
    return {
        "tool_name": name,
        "content": INTERRUPTED_CONTENT,
        "tool_call_id": call_id,
        "tool_kind": fields.pop("tool_kind", None),
        "metadata": {SYNTHESIZED_KEY: True},
        **fields,
        "outcome": "interrupted",
        "retry": None,
        "part_kind": "tool-return",
    }


def _closed(message: int, part: int) -> Change:
    return Change("HM406", message, part, "absent", "tool-return", "dangling", "exact")


def test_hm406_answers_a_crashed_runs_calls_in_the_next_request() -> None:
    messages = [
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "weather?"}]},
        {
            "kind": "response",
            "parts": [call("get_weather", "c1") | {"tool_kind": "function"}],
            "timestamp": "2025-05-01T10:00:01Z",
        },
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hello?"}]},
        {"kind": "response", "parts": [{"part_kind": "text", "content": "Hi."}]},
    ]
    assert run(messages, "HM406") == [("HM406", 2, 0, "dangling")]
    assert messages[2]["parts"][0] == {
        "tool_name": "get_weather",
        "content": INTERRUPTED_CONTENT,
        "tool_call_id": "c1",
        "tool_kind": "function",
        "metadata": {SYNTHESIZED_KEY: True},
        "timestamp": "2025-05-01T10:00:01Z",
        "outcome": "interrupted",
        "retry": None,
        "part_kind": "tool-return",
    }
    assert migrate(messages, Options()) == []


def test_hm406_leaves_the_calls_of_the_last_response_to_hm407() -> None:
    messages = [{"kind": "response", "parts": [call("t", "c1")]}]
    before = orjson.dumps(messages)
    assert run(messages, "HM406") == [] and orjson.dumps(messages) == before


def test_hm406_answers_a_dangling_call_first_in_the_next_request() -> None:
    asked = {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hello?"}]}
    check_transformed(
        "HM406",
        [{"kind": "request", "parts": [PROMPT]}, {"kind": "response", "parts": [call("t", "a")]}, asked, DONE],
        [
            {"kind": "request", "parts": [PROMPT]},
            {"kind": "response", "parts": [call("t", "a")]},
            {"kind": "request", "parts": [_interrupted("t", "a"), *asked["parts"]]},
            DONE,
        ],
        [_closed(2, 0)],
    )


def test_hm406_answers_the_open_call_after_the_answered_ones() -> None:
    check_transformed(
        "HM406",
        [
            {"kind": "request", "parts": [PROMPT]},
            {"kind": "response", "parts": [call("t", "a"), call("u", "b")]},
            {"kind": "request", "parts": [_returned("u", "b")]},
            DONE,
        ],
        [
            {"kind": "request", "parts": [PROMPT]},
            {"kind": "response", "parts": [call("t", "a"), call("u", "b")]},
            {"kind": "request", "parts": [_returned("u", "b"), _interrupted("t", "a")]},
            DONE,
        ],
        [_closed(2, 1)],
    )


def test_hm406_takes_the_calls_timestamp_and_tool_kind() -> None:
    response = {
        "kind": "response",
        "parts": [call("t", "a") | {"tool_kind": "function"}],
        "timestamp": "2025-05-01T10:00:01Z",
    }
    check_transformed(
        "HM406",
        [{"kind": "request", "parts": [PROMPT]}, response, {"kind": "request", "parts": [PROMPT]}, DONE],
        [
            {"kind": "request", "parts": [PROMPT]},
            response,
            {
                "kind": "request",
                "parts": [_interrupted("t", "a", tool_kind="function", timestamp="2025-05-01T10:00:01Z"), PROMPT],
            },
            DONE,
        ],
        [_closed(2, 0)],
    )


def test_hm406_leaves_answered_calls_alone() -> None:
    check_noop(
        "HM406",
        [
            {"kind": "request", "parts": [PROMPT]},
            {"kind": "response", "parts": [call("t", "a")]},
            {"kind": "request", "parts": [_returned("t", "a")]},
            DONE,
        ],
    )


def test_hm406_leaves_a_call_answered_by_a_retried_return_alone() -> None:
    retried = _returned("t", "a", "bad args") | {"outcome": "retried"}
    check_noop(
        "HM406",
        [
            {"kind": "request", "parts": [PROMPT]},
            {"kind": "response", "parts": [call("t", "a")]},
            {"kind": "request", "parts": [retried]},
            DONE,
        ],
    )


def test_hm406_leaves_a_history_without_calls_alone() -> None:
    check_noop("HM406", [{"kind": "request", "parts": [PROMPT]}, DONE])
