"""HM102 (framework-facts §1, §2)."""

from __future__ import annotations

from histmig.api import migrate

NULL_RETRY = {"attempt": None, "max_retries": None}


def test_hm102_drops_tool_fields_and_keeps_extras() -> None:
    messages = [
        {
            "kind": "request",
            "parts": [
                {"content": "x", "tool_name": None, "tool_call_id": None, "x_trace": 7, "part_kind": "retry-prompt"}
            ],
        }
    ]
    migrate(messages)
    assert messages[0]["parts"] == [
        {"content": "x", "x_trace": 7, "retry": {"cause": "model_retry", **NULL_RETRY}, "part_kind": "retry-feedback"}
    ]


def test_hm102_keeps_an_error_list_as_stored() -> None:
    errors = [{"type": "missing", "loc": ["city"], "msg": "Field required", "input": {}, "ctx": {"x": 1}}]
    messages = [{"kind": "request", "parts": [{"part_kind": "retry-prompt", "content": errors, "tool_name": None}]}]
    assert [(c.rule, c.cause) for c in migrate(messages)] == [("HM102", "validation_error")]
    assert messages[0]["parts"][0]["content"] == errors
