"""The rule model: what a rule is, what it looks at, what it finds and how it fixes it.

A rule is one :class:`Rule` object in one module of this package (``hm101_<name>.py``), found
automatically (:mod:`histmig.rules`), in the shape django-upgrade and ruff give theirs
(design.md "Rules"): a stable code, a one-line summary, the docs/framework.md section it comes
from, documentation with an example before and after (:class:`Docs`), what it looks at
(:class:`Look`), and a fix that edits a history in place and returns its :class:`Change`\\ s.
A fix is ``safe`` when it keeps what the conversation means (what the framework itself does at
load or request time, stored once), ``unsafe`` when it may not; ``convert`` applies the safe
fixes of the selected rules, ``--unsafe-fixes`` the others too (ruff's definitions).
A rule runs for the target releases of its :attr:`Rule.targets` (a :class:`~histmig.schema.releases.Span` of
releases; ``--target``, default the newest): the migration and repairs run for targets that
load what they write (HM101 from 2.60.0), the rollback rules (HM5xx) only for older targets,
so that a run without ``--target`` runs exactly the rules it always ran. The target is in the
:class:`Context` a fix is given (:func:`histmig.rules.select` picks the rules).

A rule is ``opt_in`` when a user must ask for it (HM104 reconstructs ``retry.attempt``, which
the framework's own loader leaves ``null``, only with ``--attempts``): it is selected only when
the :class:`~histmig.options.Options` field it names is given, then like any other rule
(:func:`histmig.rules.select`). A fix may also return :class:`Finding`\\ s: places it acts on
but leaves as they are, and why (an attempt that cannot be known).

What a rule looks at is declared, never restated: the screen's skeleton types
(:mod:`histmig.screen`), the settled check, :func:`histmig.rules.pending` and the nulls a
nested Arrow column carries (:mod:`histmig.sources._arrow`) are all derived from the
:class:`Look`\\ s of the rules.
"""

from __future__ import annotations

import copy
import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NamedTuple, Union, get_args, get_origin

import msgspec
import orjson

from histmig.schema.releases import EVERY, NEWEST, Release, Span, describe, includes

Certainty = Literal["exact", "template", "shape", "default", "derived", "fragment"]
"""How sure a finding is (design.md "Rules"): an ``exact`` text match with a framework
string, a ``template`` match with a framework f-string, the ``shape`` of the content, a
``default`` when no evidence points anywhere else, or a value ``derived`` from the record;
``fragment``: the record looks like a piece of a conversation stored over several records
(:func:`histmig.rules.pairing.fragment`), so what a rule finds there may be whole in the
conversation: a warning whatever its rule's severity (:func:`severity_of`), and no fix acts on it."""

Applicability = Literal["safe", "unsafe"]
"""A fix's applicability, as ruff defines it: ``safe`` keeps what the conversation means,
``unsafe`` may not (it removes or rewrites stored content)."""

CauseMode = Literal["inferred", "framework"]
"""``inferred``: causes from the evidence catalogue (rules/causes.py). ``framework``: the
exact ``retry`` values pydantic-ai 2.68's loader produces (docs/framework.md §2)."""

Messages = list[Any]
"""A history as plain JSON data (a list of message objects, as orjson or msgspec parse it)."""

Message = dict[str, Any]
Part = dict[str, Any]

REPAIR, MISREAD, REBIND, MIGRATE, RECOUNT, PAIR, ROLLBACK = 10, 20, 30, 40, 45, 50, 60
"""Phases, the order rules run in (then by code): load-failure repairs (HM2xx) first, so that
every call has an id the retry rules pair with; then silent misreads (HM3xx); then HM103
re-binds a tool-less unknown-tool retry before HM101/HM102 would turn it into feedback; then
HM104 counts the retries the migration made (as the framework counted them when it wrote
them, before any pairing repair); then tool pairing (HM4xx), on results the migration made
(orphans first, then dangling calls, as 2.68 repairs them); then, for an older ``--target``,
the rollback (HM5xx). No rule writes what a rule of an earlier phase looks for, so one pass
settles a history (HM104 looks at the parts of HM101-HM103 through the ``retry-prompt`` parts
they rewrite; a rollback rule writes what a migration rule looks for only for targets that
rule does not run for: HM501 writes ``retry-prompt`` parts for targets before 2.60.0, HM101
runs from 2.60.0)."""

