"""The rules, found automatically, and what is derived from what they declare.

Every module of this package named ``hm<3 digits>_<name>.py`` holds one rule as ``RULE``
(:class:`~histmig.rules.base.Rule`); :func:`registry` finds them all, in the order they run
(phase, then code). A rule's :class:`~histmig.rules.base.Look`\\ s say where it looks; from
them come :func:`pending` (which rules may change a history, in one walk), the screen's
skeleton (:mod:`histmig.screen`), :func:`nulls_kept` and :func:`known_part_kinds`. Nothing
here names a rule: adding one is one module and its test file.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from histmig.rules.base import Look, Messages, NullField, PartKind, Rule

RULE_MODULE = re.compile(r"hm\d{3}_\w+\Z")
"""The name of a rule's module: ``hm`` and its code's three digits, ``_`` and its name."""


class UnknownRule(ValueError):
    """A ``--select``/``--ignore`` code or prefix that no rule has."""


@cache
def registry() -> tuple[Rule, ...]:
    """Every rule of this package (each ``RULE`` of a module named like :data:`RULE_MODULE`
    on the package's ``__path__``), in the order they run. Raises ``ValueError`` for a code
    two modules share, and ``TypeError`` for a rule module without a ``RULE``."""
    rules: dict[str, Rule] = {}
    for module in sorted(info.name for info in pkgutil.iter_modules(__path__) if RULE_MODULE.match(info.name)):
        rule = getattr(importlib.import_module(f"{__name__}.{module}"), "RULE", None)
        if not isinstance(rule, Rule):
            raise TypeError(f"{__name__}.{module} defines no RULE")
        if rule.code in rules:
            raise ValueError(f"rule {rule.code} is defined twice")
        rules[rule.code] = rule
    return tuple(sorted(rules.values(), key=lambda rule: rule.order))


def select(select: Iterable[str] = (), ignore: Iterable[str] = ()) -> tuple[Rule, ...]:
    """The rules (in their order) whose code starts with one of ``select`` (all when empty)
    and with none of ``ignore``; prefixes work like ruff's (``HM1`` selects HM101–HM103),
    case does not matter. Raises :class:`UnknownRule` for a code or prefix no rule has."""
    rules = registry()
    select, ignore = [s.upper() for s in select], [s.upper() for s in ignore]
    for code in (*select, *ignore):
        if not any(rule.code.startswith(code) for rule in rules):
            raise UnknownRule(f"unknown rule code {code!r} (see `histmig rules`)")
    return tuple(
        rule
        for rule in rules
        if (not select or any(rule.code.startswith(s) for s in select)) and not any(rule.code.startswith(i) for i in ignore)
    )


def looks(rules: Iterable[Rule]) -> list[tuple[Rule, Look]]:
    """Every look of ``rules``, with its rule, in rule order."""
    return [(rule, look) for rule in rules for look in rule.looks]


@dataclass
class _Walk:
    """The looks of some rules, arranged for :func:`pending`'s walk: by message kind, the
    message-level ones, and by part kind the part-level ones (cached as kinds are met)."""

    rules: tuple[Rule, ...]
    message_looks: dict[Any, tuple[tuple[str, Any], ...]] = field(default_factory=dict)
    part_looks: dict[tuple[Any, Any], tuple[tuple[str, Any], ...]] = field(default_factory=dict)

    def for_message(self, kind: Any) -> tuple[tuple[str, Any], ...]:
        found = self.message_looks.get(kind)
        if found is None:
            found = self.message_looks[kind] = tuple((rule.code, look.hit) for rule, look in looks(self.rules) if look.covers(kind, None))
        return found

    def for_part(self, message_kind: Any, part_kind: Any) -> tuple[tuple[str, Any], ...]:
        key = (message_kind, part_kind)
        found = self.part_looks.get(key)
        if found is None:
            found = self.part_looks[key] = tuple((rule.code, look.hit) for rule, look in looks(self.rules) if look.covers(message_kind, part_kind))
        return found


_NO_KIND = ""
"""The part kind :func:`pending` asks about for a part whose ``part_kind`` is missing or not
text: only looks at parts of every kind cover it."""


@cache
def _walk(rules: tuple[Rule, ...]) -> _Walk:
    return _Walk(rules)


def pending(messages: Messages, rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
    """The ``rules`` (in their order) that may change ``messages``, a history as plain JSON
    data, found in one walk of its messages and parts: each rule's looks are asked where
    they are about (a part kind, a field), and only there the rule's own test. Entries that
    are not objects, and ``parts`` that are not lists, are passed over: no rule changes them
    (validation reports them).

    Sound for a whole run of the rules in their order, not only for each rule alone, because
    no rule writes what a rule of an earlier phase looks for (property test: the pending
    rules make the changes every rule would)."""
    walk = _walk(rules)
    codes: set[str] = set()
    for message in messages:
        if type(message) is not dict:
            continue
        kind = message.get("kind")
        if type(kind) is not str:
            kind = None
        for code, hit in walk.for_message(kind):
            if hit(message, None):
                codes.add(code)
        parts = message.get("parts")
        if type(parts) is not list:
            continue
        for part in parts:
            if type(part) is not dict:
                continue
            part_kind = part.get("part_kind")
            for code, hit in walk.for_part(kind, part_kind if type(part_kind) is str else _NO_KIND):
                if code not in codes and hit(message, part):
                    codes.add(code)
    return tuple([rule for rule in rules if rule.code in codes]) if codes else ()


def nulls_kept(rules: Iterable[Rule]) -> frozenset[str]:
    """The fields whose ``null`` some rule repairs (:class:`~histmig.rules.base.NullField`):
    a nested Arrow column, which cannot tell a null field from an absent one, passes these
    nulls to the engine and drops the others."""
    return frozenset(look.field for _, look in looks(rules) if isinstance(look, NullField))


def known_part_kinds(rules: Iterable[Rule], message_kind: str) -> frozenset[str]:
    """The part kinds that some rule rewrites in messages of ``message_kind``
    (:class:`~histmig.rules.base.PartKind` looks of that message kind), besides those 2.68
    loads: such a part is no newer release's unknown kind."""
    return frozenset(
        kind for _, look in looks(rules) if isinstance(look, PartKind) and look.message == message_kind for kind in look.parts  # type: ignore[union-attr]
    )
