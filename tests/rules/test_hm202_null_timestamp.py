"""HM202 (framework-facts §2 load failures)."""

from __future__ import annotations

from tests.rules.conftest import run


def test_hm202_removes_null_timestamps_where_they_fail() -> None:
    messages = [
        {
            "kind": "request",
            "timestamp": None,
            "parts": [{"part_kind": "user-prompt", "content": "x", "timestamp": None}],
        },
        {"kind": "response", "timestamp": None, "parts": [{"part_kind": "text", "content": "y", "timestamp": None}]},
    ]
    assert run(messages, "HM202") == [("HM202", 1, None, "null-timestamp"), ("HM202", 0, 0, "null-timestamp")]
    assert messages == [
        {"kind": "request", "timestamp": None, "parts": [{"part_kind": "user-prompt", "content": "x"}]},
        {"kind": "response", "parts": [{"part_kind": "text", "content": "y", "timestamp": None}]},
    ]


def test_hm202_removes_a_builtin_tool_returns_null_timestamp_in_a_response() -> None:
    part = {
        "part_kind": "builtin-tool-return",
        "tool_name": "web_search",
        "content": "x",
        "tool_call_id": "b1",
        "timestamp": None,
    }
    messages = [{"kind": "response", "parts": [part]}]
    assert run(messages, "HM202") == [("HM202", 0, 0, "null-timestamp")]
    assert "timestamp" not in messages[0]["parts"][0]
