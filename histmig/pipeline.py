"""The rewrite pipeline: one record in, the migrated record and its changes out.

Hot path (design.md): every record is parsed once (so broken JSON and records that are not
histories are caught and named), but one whose bytes hold nothing any rule targets is
returned as it is, never walked by the rules nor re-serialized. Any other record is
rewritten by the selected rules in registration order, validated against the current
schema (histmig.schema) and passed through the rules a second time; a second pass that
changes anything is an internal error: the record is rejected (kept whole) and the error
names it. Bad input never raises out of :func:`process`: the record comes back
``rejected`` with one line per problem.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import orjson

from histmig.records import NotAHistory, Record, envelope_id, locate_messages
from histmig.rules import REGISTRY, Change, Context, Rule
from histmig.rules.base import CauseMode
from histmig.schema import current_errors

TRIGGER = re.compile(
    rb"retry-prompt|retry-feedback|args_json|args_dict|provider_request_id"
    rb'|"part_kind"\s*:\s*"instruction"'
    rb'|"(?:tool_call_id|timestamp)"\s*:\s*null'
)
"""Byte patterns of everything a rule can target (retry parts, args wrappers, the renamed
field, instruction parts, null ids and timestamps). A record matching none is passed
through untouched."""

Status = Literal["unchanged", "changed", "rejected"]


class UnknownRule(ValueError):
    """A ``--select``/``--ignore`` code that no rule has."""


@dataclass(frozen=True)
class Options:
    """How to run the pipeline: the ``rules`` to apply (registration order), the cause
    mode, the envelope's messages field (``None``: auto-detect) and whether records that
    need no rule are still parsed and validated (``check`` does, ``convert`` does not)."""

    rules: tuple[Rule, ...] = tuple(REGISTRY)
    causes: CauseMode = "inferred"
    messages_field: str | None = None
    validate_all: bool = False


def select_rules(select: Iterable[str] = (), ignore: Iterable[str] = ()) -> tuple[Rule, ...]:
    """The registered rules whose code starts with one of ``select`` (all when empty) and
    with none of ``ignore``; prefixes work like ruff's (``HM1`` selects HM101–HM103).
    Raises :class:`UnknownRule` for a code or prefix that matches no rule."""
    select, ignore = [s.upper() for s in select], [s.upper() for s in ignore]
    for code in (*select, *ignore):
        if not any(rule.code.startswith(code) for rule in REGISTRY):
            raise UnknownRule(f"unknown rule code {code!r} (see `histmig rules`)")
    return tuple(
        rule
        for rule in REGISTRY
        if (not select or any(rule.code.startswith(s) for s in select))
        and not any(rule.code.startswith(i) for i in ignore)
    )


def migrate(messages: list[Any], options: Options = Options()) -> list[Change]:
    """Run the selected rules over ``messages`` (a history as plain JSON data), editing it in
    place; returns the changes in the order they were made."""
    ctx = Context(causes=options.causes)
    changes: list[Change] = []
    for rule in options.rules:
        changes.extend(rule.apply(messages, ctx))
    return changes


@dataclass
class Outcome:
    """What the pipeline made of one record: ``status``; ``output``, the bytes to write
    (the original bytes unless ``changed``; ``None`` when ``rejected``); the ``changes``;
    ``errors``, one ``path: message`` line per problem (why it was rejected, or, for an
    unchanged record under ``validate_all``, why it is not valid)."""

    record: Record
    status: Status
    output: bytes | None
    changes: list[Change] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def process(record: Record, options: Options = Options()) -> Outcome:
    """Migrate one record (see the module docstring). Never raises for bad input."""
    try:
        obj = orjson.loads(record.raw)
    except orjson.JSONDecodeError as exc:
        return Outcome(record, "rejected", None, errors=[f"invalid JSON: {exc}"])
    record = replace(record, record_id=envelope_id(obj))
    try:
        messages, field_name = locate_messages(obj, options.messages_field)
    except NotAHistory as exc:
        return Outcome(record, "rejected", None, errors=[str(exc)])
    if not options.validate_all and not TRIGGER.search(record.raw):
        return Outcome(record, "unchanged", record.raw)
    prefix = f"{field_name}" if field_name else "messages"
    try:
        changes = migrate(messages, options)
    except Exception as exc:  # a rule met a shape it did not expect: keep the record, say so
        return Outcome(record, "rejected", None, errors=[f"internal error: {type(exc).__name__}: {exc}"])
    if not changes:
        errors = _validation_errors(messages, prefix) if options.validate_all else []
        return Outcome(record, "unchanged", record.raw, errors=errors)
    errors = _validation_errors(messages, prefix)
    if errors:
        return Outcome(record, "rejected", None, changes, errors)
    second = migrate(messages, options)
    if second:
        codes = ", ".join(sorted({c.rule for c in second}))
        return Outcome(record, "rejected", None, changes, [f"internal error: a second pass changed the record again ({codes})"])
    if field_name is not None:
        obj[field_name] = messages
    return Outcome(record, "changed", orjson.dumps(obj), changes)


def _validation_errors(messages: list[Any], prefix: str) -> list[str]:
    return [
        (prefix + line[len("messages") :]) if line.startswith("messages") else line
        for line in current_errors(messages)
    ]
