"""HM101 (framework-facts §1, §2)."""

from __future__ import annotations

from histmig.api import migrate
from histmig.options import Options

NULL_RETRY = {"attempt": None, "max_retries": None}


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
