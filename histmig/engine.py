"""The engine: one record in, the migrated record, its changes and findings out; and the one
loop every source runs its records through.

Hot path (design.md), fastest first:

1. :class:`~histmig.screen.Screen` (``convert`` and ``audit``; ``check`` validates every
   record): a record whose bytes msgspec decodes into a skeleton no selected rule can change
   is left as it is, never built, walked nor re-serialized. Over a stream of records
   (:class:`Stream`) the screen is not asked while records keep changing.
2. Any other record is parsed (msgspec, which reads integers beyond 64 bits exactly), so
   broken JSON and records that are not histories are caught and named. One walk
   (:func:`~histmig.rules.pending`) finds the rules that can change it; with none it is
   left as it is.
3. The pending rules run in their order: a rule whose fix applies (safe, or unsafe with
   ``unsafe_fixes``) fixes the history in place; any other reports its findings. The result
   is serialized, and :class:`~histmig.screen.Settled` checks the output bytes at once
   against the current schema and the rules' looks. Only when that says no is the history
   validated with pydantic (:mod:`histmig.schema`, which names every error) and passed
   through the rules a second time; a second pass that changes anything is an internal error.

A record that fails validation, that a rule cannot migrate or that a second pass would
change again is rejected (kept whole) with one line per problem. Bad input never raises out
of :func:`process`. :func:`run_records` is the loop over a source's records (JSONL lines,
Arrow cells, a ``.json`` document, OpenTelemetry exports): screen, else the full way, then the
report.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, cached_property
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, TypeVar

import msgspec
import orjson

from histmig import schema
from histmig.duplicates import Duplicate, duplicated_key
from histmig.errors import Malformed, NotAHistory
from histmig.problems import CONVERSATION, InvalidJson, Problem, Warned
from histmig.records import (
    ID_FIELDS,
    RAW_ENVELOPE,
    Conversation,
    Located,
    Outcome,
    Readers,
    Record,
    check_messages,
    conversation_names,
    dumps,
    envelope_id,
    is_one_message,
    locate_in_conversation,
    locate_messages,
    messages_digest,
    names_conversations,
    one_message,
    struct_key,
)
from histmig.rules import Walk, known_part_kinds, registry, select
from histmig.rules.base import ABSENT_PART, Budgets, CauseMode, Change, Context, Finding, Rule
from histmig.rules.pairing import CODES, call_names, mentioned_call_names
from histmig.schema import REQUEST_PART_KINDS, RESPONSE_PART_KINDS, releases
from histmig.schema.releases import NEWEST, Release
from histmig.screen import Screen, Settled, Verdict, screen_for, settled_for

if TYPE_CHECKING:
    from histmig.report import Report

_DECODER = msgspec.json.Decoder()

FRONTIER = CODES["frontier"]
"""The rule of the calls of a history's last response (HM407), whose unsafe fix closes them."""


@dataclass(frozen=True)
class Plan:
    """What the engine does to every record: the ``rules`` (in their order; by default every
    rule that runs for the newest release and is not opt-in), whether the
    fixes of unsafe rules apply too (``unsafe_fixes``), the cause mode, the envelope's
    messages field (``None``: auto-detect), whether records that need no rule are still
    parsed and validated (``validate_all``: ``check`` does, ``convert`` does not), the
    ``target`` release the histories are written for (``--target``, ``check --reader``; the
    newest by default), whether each record's :class:`~histmig.records.Readers` are told
    (``readers``: ``check --reader``), HM104's ``counting`` rules and retry ``budgets``,
    whether the calls of the last response are left open whatever the fixes
    (``keep_frontier``: the plan of a record that names a conversation, :meth:`for_record`),
    the codes whose fixes are ``withheld`` (only reported: not applicable to a conversation's
    layout), whether the records were ``grouped`` into conversations (``--conversation``:
    a conversation is whole, its last calls are closed as any history's), and whether a
    record with something to say gets its messages' digest (``digests``: ``check --baseline``,
    :func:`~histmig.records.messages_digest`), and the paths of a record's other fields histmig
    reads (``read_fields``: ``--conversation`` and ``--order``, whose duplicated keys are read
    ones: :func:`histmig.duplicates.duplicated_key`), and the calls of a last response that
    another record of the input answers (``answered``, :func:`~histmig.rules.pairing.call_names`
    texts, from a first pass: :meth:`for_record`).
    Built by :meth:`histmig.options.Options.plan`.

    For an older ``target``, a record is valid when that release loads it (the legacy schema
    and the catalogue, :mod:`histmig.schema.releases`), and every record the screen does not
    pass is validated, so that none it cannot load is copied unsaid."""

    rules: tuple[Rule, ...] = field(default_factory=select)
    unsafe_fixes: bool = False
    causes: CauseMode = "inferred"
    messages_field: str | None = None
    validate_all: bool = False
    target: Release = NEWEST
    readers: bool = False
    counting: str = "current"
    budgets: Budgets = Budgets()
    keep_frontier: bool = False
    withheld: frozenset[str] = frozenset()
    grouped: bool = False
    digests: bool = False
    read_fields: tuple[tuple[str, ...], ...] = ()
    answered: frozenset[str] = frozenset()

    @cached_property
    def context(self) -> Context:
        """The :class:`~histmig.rules.base.Context` the rules are given (built once)."""
        return Context(self.causes, self.target, self.counting, self.budgets)

    @cached_property
    def validates_unchanged(self) -> bool:
        """Whether a record no rule changes is validated too: under ``validate_all``, or for an
        older target."""
        return self.validate_all or self.target != NEWEST

    @cached_property
    def walk(self) -> Walk:
        """:func:`~histmig.rules.pending` for these rules (built once)."""
        return Walk(self.rules)

    @cached_property
    def _settled(self) -> dict[tuple[str | None, bool], Settled]:
        return {}

    def settled(self, field: str | None, pairing: bool = True) -> Settled | None:
        """The :class:`~histmig.screen.Settled` check of these rules for envelope ``field``
        (looked up here, not in a cache keyed by the rules, on every migrated record);
        without ``pairing``, the history looks are not asked (the engine asked them of the
        migrated history already); ``None`` for an older target: it checks against the
        newest schema."""
        if self.target != NEWEST:
            return None
        found = self._settled.get((field, pairing))
        if found is None:
            found = self._settled[field, pairing] = settled_for(self.rules, field, self.fixing if pairing else None)
        return found

    @cached_property
    def fixing(self) -> frozenset[str]:
        """The codes of the rules whose fix applies: the safe ones, and the unsafe ones with
        ``unsafe_fixes`` (a rule without a fix only reports), but those ``withheld`` (fixes
        not applicable to a conversation's layout, :func:`process_conversation`)."""
        return frozenset(
            rule.code
            for rule in self.rules
            if rule.fix is not None
            and (rule.applicability == "safe" or self.unsafe_fixes)
            and not (self.keep_frontier and rule.code == FRONTIER)
            and rule.code not in self.withheld
        )

    @cached_property
    def _frontier_kept(self) -> Plan:
        return replace(self, keep_frontier=True)

    @property
    def closes_alone(self) -> bool:
        """Whether HM407's fix closes the calls of a record's last response as a history's
        given alone: its unsafe fix applies and records are not grouped by ``--conversation``
        (:meth:`for_record`, :meth:`for_columns` say which records keep them open)."""
        return not self.grouped and FRONTIER in self.fixing

    def for_record(self, obj: Any, messages: list[Any]) -> Plan:
        """The plan for one record (``obj``, holding ``messages``): this one, but that the
        calls of the last response of a record naming a conversation
        (:func:`~histmig.records.conversation_names`), or holding a call another record
        answers (:attr:`answered`), stay open whatever the fixes: another record of the
        conversation (the next run's, starting with their results) may answer them, which a
        record alone cannot tell (HM407's unsafe fix closes them on a history given alone,
        :func:`migrate`)."""
        if not self.closes_alone:
            return self
        if conversation_names(obj, messages) or (self.answered and not self.answered.isdisjoint(call_names(messages))):
            return self._frontier_kept
        return self

    @property
    def untold(self) -> Plan:
        """The plan for a conversation ``--conversation`` could not tell, a record whose key is
        missing or null (:attr:`~histmig.records.Conversation.note`): a conversation of its
        own, not known to be whole (a misspelt key leaves every record so), whose last
        response's calls stay open whatever the fixes (HM407), as a record's that names a
        conversation without ``--conversation`` (:meth:`for_record`)."""
        return self._frontier_kept if FRONTIER in self.fixing else self

    def for_columns(self, columns: Iterable[str]) -> Plan:
        """The plan for the rows of a table or a columnar file (not grouped by
        ``--conversation``) that has ``columns`` besides its messages: with a column naming
        conversations (:func:`~histmig.records.names_conversations`, a chat app's
        ``session_id``), every row is a record that may name one, whose last response's calls
        stay open whatever the fixes, as :meth:`for_record` keeps a JSON record's that names one
        in its envelope: the next run's row may answer them."""
        if not self.closes_alone or not any(map(names_conversations, columns)):
            return self
        return self._frontier_kept

    @property
    def screen(self) -> Screen | None:
        """The :class:`~histmig.screen.Screen` of these rules and envelope field, or ``None``
        under ``validate_all`` (``check`` parses and validates every record)."""
        return None if self.validate_all else screen_for(self.rules, self.messages_field, self.fixing, self.target)

    @property
    def history_screen(self) -> Screen | None:
        """:attr:`screen` for a bare history (a conversation's records put together,
        :func:`joined_history`)."""
        return None if self.validate_all else screen_for(self.rules, None, self.fixing, self.target)

    def processor(self) -> Stream:
        """A :class:`Stream` of this plan, for one task's records (the plan is the job of a
        migration, :class:`~histmig.sources.base.Job`)."""
        return Stream(self)