Severity = Literal["error", "warning"]
"""How a finding counts: an ``error`` fails ``check``; a ``warning`` is reported and does not
(the calls of a history's last response, which a resumed run may still answer)."""


def severity_of(certainty: Certainty, severity: Severity) -> Severity:
    """The severity of a finding of ``certainty`` by a rule of ``severity``: a ``fragment``'s
    is a warning (it is no proof of damage: the rest of its conversation is in other records),
    any other's its rule's."""
    return "warning" if certainty == "fragment" else severity


class Finding(NamedTuple):
    """What a rule found at one place of a history: the rule's ``code``, the ``message``
    and ``part`` indices (0-based; ``part`` is ``None`` for the message itself), a ``text``
    saying what is there, the ``evidence`` that decided it, its ``certainty`` and
    ``severity``."""

    code: str
    message: int
    part: int | None
    text: str
    evidence: str
    certainty: Certainty
    severity: Severity = "error"


class Change(NamedTuple):
    """One located edit a fix made: the ``rule`` code, the ``message`` and ``part`` indices
    (``part`` ``None`` for a message-level edit), ``before``/``after`` (the ``part_kind``
    values, or field names for a message-level edit; :data:`ABSENT_PART` for a part added or
    removed), the ``evidence`` that decided it and its ``certainty``, the ``RetryInfo.cause``
    written, if any, the ``tool_call_id`` a rule assigned (HM201, HM103, HM401), if any, and
    what a fix ``removed``, whole, so that nothing is lost (README "Report"). An added part's
    place is where it now is; a removed part's, where it was."""

    rule: str
    message: int
    part: int | None
    before: str
    after: str
    evidence: str
    certainty: Certainty
    cause: str | None = None
    tool_call_id: str | None = None
    removed: Any = None

    def finding(self, severity: Severity = "error") -> Finding:
        """The finding this change fixes."""
        return Finding(
            self.rule,
            self.message,
            self.part,
            f"{self.before} -> {self.after}",
            self.evidence,
            self.certainty,
            severity,
        )


ABSENT_PART = "absent"
"""``before`` of a change that adds a part, ``after`` of one that removes it."""


@dataclass(frozen=True)
class Budgets:
    """The retry budgets an agent was configured with (``--max-retries``), which a history
    does not hold: ``tools`` (the agent's ``retries``: every tool without its own, and the
    budget of an unknown tool name), ``output`` (the output retries: tool-less feedback and
    output tools without their own) and ``by_tool``, ``(name, budget)`` pairs for tools
    configured with their own (docs/framework.md §4). ``None``: not given."""

    tools: int | None = None
    output: int | None = None
    by_tool: tuple[tuple[str, int], ...] = ()

    @classmethod
    def parse(cls, spec: str) -> Budgets:
        """The budgets of ``tools=N,output=M,tool:NAME=K`` (any of them, comma-separated, each
        key once). Raises ``ValueError`` naming the item that is not ``KEY=N`` with a known key
        and a count of 0 or more, or the key given twice (``tools=1,tools=2`` is a slip the
        run cannot tell which of to take)."""
        values: dict[str, int] = {}
        by_tool: dict[str, int] = {}
        for item in (item.strip() for item in spec.split(",")):
            key, equals, count = item.rpartition("=")
            key = key.strip()
            if (
                not equals
                or not count.strip().isdigit()
                or not (key in ("tools", "output") or (key.startswith("tool:") and key[5:]))
            ):
                raise ValueError(f"--max-retries: {item!r} is not tools=N, output=N or tool:NAME=N")
            kept, name = (by_tool, key[5:]) if key.startswith("tool:") else (values, key)
            if name in kept:
                raise ValueError(f"--max-retries: {key} is given twice")
            kept[name] = int(count)
        return cls(values.get("tools"), values.get("output"), tuple(sorted(by_tool.items())))

    def __bool__(self) -> bool:
        return self.tools is not None or self.output is not None or bool(self.by_tool)

    def of_tool(self, name: str, default: int | None) -> int | None:
        """The budget of tool ``name``: its own, else ``default``."""
        return dict(self.by_tool).get(name, default)


