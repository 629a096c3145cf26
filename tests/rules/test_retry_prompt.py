"""HM101–HM103 (framework-facts §1, §2)."""

from __future__ import annotations

import pytest

from histmig.pipeline import Options, migrate, select_rules
from histmig.rules.base import Malformed
from histmig.rules.retry_prompt import dump_error_details
from tests.conftest import framework_dump

NULL_RETRY = {"attempt": None, "max_retries": None}


def test_dump_error_details_matches_the_framework() -> None:
    errors = [
        {"loc": ["a"], "type": "missing", "msg": "m", "input": {"x": 1}, "ctx": {"c": 1}, "url": "u", "extra": 5},
        {"type": "missing", "loc": ["b"], "msg": "m", "input": {"x": 1}},
        {"type": "missing", "loc": ["b", "c"], "msg": "m", "input": {"x": 1}},
        {"type": "missing", "loc": [], "msg": "m", "input": {"x": 2}},
    ]
    part = {"part_kind": "retry-prompt", "content": errors, "tool_name": "t", "tool_call_id": "c", "timestamp": "2025-01-01T00:00:00Z"}
    expected = framework_dump([{"kind": "request", "parts": [part]}])[0]["parts"][0]["content"]
    assert dump_error_details(errors) == expected
    assert [list(e) for e in dump_error_details(errors)] == [list(e) for e in expected]


def test_hm101_empty_tool_name_is_tool_bound_and_keeps_an_empty_id() -> None:
    messages = [{"kind": "request", "parts": [{"content": "x", "tool_name": "", "tool_call_id": "", "part_kind": "retry-prompt"}]}]
    migrate(messages)
    assert messages[0]["parts"] == [
        {"content": "x", "tool_name": "", "tool_call_id": "", "outcome": "retried", "retry": {"cause": "model_retry", **NULL_RETRY}, "part_kind": "tool-return"}
    ]


def test_hm101_framework_mode_writes_a_null_retry_for_text() -> None:
    messages = [{"kind": "request", "parts": [{"content": "x", "tool_name": "t", "tool_call_id": "c", "part_kind": "retry-prompt"}]}]
    migrate(messages, Options(causes="framework"))
    assert messages[0]["parts"][0]["retry"] is None


def test_hm101_rejects_content_no_release_wrote() -> None:
    messages = [{"kind": "request", "parts": [{"content": {"a": 1}, "tool_name": "t", "part_kind": "retry-prompt"}]}]
    with pytest.raises(Malformed, match=r"^messages\[0\]\.parts\[0\]\.content: "):
        migrate(messages)


def test_hm102_drops_tool_fields_and_keeps_extras() -> None:
    messages = [{"kind": "request", "parts": [{"content": "x", "tool_name": None, "tool_call_id": None, "x_trace": 7, "part_kind": "retry-prompt"}]}]
    migrate(messages)
    assert messages[0]["parts"] == [{"content": "x", "x_trace": 7, "retry": {"cause": "model_retry", **NULL_RETRY}, "part_kind": "retry-feedback"}]


def _unknown_tool_history() -> list:
    return [
        {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "nope", "args": {}, "tool_call_id": "c9"}]},
        {"kind": "request", "parts": [{"content": "Unknown tool name: 'nope'. Available tools: add", "tool_name": None, "tool_call_id": None, "part_kind": "retry-prompt"}]},
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


def test_select_ignore_prefixes() -> None:
    assert [r.code for r in select_rules(["HM2"], ["HM203"])] == ["HM201", "HM202", "HM204"]


@pytest.mark.parametrize(
    ("part", "keys"),
    [
        (
            {"content": "x", "tool_name": "t", "tool_call_id": "c", "part_kind": "retry-prompt"},
            ["content", "tool_name", "tool_call_id", "outcome", "retry", "part_kind"],
        ),
        (
            {"part_kind": "retry-prompt", "content": "x", "tool_name": "t", "tool_call_id": "c", "timestamp": "2025-01-01T00:00:00Z"},
            ["part_kind", "content", "tool_name", "tool_call_id", "timestamp", "outcome", "retry"],
        ),
        (
            {"tool_call_id": None, "content": "x", "part_kind": "retry-prompt", "tool_name": None, "timestamp": "2025-01-01T00:00:00Z"},
            ["content", "part_kind", "timestamp", "retry"],
        ),
        (
            {"retry": "stale", "content": "x", "tool_name": None, "part_kind": "retry-prompt"},
            ["content", "retry", "part_kind"],
        ),
    ],
)
def test_new_keys_go_before_a_last_part_kind_else_at_the_end(part: dict, keys: list[str]) -> None:
    messages = [{"kind": "request", "parts": [part]}]
    migrate(messages)
    assert list(messages[0]["parts"][0]) == keys
