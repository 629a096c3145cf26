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
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from typing import Any

from histmig.errors import UnknownRule
from histmig.rules.base import ANY_PART, FieldLook, HistoryLook, Look, Messages, NullField, PartKind, Rule, always
from histmig.schema.releases import NEWEST, Release

RULE_MODULE = re.compile(r"hm\d{3}_\w+\Z")
"""The name of a rule's module: ``hm`` and its code's three digits, ``_`` and its name."""


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


def select(
    select: Iterable[str] = (), ignore: Iterable[str] = (), target: Release = NEWEST, enabled: Iterable[str] = ()
) -> tuple[Rule, ...]:
    """The rules (in their order) that run for ``target`` (:meth:`Rule.runs_for
    <histmig.rules.base.Rule.runs_for>`; the newest release by default) whose code starts
    with one of ``select`` (all when empty) and with none of ``ignore``; prefixes work like
    ruff's (``HM1`` selects HM101–HM103), case does not matter. An opt-in rule
    (:attr:`~histmig.rules.base.Rule.opt_in`) is among them only when its option is in
    ``enabled``. Raises :class:`UnknownRule` for a code or prefix no rule has, or whose rules
    none run for ``target`` (``--select HM501`` without ``--target``), and for the full code
    of an opt-in rule whose option is not given."""
    rules = registry()
    select, ignore, enabled = [s.upper() for s in select], [s.upper() for s in ignore], set(enabled)
    for code in (*select, *ignore):
        if not any(rule.code.startswith(code) for rule in rules):
            raise UnknownRule(f"unknown rule code {code!r} (see `histmig rules`)")
    for code in select:
        named = [rule for rule in rules if rule.code.startswith(code)]
        if not any(rule.runs_for(target) for rule in named):
            said = (
                f"{code} runs only for a --target {named[0].target_text}, not {target}"
                if len(named) == 1
                else f"no {code} rule runs for a --target {target}"
            )
            raise UnknownRule(f"{said} (see `histmig rules {code}`)")
    for rule in rules:
        if rule.opt_in is not None and rule.opt_in not in enabled and rule.code in select:
            raise UnknownRule(f"rule {rule.code} runs only with --{rule.opt_in.replace('_', '-')}")
    return tuple(
        rule
        for rule in rules
        if rule.runs_for(target)
        and (rule.opt_in is None or rule.opt_in in enabled)
        and (not select or any(rule.code.startswith(s) for s in select))
        and not any(rule.code.startswith(i) for i in ignore)
    )


def opt_ins() -> frozenset[str]:
    """The options that turn opt-in rules on (each rule's :attr:`~histmig.rules.base.Rule.opt_in`)."""
    return frozenset(rule.opt_in for rule in registry() if rule.opt_in is not None)


def looks(rules: Iterable[Rule]) -> list[tuple[Rule, Look]]:
    """Every look of ``rules``, with its rule, in rule order."""
    return [(rule, look) for rule in rules for look in rule.looks]