def migrate(messages: list[Any], plan: Plan = Plan()) -> list[Change]:
    """Run the fixes of ``plan`` over ``messages`` (a history as plain JSON data), in rule
    order, editing it in place; returns the changes in the order they were made. Only the
    rules :func:`~histmig.rules.pending` finds run: the others would change nothing. Raises
    :class:`~histmig.errors.Malformed` for a part a rule targets that no release wrote."""
    return _apply(messages, plan.walk.to_run(messages)[0], plan)[0]


def findings(messages: list[Any], plan: Plan = Plan()) -> list[Finding]:
    """What the rules of ``plan`` find in ``messages``, which are left as they are: the rules
    :func:`~histmig.rules.pending` finds, a phase at a time, each rule of a phase asked on the
    history as the fixes of the earlier phases leave it (as :func:`migrate` runs them, on a
    copy), so that each finding is one a run would meet, at its place then. Raises
    :class:`~histmig.errors.Malformed` as :func:`migrate` does."""
    work = copy.deepcopy(messages)
    walk = plan.walk
    found: list[Finding] = []
    fixed = False
    asked: frozenset[str] | None = None
    for _, phase in itertools.groupby(walk.pending(work), key=lambda rule: rule.phase):
        rules = list(phase)
        if fixed and asked is None and any(rule.code in walk.history_codes for rule in rules):
            asked = walk.history_found(work)
        rules = [rule for rule in rules if asked is None or rule.code not in walk.history_codes or rule.code in asked]
        found += [finding for rule in rules for finding in rule.check(work, plan.context)]
        for rule in rules:
            if rule.code in plan.fixing:
                made = rule.fix(work, plan.context)  # type: ignore[misc]  # a fixing rule has a fix
                fixed = any(type(done) is Change for done in made) or fixed
    return found


def _apply(messages: list[Any], rules: tuple[Rule, ...], plan: Plan) -> tuple[list[Change], list[Finding], bool]:
    """The changes the fixing rules of ``rules`` made to ``messages``, the findings of the
    others and those the fixing rules left as they are, and whether the history looks were asked
    of the history the earlier fixes made and no fix of theirs changed it (then its pairing
    needs no second look: no later phase writes what they look for). The rules of a history look
    run only if its ``found``, asked when the first of them comes, finds them
    (:meth:`~histmig.rules.Walk.to_run`)."""
    ctx = plan.context
    history = plan.walk.history_codes
    changes: list[Change] = []
    findings: list[Finding] = []
    asked: frozenset[str] | None = None
    looked_fixed = False
    for rule in rules:
        if rule.code in history:
            if asked is None:
                asked = plan.walk.history_found(messages)
            if rule.code not in asked:
                continue
            if rule.code in plan.fixing:
                made = False
                for done in rule.fix(messages, ctx):  # type: ignore[misc]  # a fixing rule has a fix
                    if type(done) is Change:
                        changes.append(done)
                        looked_fixed = made = True
                    else:
                        findings.append(done)  # type: ignore[arg-type]  # not a Change: a Finding
                if made:  # what the family's later rules find changed (HM401 lifts HM406's stand-ins): ask again
                    asked = None
                continue
        if rule.code in plan.fixing:
            for done in rule.fix(messages, ctx):  # type: ignore[misc]  # a fixing rule has a fix
                (changes if type(done) is Change else findings).append(done)  # type: ignore[arg-type]  # by its type
        else:
            findings.extend(rule.check(messages, ctx))
    return changes, findings, asked is not None and not looked_fixed


