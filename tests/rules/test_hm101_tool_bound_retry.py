"""HM101 (docs/framework.md §1, §2)."""

from __future__ import annotations

from typing import Any

from histmig.options import Options
from histmig.rules.base import Change
from tests.rules.conftest import check_noop, check_transformed, migrate

NULL_RETRY = {"attempt": None, "max_retries": None}
CALL = {
    "kind": "response",
    "parts": [{"part_kind": "tool-call", "tool_name": "get_weather", "args": {"city": "Londn"}, "tool_call_id": "c1"}],
}


def _retry(content: Any, tool_name: str | None = "get_weather", **fields: Any) -> dict[str, Any]:
    part = {"part_kind": "retry-prompt", "content": content, "tool_name": tool_name, "tool_call_id": "c1", **fields}
    return {"kind": "request", "parts": [part]}


def _retried(content: Any, cause: str | None, tool_name: str = "get_weather", **fields: Any) -> dict[str, Any]:
    """The tool-return HM101 writes for :func:`_retry`'s part: its keys in order, then outcome and retry."""
    retry = None if cause is None else {"cause": cause, **NULL_RETRY}
    part = {"part_kind": "tool-return", "content": content, "tool_name": tool_name, "tool_call_id": "c1", **fields}
    return {"kind": "request", "parts": [part | {"outcome": "retried", "retry": retry}]}


def _change(evidence: str, certainty: str, cause: str | None) -> Change:
    return Change("HM101", 1, 0, "retry-prompt", "tool-return", evidence, certainty, cause)


def test_hm101_empty_tool_name_is_tool_bound_and_keeps_an_empty_id() -> None:
    messages = [
        {
            "kind": "request",
            "parts": [{"content": "x", "tool_name": "", "tool_call_id": "", "part_kind": "retry-prompt"}],
        }
    ]
    migrate(messages)
    assert messages[0]["parts"] == [
        {
            "content": "x",
            "tool_name": "",
            "tool_call_id": "",
            "outcome": "retried",
            "retry": {"cause": "model_retry", **NULL_RETRY},
            "part_kind": "tool-return",
        }
    ]


def test_hm101_framework_mode_writes_a_null_retry_for_text() -> None:
    messages = [
        {
            "kind": "request",
            "parts": [{"content": "x", "tool_name": "t", "tool_call_id": "c", "part_kind": "retry-prompt"}],
        }
    ]
    migrate(messages, Options(causes="framework"))
    assert messages[0]["parts"][0]["retry"] is None


def test_hm101_cleans_an_error_list_and_names_its_cause() -> None:
    errors = [{"type": "missing", "loc": ["city"], "msg": "Field required", "input": {}, "ctx": {"x": 1}}]
    messages = [
        {
            "kind": "request",
            "parts": [{"part_kind": "retry-prompt", "content": errors, "tool_name": "t", "tool_call_id": "c"}],
        }
    ]
    changes = migrate(messages)
    assert [(c.rule, c.cause, c.evidence, c.certainty) for c in changes] == [
        ("HM101", "validation_error", "error-list", "shape")
    ]
    assert messages[0]["parts"][0]["content"] == [
        {"type": "missing", "loc": ["city"], "msg": "Field required", "input": {}}
    ]


def test_hm101_free_text_is_a_model_retry_by_default() -> None:
    text = "Unknown city 'Londn', use the full name."
    check_transformed(
        "HM101",
        [CALL, _retry(text, timestamp="2025-05-01T10:00:02Z")],
        [CALL, _retried(text, "model_retry", timestamp="2025-05-01T10:00:02Z")],
        [_change("free-text", "default", "model_retry")],
    )


def test_hm101_a_timeout_text_is_a_model_retry_by_its_template() -> None:
    check_transformed(
        "HM101",
        [CALL, _retry("Timed out after 30 seconds.")],
        [CALL, _retried("Timed out after 30 seconds.", "model_retry")],
        [_change("tool-timeout", "template", "model_retry")],
    )


def test_hm101_an_unknown_tool_name_bound_to_its_call_is_unknown_tool() -> None:
    text = "Unknown tool name: 'get_wether'. Available tools: get_weather"
    check_transformed(
        "HM101",
        [CALL, _retry(text, tool_name="get_wether")],
        [CALL, _retried(text, "unknown_tool", tool_name="get_wether")],
        [_change("unknown-tool", "template", "unknown_tool")],
    )


def test_hm101_an_error_list_is_a_validation_error_by_its_shape() -> None:
    errors = [{"type": "missing", "loc": ["city"], "msg": "Field required", "input": {}}]
    check_transformed(
        "HM101",
        [CALL, _retry(errors)],
        [CALL, _retried(errors, "validation_error")],
        [_change("error-list", "shape", "validation_error")],
    )


def test_hm101_keeps_unknown_keys_in_place() -> None:
    check_transformed(
        "HM101",
        [CALL, _retry("x", x_trace=7)],
        [CALL, _retried("x", "model_retry", x_trace=7)],
        [_change("free-text", "default", "model_retry")],
    )


def test_hm101_framework_causes_say_what_the_loader_wrote() -> None:
    check_transformed(
        "HM101",
        [CALL, _retry("x")],
        [CALL, _retried("x", None)],
        [_change("loader:tool-bound-text", "shape", None)],
        causes="framework",
    )


def test_hm101_leaves_a_retried_tool_return_alone() -> None:
    check_noop("HM101", [CALL, _retried("x", "model_retry")])


def test_hm101_leaves_a_tool_less_retry_prompt_to_hm102() -> None:
    check_noop("HM101", [_retry("Please return text.", tool_name=None)])


def test_hm101_leaves_a_user_prompt_naming_a_retry_prompt_alone() -> None:
    check_noop("HM101", [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "retry-prompt"}]}])
