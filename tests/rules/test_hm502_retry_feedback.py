"""HM502 (framework-facts §2, §3.2, §3.3)."""

from __future__ import annotations

from histmig.api import migrate
from histmig.options import Options
from histmig.rules.base import conversation_key, derived_tool_call_id

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
