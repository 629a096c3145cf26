"""HM102 (docs/framework.md §1, §2)."""

from __future__ import annotations

from typing import Any

from histmig.rules.base import Change
from tests.rules.conftest import check_noop, check_transformed, migrate

NULL_RETRY = {"attempt": None, "max_retries": None}


def _retry(content: Any, **fields: Any) -> dict[str, Any]:
    return {
        "kind": "request",
        "parts": [{"part_kind": "retry-prompt", "content": content, "tool_name": None, **fields}],
    }


def _feedback(content: Any, cause: str, **fields: Any) -> dict[str, Any]:
    retry = {"cause": cause, **NULL_RETRY}
    return {"kind": "request", "parts": [{"part_kind": "retry-feedback", "content": content, **fields, "retry": retry}]}


def _change(evidence: str, certainty: str, cause: str) -> Change:
    return Change("HM102", 0, 0, "retry-prompt", "retry-feedback", evidence, certainty, cause)


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


def test_hm102_a_please_text_is_no_output_exactly() -> None:
    text = "Please return text or call a tool."
    check_transformed(
        "HM102",
        [_retry(text, tool_call_id="pyd_ai_1", timestamp="2025-05-01T10:00:04Z")],
        [_feedback(text, "no_output", timestamp="2025-05-01T10:00:04Z")],
        [_change("no-output:please", "exact", "no_output")],
    )


def test_hm102_the_oldest_plain_text_refusal_is_no_output() -> None:
    text = "Plain text responses are not permitted, please call one of the functions instead."
    check_transformed(
        "HM102",
        [_retry(text)],
        [_feedback(text, "no_output")],
        [_change("no-output:plain-text-functions", "exact", "no_output")],
    )


def test_hm102_an_invalid_kind_text_is_a_model_retry_by_its_template() -> None:
    check_transformed(
        "HM102",
        [_retry("Invalid kind: 'x'")],
        [_feedback("Invalid kind: 'x'", "model_retry")],
        [_change("invalid-kind", "template", "model_retry")],
    )


def test_hm102_an_error_list_is_a_validation_error() -> None:
    errors = [{"type": "missing", "loc": ["city"], "msg": "Field required", "input": {}}]
    check_transformed(
        "HM102",
        [_retry(errors)],
        [_feedback(errors, "validation_error")],
        [_change("error-list", "shape", "validation_error")],
    )


def test_hm102_framework_causes_say_what_the_loader_wrote() -> None:
    check_transformed(
        "HM102",
        [_retry("Validation failed: bad")],
        [_feedback("Validation failed: bad", "model_retry")],
        [_change("loader:tool-less-text", "shape", "model_retry")],
        causes="framework",
    )


def test_hm102_leaves_a_tool_bound_retry_prompt_to_hm101() -> None:
    call = {"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": "c1"}
    bound = {"part_kind": "retry-prompt", "content": "x", "tool_name": "t", "tool_call_id": "c1"}
    check_noop("HM102", [{"kind": "response", "parts": [call]}, {"kind": "request", "parts": [bound]}])


def test_hm102_leaves_a_retry_feedback_part_alone() -> None:
    check_noop("HM102", [_feedback("Please return text.", "no_output")])
