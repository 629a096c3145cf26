"""Fixes commute (issue: check as a gate, item 3): any sequence of runs whose options only
widen (safe then unsafe, unsafe twice, safe twice) gives the bytes of one run with the widest
options, on generated damaged histories (tests/acceptance/test_pairing.py's) with a legacy
retry answering its call under another id, and on the captured runs (runs that ended in an
exception)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from histmig.engine import process_full
from histmig.options import Options
from histmig.records import Record, dumps
from tests.acceptance.test_pairing import CAPTURED, DAMAGE, _damage, conversations
from tests.conftest import history_id, load

SAFE, UNSAFE = Options(), Options(unsafe_fixes=True)
WIDENING = [(SAFE, UNSAFE), (UNSAFE, UNSAFE), (SAFE, SAFE), (SAFE, SAFE, UNSAFE), (SAFE, UNSAFE, UNSAFE)]


def _run(raw: bytes, options: Options) -> bytes:
    """What ``convert`` writes for the record ``raw`` with ``options``: its output, or the
    record as it was when rejected."""
    outcome = process_full(Record(raw, "h.json", "file"), options.plan())
    return outcome.output if outcome.status == "changed" else raw  # type: ignore[return-value]


def assert_commutes(history: list[Any]) -> None:
    raw = dumps(history)
    for runs in WIDENING:
        once, output = _run(raw, runs[-1]), raw
        for options in runs:
            output = _run(output, options)
        assert output == once, [("unsafe" if o.unsafe_fixes else "safe") for o in runs]


@pytest.mark.parametrize("path", CAPTURED, ids=history_id)
def test_widening_runs_on_a_captured_run_give_the_bytes_of_the_widest(path: Path) -> None:
    assert_commutes(load(path))


def test_a_retry_answering_its_call_under_another_id_is_re_paired_after_a_safe_run() -> None:
    history = [
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "weather?"}]},
        {
            "kind": "response",
            "parts": [{"part_kind": "tool-call", "tool_name": "w", "args": "{}", "tool_call_id": "a"}],
        },
        {
            "kind": "request",
            "parts": [{"part_kind": "retry-prompt", "content": "bad city", "tool_name": "w", "tool_call_id": "b"}],
        },
        {"kind": "response", "parts": [{"part_kind": "text", "content": "sorry"}]},
    ]
    safe = _run(dumps(history), SAFE)
    assert b"pydantic_ai_synthesized_tool_return" in safe  # HM406 closed the call: the retry is orphaned
    unsafe = _run(safe, UNSAFE)
    assert unsafe == _run(dumps(history), UNSAFE)
    assert b'"tool_call_id":"a","outcome":"retried"' in unsafe and b"synthesized" not in unsafe


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.lists(st.tuples(DAMAGE, st.integers(0, 40)), max_size=4))
def test_widening_runs_on_damaged_histories_give_the_bytes_of_the_widest(
    history: list[Any], damages: list[tuple[str, int]]
) -> None:
    for kind, at in damages:
        _damage(history, kind, at)
    assert_commutes(copy.deepcopy(history))
