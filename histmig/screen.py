"""The screen: tells, without building the record, that no rule can change it; and the settled
check, which tells that a migrated record is done.

Most records of an archive hold nothing to migrate. :class:`Screen` decodes a record's bytes
with msgspec into a typed skeleton of the history (the envelope's messages field, each
message's ``kind`` and ``parts``, each part's ``part_kind`` and the fields some rule looks at)
and skips every other value without building a Python object: a few microseconds for a 3 KB
record, against an orjson parse and a walk of its parts. The skeleton is built from what the
selected rules declare (:class:`~histmig.rules.base.Look`), never restated here:

- a part's ``part_kind`` is one the target release writes (2.68 by default; for an older
  ``--target``, the catalogue's, :func:`histmig.schema.releases.written_kinds`) that no rule
  rewrites (:class:`~histmig.rules.base.PartKind`: ``retry-prompt``, ``instruction``, a newer
  release's kind fail to decode);
- a field some rule looks at decodes as that look's *quiet* type, the values the rule leaves
  alone: a non-null type where a rule repairs nulls, nothing at all where a rule acts on a
  field's presence, a stricter shape where it acts on some values;

and a record it accepts is valid JSON in UTF-8 (checked apart: msgspec skips strings
unchecked) nested no deeper than msgspec's limit, which is below orjson's. The skeleton's
structs are untracked by the garbage collector (``gc=False``): a decoded skeleton holds no
cycle and is dropped at once. Whatever it refuses goes the full way
(:func:`histmig.engine.process_full`), which names what is wrong. One value the full way
refuses passes: a number beyond a double's range (``1e400``), which JSON allows and the
record carries unchanged (``check`` parses every record and names it).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from functools import lru_cache
from operator import attrgetter
from typing import Any, Literal, Union

import msgspec

from histmig.records import conversation_envelope, field_path, is_one_message, one_message
from histmig.rules import looks
from histmig.rules.base import FieldLook, Finding, HistoryLook, Look, PartKind, Rule, severity_of
from histmig.schema import PLAIN_CURRENT, Fields, msgspec_type
from histmig.schema.releases import NEWEST, Release, written_kinds

_names = itertools.count()


def _about(look: Look, message_kind: Any, part_kind: Any) -> bool:
    """Whether ``look`` is about parts of ``part_kind`` (``None``: the message itself) in
    messages of ``message_kind`` (``None``: of either kind; the skeleton's and the settled
    check's part structs serve requests and responses alike, so a look of either counts)."""
    return (
        look.covers(message_kind, part_kind)
        if message_kind is not None or look.message is None
        else look.covers(look.message, part_kind)
    )


def _field_looks(rules: tuple[Rule, ...], message_kind: Any, part_kind: Any) -> list[FieldLook]:
    return [look for _, look in looks(rules) if isinstance(look, FieldLook) and _about(look, message_kind, part_kind)]


def _quiet_fields(rules: tuple[Rule, ...], message_kind: Any, part_kind: Any) -> Fields:
    """The skeleton fields of a part of ``part_kind`` (or of a message): each field some look
    covers, of the look's quiet type, then each a history look reads there, absent by default.
    Raises ``TypeError`` when two looks give one field different quiet types (msgspec cannot
    decode a value as both)."""
    fields: dict[str, Any] = {}
    for look in _field_looks(rules, message_kind, part_kind):
        quiet = look.quiet_type()
        if fields.setdefault(look.field, quiet) != quiet:
            raise TypeError(f"two rules look at {part_kind or message_kind}.{look.field} with different quiet types")
    for history in _history_looks(rules):
        for name, type_ in history.reads.get(part_kind, ()) if part_kind is not None else ():
            fields.setdefault(name, type_)
    return [(name, type_, None) for name, type_ in fields.items()]


def _history_looks(rules: tuple[Rule, ...]) -> list[HistoryLook]:
    """The history looks of ``rules``, one a family (looks sharing ``skeleton`` are asked
    once)."""
    found: dict[Any, HistoryLook] = {}
    for _, look in looks(rules):
        if isinstance(look, HistoryLook):
            found.setdefault(look.skeleton, look)
    return list(found.values())


def _read_kinds(rules: tuple[Rule, ...]) -> frozenset[str]:
    """The part kinds some history look of ``rules`` reads."""
    return frozenset(kind for look in _history_looks(rules) for kind in look.reads)


def _struct(fields: Fields, tag_field: str, tag: str, collect: Any = None) -> Any:
    """A skeleton struct tagged ``tag``, its kind in ``_kind``; with ``collect``, each decoded
    instance is handed to it (a part a history look reads: msgspec calls ``__post_init__`` as
    it decodes, so the parts come in history order, without a walk of the others)."""
    namespace: dict[str, Any] = {"_kind": tag}
    if collect is not None:
        namespace["__post_init__"] = collect  # a builtin (list.append): no Python frame a part
    return msgspec.defstruct(
        f"_Skeleton{next(_names)}", fields, tag_field=tag_field, tag=tag, gc=False, namespace=namespace
    )


def _skeleton(rules: tuple[Rule, ...], read: list[Any], target: Release) -> Any:
    """The skeleton type of a history for ``rules`` and the ``target`` release: a list of
    request/response structs, each with its ``parts`` (one union tagged by ``part_kind`` of
    every quiet kind of its message kind: one ``target`` writes there and no rule rewrites)
    and the message fields some rule looks at; each struct class's kind in ``_kind``; the
    parts of a kind a history look reads are appended to ``read`` as they are decoded."""
    rewritten = {kind for _, look in looks(rules) if isinstance(look, PartKind) for kind in look.parts}
    reads = _read_kinds(rules)
    messages = []
    for message_kind in ("request", "response"):
        kinds = written_kinds(target, message_kind) - rewritten
        part: Any = Union[
            tuple(
                _struct(_quiet_fields(rules, None, kind), "part_kind", kind, read.append if kind in reads else None)
                for kind in sorted(kinds)
            )
        ]
        messages.append(
            _struct([("parts", list[part]), *_quiet_fields(rules, message_kind, None)], "kind", message_kind)
        )
    return list[Union[tuple(messages)]]  # type: ignore[misc]  # a type built at run time


def _decoder(messages: Any, path: tuple[str, ...]) -> msgspec.json.Decoder:
    """A decoder of a record holding ``messages`` at ``path`` (keys from the record down, any
    JSON key: each level a struct whose one field is renamed to the key), or of a bare array
    of them (``path`` empty)."""
    for key in reversed(path):
        messages = msgspec.defstruct(f"_Envelope{next(_names)}", [("value", messages)], rename={"value": key}, gc=False)
    return msgspec.json.Decoder(messages)


def _path(field: str | None) -> tuple[str, ...]:
    return field_path(field) if field is not None else ()


Verdict = Union[tuple[Finding, ...], None]
"""What the screen says of a record: ``()`` nothing to change or report; findings to report,
nothing to change; ``None`` the record must go the full way."""


class _Families:
    """The history looks of ``rules`` asked of a decoded skeleton (``families(messages, parts)
    -> Verdict``): their findings, kept when their rule is selected (with its severity), or
    ``None`` when a family cannot tell or one finding's rule would fix it (``fixing``)."""

    def __init__(
        self, asked: list[tuple[Any, frozenset[str]]], rules: tuple[Rule, ...], fixing: frozenset[str]
    ) -> None:
        self.asked = asked  # each family's skeleton and the part kinds it reads
        self._severity = {rule.code: rule.severity for rule in rules}
        self._fixing = fixing

    @classmethod
    def asker(cls, rules: tuple[Rule, ...], fixing: frozenset[str]) -> Callable[[list[Any], list[Any]], Verdict] | None:
        """What the screen and the settled check call a record (a bound method: :meth:`one`
        for a single family, the usual case), or ``None`` for rules without a history look.
        Called only when the record holds a part a look reads (:class:`HistoryLook`)."""
        asked = [(look.skeleton, frozenset(look.reads)) for look in _history_looks(rules)]
        if not asked:
            return None
        families = cls(asked, rules, fixing)
        return families.one if len(asked) == 1 else families.__call__

    def __call__(self, messages: list[Any], parts: list[Any]) -> Verdict:
        found: list[Finding] = []
        for skeleton, kinds in self.asked:
            mine = [part for part in parts if part._kind in kinds]  # a family is given the parts it reads alone
            verdict = skeleton(messages, mine) if mine else []
            if verdict is None:
                return None
            found += verdict
        return self._kept(found) if found else ()

    def one(self, messages: list[Any], parts: list[Any]) -> Verdict:
        """:meth:`__call__` for a single family (the usual case: the pairing rules), without
        the loop: the screen asks it of every record holding a part it reads."""
        verdict = self.asked[0][0](messages, parts)
        if not verdict:
            return verdict if verdict is None else ()
        return self._kept(verdict)

    def _kept(self, found: list[Finding]) -> Verdict:
        """``found``, with their rules' severities, those of selected rules only; ``None``
        when one's rule would fix it."""
        kept = []
        for finding in found:
            if finding.code in self._fixing and finding.certainty != "fragment":  # no fix acts on a fragment's
                return None
            if finding.code in self._severity:
                kept.append(
                    finding
                    if finding.severity == "warning"
                    else finding._replace(severity=severity_of(finding.certainty, self._severity[finding.code]))
                )
        return tuple(kept)


class Screen:
    """``screen(raw) -> Verdict``: ``()`` only when ``raw``, the JSON text of a record
    (bytes), is an object holding at ``field`` (a :func:`~histmig.records.field_path`, default
    ``messages``, the first candidate :func:`~histmig.records.locate_messages` tries) a
    history none of ``rules`` can change or has anything to say of, in part kinds the
    ``target`` release writes, and that orjson reads (see the module docstring), or such a
    history as JSON text in a string there (decoded a second time), or such a history as a
    bare array (its first byte ``[``, as a Parquet or DuckDB cell holds it); the findings,
    when ``rules`` would only report them (a rule not in ``fixing``, such as HM407's calls of
    the last response); ``None`` says nothing: the record must go the full way. Never
    raises."""

    def __init__(
        self,
        rules: tuple[Rule, ...],
        field: str | None = None,
        fixing: frozenset[str] = frozenset(),
        target: Release = NEWEST,
    ) -> None:
        self._read: list[Any] = []
        skeleton = _skeleton(rules, self._read, target)
        path = _path(field or "messages")
        self._held = attrgetter(".".join(["value"] * len(path)))
        self._record = _decoder(Union[skeleton, str], path)
        self._array = _decoder(skeleton, ())
        self._envelope = conversation_envelope(Union[skeleton, str, None]) if field is None else None
        self._families = _Families.asker(rules, fixing)

    def __call__(self, raw: bytes) -> Verdict:
        """What ``raw`` needs (see the class docstring). One decode, no search of the bytes
        first: a record holding a ``retry-prompt`` part stops decoding there; then each
        history look on the skeleton and the parts it reads (gathered by the decode: a screen
        serves one thread)."""
        read = self._read
        read.clear()
        try:
            if raw[0] == 0x5B:  # "["
                messages = self._array.decode(raw)
            elif (messages := self._held(self._record.decode(raw))).__class__ is str:
                messages = self._array.decode(messages)
            if not raw.isascii():
                raw.decode()
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError, IndexError):
            return None
        families = self._families
        return (
            () if families is None or not read else families(messages, read)
        )  # no part a look reads: nothing for it (HistoryLook)

    def pieces(self, raws: Iterable[bytes]) -> Verdict | Literal[False]:
        """What the screen says of the history the records ``raws`` (their JSON texts, in the
        order of their conversation) hold put together, as it says it of their
        :func:`~histmig.engine.joined_history` (the history looks asked once, of the whole,
        their findings' places the joined history's), with one decode a record and no bytes
        joined: each record a bare array, or an object holding its messages at the screen's
        field (a key, not a path: the joined history reads no other; without one, ``messages``,
        its other candidate fields arrays or null). ``False`` says nothing (put the history
        together, :func:`~histmig.engine.joined_history`): a record whose history may be
        elsewhere (one message, another candidate field, no ``[`` or ``{`` first), that is
        not UTF-8 or nested too deep for a record's decode. JSON text in a string is read by
        none: ``None``, as a record that does not decode. Never raises."""
        read = self._read
        read.clear()
        history: list[Any] = []
        envelope = self._envelope
        for raw in raws:
            first = raw[:1]
            try:
                if first == b"[":
                    messages = self._array.decode(raw)
                elif first != b"{":
                    return False
                elif envelope is None:
                    messages = self._held(self._record.decode(raw))
                else:
                    found = envelope.decode(raw)
                    messages = found.f0
                    if messages is None or one_message(found):
                        return False
                if messages.__class__ is str:
                    return None
                if not raw.isascii():
                    raw.decode()
            except msgspec.DecodeError:  # a record that is one message is read whole: its messages field does not count
                return False if envelope is not None and is_one_message(raw) else None
            except (UnicodeDecodeError, RecursionError):  # the joined history holds a part of the record alone
                return False
            history += messages
        families = self._families
        return () if families is None or not read else families(history, read)


