"""HM203 (docs/framework.md §2 load failures, bug case BC3)."""

from __future__ import annotations

from typing import Any

from histmig.rules.base import Change
from tests.rules.conftest import check_noop, check_transformed, run

RETRY = {"cause": "validation_error", "attempt": None, "max_retries": None}


def _feedback(*details: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "request", "parts": [{"part_kind": "retry-feedback", "content": list(details), "retry": RETRY}]}


def test_hm203_inserts_input_after_msg() -> None:
    messages = [
        {
            "kind": "request",
            "parts": [
                {
                    "part_kind": "retry-feedback",
                    "retry": {"cause": "validation_error"},
                    "content": [
                        {"type": "t", "loc": [], "msg": "m", "ctx": {}},
                        {"type": "t", "loc": [], "msg": "m", "input": 1},
                    ],
                }
            ],
        }
    ]
    assert run(messages, "HM203") == [("HM203", 0, 0, "missing-input:1")]
    assert list(messages[0]["parts"][0]["content"][0]) == ["type", "loc", "msg", "input", "ctx"]


def test_hm203_leaves_a_response_and_text_content_alone() -> None:
    messages = [
        {
            "kind": "response",
            "parts": [{"part_kind": "retry-feedback", "content": [{"type": "t", "loc": [], "msg": "m"}]}],
        },
        {
            "kind": "request",
            "parts": [{"part_kind": "retry-feedback", "content": "no list", "retry": {"cause": "model_retry"}}],
        },
    ]
    assert run(messages, "HM203") == []


def test_hm203_puts_input_right_after_msg_wherever_msg_is() -> None:
    check_transformed(
        "HM203",
        [_feedback({"msg": "Field required", "type": "missing", "loc": ["city"]})],
        [_feedback({"msg": "Field required", "input": None, "type": "missing", "loc": ["city"]})],
        [Change("HM203", 0, 0, "retry-feedback", "retry-feedback", "missing-input:1", "shape")],
    )


def test_hm203_counts_every_entry_it_completes() -> None:
    first = {"type": "missing", "loc": ["city"], "msg": "Field required"}
    second = {"type": "int_parsing", "loc": ["days"], "msg": "Input should be a valid integer", "input": "x"}
    third = {"type": "missing", "loc": ["unit"], "msg": "Field required", "url": "https://errors.pydantic.dev"}
    check_transformed(
        "HM203",
        [_feedback(first, second, third)],
        [_feedback(first | {"input": None}, second, {**first, "loc": ["unit"], "input": None, "url": third["url"]})],
        [Change("HM203", 0, 0, "retry-feedback", "retry-feedback", "missing-input:2", "shape")],
    )


def test_hm203_completes_a_legacy_retry_prompts_error_list_for_hm101() -> None:
    detail = {"type": "missing", "loc": ["city"], "msg": "Field required"}
    call = {"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": "c1"}
    retry = {"part_kind": "retry-prompt", "content": [detail], "tool_name": "t", "tool_call_id": "c1"}
    check_transformed(
        "HM203",
        [{"kind": "response", "parts": [call]}, {"kind": "request", "parts": [retry]}],
        [
            {"kind": "response", "parts": [call]},
            {"kind": "request", "parts": [retry | {"content": [detail | {"input": None}]}]},
        ],
        [Change("HM203", 1, 0, "retry-prompt", "retry-prompt", "missing-input:1", "shape")],
        loads=False,
    )


def test_hm203_leaves_complete_error_details_alone() -> None:
    check_noop("HM203", [_feedback({"type": "missing", "loc": ["city"], "msg": "Field required", "input": {}})])


def test_hm203_leaves_a_tool_returns_list_content_alone() -> None:
    returned = {
        "part_kind": "tool-return",
        "tool_name": "t",
        "content": [{"msg": "not an error"}],
        "tool_call_id": "c1",
    }
    call = {"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": "c1"}
    check_noop("HM203", [{"kind": "response", "parts": [call]}, {"kind": "request", "parts": [returned]}])


def test_hm203_leaves_an_empty_error_list_alone() -> None:
    check_noop("HM203", [_feedback()])
