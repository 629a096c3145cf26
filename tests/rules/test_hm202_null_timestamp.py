"""HM202 (docs/framework.md §2 load failures)."""

from __future__ import annotations

from histmig.rules.base import Change
from tests.rules.conftest import check_noop, check_transformed, run

PROMPT = {"part_kind": "user-prompt", "content": "hi"}
TEXT = {"part_kind": "text", "content": "hello"}


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


def test_hm202_removes_a_tool_returns_null_timestamp_and_keeps_the_key_order() -> None:
    call = {"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": "c1"}
    returned = {"part_kind": "tool-return", "tool_name": "t", "content": "42", "timestamp": None, "tool_call_id": "c1"}
    kept = {"part_kind": "tool-return", "tool_name": "t", "content": "42", "tool_call_id": "c1"}
    check_transformed(
        "HM202",
        [{"kind": "response", "parts": [call]}, {"kind": "request", "parts": [returned]}],
        [{"kind": "response", "parts": [call]}, {"kind": "request", "parts": [kept]}],
        [Change("HM202", 1, 0, "tool-return", "tool-return", "null-timestamp", "exact")],
    )


def test_hm202_removes_a_responses_null_timestamp() -> None:
    check_transformed(
        "HM202",
        [{"kind": "request", "parts": [PROMPT]}, {"kind": "response", "parts": [TEXT], "timestamp": None}],
        [{"kind": "request", "parts": [PROMPT]}, {"kind": "response", "parts": [TEXT]}],
        [Change("HM202", 1, None, "response", "response", "null-timestamp", "exact")],
    )


def test_hm202_removes_a_system_prompts_null_timestamp() -> None:
    system = {"part_kind": "system-prompt", "content": "Be brief.", "timestamp": None}
    check_transformed(
        "HM202",
        [{"kind": "request", "parts": [system, PROMPT]}],
        [{"kind": "request", "parts": [{"part_kind": "system-prompt", "content": "Be brief."}, PROMPT]}],
        [Change("HM202", 0, 0, "system-prompt", "system-prompt", "null-timestamp", "exact")],
    )


def test_hm202_leaves_a_requests_own_null_timestamp_alone() -> None:
    check_noop("HM202", [{"kind": "request", "parts": [PROMPT], "timestamp": None}])


def test_hm202_leaves_a_null_timestamp_on_a_responses_text_part_alone() -> None:
    check_noop("HM202", [{"kind": "response", "parts": [TEXT | {"timestamp": None}]}])


def test_hm202_leaves_stored_and_absent_timestamps_alone() -> None:
    check_noop(
        "HM202",
        [
            {"kind": "request", "parts": [PROMPT | {"timestamp": "2025-05-01T10:00:00Z"}]},
            {"kind": "response", "parts": [TEXT], "timestamp": "2025-05-01T10:00:01Z"},
            {"kind": "request", "parts": [PROMPT]},
        ],
    )
