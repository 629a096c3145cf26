"""Running one rule, or a few, on a history, as the engine would; and the three checks every
rule's cases are written with (after django-upgrade's ``check_noop`` / ``check_transformed``):

- :func:`check_noop`: the rule finds nothing in a history and the record's bytes come out as
  they went in;
- :func:`check_transformed`: the rule migrates a history to exactly the given one (its compact
  JSON bytes, key order included) with exactly the given change rows, and a second run changes
  nothing;
- :func:`check_found`: the rule only reports (no fix, or an unsafe one not asked for): exactly
  the given findings, and the bytes as they were.

Each runs the rule alone (``--select CODE``) both on the history in place (:func:`histmig.engine.migrate`,
:func:`histmig.engine.findings`) and on the record's JSON text the way a run reads it
(:func:`histmig.engine.process`: the screen, then the full way)."""

from __future__ import annotations

import copy
from typing import Any

import orjson
from pydantic_ai.messages import ModelMessagesTypeAdapter

from histmig import engine
from histmig.options import Options
from histmig.records import Record
from histmig.rules.base import Change, Finding
from histmig.schema.releases import NEWEST


def migrate(messages: list[Any], options: Options = Options()) -> list[Change]:
    """The rules of ``options`` over ``messages`` in place, as the engine runs them, without
    the validation :func:`histmig.api.migrate` adds: a rule is tested alone, on histories
    other rules would still have to fix."""
    return engine.migrate(messages, options.plan())


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


def _record(history: list[Any], plan: engine.Plan) -> engine.Outcome:
    return engine.process(Record(orjson.dumps(history), "test.jsonl", "line 1"), plan)


def check_noop(code: str, history: list[Any], **options: Any) -> None:
    """Rule ``code`` alone (with ``options``) leaves ``history`` as it is: it changes nothing
    and finds nothing in place, and the record comes out ``unchanged`` with its own bytes."""
    plan = Options(select=(code,), **options).plan()
    raw = orjson.dumps(history)
    messages = copy.deepcopy(history)
    assert engine.findings(messages, plan) == []
    assert engine.migrate(messages, plan) == []
    assert orjson.dumps(messages) == raw
    outcome = _record(history, plan)
    assert (outcome.status, outcome.output, outcome.changes, outcome.findings) == ("unchanged", raw, [], [])


def check_transformed(
    code: str,
    before: list[Any],
    after: list[Any],
    changes: list[Change],
    findings: list[Finding] | None = None,
    *,
    loads: bool = True,
    **options: Any,
) -> None:
    """Rule ``code`` alone (with ``options``) migrates ``before`` to exactly ``after`` (the
    same compact JSON bytes: values and key order) with exactly the change rows ``changes``,
    in place and as a record (``changed``, its output ``after``'s bytes, those changes and
    ``findings``, default none, left as found); run again on ``after``, it changes nothing.
    For the newest target, pydantic-ai 2.68 loads ``after``. Without ``loads``, ``after``
    still holds what another rule migrates (a ``retry-prompt``): the record is ``rejected``,
    kept as it was, with the same changes."""
    plan = Options(select=(code,), **options).plan()
    messages = copy.deepcopy(before)
    assert engine.migrate(messages, plan) == changes
    assert orjson.dumps(messages) == orjson.dumps(after)
    assert engine.migrate(copy.deepcopy(after), plan) == []
    outcome = _record(before, plan)
    if not loads:
        assert (outcome.status, outcome.output, outcome.changes) == ("rejected", None, changes)
        assert outcome.errors
        return
    assert outcome.errors == []
    assert (outcome.status, outcome.output, outcome.changes) == ("changed", orjson.dumps(after), changes)
    assert outcome.findings == (findings or [])
    if plan.target == NEWEST:
        ModelMessagesTypeAdapter.validate_json(orjson.dumps(after))


def check_found(code: str, history: list[Any], findings: list[Finding], **options: Any) -> None:
    """Rule ``code`` alone (with ``options``) reports exactly ``findings`` in ``history`` and
    changes nothing: in place, and as a record (``unchanged``, its own bytes, those findings)."""
    plan = Options(select=(code,), **options).plan()
    raw = orjson.dumps(history)
    messages = copy.deepcopy(history)
    assert engine.findings(messages, plan) == findings
    assert engine.migrate(messages, plan) == []
    assert orjson.dumps(messages) == raw
    outcome = _record(history, plan)
    assert (outcome.status, outcome.output, outcome.changes, outcome.findings) == ("unchanged", raw, [], findings)