@dataclass(frozen=True)
class Context:
    """What a rule may know besides the history: the cause mode the user chose, the
    ``target`` release whose shapes the history is written in (``--target``; the newest by
    default), and for HM104 the ``counting`` rules (``current``, ``writer`` or a release,
    README "Attempts") and the agent's retry :class:`Budgets`."""

    causes: CauseMode = "inferred"
    target: Release = NEWEST
    counting: str = "current"
    budgets: Budgets = Budgets()


ANY_PART = "*"
"""``parts`` value of a :class:`Look`: parts of every kind."""

ABSENT = Annotated[int, msgspec.Meta(ge=1, le=0)]
"""A msgspec type no JSON value satisfies: a field of this type must be absent."""

NOT_NULL = Union[str, int, float, bool, list[msgspec.Raw], dict[str, msgspec.Raw]]
"""A msgspec type of any JSON value but ``null``."""

Test = Callable[[Message, Any], bool]
"""``test(message, part)``: whether the rule acts at this place (``part`` is ``None`` for a
message-level look). Asked only where the look's own condition holds."""


def always(message: Message, part: Any) -> bool:
    """The test of a look whose own condition decides alone."""
    return True


def _kinds(parts: str | Iterable[str] | None) -> frozenset[str] | str | None:
    if parts is None or parts == ANY_PART:
        return parts
    return frozenset([parts] if isinstance(parts, str) else parts)


class Look:
    """Where a rule looks and what makes it act there, declared once for every consumer.

    ``message``: the message kind (``request``, ``response``), or ``None`` for any;
    ``parts``: the part kinds looked at (:data:`ANY_PART` for all), or ``None`` for the
    message itself; ``test``: the rule's own precise test, asked only where the look's own
    condition holds (a part of the kind; a null field; a field that is present). The
    subclasses are the conditions; :class:`histmig.rules.Walk` compiles them."""

    __slots__ = ("message", "parts", "test")

    def __init__(self, parts: str | Iterable[str] | None, message: str | None, test: Test) -> None:
        self.message = message
        self.parts = _kinds(parts)
        self.test = test

    def covers(self, message_kind: Any, part_kind: Any) -> bool:
        """Whether this look is about parts of ``part_kind`` (``None``: the message itself)
        in messages of ``message_kind``."""
        if self.message is not None and message_kind != self.message:
            return False
        if part_kind is None or self.parts is None:
            return part_kind is None and self.parts is None
        return self.parts == ANY_PART or part_kind in self.parts


class PartKind(Look):
    """The rule rewrites parts of these kinds (``retry-prompt``, ``instruction``): the
    screen lets no such part through, and a kind no release up to 2.68 loads but a rule
    rewrites in messages of ``message`` kind is known there (validation warns of no unknown
    ``part_kind``)."""

    __slots__ = ()
    parts: frozenset[str] | str  # never None: a PartKind names part kinds

    def __init__(self, parts: str | Iterable[str], *, message: str | None = None, test: Test = always) -> None:
        super().__init__(parts, message, test)


class FieldLook(Look, ABC):
    """A look at one ``field`` of a part (or of the message itself, ``parts`` ``None``): the
    rule acts only where the field is present (and, for :class:`NullField`, ``null``)."""

    __slots__ = ("field",)

    def __init__(self, field: str, parts: str | Iterable[str] | None, message: str | None, test: Test) -> None:
        super().__init__(parts, message, test)
        self.field = field

    @abstractmethod
    def quiet_type(self) -> Any:
        """The msgspec type the screen decodes the field as: a value that decodes is one the
        rule does not act on."""

    def settled_type(self, declared: Any) -> Any:
        """The msgspec type the settled check decodes the field of a migrated history as,
        given the one 2.68's schema declares (``None``: not declared): it must rule out what
        the rule would act on again. By default 2.68's own type already does."""
        return declared


