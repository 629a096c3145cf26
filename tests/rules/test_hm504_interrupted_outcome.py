"""HM504 (framework-facts §3.3)."""

from __future__ import annotations

import pytest

from histmig.api import migrate
from histmig.options import Options

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
