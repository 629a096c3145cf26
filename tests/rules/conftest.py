"""Running one rule, or a few, on a history, as the engine would."""

from __future__ import annotations

from typing import Any

from histmig.api import migrate
from histmig.options import Options


def run(messages: list[Any], *codes: str, **options: Any) -> list[tuple[Any, ...]]:
    """Run the rules ``codes`` (and no other) over ``messages`` in place; the changes as
    ``(rule, message, part, evidence)``."""
    changes = migrate(messages, Options(select=codes, **options))
    return [(c.rule, c.message, c.part, c.evidence) for c in changes]


def opening() -> dict[str, Any]:
    """A run's first request: a history starting with it is whole, not a fragment."""
    return {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "go"}]}


def call(name: str, call_id: object = None) -> dict[str, Any]:
    return {"part_kind": "tool-call", "tool_name": name, "args": {}, "tool_call_id": call_id}


def result(kind: str, name: str, call_id: object = None) -> dict[str, Any]:
    return {"part_kind": kind, "tool_name": name, "content": "x", "tool_call_id": call_id}