class NullField(FieldLook):
    """The rule repairs ``"field": null``, which legacy releases wrote and 2.68 refuses: the
    screen decodes the field as ``type`` (its non-null type), a nested Arrow column passes the
    field's nulls to the engine, and the settled check refuses a null there."""

    __slots__ = ("type",)

    def __init__(
        self,
        field: str,
        *,
        parts: str | Iterable[str] | None = None,
        message: str | None = None,
        type: Any = str,
        test: Test = always,
    ) -> None:
        super().__init__(field, parts, message, test)
        self.type = type

    def quiet_type(self) -> Any:
        return self.type

    def settled_type(self, declared: Any) -> Any:
        if declared is None:
            return NOT_NULL
        members = get_args(declared)
        if get_origin(declared) is Union and type(None) in members:
            kept = tuple(member for member in members if member is not type(None))
            return kept[0] if len(kept) == 1 else Union[kept]
        return declared


class AbsentField(FieldLook):
    """The rule acts on a field that is there at all (``provider_request_id``): the screen
    and the settled check require it absent."""

    __slots__ = ()

    def __init__(
        self, field: str, *, parts: str | Iterable[str] | None = None, message: str | None = None, test: Test = always
    ) -> None:
        super().__init__(field, parts, message, test)

    def quiet_type(self) -> Any:
        return ABSENT

    def settled_type(self, declared: Any) -> Any:
        return ABSENT


class ValueField(FieldLook):
    """The rule acts on some values of ``field`` (an ``args`` wrapper, error details without
    ``input``): ``quiet`` is the msgspec type of values it leaves alone, and ``test`` decides
    wherever the field is present. With ``settles``, the settled check decodes the field as
    ``quiet`` too (``quiet`` must then accept no value 2.68 refuses); without it, 2.68's own
    type already refuses what the rule acts on."""

    __slots__ = ("quiet", "settles")

    def __init__(
        self,
        field: str,
        *,
        quiet: Any,
        test: Test,
        parts: str | Iterable[str] | None = None,
        message: str | None = None,
        settles: bool = False,
    ) -> None:
        super().__init__(field, parts, message, test)
        self.quiet = quiet
        self.settles = settles

    def quiet_type(self) -> Any:
        return self.quiet

    def settled_type(self, declared: Any) -> Any:
        return self.quiet if self.settles else declared


Skeleton = Callable[[list[Any], list[Any]], "list[Finding] | None"]
"""What a :class:`HistoryLook` asks of a record's skeleton (:mod:`histmig.screen`)."""


class HistoryLook(Look):
    """The rule looks at relations across the whole history (a tool call and the result that
    answers it, messages apart), which no single place shows; a family of rules shares one
    look, asked once a record whichever of them are selected:

    - ``found(messages)``: the codes of the family's rules that may act on a history (plain
      JSON data), for :func:`histmig.rules.pending`;
    - ``skeleton(messages, parts)``: the same question asked of the screen's skeleton (the
      decoded message structs, each struct class's kind in its ``_kind``; ``parts``, the
      decoded parts of the kinds the look ``reads``, in history order): ``[]`` when no rule of
      the family acts, the findings when the family's rules would only find what the skeleton
      shows (each the finding its rule's ``find`` makes, so that the screen can report it
      without building the record), ``None`` when the record must go the full way;
    - ``reads``: the part kinds ``skeleton`` is given, each with the fields it reads and
      their msgspec types (a field another look declares keeps that look's type).

    A history holding no part of the kinds a look reads has nothing for it (no call, no
    result: nothing to pair): the screen does not ask ``skeleton`` of it."""

    __slots__ = ("found", "reads", "skeleton")

    def __init__(
        self,
        found: Callable[[Messages], frozenset[str]],
        skeleton: Skeleton,
        reads: dict[str, tuple[tuple[str, Any], ...]],
    ) -> None:
        super().__init__(None, None, always)
        self.found = found
        self.skeleton = skeleton
        self.reads = reads


