"""HM501 (docs/framework.md §1.2, §2, §3.3)."""

from __future__ import annotations

import pytest

from histmig.errors import Malformed
from histmig.options import Options
from histmig.rules.base import Change, conversation_key, derived_tool_call_id
from tests.rules.conftest import check_noop, check_transformed, migrate

CALL = {
    "kind": "response",
    "parts": [{"part_kind": "tool-call", "tool_name": "add", "args": {"a": 1}, "tool_call_id": "c1"}],
}
TIMED_OUT = {
    "part_kind": "tool-return",
    "tool_name": "add",
    "content": "Timed out after 30 seconds.",
    "tool_call_id": "c1",
    "outcome": "retried",
    "retry": {"cause": "model_retry", "attempt": 1, "max_retries": 3},
}
PROMPT = {
    "content": "Timed out after 30 seconds.",
    "tool_name": "add",
    "tool_call_id": "c1",
    "part_kind": "retry-prompt",
}


def _rolled_back(evidence: str) -> Change:
    return Change("HM501", 1, 0, "tool-return", "retry-prompt", evidence, "exact")


RETRIED = {
    "tool_name": "add",
    "content": [{"type": "int_parsing", "loc": ["a"], "msg": "Input should be a valid integer", "input": "one"}],
    "tool_call_id": "c1",
    "tool_kind": None,
    "metadata": None,
    "timestamp": "2026-11-29T22:10:59Z",
    "outcome": "retried",
    "retry": {"cause": "validation_error", "attempt": 1, "max_retries": 3},
    "part_kind": "tool-return",
    "content_file_digests": [],
}


def _rolled(part: dict, target: str) -> tuple[dict, list[tuple[str, str, str]]]:
    messages = [{"kind": "request", "parts": [part]}]
    changes = migrate(messages, Options(select=("HM501",), target=target))
    return messages[0]["parts"][0], [(c.rule, c.evidence, c.certainty) for c in changes]


def test_hm501_writes_the_retry_prompt_of_the_target_and_reports_the_retry_lost() -> None:
    part, changes = _rolled(RETRIED, "2.59.0")
    assert list(part.items()) == [
        ("content", RETRIED["content"]),
        ("tool_name", "add"),
        ("tool_call_id", "c1"),
        ("timestamp", "2026-11-29T22:10:59Z"),
        ("part_kind", "retry-prompt"),
    ]
    assert changes == [("HM501", "lost retry.cause='validation_error', retry.attempt, retry.max_retries", "exact")]


def test_hm501_names_a_tool_kind_or_metadata_it_cannot_keep_and_keeps_unknown_keys() -> None:
    part, changes = _rolled({**RETRIED, "retry": None, "metadata": {"trace": 1}, "note": "mine"}, "1.107.10")
    assert list(part) == ["content", "tool_name", "tool_call_id", "timestamp", "part_kind", "note"]
    assert changes == [("HM501", "lost metadata", "exact")]
    assert _rolled({**RETRIED, "retry": None}, "2.0.0")[1] == [("HM501", "nothing lost", "exact")]


@pytest.mark.parametrize(
    ("target", "tool_call_id"), [("0.0.20", None), ("0.0.46", derived_tool_call_id(conversation_key([]), 0, 0, None))]
)  # a history opening with no prompt
def test_hm501_an_unknown_tool_retry_is_tool_less_before_0_0_47(target: str, tool_call_id: str | None) -> None:
    unknown = {
        **RETRIED,
        "tool_name": "get_wether",
        "content": "Unknown tool name: 'get_wether'. No tools available.",
        "retry": {"cause": "unknown_tool", "attempt": None, "max_retries": None},
    }
    part, changes = _rolled(unknown, target)
    assert (part["tool_name"], part["tool_call_id"]) == (None, tool_call_id)
    notes = "tool-less before 0.0.47" if tool_call_id is None else "tool-less before 0.0.47; tool_call_id derived"
    assert changes == [
        (
            "HM501",
            f"lost retry.cause='unknown_tool', tool_name, tool_call_id; {notes}",
            "exact" if tool_call_id is None else "derived",
        )
    ]
    assert _rolled(unknown, "0.0.47")[0]["tool_name"] == "get_wether"


def test_hm501_leaves_other_outcomes_and_refuses_a_content_a_retry_prompt_cannot_hold() -> None:
    assert _rolled({**RETRIED, "outcome": "failed"}, "2.59.0") == ({**RETRIED, "outcome": "failed"}, [])
    with pytest.raises(Malformed, match=r"messages\[0\]\.parts\[0\]\.content: a retry-prompt holds text"):
        _rolled({**RETRIED, "content": {"rows": 3}}, "2.59.0")


def test_hm501_runs_only_for_a_target_before_2_60_0() -> None:
    messages = [{"kind": "request", "parts": [dict(RETRIED)]}]
    assert migrate(messages) == [] and migrate(messages, Options(target="2.60.0")) == []


def test_hm501_rolls_a_retried_return_back_to_the_call_s_retry_prompt() -> None:
    check_transformed(
        "HM501",
        [CALL, {"kind": "request", "parts": [TIMED_OUT]}],
        [CALL, {"kind": "request", "parts": [PROMPT]}],
        [_rolled_back("lost retry.cause='model_retry', retry.attempt, retry.max_retries")],
        target="2.59.0",
    )


def test_hm501_a_null_retry_loses_nothing() -> None:
    check_transformed(
        "HM501",
        [CALL, {"kind": "request", "parts": [TIMED_OUT | {"retry": None}]}],
        [CALL, {"kind": "request", "parts": [PROMPT]}],
        [_rolled_back("nothing lost")],
        target="1.0.0",
    )


def test_hm501_leaves_a_successful_return_alone() -> None:
    check_noop(
        "HM501",
        [CALL, {"kind": "request", "parts": [TIMED_OUT | {"outcome": "success", "retry": None}]}],
        target="2.59.0",
    )


def test_hm501_leaves_a_return_without_outcome_alone() -> None:
    returned = {"part_kind": "tool-return", "tool_name": "add", "content": "2", "tool_call_id": "c1"}
    check_noop("HM501", [CALL, {"kind": "request", "parts": [returned]}], target="2.0.0")


def test_hm501_leaves_a_retry_prompt_the_target_writes_alone() -> None:
    check_noop("HM501", [CALL, {"kind": "request", "parts": [PROMPT]}], target="2.59.0")