@lru_cache(maxsize=16)
def screen_for(
    rules: tuple[Rule, ...], field: str | None, fixing: frozenset[str] = frozenset(), target: Release = NEWEST
) -> Screen:
    """The :class:`Screen` of ``rules``, ``field``, ``fixing`` and ``target``, built once per
    process (building one takes about a millisecond)."""
    return Screen(rules, field, fixing, target)


def _settled_history(rules: tuple[Rule, ...], read: list[Any] | None) -> Any:
    """The current schema's msgspec type (:data:`~histmig.schema.PLAIN_CURRENT`), each part
    and message struct made stricter by what ``rules`` look at there
    (:meth:`~histmig.rules.base.FieldLook.settled_type`), each struct class's tag in
    ``_kind``; with ``read``, the parts of a kind a history look reads are appended to it as
    they are decoded (as in the screen's skeleton, :func:`_struct`)."""
    reads = _read_kinds(rules) if read is not None else frozenset()

    def namespace(tag: tuple[str, str] | None) -> dict[str, Any]:
        attributes: dict[str, Any] = {"_kind": tag and tag[1]}
        if tag is not None and tag[0] == "part_kind" and tag[1] in reads:
            attributes["__post_init__"] = read.append  # type: ignore[union-attr]  # reads is not empty: read is a list
        return attributes

    def refine(tag: tuple[str, str] | None, fields: Fields) -> Fields:
        if tag is None or tag[0] not in ("part_kind", "kind"):
            return fields
        message_kind, part_kind = (None, tag[1]) if tag[0] == "part_kind" else (tag[1], None)
        refined = list(fields)
        for look in _field_looks(rules, message_kind, part_kind):
            index = next((i for i, (name, *_) in enumerate(refined) if name == look.field), None)
            if index is None:
                refined.append((look.field, look.settled_type(None), None))
            else:
                name, declared, *default = refined[index]
                refined[index] = (name, look.settled_type(declared), *default)
        return refined

    return msgspec_type(PLAIN_CURRENT, refine=refine, namespace=namespace)