@dataclass(frozen=True)
class Docs:
    """A rule's documentation, in the shape ruff gives its rules: ``what`` it does, ``why``
    it matters, and an example history ``before`` and ``after`` the fix, as JSON text (a
    test runs the rule on ``before``, for the ``target`` release when given, and compares
    with ``after``; ``after`` ``None`` for a rule that only reports, whose example is what it
    finds); ``safety``, whether the fix is safe or unsafe and why (or why there is none), as
    ruff's "Fix safety" says it; and for a rule that finds (the tool-pairing rules),
    ``severity``: why its findings are errors or warnings, by what the framework does with them
    (``histmig rules CODE`` prints it). The rule pages of ``docs/rules/`` are generated from
    these (``scripts/docs.py``)."""

    what: str
    why: str
    before: str
    after: str | None = None
    target: str | None = None
    safety: str = ""
    severity: str | None = None


Fix = Callable[[Messages, Context], "Sequence[Change | Finding]"]
"""A rule's fix: edits a history in place, returns the changes it made, in order, and the
findings it leaves as they are (a :class:`Finding` says why). Raises :class:`Malformed` for a
targeted part no release wrote."""

Find = Callable[[Messages, Context], list[Finding]]
"""A rule's check: the findings in a history, which it leaves as it is."""


@dataclass(frozen=True, eq=False)
class Rule:
    """One rule (see the module docstring).

    ``code`` is stable (``HM101``); ``name`` a slug (``tool-bound-retry``); ``summary`` one
    line; ``source`` where it comes from in words a user can check (the pydantic-ai
    releases and the function or model of ``pydantic_ai/messages.py``, as ``histmig rules``
    shows it); ``facts`` the sections of docs/framework.md (and bug cases)
    behind it, for developers, never shown by the command line; ``docs`` its
    :class:`Docs`; ``looks`` what it looks at (:class:`Look`); ``fix`` edits a history in
    place and returns the :class:`Change`\\ s, and :class:`Finding`\\ s for places it leaves
    as they are (``None``: the rule only reports); ``applicability`` says whether the fix is
    ``safe`` or ``unsafe``; ``find`` returns the findings without changing the history
    (``None``: those the fix would make); ``severity`` of its findings; ``phase`` orders the
    rules (:data:`REPAIR` ... :data:`ROLLBACK`, then by code); ``targets`` are the target
    releases it runs for (every release by default); ``opt_in`` names the
    :class:`~histmig.options.Options` field that turns the rule on (``None``: on unless
    ``--ignore``-d)."""

    code: str
    name: str
    summary: str
    source: str
    docs: Docs
    looks: tuple[Look, ...]
    fix: Fix | None = field(default=None, repr=False)
    applicability: Applicability = "safe"
    phase: int = MIGRATE
    find: Find | None = field(default=None, repr=False)
    severity: Severity = "error"
    facts: str = ""
    targets: Span = EVERY[0]
    opt_in: str | None = None

    def __post_init__(self) -> None:
        if self.fix is None and self.find is None:
            raise TypeError(f"rule {self.code} needs a fix or a find")

    def runs_for(self, target: Release) -> bool:
        """Whether the rule runs when the history is written for ``target``."""
        return includes((self.targets,), target)

    @property
    def target_text(self) -> str:
        """The target releases the rule runs for, in words (``before 2.60.0``)."""
        return describe((self.targets,))

    def check(self, messages: Messages, ctx: Context) -> list[Finding]:
        """What the rule finds in ``messages``, without changing them: ``find``'s findings,
        else those of the fix run on a copy (a change as the finding it fixes). A finding
        has the rule's ``severity``, but one ``find`` made a warning (HM405: a call the
        framework's token limit cut, as it records it) stays one."""
        if self.find is not None:
            return [
                finding
                if finding.severity == "warning"
                else finding._replace(severity=severity_of(finding.certainty, self.severity))
                for finding in self.find(messages, ctx)
            ]
        assert self.fix is not None  # __post_init__: a fix or a find
        return [
            done.finding(severity_of(done.certainty, self.severity)) if isinstance(done, Change) else done
            for done in self.fix(copy.deepcopy(messages), ctx)
        ]

    @property
    def order(self) -> tuple[int, str]:
        """Where the rule runs: its phase, then its code."""
        return (self.phase, self.code)