def process(record: Record, plan: Plan = Plan()) -> Outcome:
    """Migrate one record (see the module docstring): ``unchanged`` at once when the screen
    passes it, else :func:`process_full`. Never raises for bad input."""
    screen = plan.screen
    verdict = None if screen is None else screen(record.raw)
    return process_full(record, plan) if verdict is None else screened_outcome(record, verdict, plan.messages_field)


_IDS = msgspec.json.Decoder(msgspec.defstruct("_Ids", [(name, Any, None) for name in ID_FIELDS], gc=False))
"""Reads an envelope's id fields alone (:data:`~histmig.records.ID_FIELDS`)."""


def screened_outcome(record: Record, findings: tuple[Finding, ...], field: str | None = None) -> Outcome:
    """The outcome of a record the screen passed (:data:`~histmig.screen.Verdict`):
    ``unchanged``, with the ``findings`` it reported and, when there are any, the record's
    envelope id (read alone: the record is not built), and the conversations it names when a
    finding says it may be a piece of one (:func:`told_conversations`; ``field``, the
    envelope's messages field, ``None``: auto-detect)."""
    if not findings:
        return Outcome(record, "unchanged", record.raw)
    conversations = told_conversations(record.raw, findings, field)
    envelope = record.raw[:1] == b"{"
    return Outcome(
        _with_id(record, envelope), "unchanged", record.raw, findings=list(findings), conversations=conversations
    )


def told_conversations(raw: bytes, findings: Iterable[Finding], field: str | None) -> tuple[str, ...]:
    """The conversations record ``raw`` names (:func:`~histmig.records.conversation_names`)
    and the calls that may tie it to another of its records
    (:func:`~histmig.rules.pairing.call_names`), when one of its ``findings`` says it may be a
    piece of a conversation: a fragment's, or the calls of its last response
    (:data:`FRONTIER`); else none (the record is not parsed again: a record holds such
    findings rarely)."""
    if not any(finding.certainty == "fragment" or finding.code == FRONTIER for finding in findings):
        return ()
    try:
        obj = _DECODER.decode(raw)
        messages = locate_messages(obj, field).messages
    except (msgspec.DecodeError, RecursionError, NotAHistory):
        return ()
    return conversation_names(obj, messages) + call_names(messages)


_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
_FIELDS = msgspec.json.Decoder(dict[str, msgspec.Raw])


def _holds_one_message(raw: bytes, field: str | None) -> bool:
    """Whether ``raw`` is a record of a conversation that holds one message in a field
    (``{"conversation_id": "c", "message": {...}}``, :func:`~histmig.records.locate_in_conversation`),
    which the full way, reading a record as a whole history, rejects: asked only of a record
    it rejected."""
    try:
        return locate_in_conversation(_DECODER.decode(raw), field).single
    except (msgspec.DecodeError, RecursionError, NotAHistory):
        return False


def joined_history(raws: Sequence[bytes], field: str | None) -> bytes | None:
    """The bytes of the history the records of a conversation hold put together (``raws``,
    their bytes in order): each
    one's array (a bare history, an envelope's messages field as auto-detection finds it,
    ``field`` when it is a key of the envelope) or message (a record that is one) joined into
    one array, built from their bytes alone (each record's checked JSON on its own, never only
    when put together). ``None`` when a record's history is not an array of its bytes (JSON
    text in a string, a nested field, a field found by its content, no JSON): then the records
    are parsed (:func:`process_conversation`)."""
    pieces: list[bytes] = []
    for raw in raws:
        items = _items(raw, field)
        if items is None:
            return None
        pieces += items
    return b"[" + b",".join(pieces) + b"]"


def _screened_conversation(
    records: Sequence[Record], findings: tuple[Finding, ...], field: str | None
) -> list[Outcome]:
    """The outcomes of a conversation's ``records`` the screen passed, their histories put
    together (:func:`joined_history`), with ``findings``: each record unchanged, with the
    findings at its messages, their places its own (as :func:`process_conversation` gives
    them), each named by its envelope id; no record is built."""
    layout: Layout = [
        (r, i)
        for r, record in enumerate(records)
        for i in range(len(_items(record.raw, field) or ()))  # joined: each record's items are there
    ]
    placed: list[list[Finding]] = [[] for _ in records]
    for finding in findings:
        r, i = _at(layout, finding.message)
        placed[r].append(finding._replace(message=i))
    return [
        Outcome(_with_id(record, record.raw.lstrip()[:1] == b"{"), "unchanged", record.raw, findings=own)
        for record, own in zip(records, placed)
    ]


def _with_id(record: Record, envelope: bool) -> Record:
    """``record`` with its envelope id (read alone: the record is not built), when it came
    without one and is an ``envelope``."""
    if record.record_id is None and envelope:
        # the record's own bytes are JSON (joined_history, the screen): only an id field nested too deep can raise
        with contextlib.suppress(msgspec.DecodeError):
            return Record(
                record.raw, record.source, record.location, envelope_id(msgspec.structs.asdict(_IDS.decode(record.raw)))
            )
    return record


def _joinable(field: str | None) -> bool:
    """Whether a conversation's histories at the envelope's messages ``field`` are put together
    from their bytes (:func:`joined_history`): auto-detected, or a key of the envelope (not a
    path into it)."""
    return field is None or not ("." in field or "\\" in field)


def _items(raw: bytes, field: str | None) -> list[Any] | None:
    """The messages of one record as their bytes (:func:`joined_history`), or ``None``."""
    try:
        if raw.lstrip()[:1] != b"{":
            return _ITEMS.decode(raw)
        if field is not None:
            if not _joinable(field):
                return None
            value = _FIELDS.decode(raw).get(field)
            return None if value is None else _ITEMS.decode(value)
        found: Any = RAW_ENVELOPE.decode(raw)
    except (msgspec.DecodeError, RecursionError):  # a record nested too deep joins nothing: it goes the full way
        return None
    if one_message(found):
        return [raw.strip()]
    for name in found.__struct_fields__[2:]:
        items = getattr(found, name)
        if items is not None:
            return items
    return None


SKIP_SCREEN_AFTER = 2
"""Records in a row that :class:`Stream` found changed, after which it stops asking the
screen, until a record comes out unchanged."""


class Processor(Protocol):
    """What :func:`run_records` runs each record through: :meth:`screened` says a record's
    bytes need nothing but the findings it gives (:data:`~histmig.screen.Verdict`; ``()``:
    the record is only counted), or ``None``: then :meth:`full` makes its
    :class:`Outcome`."""

    def screened(self, raw: bytes) -> Verdict: ...

    def passed(self, record: Record, findings: tuple[Finding, ...]) -> Outcome:
        """The outcome of a record :meth:`screened` passed with ``findings``
        (:func:`screened_outcome`)."""
        ...

    def full(self, record: Record) -> Outcome: ...


