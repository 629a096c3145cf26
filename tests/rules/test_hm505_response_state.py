"""HM505 (the releases' ModelResponseState; docs/framework.md §3.3)."""

from __future__ import annotations

import pytest

from histmig.options import Options
from histmig.rules.base import Change
from tests.rules.conftest import check_noop, check_transformed, migrate

ASK = {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]}
TEXT = {"part_kind": "text", "content": "Working on it"}


@pytest.mark.parametrize(
    ("target", "state", "written"),
    [
        ("2.0.0", "suspended", "incomplete"),
        ("1.95.0", "suspended", "interrupted"),
        ("1.95.0", "incomplete", "interrupted"),
        ("1.97.0", "incomplete", "incomplete"),
        ("2.10.0", "suspended", "suspended"),
        ("1.91.0", "suspended", "suspended"),
    ],
)
def test_hm505_writes_the_nearest_state_the_target_loads(target: str, state: str, written: str) -> None:
    messages = [{"kind": "response", "parts": [], "state": state}]
    changes = migrate(messages, Options(target=target))
    assert messages[0]["state"] == written
    assert [(c.rule, c.message, c.part, c.evidence) for c in changes] == (
        [("HM505", 0, None, f"lost state={state!r}; written as {written!r}")] if written != state else []
    )


def test_hm505_writes_incomplete_for_suspended_in_place() -> None:
    check_transformed(
        "HM505",
        [ASK, {"kind": "response", "parts": [TEXT], "state": "suspended", "model_name": "gpt-4o"}],
        [ASK, {"kind": "response", "parts": [TEXT], "state": "incomplete", "model_name": "gpt-4o"}],
        [Change("HM505", 1, None, "state", "state", "lost state='suspended'; written as 'incomplete'", "exact")],
        target="2.0.0",
    )


def test_hm505_writes_interrupted_where_the_target_has_no_incomplete() -> None:
    check_transformed(
        "HM505",
        [ASK, {"kind": "response", "parts": [TEXT], "state": "incomplete"}],
        [ASK, {"kind": "response", "parts": [TEXT], "state": "interrupted"}],
        [Change("HM505", 1, None, "state", "state", "lost state='incomplete'; written as 'interrupted'", "exact")],
        target="1.95.0",
    )


def test_hm505_leaves_a_complete_response_alone() -> None:
    check_noop("HM505", [ASK, {"kind": "response", "parts": [TEXT], "state": "complete"}], target="2.0.0")


def test_hm505_leaves_a_response_without_state_alone() -> None:
    check_noop("HM505", [ASK, {"kind": "response", "parts": [TEXT]}], target="2.0.0")


def test_hm505_leaves_a_requests_state_alone() -> None:
    check_noop("HM505", [ASK | {"state": "suspended"}, {"kind": "response", "parts": [TEXT]}], target="2.0.0")