class Settled:
    """``settled(output) -> bool``: ``True`` only when ``output``, the JSON text histmig wrote
    for a migrated record (bytes), holds at ``field`` (a :func:`~histmig.records.field_path`;
    ``None``: the record is a bare array) a history pydantic-ai 2.68 loads on which a second
    pass of ``rules`` changes nothing: it decodes with msgspec into the current schema made
    stricter where the rules look (:func:`_settled_history`), and no history look finds what
    a rule of ``fixing`` would fix (``fixing`` ``None``: the history looks are not asked). The
    current schema itself rules out the part kinds rules rewrite (no release up to 2.68 loads
    them). ``False`` says nothing: the engine then validates with pydantic and runs the second
    pass."""

    def __init__(
        self, rules: tuple[Rule, ...], field: str | None = None, fixing: frozenset[str] | None = frozenset()
    ) -> None:
        path = _path(field)
        families = None if fixing is None else _Families.asker(rules, fixing)
        self._read: list[Any] = []
        self._decoder = _decoder(_settled_history(rules, self._read if families is not None else None), path)
        self._messages = attrgetter(".".join(["value"] * len(path))) if path else (lambda decoded: decoded)
        self._families = families

    def __call__(self, output: bytes) -> bool:
        return self.look(output) not in (False, None)

    def look(self, output: bytes) -> Verdict | Literal[False]:
        """``False`` when ``output`` does not decode as settled; else what the history looks
        say of it (:data:`Verdict`: ``None`` when they cannot tell, or a rule of ``fixing``
        would fix what they find; else what they find, to report), ``()`` without them. A
        check serves one thread (the parts are gathered by the decode)."""
        read = self._read
        read.clear()
        try:
            decoded = self._decoder.decode(output)
        except (msgspec.DecodeError, RecursionError):
            return False
        families = self._families
        return () if families is None or not read else families(self._messages(decoded), read)


@lru_cache(maxsize=16)
def settled_for(rules: tuple[Rule, ...], field: str | None, fixing: frozenset[str] | None = frozenset()) -> Settled:
    """The :class:`Settled` check of ``rules``, ``field`` and ``fixing``, built once per
    process."""
    return Settled(rules, field, fixing)