class Stream:
    """The engine over the records of one input, in order (a :class:`Processor`).
    :meth:`screened` asks the screen whether a record needs nothing, except after
    :data:`SKIP_SCREEN_AFTER` records in a row that :meth:`full` found changed: then it says
    ``False`` at once, until a record does not change. In an archive written by a legacy
    release nearly every record changes, and the screen, which stops at the first
    ``retry-prompt`` part, would only add its cost (~3 µs a record). The outcome is the same
    whether the screen is asked or not: the full way leaves a record that needs nothing
    unchanged, and a record it rejects that the screen was not asked about is put to the
    screen then (the screen passes one value the full way refuses, a number beyond a
    double's range, see :mod:`histmig.screen`)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self._screen = plan.screen
        self._history_screen = plan.history_screen if plan.grouped else None
        self._changed_in_a_row = 0

    def _skipping(self) -> bool:
        return self._changed_in_a_row >= SKIP_SCREEN_AFTER

    def screened(self, raw: bytes) -> Verdict:
        """What the screen says of ``raw`` (``None`` when it is not asked)."""
        if self._screen is None or self._skipping():
            return None
        verdict = self._screen(raw)
        if verdict is not None:
            self._changed_in_a_row = 0
        return verdict

    def screen(self, conversation: Conversation) -> Verdict:
        """What the screen says of ``conversation`` (:data:`~histmig.screen.Verdict`): of a
        record alone, :meth:`screened`; of several, what it says of their histories put
        together (:func:`joined_history`), read in one decode a record where the screen can
        (:meth:`~histmig.screen.Screen.pieces`). With ``()`` its records need only be counted,
        none built nor parsed (:meth:`~histmig.records.Conversation.read`)."""
        raws = conversation.raws
        if len(raws) == 1:
            return self.screened(raws[0])
        if self._history_screen is None:
            return None
        field = self.plan.messages_field
        if _joinable(field):  # the records' histories screened in one decode each, as joined_history reads them
            verdict = self._screen.pieces(raws)  # type: ignore[union-attr]  # not validate_all
            if verdict is not False:
                return verdict
        joined = joined_history(raws, field)
        return None if joined is None else self._history_screen(joined)

    def conversation(self, conversation: Conversation, verdict: Verdict | Literal["ask"] = "ask") -> list[Outcome]:
        """The outcomes of ``conversation``'s records: a conversation of one record as any
        record (the screen, else :meth:`full`); one of several, or one message alone, by
        :func:`process_conversation`, unless the screen passes their histories put together
        (:func:`joined_history`) with nothing to say: then no record is built. ``verdict``:
        what :meth:`screen` said of it, when it was asked (the screen is not asked again)."""
        if verdict == "ask":
            verdict = self.screen(conversation)
        records = conversation.records
        if verdict == ():
            return [Outcome(record, "unchanged", record.raw) for record in records]
        plan = self.plan if conversation.note is None else self.plan.untold
        if len(records) == 1:
            if verdict is not None:
                return [self.passed(records[0], verdict)]
            if not is_one_message(records[0].raw):
                outcome = self.full(records[0], plan)
                if outcome.status != "rejected" or not _holds_one_message(records[0].raw, plan.messages_field):
                    return [outcome]
        elif verdict is not None:
            return _screened_conversation(records, verdict, plan.messages_field)
        return process_conversation(conversation, plan)

    def full(self, record: Record, plan: Plan | None = None) -> Outcome:
        """:func:`process_full` of ``record`` (a record that :meth:`screened` just refused, or
        was not asked about) in ``plan`` (``None``: the stream's), counted towards skipping the
        screen."""
        asked = self._screen is None or not self._skipping()
        outcome = process_full(record, plan or self.plan)
        self._changed_in_a_row = self._changed_in_a_row + 1 if outcome.status == "changed" else 0
        if not asked and outcome.status == "rejected":
            verdict = self._screen(record.raw)  # type: ignore[misc]  # not asked: there is a screen
            if verdict is not None:
                return self.passed(record, verdict)
        return outcome

    def passed(self, record: Record, findings: tuple[Finding, ...]) -> Outcome:
        """:func:`screened_outcome` of ``record``, in this plan's envelope field."""
        return screened_outcome(record, findings, self.plan.messages_field)


class ConversationProcessor(Protocol):
    """What :func:`run_conversations` runs each conversation through: :meth:`screen` says
    whether its records need nothing but counting (``()``; :data:`~histmig.screen.Verdict`),
    :meth:`conversation` makes their outcomes, told what :meth:`screen` said (a
    :class:`Stream`; an OpenTelemetry export, which screens nothing)."""

    def screen(self, conversation: Conversation) -> Verdict: ...

    def conversation(self, conversation: Conversation, verdict: Verdict | Literal["ask"] = "ask") -> list[Outcome]: ...


K = TypeVar("K")


def run_records(
    items: Iterable[tuple[bytes, K]],
    processor: Processor,
    report: Report,
    record: Callable[[bytes, K], Record],
    accept: Callable[[K, Outcome], Outcome] | None = None,
) -> None:
    """The one record loop: every ``(raw, key)`` of ``items`` (a record's bytes and where it
    lies, in the source's own terms: a line's span, a cell's row) through ``processor``. A
    record the screen passes is only counted; any other is named by ``record(raw, key)``,
    goes the full way, is handed to ``accept(key, outcome)`` (which keeps its output where
    the source needs it, and may return another outcome: a cell its column cannot hold is
    rejected) and is added to ``report`` unless it is quiet (:attr:`Outcome.quiet`). Never
    raises for bad input."""
    unchanged = 0
    screened, full, passed = processor.screened, processor.full, processor.passed
    for raw, key in items:
        verdict = screened(raw)
        if verdict == ():
            unchanged += 1
            continue
        outcome = full(record(raw, key)) if verdict is None else passed(record(raw, key), verdict)
        if accept is not None:
            outcome = accept(key, outcome)
        if outcome.status == "unchanged" and not (
            outcome.errors or outcome.warnings or outcome.findings or outcome.readers
        ):  # Outcome.quiet, inline: once a record
            unchanged += 1
        else:
            report.add(outcome)
    report.add_unchanged(unchanged)


def run_conversations(
    conversations: Iterable[tuple[Conversation, Sequence[K]]],
    processor: ConversationProcessor,
    report: Report,
    accept: Callable[[K, Outcome], Outcome] | None = None,
    *,
    quiet_too: bool = True,
) -> None:
    """:func:`run_records` for a source that groups its records into conversations
    (``--conversation``): each ``(conversation, keys)`` (its records in order and where each
    lies) through ``processor`` (:meth:`Stream.conversation`, or any
    :class:`ConversationProcessor`), each record's outcome handed to
    ``accept(key, outcome)`` and added to ``report`` unless it is quiet. A conversation's
    :attr:`~histmig.records.Conversation.note` is a warning of each of its records; one it
    ``refused`` is rejected whole, unread. Without ``quiet_too`` (a source that writes only
    the records that change), a conversation the screen passes with nothing to say
    (:meth:`Stream.screen`) is only counted: no outcome is made, ``accept`` is not called.
    Under a :class:`Stream`'s ``digests`` (``check --baseline``) each record with something
    to say is named by its messages' digest, as a record alone is (:func:`process_full`),
    never by where it lies: a baseline holds whatever the file's order. Never raises for bad
    input."""
    unchanged = 0
    plan = processor.plan if isinstance(processor, Stream) else None  # the otel commands' converter has none
    digests, field = (plan.digests, plan.messages_field) if plan is not None else (False, None)
    for conversation, keys in conversations:
        refused = conversation.refused
        if refused is None and not quiet_too and conversation.note is None:
            verdict = processor.screen(conversation)
            if verdict == ():
                unchanged += len(keys)
                continue
            outcomes = processor.conversation(conversation, verdict)
        elif refused is None:
            outcomes = processor.conversation(conversation)
        else:
            outcomes = [Outcome(record, "rejected", None, errors=[refused]) for record in conversation.records]
        for key, outcome in zip(keys, outcomes):
            if conversation.note is not None:
                outcome.warnings.append(Warned(CONVERSATION, conversation.note))
            if accept is not None:
                outcome = accept(key, outcome)
            if outcome.quiet:
                unchanged += 1
            else:
                if digests and outcome.digest is None:
                    outcome.digest = messages_digest(outcome.record.raw, field)
                report.add(outcome)
    report.add_unchanged(unchanged)


def process_full(record: Record, plan: Plan = Plan(), *, defer: bool = True) -> Outcome:
    """Migrate one record the full way, without the screen: parse, find the pending rules,
    fix, serialize, settled check, else validate and second pass. Never raises for bad
    input. Under ``plan.readers`` the outcome also tells which releases load the record as it
    was read (:class:`~histmig.records.Readers`).

    A record some rule acts on at a place goes without its history looks (``defer``,
    :meth:`~histmig.rules.Walk.to_run`; for the newest target, whose settled check there is):
    the settled check asks them of the output instead, from its decoded structs, where they
    cost a fraction of a walk of the parsed record (no rule writes what they look for:
    phases); their findings are reported. Only when they find something to fix, or cannot
    tell, is the record migrated again with them, each family asked when its phase comes."""
    outcome = _full_way(record, plan, defer and plan.target == NEWEST)
    if outcome.status == "rejected":
        outcome.conversations = mentioned_call_names(record.raw)
    elif outcome.findings:
        outcome.conversations = told_conversations(record.raw, outcome.findings, plan.messages_field)
    if plan.readers:
        outcome.readers = Readers(plan.target, _readers(record.raw, plan.messages_field))
    if plan.digests and not outcome.quiet:
        outcome.digest = messages_digest(record.raw, plan.messages_field)
    return outcome


def _full_way(record: Record, plan: Plan, defer: bool, known: tuple[Duplicate | None] | None = None) -> Outcome:
    """:func:`process_full` but the readers; ``known``: its duplicated key, found already (a
    second go, without deferring: :func:`_duplicated` of the first)."""
    try:
        obj = _DECODER.decode(record.raw)
    except (msgspec.DecodeError, RecursionError) as exc:
        return Outcome(record, "rejected", None, errors=[_json_problem(record.raw, exc)])
    try:
        located = locate_messages(obj, plan.messages_field)
        check_messages(located.messages, located.name or "messages")
    except NotAHistory as exc:
        return Outcome(_named(record, obj), "rejected", None, errors=[str(exc)])
    messages = located.messages
    plan = plan.for_record(obj, messages)
    rules, deferred = plan.walk.to_run(messages, defer=defer)
    name = located.name
    prefix = name or "messages"
    # the last value of a key read twice may need nothing where another needs a rule (or is refused):
    # looked for before "unchanged" too
    (duplicated,) = known or (_duplicated(record.raw, obj, located, prefix, plan.read_fields),)
    if not rules and not plan.validates_unchanged and (duplicated is None or not duplicated.read):
        return Outcome(record, "unchanged", record.raw)
    record = _named(record, obj)
    if duplicated is not None and duplicated.read:
        return Outcome(record, "rejected", None, errors=[duplicated.problem])
    try:
        changes, findings, paired = _apply(messages, rules, plan)
    except Malformed as exc:
        return Outcome(record, "rejected", None, errors=[_under(exc.args[0], prefix)])
    except Exception as exc:  # a rule met a shape it did not expect: keep the record, say so
        return Outcome(record, "rejected", None, errors=[f"internal error: {type(exc).__name__}: {exc}"])
    if deferred and not changes:
        return _full_way(record, plan, defer=False, known=(duplicated,))
    if changes and duplicated is not None:  # in a payload: writing the record again would keep one of its values
        return Outcome(record, "rejected", None, changes, errors=[duplicated.problem])
    if not changes:
        if not plan.validates_unchanged:
            return Outcome(record, "unchanged", record.raw, findings=findings)
        errors, warnings = _validate(messages, prefix, plan.target)
        if errors and schema.legacy_errors(messages):
            errors.append("no release 0.0.13-2.68 wrote this shape: no rule can migrate it")
        return Outcome(record, "unchanged", record.raw, errors=errors, warnings=warnings, findings=findings)
    # a history held as JSON text in a string field (written back as text), or under a key no struct can read
    # the record by, is checked as a bare history
    if located.text or not all(map(struct_key, located.path)):
        checked, field = dumps(messages), None
        output = dumps(located.put(obj, checked.decode())) if located.text else dumps(obj)
    else:
        output = checked = dumps(obj)
        field = name
    if deferred:
        verdict = plan.settled(field).look(checked)  # type: ignore[union-attr]  # deferred: the newest target
        if verdict is None or verdict is False:
            return _full_way(record, plan, defer=False, known=(None,))
        return Outcome(record, "changed", output, changes, [], [], findings + list(verdict))
    settled = plan.settled(field, pairing=not paired)
    if settled is not None and settled(checked):
        return Outcome(record, "changed", output, changes, [], [], findings)
    errors, warnings = _validate(messages, prefix, plan.target)
    if errors:
        return Outcome(record, "rejected", None, changes, errors, warnings, findings)
    second = _apply(messages, plan.walk.to_run(messages)[0], plan)[0]
    if second:
        codes = ", ".join(sorted({c.rule for c in second}))
        return Outcome(
            record, "rejected", None, changes, [f"internal error: a second pass changed the record again ({codes})"]
        )
    return Outcome(record, "changed", output, changes, warnings=warnings, findings=findings)


def _duplicated(
    raw: bytes, obj: Any, located: Located, prefix: str, fields: tuple[tuple[str, ...], ...] = ()
) -> Duplicate | None:
    """The first duplicated key of the record (:func:`histmig.duplicates.duplicated_key`; ``fields``:
    :attr:`Plan.read_fields`), or, for a history held as JSON text, of that text, its path under
    ``prefix`` (a key histmig reads in the text counts before a payload's of the record)."""
    found = duplicated_key(raw, obj, located.path, single=located.single, fields=fields)
    if located.text and (found is None or not found.read):
        text = obj
        for key in located.path:
            text = text[key]
        inner = duplicated_key(text.encode(errors="surrogatepass"), located.messages)
        if inner is not None and (found is None or inner.read):
            return inner._replace(problem=inner.problem.under(prefix))
    return found


def _readers(raw: bytes, field: str | None) -> releases.Spans:
    """The releases that load the history in ``raw`` as it is: none when it is no history or
    no release wrote its shape (:func:`histmig.schema.legacy_errors`), else as the catalogue
    tells."""
    try:
        messages = locate_messages(_DECODER.decode(raw), field).messages
    except (msgspec.DecodeError, RecursionError, NotAHistory):
        return ()
    return () if schema.legacy_errors(messages) else releases.readers(messages)


def _named(record: Record, obj: Any) -> Record:
    """``record`` with its ``record_id``: the one it came with (a Parquet or DuckDB id
    column's), else the parsed record's envelope id."""
    return (
        record if record.record_id is not None else Record(record.raw, record.source, record.location, envelope_id(obj))
    )


def _json_problem(raw: bytes, error: Exception) -> str:
    """Why ``raw`` is not JSON histmig reads (msgspec's ``error`` said it is not), in the
    plainest words at hand: an integer longer than Python reads exactly (msgspec's ``Integer
    value out of range``: ``sys.get_int_max_str_digits()``, 4,300 by default), where it stops
    being UTF-8 (``not UTF-8: byte 0xff at byte 81 of the record``, counted from 1), else
    orjson's message (msgspec's can mislead: ``Input data was truncated`` for a lone
    surrogate), its ``line 1 column 31 (char 30)`` on a record's first line given as ``at
    character 31 of the record``, counted from 1; a text nested deeper than Python's
    recursion limit lets msgspec go (orjson stops at 1024 levels) is said to be, in the same
    words whichever of the two stops first. All but the integer are an
    :class:`~histmig.problems.InvalidJson`."""
    if str(error).startswith("Integer value out of range"):
        digits = sys.get_int_max_str_digits()
        return (
            f"an integer of more than {digits:,} digits: histmig keeps integers exactly up to {digits:,} digits, "
            "Python's limit"
        )
    try:
        raw.decode()
    except UnicodeDecodeError as exc:
        return InvalidJson.of(raw, f"not UTF-8: byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} of the record")
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if not str(exc).startswith("depth limit exceeded"):
            return InvalidJson.of(raw, _FIRST_LINE_PLACE.sub(r" at character \1 of the record", str(exc)))
    return InvalidJson.of(raw, f"nested deeper than {sys.getrecursionlimit()} levels")


_FIRST_LINE_PLACE = re.compile(r": line 1 column (\d+) \(char \d+\)$")
"""orjson's place of an error on the record's first line (a JSONL record's only one), which
an error line would otherwise read as a line of the file."""

_SCHEMA_PART_KINDS = {"request": REQUEST_PART_KINDS, "response": RESPONSE_PART_KINDS}
_PLACEHOLDER = {
    "request": {"part_kind": "user-prompt", "content": ""},
    "response": {"part_kind": "text", "content": ""},
}


def validation_errors(messages: list[Any], target: Release = NEWEST) -> list[str]:
    """What keeps the ``target`` release from loading ``messages`` (a history as plain JSON
    data), one ``path: message`` line each, as ``check`` says it of a record (:func:`_validate`:
    a part of a kind no release knows is carried, not an error); ``[]`` when it loads them."""
    errors, _ = _validate(messages, "messages", target)
    if errors and schema.legacy_errors(messages):
        errors.append("no release 0.0.13-2.68 wrote this shape: no rule can migrate it")
    return errors


def _validate(messages: list[Any], prefix: str, target: Release = NEWEST) -> tuple[list[str], list[str]]:
    """Validation errors and unknown-part warnings of a history, paths under ``prefix``, for
    the ``target`` release: the newest's schema, or, for an older one, the legacy schema (what
    some release wrote) and what the catalogue says ``target`` cannot load
    (:func:`histmig.schema.releases.load_errors`).

    A part whose ``part_kind`` no release loads in any message and no rule rewrites (a newer
    release's) is carried unchanged and reported as a warning, never an error. A part of a
    kind some release loads in the other message kind only (a ``text`` part in a request, a
    ``user-prompt`` in a response) is an error: no release loads it there (docs/framework.md
    §3.2), so it is damage, not a newer release's part. Either is validated as an empty
    placeholder of its message kind, so every other path keeps its index. A history the newest
    release loads as it is has neither (an unknown ``part_kind`` fails validation): that is
    checked first, and the parts are walked only when it fails."""
    if target == NEWEST and schema.is_current(messages):
        return [], []
    known = _known_part_kinds(registry())
    errors: list[str] = []
    warnings: list[str] = []
    checked: list[Any] = []
    for m_index, message in enumerate(messages):
        kind: Any = message.get("kind") if isinstance(message, dict) else None
        parts = message.get("parts") if isinstance(kind, str) and kind in known else None
        if isinstance(parts, list):
            placed = [
                (p_index, part["part_kind"])
                for p_index, part in enumerate(parts)
                if isinstance(part, dict)
                and isinstance(part.get("part_kind"), str)
                and part["part_kind"] not in known[kind]
            ]
            for p_index, part_kind in placed:
                path = f"{prefix}[{m_index}].parts[{p_index}]"
                other = "response" if kind == "request" else "request"
                if part_kind in known[other]:
                    errors.append(
                        Problem(path, f"part_kind {part_kind!r} is a {other} part: no release loads it in a {kind}")
                    )
                else:
                    warnings.append(Problem(path, f"unknown part_kind {part_kind!r}, carried unchanged"))
            if placed:
                unknown = {p_index for p_index, _ in placed}
                message = {
                    **message,
                    "parts": [_PLACEHOLDER[kind] if i in unknown else part for i, part in enumerate(parts)],
                }
        checked.append(message)
    if target == NEWEST:
        return errors + _validation_errors(checked, prefix), warnings
    return errors + [
        _under(line, prefix) for line in (*schema.legacy_errors(checked), *releases.load_errors(checked, target))
    ], warnings


@cache
def _known_part_kinds(rules: tuple[Rule, ...]) -> dict[str, frozenset[str]]:
    """By message kind, the part kinds 2.68 or an older release loads or one of ``rules``
    rewrites there."""
    return {
        kind: kinds | known_part_kinds(rules, kind) | frozenset(releases.PART_KINDS[kind])
        for kind, kinds in _SCHEMA_PART_KINDS.items()
    }


def _under(line: str, prefix: str) -> str:
    return line.under(prefix) if isinstance(line, Problem) else line


def _validation_errors(messages: list[Any], prefix: str) -> list[str]:
    return [_under(line, prefix) for line in schema.current_errors(messages)]


# ------------------------------------------------------------ a conversation of several records


class _Held(NamedTuple):
    """A record of a conversation as parsed: the record (named), the parsed ``obj`` and where
    its history is in it."""

    record: Record
    obj: Any
    located: Located


Layout = list[tuple[int, int]]
"""Where each message of a conversation's history is: ``(record, index in that record)``."""


def process_conversation(conversation: Conversation, plan: Plan = Plan()) -> list[Outcome]:
    """Migrate the records of ``conversation`` as one history (design.md "The unit of
    work"): their messages concatenated in order, the rules run on the whole (pairing across
    records, derived ids and attempts counted from the conversation, the settled check and
    validation on the whole), and each record given back its own messages, changed only where
    a rule changed them: a record whose messages come back as they were keeps its bytes.
    Returns an :class:`Outcome` a record, in order; the change, finding and error places are
    the record's own (``messages[0]`` is its first message).

    Nothing moves between records: a part a fix adds stays in the message it went to; a new
    message goes to the record of the message before it. A fix that would empty a record,
    move a part to another record, or add a message where every record holds one message is
    not applied: the conversation is migrated again with that rule only reporting, and the
    record it concerns warned that the fix is not applicable to this layout.

    A record that is not JSON, holds no history or names a key histmig reads twice rejects the
    whole conversation (every record kept as it is, each told why), and so does a record that
    would be rewritten while a payload of it names a key twice (writing it again would keep one
    of the values: :func:`histmig.duplicates.duplicated_key`). Never raises for bad input."""
    held: list[_Held] = []
    payload: dict[int, Duplicate] = {}
    for at, record in enumerate(conversation.records):
        try:
            obj = _DECODER.decode(record.raw)
        except (msgspec.DecodeError, RecursionError) as exc:
            bad = Outcome(record, "rejected", None, errors=[_json_problem(record.raw, exc)])
            return _rejected_with(conversation, at, bad)
        try:
            located = locate_in_conversation(obj, plan.messages_field)
            check_messages(located.messages, located.name or "messages")
        except NotAHistory as exc:
            return _rejected_with(conversation, at, Outcome(_named(record, obj), "rejected", None, errors=[str(exc)]))
        duplicated = _duplicated(record.raw, obj, located, located.name or "messages", plan.read_fields)
        if duplicated is not None and duplicated.read:
            bad = Outcome(_named(record, obj), "rejected", None, errors=[duplicated.problem])
            return _rejected_with(conversation, at, bad)
        if duplicated is not None:
            payload[at] = duplicated
        held.append(_Held(_named(record, obj), obj, located))
    outcomes = _conversation_way(conversation, held, plan)
    rewritten = next((at for at in payload if outcomes[at].status == "changed"), None)
    if rewritten is not None:
        bad = Outcome(held[rewritten].record, "rejected", None, errors=[payload[rewritten].problem])
        return _rejected_with(conversation, rewritten, bad, "cannot be rewritten")
    if plan.readers:
        for outcome, record in zip(outcomes, conversation.records):
            outcome.readers = Readers(plan.target, _readers(record.raw, plan.messages_field))
    return outcomes


def _rejected_with(conversation: Conversation, at: int, bad: Outcome, why: str = "cannot be read") -> list[Outcome]:
    """Every record of ``conversation`` rejected, kept as it is: the one at ``at`` with its
    own outcome ``bad``, each other saying which record rejected its conversation and ``why``."""
    said = f"rejected with its conversation ({conversation.name}): {bad.record.name} {why}"
    return [
        bad if i == at else Outcome(record, "rejected", None, errors=[said])
        for i, record in enumerate(conversation.records)
    ]


def _conversation_way(conversation: Conversation, held: list[_Held], plan: Plan) -> list[Outcome]:
    """:func:`process_conversation` of the parsed ``held`` records."""
    history = [message for item in held for message in item.located.messages]
    rules = plan.walk.to_run(history, defer=False)[0]
    if not rules and not plan.validates_unchanged:
        return [Outcome(item.record, "unchanged", item.record.raw) for item in held]
    original: Layout = [(r, i) for r, item in enumerate(held) for i in range(len(item.located.messages))]
    # each message and part held with its record's number: held, none is freed while the rules run, so no object
    # they make takes the id of one they replaced (HM501 replaces a part; its next one took the freed part's id,
    # and so its record, and the conversation was told a part had moved between records)
    owner = {id(message): (r, message) for r, item in enumerate(held) for message in item.located.messages}
    part_owner = {
        id(part): (r, part)
        for r, item in enumerate(held)
        for message in item.located.messages
        for part in message["parts"]
    }
    before = [dumps(item.located.messages) for item in held]
    try:
        changes, findings, paired = _apply(history, rules, plan)
    except Malformed as exc:
        return _rejected_all(held, [exc.args[0]], original)
    except Exception as exc:  # a rule met a shape it did not expect: keep the records, say so
        return _rejected_all(held, [f"internal error: {type(exc).__name__}: {exc}"], original)
    split, final, added, moved = _split(history, owner, part_owner, len(held))
    refused = _not_applicable(held, split, final, added, moved, changes)
    if refused:
        codes = frozenset(refused)
        outcomes = process_conversation(conversation, replace(plan, withheld=plan.withheld | codes))
        for code, (r, why) in refused.items():
            said = f"{code} not applied: its fix would {why} (not applicable to this layout)"
            outcomes[r].warnings.append(Warned(code, said))
        return outcomes
    if changes:
        checked = dumps(history)
        settled = plan.settled(None, pairing=not paired)
        if settled is None or not settled(checked):
            errors, warnings = _validate(history, "messages", plan.target)
            if errors:
                return _rejected_all(held, errors, final, warnings)
            second = _apply(history, plan.walk.to_run(history)[0], plan)[0]
            if second:
                said = ", ".join(sorted({c.rule for c in second}))
                return _rejected_all(
                    held, [f"internal error: a second pass changed the conversation again ({said})"], final
                )
        errors, warnings = [], []
    else:
        errors, warnings = _validate(history, "messages", plan.target) if plan.validates_unchanged else ([], [])
    placed = _places(plan, changes, findings, (original, final), added, len(held))
    error_lines = _lines(held, errors, final)
    if errors and not changes and schema.legacy_errors(history):
        for lines in error_lines:
            if lines:
                lines.append("no release 0.0.13-2.68 wrote this shape: no rule can migrate it")
    warning_lines = _lines(held, warnings, final)
    outcomes = []
    for r, item in enumerate(held):
        own_changes, own_findings = placed[r]
        record = item.record
        if changes and dumps(split[r]) != before[r]:
            output = dumps(item.located.put(item.obj, split[r]))
            outcomes.append(Outcome(record, "changed", output, own_changes, [], warning_lines[r], own_findings))
        else:
            outcomes.append(
                Outcome(record, "unchanged", record.raw, [], error_lines[r], warning_lines[r], own_findings)
            )
    return outcomes


def _split(
    history: list[Any], owner: dict[int, tuple[int, Any]], part_owner: dict[int, tuple[int, Any]], records: int
) -> tuple[list[list[Any]], Layout, list[int], set[int]]:
    """The migrated ``history`` given back to its ``records``: each record's messages (a
    message keeps its record, told by identity, ``owner``, which holds each message with its
    record's number; a new one goes to the record of the message before it, the first
    record's at the start), where each message now is, the
    places of the new messages, and the records holding a part that came from another record
    (``part_owner``)."""
    split: list[list[Any]] = [[] for _ in range(records)]
    final: Layout = []
    added: list[int] = []
    moved: set[int] = set()
    current = 0
    for at, message in enumerate(history):
        found = owner.get(id(message))
        if found is None:
            added.append(at)
        else:
            current = found[0]
        for part in message["parts"]:
            came = part_owner.get(id(part), (current,))[0]
            if came != current:
                moved |= {came, current}
        final.append((current, len(split[current])))
        split[current].append(message)
    return split, final, added, moved


def _not_applicable(
    held: list[_Held], split: list[list[Any]], final: Layout, added: list[int], moved: set[int], changes: list[Change]
) -> dict[str, tuple[int, str]]:
    """The rules whose fixes do not fit the records of a conversation, each with the record
    it concerns and why: a fix that empties a record (its message removals), that adds a
    message where every record holds one (the changes at the new message), or that moves a
    part between records (every rule that changed the conversation, none telling alone)."""
    refused: dict[str, tuple[int, str]] = {}
    emptied = [r for r, item in enumerate(held) if item.located.messages and not split[r]]
    for r in emptied:
        for change in changes:
            if change.part is None and change.after == ABSENT_PART:
                refused.setdefault(change.rule, (r, "empty this record"))
    for r, item in enumerate(held):
        if item.located.single and len(split[r]) > 1:
            for at in added:
                for change in changes:
                    if change.message == at:
                        refused.setdefault(change.rule, (r, "add a message to a record that is one message"))
    if added and len(held) > 1 and all(len(item.located.messages) == 1 for item in held):
        for at in added:
            for change in changes:
                if change.message == at:
                    refused.setdefault(change.rule, (final[at][0], "add a message where a record holds one"))
    if moved or (emptied and not refused):
        for change in changes:
            refused.setdefault(change.rule, (min(moved or emptied), "move a part to another record"))
    return refused


def _places(
    plan: Plan,
    changes: list[Change],
    findings: list[Finding],
    layouts: tuple[Layout, Layout],
    added: list[int],
    records: int,
) -> list[tuple[list[Change], list[Finding]]]:
    """Each of the ``records``' changes and findings, placed in it (``layouts``: the original
    and the final places of the messages). A rule runs on the history the
    earlier rules left: its places are in the original numbering until a rule removed or
    added a message, in the final one after (a rule that adds messages gives the final
    places of what it added)."""
    order = {rule.code: i for i, rule in enumerate(plan.rules)}
    adding = {change.rule for change in changes if change.message in added}
    reshaping = adding | {change.rule for change in changes if change.part is None and change.after == ABSENT_PART}
    first = min((order.get(code, 0) for code in reshaping), default=len(order))
    original, final = layouts
    placed: list[tuple[list[Change], list[Finding]]] = [([], []) for _ in range(records)]

    def layout(code: str) -> Layout:
        return final if code in adding or order.get(code, 0) > first else original

    for change in changes:
        r, i = _at(layout(change.rule), change.message)
        placed[r][0].append(change._replace(message=i))
    for finding in findings:
        r, i = _at(layout(finding.code), finding.message)
        placed[r][1].append(finding._replace(message=i))
    return placed


def _at(layout: Layout, message: int) -> tuple[int, int]:
    """Where the message at ``message`` of a conversation is in its records (the last message
    for a place past the end: a removed last message)."""
    return layout[min(message, len(layout) - 1)] if layout else (0, message)


_MESSAGE_PATH = re.compile(r"messages\[(\d+)\]")


def _lines(held: list[_Held], lines: list[str], layout: Layout) -> list[list[str]]:
    """Each record's share of a conversation's error or warning ``lines``: a line whose path
    starts at a message goes to that message's record, its path the record's own; a line of
    the whole conversation goes to every record."""
    shares: list[list[str]] = [[] for _ in held]
    for line in lines:
        path = line.path if isinstance(line, Problem) else None
        found = _MESSAGE_PATH.match(path) if path else None
        if path is None or found is None or not layout:
            for share in shares:
                share.append(line)
            continue
        r, i = _at(layout, int(found.group(1)))
        prefix = held[r].located.name or "messages"
        shares[r].append(Problem(f"{prefix}[{i}]{path[found.end() :]}", line.message))  # type: ignore[attr-defined]
    return shares


def _rejected_all(
    held: list[_Held], errors: list[str], layout: Layout, warnings: list[str] | None = None
) -> list[Outcome]:
    """Every record of a conversation rejected, kept as it is: each with its share of
    ``errors`` (:func:`_lines`), or, when none is its own, told that its conversation was."""
    shares = _lines(held, list(errors), layout)
    warned = _lines(held, warnings or [], layout)
    return [
        Outcome(
            item.record,
            "rejected",
            None,
            [],
            shares[r] or ["rejected with its conversation: another of its records cannot be migrated"],
            warned[r],
        )
        for r, item in enumerate(held)
    ]