class Walk:
    """:func:`pending` for some ``rules``, compiled once from their place looks
    (:class:`~histmig.rules.base.PartKind`, :class:`~histmig.rules.base.FieldLook`) into one
    function (as :mod:`dataclasses` compiles ``__init__``): a walk of the messages and their parts that
    asks, at each kind of place a look is about, whether a null field holds ``null`` or another
    field is present, then the rule's own test, each only until its rule is found; looks that
    ask the same question are asked once, for all their rules. The walk is the hot path of
    every migrated record: compiled, it asks no more than a walk written by hand would. The
    rules that look at relations across the history (:class:`~histmig.rules.base.HistoryLook`)
    are asked through their family's ``found``. :attr:`source` is the compiled code, for the
    curious. Built once per rule selection
    (:meth:`histmig.engine.Plan.walk`)."""

    def __init__(self, rules: tuple[Rule, ...]) -> None:
        self.rules = rules
        places = [(rule, look) for rule, look in looks(rules) if isinstance(look, (PartKind, FieldLook))]
        histories: dict[Any, set[str]] = {}
        for rule, look in looks(rules):
            if isinstance(look, HistoryLook):
                histories.setdefault(look.found, set()).add(rule.code)
        self._histories = [(found, frozenset(codes)) for found, codes in histories.items()]
        self._selections: dict[frozenset[str], tuple[Rule, ...]] = {}
        self.history_codes: frozenset[str] = frozenset().union(*histories.values())
        """The codes of the rules a :class:`~histmig.rules.base.HistoryLook` is about."""
        tests: dict[Any, str] = {}
        messages = _branches([(rule, look) for rule, look in places if look.parts is None], "message", tests)
        anywhere = _branches([(rule, look) for rule, look in places if look.parts == ANY_PART], "part", tests)
        kinds = sorted({kind for _, look in places if look.parts not in (None, ANY_PART) for kind in look.parts})
        by_kind: list[str] = []
        for n, kind in enumerate(kinds):
            found = [(rule, look) for rule, look in places if look.parts not in (None, ANY_PART) and kind in look.parts]
            by_kind += [f"{'el' if n else ''}if part_kind == {kind!r}:", *_indent(_branches(found, "part", tests))]
        self.source = "\n".join(
            [
                "def walk(messages):",
                "    codes = set()",
                "    for message in messages:",
                "        if type(message) is not dict:",
                "            continue",
                "        kind = message.get('kind')",
                *_indent(messages, 2),
                "        parts = message.get('parts')",
                "        if type(parts) is not list:",
                "            continue",
                "        for part in parts:",
                "            if type(part) is not dict:",
                "                continue",
                "            part_kind = part.get('part_kind')",
                *_indent(anywhere + by_kind, 3),
                "    return codes",
            ]
        )
        names = {name: test for test, name in tests.items()}
        exec(self.source, names)  # the source is built from field names, kinds and codes, each written as a literal)
        self._walk: Callable[[Messages], set[str]] = names["walk"]

    def _chosen(self, codes: frozenset[str]) -> tuple[Rule, ...]:
        """The rules with ``codes``, in order: kept, a few selections recurring record after
        record."""
        chosen = self._selections.get(codes)
        if chosen is None:
            chosen = tuple(rule for rule in self.rules if rule.code in codes)
            if len(self._selections) < 1024:  # bounded, whatever the input
                self._selections[codes] = chosen
        return chosen

    def history_found(self, messages: Messages) -> frozenset[str]:
        """The codes of the rules the history looks find in ``messages`` (each family's
        ``found``): asked again by the engine once the fixes of earlier phases changed the
        history (:func:`histmig.engine.migrate`), so that a family found up front only
        because its ids were not there yet (HM201 gives them) stays quiet."""
        if len(self._histories) == 1:
            found, family = self._histories[0]
            return found(messages) & family
        return frozenset().union(*(found(messages) & family for found, family in self._histories))

    def to_run(self, messages: Messages, defer: bool = False) -> tuple[tuple[Rule, ...], bool]:
        """The rules the engine runs on ``messages``, and whether it left the history looks'
        rules out: those :meth:`pending` finds, but that a history whose places some rule acts
        on gets every rule of a history look, each family asked when its phase comes, of the
        history the earlier fixes made (:func:`histmig.engine.migrate`); with ``defer``, none
        of them: the engine asks the looks of the output (:func:`histmig.engine.process_full`)."""
        codes = self._walk(messages)
        if codes:
            if defer and self._histories:
                return self._chosen(frozenset(codes)), True
            codes |= self.history_codes
        else:  # a family that finds anything runs whole: a fix of one of its rules may call for another (HM401, HM406)
            for found, family in self._histories:
                if found(messages) & family:
                    codes |= family
        return (self._chosen(frozenset(codes)) if codes else ()), False

    def pending(self, messages: Messages) -> tuple[Rule, ...]:
        """The rules that may change ``messages`` (see :func:`pending`): those the compiled walk
        finds, and those a :class:`~histmig.rules.base.HistoryLook` family finds (each
        family's ``found`` asked once)."""
        codes = self._walk(messages)
        for found, family in self._histories:
            codes.update(found(messages) & family)
        return self._chosen(frozenset(codes)) if codes else ()


def _branches(found: Sequence[tuple[Rule, Look]], target: str, tests: dict[Any, str]) -> list[str]:
    """The source lines asking the questions of ``found`` at ``target`` (``part`` or
    ``message``): one ``if`` a question, led by its message kind when the look has one;
    ``tests`` names each rule test the lines call."""
    questions: dict[tuple[str | None, bool, str | None, Any], list[str]] = {}
    for rule, look in found:
        null = isinstance(look, NullField)
        test = None if look.test is always else look.test
        questions.setdefault((look.message, null, getattr(look, "field", None), test), []).append(rule.code)
    lines = []
    for (message, null, field, test), codes in questions.items():
        asked = [f"kind == {message!r}"] if message is not None else []
        if field is not None:
            asked.append(f"{target}.get({field!r}, 0) is None" if null else f"{field!r} in {target}")
        asked.append(f"{codes[0]!r} not in codes")
        if test is not None:
            asked.append(
                f"{tests.setdefault(test, f'test{len(tests)}')}(message, {'part' if target == 'part' else 'None'})"
            )
        lines += [
            f"if {' and '.join(asked)}:",
            f"    codes.add({codes[0]!r})" if len(codes) == 1 else f"    codes.update({tuple(codes)!r})",
        ]
    return lines


def _indent(lines: list[str], levels: int = 1) -> list[str]:
    return ["    " * levels + line for line in lines]


@cache
def _walk(rules: tuple[Rule, ...]) -> Walk:
    return Walk(rules)


def pending(messages: Messages, rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
    """The ``rules`` (in their order) that may change ``messages``, a history as plain JSON
    data, found in one walk of its messages and parts (:class:`Walk`): each rule's looks are
    asked where they are about (a part kind, a field), and only there the rule's own test.
    Entries that are not objects, and ``parts`` that are not lists, are passed over: no rule
    changes them (validation reports them).

    Sound for a whole run of the rules in their order, not only for each rule alone, because
    no rule writes what a rule of an earlier phase looks for (property test: the pending
    rules make the changes every rule would)."""
    return _walk(rules).pending(messages)


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
        kind
        for _, look in looks(rules)
        if isinstance(look, PartKind) and look.message == message_kind
        for kind in look.parts
    )
