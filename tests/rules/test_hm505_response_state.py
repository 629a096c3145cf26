"""HM505 (the releases' ModelResponseState; framework-facts §3.3)."""

from __future__ import annotations

import pytest

from histmig.api import migrate
from histmig.options import Options


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
