"""The rule machinery: a rule's identity, the change it reports, and the registry.

A rule is a small object with a stable code (``HM101``), a one-line summary, the
framework-facts section it comes from, and a function that edits one conversation in
place and returns the changes it made (the django-upgrade ``Fixer`` pattern, design.md
"Rules"). Rules run in registration order; the order is part of the contract because a
later rule can rely on an earlier one (HM101 relies on HM201 having given every call an id).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

Certainty = Literal["exact", "template", "shape", "default", "derived"]
"""How sure a change is (design.md "Rules"): an ``exact`` text match with a framework
string, a ``template`` match with a framework f-string, the ``shape`` of the content, a
``default`` when no evidence points anywhere else, or a value ``derived`` from the record."""

CauseMode = Literal["inferred", "framework"]
"""``inferred``: causes from the evidence catalogue (rules/causes.py). ``framework``: the
exact ``retry`` values pydantic-ai 2.68's loader produces (framework-facts §2)."""

Messages = list[dict[str, Any]]


class Change(NamedTuple):
    """One located edit a rule made to a conversation.

    ``message`` and ``part`` are 0-based indices into the history (``part`` is ``None`` for a
    message-level edit). ``before``/``after`` are the ``part_kind`` values (or a field name
    for message-level edits). ``cause`` is the ``RetryInfo.cause`` written, if any.
    ``evidence`` names the catalogue entry, content shape or derivation that decided the
    edit, and ``certainty`` how sure that is.
    """

    rule: str
    message: int
    part: int | None
    before: str
    after: str
    evidence: str
    certainty: Certainty
    cause: str | None = None

    def as_row(self) -> tuple[Any, ...]:
        """The change as the report's ``changes`` row holds it (README "Report"): ``rule``,
        ``message``, ``part``, ``before``, ``after``, ``cause``, ``evidence``, ``certainty``."""
        return (self.rule, self.message, self.part, self.before, self.after, self.cause, self.evidence, self.certainty)


class Malformed(ValueError):
    """A part a rule targets has a shape no release wrote, so it cannot be migrated; the
    message starts with the path inside the record (``messages[2].parts[0].content: …``).
    The pipeline rejects the record, unchanged."""


@dataclass(frozen=True)
class Context:
    """What a rule may know besides the conversation: the cause mode chosen by the user."""

    causes: CauseMode = "inferred"


RuleFunc = Callable[[Messages, Context], list[Change]]

@dataclass(frozen=True, eq=False)
class Rule:
    """A registered rewrite: ``code`` (stable, e.g. ``HM101``), ``summary`` (one line),
    ``source`` (the framework-facts section or release it comes from) and ``apply``, which
    edits a conversation in place and returns the changes it made. Where a rule can change
    anything is decided for all rules in one walk (:func:`histmig.rules.pending`)."""

    code: str
    summary: str
    source: str
    apply: RuleFunc = field(repr=False)


REGISTRY: list[Rule] = []


def register(code: str, summary: str, source: str) -> Callable[[RuleFunc], RuleFunc]:
    """Decorator adding a rule function to :data:`REGISTRY` under ``code``.

    Raises ``ValueError`` when the code is registered twice.
    """

    def decorate(func: RuleFunc) -> RuleFunc:
        if any(rule.code == code for rule in REGISTRY):
            raise ValueError(f"rule {code} registered twice")
        REGISTRY.append(Rule(code, summary, source, func))
        return func

    return decorate


def iter_parts(messages: Messages, kind: str | None = None):
    """Yield ``(message_index, part_index, message, part)`` for every dict part of every
    dict message (optionally only messages of ``kind`` ``'request'``/``'response'``).
    Malformed entries (not dicts, no ``parts`` list) are skipped; validation reports them."""
    for m_index, message in enumerate(messages):
        if not isinstance(message, dict) or (kind is not None and message.get("kind") != kind):
            continue
        parts = message.get("parts")
        if not isinstance(parts, list):
            continue
        for p_index, part in enumerate(parts):
            if isinstance(part, dict):
                yield m_index, p_index, message, part