def is_json(text: str | bytes) -> bool:
    """Whether ``text`` is one JSON value, as orjson reads it (a tool call's ``args`` text cut
    mid-stream is not; nor is a rejected cell written to a JSONL export)."""
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def iter_parts(messages: Messages, kind: str | None = None) -> Iterator[tuple[int, int, Message, Part]]:
    """Yield ``(message_index, part_index, message, part)`` for every object part of every
    object message (optionally only messages of ``kind`` ``request``/``response``).
    Malformed entries (not objects, no ``parts`` list) are skipped; validation reports them."""
    for m_index, message in enumerate(messages):
        if not isinstance(message, dict) or (kind is not None and message.get("kind") != kind):
            continue
        parts = message.get("parts")
        if not isinstance(parts, list):
            continue
        for p_index, part in enumerate(parts):
            if isinstance(part, dict):
                yield m_index, p_index, message, part


_OPENING_PARTS = ("system-prompt", "user-prompt")
_SORTED = msgspec.json.Encoder(order="sorted")


def conversation_key(messages: Messages) -> str:
    """What tells one conversation from another, from its own stable content: 32 hex digits
    of a SHA-256 of the ``system-prompt`` and ``user-prompt`` parts of its first message
    (``part_kind``, ``content`` and ``timestamp``, JSON with sorted keys): what was said first
    and when. No rule rewrites these (HM202 removes a null timestamp, read as absent either
    way), so the key is the same whichever rules are selected. A history that opens with no
    such part has the key of an empty list."""
    first = messages[0] if messages and isinstance(messages[0], dict) else {}
    parts = first.get("parts") if isinstance(first.get("parts"), list) else []
    opening = [
        (part.get("part_kind"), part.get("content"), part.get("timestamp"))
        for part in parts  # type: ignore[union-attr]  # a list, tested just above
        if isinstance(part, dict) and part.get("part_kind") in _OPENING_PARTS
    ]
    return hashlib.sha256(_SORTED.encode(opening)).hexdigest()[:32]


def derived_tool_call_id(conversation: str, m_index: int, p_index: int, tool_name: Any) -> str:
    """A deterministic ``tool_call_id`` for the part at ``messages[m_index].parts[p_index]``
    of the conversation whose :func:`conversation_key` is ``conversation``: ``'pyd_ai_'`` +
    32 hex digits of a SHA-256 of the key, the position and the tool name, the shape the
    framework generates from 0.0.45 (docs/framework.md §3.3), but reproducible, and distinct
    across conversations (analytics joining tool calls across conversations, and
    OpenTelemetry call ids, need them distinct): HM201's calls, HM501's and HM502's tool-less
    retries."""
    digest = hashlib.sha256(f"histmig:{conversation}:{m_index}:{p_index}:{tool_name}".encode()).hexdigest()
    return "pyd_ai_" + digest[:32]


def rename_field(messages: Messages, code: str, old: str, new: str, test: Test) -> list[Change]:
    """Rename each message's field ``old`` to ``new`` in its place (a ``new`` already there is
    dropped), wherever ``test(message, None)`` holds; one message-level change of rule
    ``code`` each (``before``/``after`` the field names, evidence ``field-rename``)."""
    changes: list[Change] = []
    for m_index, message in enumerate(messages):
        if not isinstance(message, dict) or not test(message, None):
            continue
        message.pop(new, None)
        items = list(message.items())
        message.clear()  # the same object, renamed in its place: a conversation tells its records' messages by identity
        message.update(((new if key == old else key), value) for key, value in items)
        changes.append(Change(code, m_index, None, old, new, "field-rename", "exact"))
    return changes
