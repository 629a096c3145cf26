"""HM103 (framework-facts §1.2)."""

from __future__ import annotations

from histmig.api import migrate
from histmig.options import Options

NULL_RETRY = {"attempt": None, "max_retries": None}


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
