"""HM504 (docs/framework.md §3.3)."""

from __future__ import annotations

import pytest

from histmig.options import Options
from histmig.rules.base import Change
from tests.rules.conftest import check_noop, check_transformed, migrate

CALL = {
    "kind": "response",
    "parts": [{"part_kind": "tool-call", "tool_name": "fetch", "args": {}, "tool_call_id": "c"}],
}
LOST = Change("HM504", 1, 0, "tool-return", "tool-return", "lost outcome='interrupted'; written as 'failed'", "exact")

RETURN = {
    "part_kind": "tool-return",
    "tool_name": "fetch",
    "content": "",
    "tool_call_id": "c",
    "outcome": "interrupted",
}


@pytest.mark.parametrize(
    ("target", "outcome"),
    [("1.67.0", "failed"), ("2.9.9", "failed"), ("1.66.0", "interrupted"), ("2.10.0", "interrupted")],
)
def test_hm504_writes_failed_where_the_target_has_outcome_but_not_interrupted(target: str, outcome: str) -> None:
    messages = [{"kind": "request", "parts": [dict(RETURN)]}]
    changes = migrate(messages, Options(target=target))
    assert messages[0]["parts"][0]["outcome"] == outcome
    assert [(c.rule, c.evidence) for c in changes] == (
        [("HM504", "lost outcome='interrupted'; written as 'failed'")] if outcome == "failed" else []
    )


def test_hm504_writes_failed_in_place_of_interrupted() -> None:
    check_transformed(
        "HM504",
        [CALL, {"kind": "request", "parts": [RETURN | {"timestamp": "2025-05-01T10:00:00Z"}]}],
        [CALL, {"kind": "request", "parts": [RETURN | {"outcome": "failed", "timestamp": "2025-05-01T10:00:00Z"}]}],
        [LOST],
        target="2.0.0",
    )


def test_hm504_rewrites_the_interrupted_return_2_68_synthesizes() -> None:
    synthesized = RETURN | {"content": "The tool call was interrupted before a result was produced.", "retry": None}
    check_transformed(
        "HM504",
        [CALL, {"kind": "request", "parts": [synthesized]}],
        [CALL, {"kind": "request", "parts": [synthesized | {"outcome": "failed"}]}],
        [LOST],
        target="1.67.0",
    )


def test_hm504_leaves_the_outcomes_the_target_knows_alone() -> None:
    for outcome in ("success", "failed", "denied"):
        check_noop("HM504", [CALL, {"kind": "request", "parts": [RETURN | {"outcome": outcome}]}], target="2.0.0")


def test_hm504_leaves_a_return_without_outcome_alone() -> None:
    returned = {key: value for key, value in RETURN.items() if key != "outcome"}
    check_noop("HM504", [CALL, {"kind": "request", "parts": [returned]}], target="2.0.0")
