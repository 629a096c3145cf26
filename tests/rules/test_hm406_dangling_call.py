"""HM406 (2.68 ``_repair_dangling_tool_calls``): a call before the last response without a
result gets 2.68's interrupted return, safely (2.68 adds it before every request anyway)."""

from __future__ import annotations

import orjson

from histmig.api import migrate
from histmig.options import Options
from histmig.rules.pairing import INTERRUPTED_CONTENT, SYNTHESIZED_KEY
from tests.rules.conftest import call, run


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
