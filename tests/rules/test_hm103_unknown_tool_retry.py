"""HM103 (docs/framework.md §1.2)."""

from __future__ import annotations

from typing import Any

from histmig.options import Options
from histmig.rules.base import Change
from tests.rules.conftest import check_noop, check_transformed, migrate

NULL_RETRY = {"attempt": None, "max_retries": None}
UNKNOWN = "Unknown tool name: 'nope'. Available tools: add"


def _calls(*ids: str, name: str = "nope") -> dict[str, Any]:
    return {
        "kind": "response",
        "parts": [{"part_kind": "tool-call", "tool_name": name, "args": {}, "tool_call_id": i} for i in ids],
    }


def _retry(content: Any = UNKNOWN, **fields: Any) -> dict[str, Any]:
    return {"part_kind": "retry-prompt", "content": content, "tool_name": None, "tool_call_id": None, **fields}


def _retried(call_id: str, content: str = UNKNOWN, **fields: Any) -> dict[str, Any]:
    return {
        "part_kind": "tool-return",
        "content": content,
        "tool_name": "nope",
        "tool_call_id": call_id,
        **fields,
        "outcome": "retried",
        "retry": {"cause": "unknown_tool", **NULL_RETRY},
    }


def _change(message: int, part: int, call_id: str) -> Change:
    return Change(
        "HM103",
        message,
        part,
        "retry-prompt",
        "tool-return",
        "unknown-tool+preceding-call",
        "template",
        "unknown_tool",
        call_id,
    )


def _unknown_tool_history() -> list:
    return [
        {
            "kind": "response",
            "parts": [{"part_kind": "tool-call", "tool_name": "nope", "args": {}, "tool_call_id": "c9"}],
        },
        {
            "kind": "request",
            "parts": [
                {
                    "content": "Unknown tool name: 'nope'. Available tools: add",
                    "tool_name": None,
                    "tool_call_id": None,
                    "part_kind": "retry-prompt",
                }
            ],
        },
    ]


def test_hm103_rebinds_to_the_preceding_call() -> None:
    messages = _unknown_tool_history()
    changes = migrate(messages)
    assert [(c.rule, c.cause) for c in changes] == [("HM103", "unknown_tool")]
    assert messages[1]["parts"][0] == {
        "content": "Unknown tool name: 'nope'. Available tools: add",
        "tool_name": "nope",
        "tool_call_id": "c9",
        "outcome": "retried",
        "retry": {"cause": "unknown_tool", **NULL_RETRY},
        "part_kind": "tool-return",
    }


def test_hm103_without_a_matching_call_leaves_feedback() -> None:
    messages = _unknown_tool_history()
    messages[0]["parts"][0]["tool_name"] = "other"
    assert [(c.rule, c.cause) for c in migrate(messages)] == [("HM102", "model_retry")]


def test_hm103_is_off_in_framework_mode() -> None:
    messages = _unknown_tool_history()
    assert [c.rule for c in migrate(messages, Options(causes="framework"))] == ["HM102"]


def test_hm103_uses_each_call_once_in_order() -> None:
    call = {"part_kind": "tool-call", "tool_name": "nope", "args": {}}
    retry = {
        "content": "Unknown tool name: 'nope'. No tools available.",
        "tool_name": None,
        "part_kind": "retry-prompt",
    }
    messages = [
        {"kind": "response", "parts": [{**call, "tool_call_id": "c1"}, {**call, "tool_call_id": "c2"}]},
        {"kind": "request", "parts": [dict(retry), dict(retry), dict(retry)]},
    ]
    assert [c.rule for c in migrate(messages)] == ["HM103", "HM103", "HM102"]
    assert [p.get("tool_call_id") for p in messages[1]["parts"]] == ["c1", "c2", None]


def test_hm103_binds_the_retry_to_the_invented_call_before_it() -> None:
    check_transformed(
        "HM103",
        [_calls("c9"), {"kind": "request", "parts": [_retry(timestamp="2024-06-01T09:00:00Z")]}],
        [_calls("c9"), {"kind": "request", "parts": [_retried("c9", timestamp="2024-06-01T09:00:00Z")]}],
        [_change(1, 0, "c9")],
    )


def test_hm103_binds_two_retries_to_two_calls_in_order() -> None:
    text = "Unknown tool name: 'nope'. No tools available."
    check_transformed(
        "HM103",
        [_calls("c1", "c2"), {"kind": "request", "parts": [_retry(text), _retry(text)]}],
        [_calls("c1", "c2"), {"kind": "request", "parts": [_retried("c1", text), _retried("c2", text)]}],
        [_change(1, 0, "c1"), _change(1, 1, "c2")],
    )


def test_hm103_looks_only_at_the_nearest_response() -> None:
    earlier = [_calls("c1"), {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "go on"}]}]
    check_noop(
        "HM103",
        [
            *earlier,
            {"kind": "response", "parts": [{"part_kind": "text", "content": "ok"}]},
            {"kind": "request", "parts": [_retry()]},
        ],
    )


def test_hm103_leaves_a_call_without_an_id_alone() -> None:
    response = _calls("c1")
    response["parts"][0]["tool_call_id"] = None
    check_noop("HM103", [response, {"kind": "request", "parts": [_retry()]}])


def test_hm103_leaves_a_retry_of_another_text_to_hm102() -> None:
    check_noop("HM103", [_calls("c1"), {"kind": "request", "parts": [_retry("Please return text.")]}])


def test_hm103_leaves_an_unknown_tool_retry_bound_to_a_name_to_hm101() -> None:
    check_noop("HM103", [_calls("c1"), {"kind": "request", "parts": [_retry(tool_name="nope", tool_call_id="c1")]}])


def test_hm103_changes_nothing_under_framework_causes() -> None:
    check_noop("HM103", [_calls("c9"), {"kind": "request", "parts": [_retry()]}], causes="framework")
