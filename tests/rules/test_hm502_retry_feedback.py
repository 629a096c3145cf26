"""HM502 (docs/framework.md §2, §3.2, §3.3)."""

from __future__ import annotations

from typing import Any

from histmig.options import Options
from histmig.rules.base import Change, conversation_key, derived_tool_call_id
from tests.rules.conftest import check_noop, check_transformed, migrate

ERRORS = [{"type": "json_invalid", "loc": [], "msg": "Invalid JSON", "input": "{", "ctx": {"error": "EOF"}}]
FEEDBACK = {
    "content": ERRORS,
    "retry": {"cause": "validation_error", "attempt": 2, "max_retries": 2},
    "timestamp": "2026-11-29T22:10:59Z",
    "part_kind": "retry-feedback",
}


def test_hm502_writes_the_tool_less_retry_prompt_with_the_error_list_as_stored() -> None:
    messages = [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}, dict(FEEDBACK)]}]
    key = conversation_key(messages)
    changes = migrate(messages, Options(target="2.0.0"))
    assert list(messages[0]["parts"][1].items()) == [
        ("content", ERRORS),
        ("tool_name", None),
        ("tool_call_id", derived_tool_call_id(key, 0, 1, None)),
        ("timestamp", "2026-11-29T22:10:59Z"),
        ("part_kind", "retry-prompt"),
    ]
    assert [(c.rule, c.before, c.after, c.evidence, c.certainty) for c in changes] == [
        (
            "HM502",
            "retry-feedback",
            "retry-prompt",
            "lost retry.cause='validation_error', retry.attempt, retry.max_retries; tool_call_id derived",
            "derived",
        )
    ]


def test_hm502_writes_a_null_id_before_0_0_45_and_no_timestamp_when_there_was_none() -> None:
    messages = [
        {
            "kind": "request",
            "parts": [
                {"content": "Please call a tool.", "retry": {"cause": "no_output"}, "part_kind": "retry-feedback"}
            ],
        }
    ]
    changes = migrate(messages, Options(target="0.0.44"))
    assert messages[0]["parts"] == [
        {"content": "Please call a tool.", "tool_name": None, "tool_call_id": None, "part_kind": "retry-prompt"}
    ]
    assert [(c.evidence, c.certainty) for c in changes] == [("lost retry.cause='no_output'", "exact")]


def test_hm502_runs_only_for_a_target_before_2_60_0() -> None:
    messages = [{"kind": "request", "parts": [dict(FEEDBACK)]}]
    assert migrate(messages, Options(target="2.60.0")) == [] and messages[0]["parts"] == [FEEDBACK]


def _feedback(retry: Any, content: Any = "Please return text.") -> dict[str, Any]:
    return {"part_kind": "retry-feedback", "content": content, "retry": retry}


def test_hm502_a_retry_answering_no_call_gets_a_derived_id_after_0_0_45() -> None:
    before = [{"kind": "request", "parts": [_feedback({"cause": "no_output", "attempt": None, "max_retries": None})]}]
    derived = derived_tool_call_id(conversation_key(before), 0, 0, None)
    check_transformed(
        "HM502",
        before,
        [
            {
                "kind": "request",
                "parts": [
                    {
                        "content": "Please return text.",
                        "tool_name": None,
                        "tool_call_id": derived,
                        "part_kind": "retry-prompt",
                    }
                ],
            }
        ],
        [
            Change(
                "HM502",
                0,
                0,
                "retry-feedback",
                "retry-prompt",
                "lost retry.cause='no_output'; tool_call_id derived",
                "derived",
            )
        ],
        target="2.59.0",
    )


def test_hm502_a_null_retry_loses_nothing() -> None:
    before = [{"kind": "request", "parts": [_feedback(None)]}]
    derived = derived_tool_call_id(conversation_key(before), 0, 0, None)
    check_transformed(
        "HM502",
        before,
        [
            {
                "kind": "request",
                "parts": [
                    {
                        "content": "Please return text.",
                        "tool_name": None,
                        "tool_call_id": derived,
                        "part_kind": "retry-prompt",
                    }
                ],
            }
        ],
        [Change("HM502", 0, 0, "retry-feedback", "retry-prompt", "nothing lost; tool_call_id derived", "derived")],
        target="2.0.0",
    )


def test_hm502_before_0_0_45_the_id_is_null_and_nothing_is_derived() -> None:
    check_transformed(
        "HM502",
        [
            {
                "kind": "request",
                "parts": [
                    _feedback(None, "Plain text responses are not permitted, please call one of the functions instead.")
                ],
            }
        ],
        [
            {
                "kind": "request",
                "parts": [
                    {
                        "content": "Plain text responses are not permitted, please call one of the functions instead.",
                        "tool_name": None,
                        "tool_call_id": None,
                        "part_kind": "retry-prompt",
                    }
                ],
            }
        ],
        [Change("HM502", 0, 0, "retry-feedback", "retry-prompt", "nothing lost", "exact")],
        target="0.0.20",
    )


def test_hm502_leaves_a_retried_tool_return_to_hm501() -> None:
    call = {"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": "c1"}
    retried = {
        "part_kind": "tool-return",
        "tool_name": "t",
        "content": "x",
        "tool_call_id": "c1",
        "outcome": "retried",
        "retry": None,
    }
    check_noop(
        "HM502", [{"kind": "response", "parts": [call]}, {"kind": "request", "parts": [retried]}], target="2.59.0"
    )


def test_hm502_leaves_a_tool_less_retry_prompt_alone() -> None:
    prompt = {
        "content": "Please return text.",
        "tool_name": None,
        "tool_call_id": "pyd_ai_1",
        "part_kind": "retry-prompt",
    }
    check_noop("HM502", [{"kind": "request", "parts": [prompt]}], target="2.59.0")
