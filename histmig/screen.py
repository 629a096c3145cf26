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
from functools import lru_cache
from typing import Any, Union

import msgspec

from histmig.rules import looks
from histmig.rules.base import FieldLook, Look, PartKind, Rule
from histmig.schema import PLAIN_CURRENT, Fields, msgspec_type
from histmig.schema.releases import NEWEST, Release, written_kinds

_names = itertools.count()


def _about(look: Look, message_kind: Any, part_kind: Any) -> bool:
    """Whether ``look`` is about parts of ``part_kind`` (``None``: the message itself) in
    messages of ``message_kind`` (``None``: of either kind; the skeleton's and the settled
    check's part structs serve requests and responses alike, so a look of either counts)."""
    return look.covers(message_kind, part_kind) if message_kind is not None or look.message is None else look.covers(look.message, part_kind)


def _field_looks(rules: tuple[Rule, ...], message_kind: Any, part_kind: Any) -> list[FieldLook]:
    return [look for _, look in looks(rules) if isinstance(look, FieldLook) and _about(look, message_kind, part_kind)]


def _quiet_fields(rules: tuple[Rule, ...], message_kind: Any, part_kind: Any) -> Fields:
    """The skeleton fields of a part of ``part_kind`` (or of a message): each field some look
    covers, of the look's quiet type, absent by default. Raises ``TypeError`` when two looks
    give one field different types (msgspec cannot decode a value as both)."""
    fields: dict[str, Any] = {}
    for look in _field_looks(rules, message_kind, part_kind):
        quiet = look.quiet_type()
        if fields.setdefault(look.field, quiet) != quiet:
            raise TypeError(f"two rules look at {part_kind or message_kind}.{look.field} with different quiet types")
    return [(name, type_, None) for name, type_ in fields.items()]


def _struct(fields: Fields, tag_field: str, tag: str) -> Any:
    return msgspec.defstruct(f"_Skeleton{next(_names)}", fields, tag_field=tag_field, tag=tag, gc=False)


def _skeleton(rules: tuple[Rule, ...], target: Release) -> Any:
    """The skeleton type of a history for ``rules`` and the ``target`` release: a list of
    request/response structs, each with its ``parts`` (one union tagged by ``part_kind`` of
    every quiet kind: one ``target`` writes and no rule rewrites) and the message fields some
    rule looks at."""
    rewritten = {kind for _, look in looks(rules) if isinstance(look, PartKind) for kind in look.parts}  # type: ignore[union-attr]
    quiet = sorted((written_kinds(target, "request") | written_kinds(target, "response")) - rewritten)
    part = Union[tuple(_struct(_quiet_fields(rules, None, kind), "part_kind", kind) for kind in quiet)]
    messages = [
        _struct([("parts", list[part]), *_quiet_fields(rules, kind, None)], "kind", kind) for kind in ("request", "response")
    ]
    return list[Union[tuple(messages)]]


def _decoder(messages: Any, field: str | None) -> msgspec.json.Decoder:
    """A decoder of a record holding ``messages`` at ``field``, or of a bare array of them
    (``field`` ``None``)."""
    if field is None:
        return msgspec.json.Decoder(messages)
    return msgspec.json.Decoder(msgspec.defstruct("_Envelope", [(field, messages)], gc=False))


class Screen:
    """``screen(raw) -> bool``: ``True`` only when ``raw``, the JSON text of a record (bytes),
    is an object whose ``field`` (default ``messages``, the first candidate
    :func:`~histmig.records.locate_messages` tries) holds a history none of ``rules`` can
    change, in part kinds the ``target`` release writes, and that orjson reads (see the
    module docstring), or such a history as a bare array (its first byte ``[``, as a Parquet
    or DuckDB cell holds it). ``False`` says nothing: the record must go the full way. Never
    raises."""

    def __init__(self, rules: tuple[Rule, ...], field: str | None = None, target: Release = NEWEST) -> None:
        skeleton = _skeleton(rules, target)
        self._record = _decoder(skeleton, field or "messages")
        self._array = _decoder(skeleton, None)

    def __call__(self, raw: bytes) -> bool:
        """Whether ``raw`` needs nothing (see the class docstring). One decode, no search of
        the bytes first: a record holding a ``retry-prompt`` part stops decoding there."""
        try:
            (self._array if raw[:1] == b"[" else self._record).decode(raw)
            if not raw.isascii():
                raw.decode()
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            return False
        return True


@lru_cache(maxsize=16)
def screen_for(rules: tuple[Rule, ...], field: str | None, target: Release = NEWEST) -> Screen:
    """The :class:`Screen` of ``rules``, ``field`` and ``target``, built once per process
    (building one takes about a millisecond)."""
    return Screen(rules, field, target)


def _settled_history(rules: tuple[Rule, ...]) -> Any:
    """The current schema's msgspec type (:data:`~histmig.schema.PLAIN_CURRENT`), each part
    and message struct made stricter by what ``rules`` look at there
    (:meth:`~histmig.rules.base.FieldLook.settled_type`)."""

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

    return msgspec_type(PLAIN_CURRENT, refine=refine)


class Settled:
    """``settled(output) -> bool``: ``True`` only when ``output``, the JSON text histmig wrote
    for a migrated record (bytes), holds at ``field`` (``None``: the record is a bare array)
    a history pydantic-ai 2.68 loads on which a second pass of ``rules`` changes nothing: it
    decodes with msgspec into the current schema made stricter where the rules look
    (:func:`_settled_history`). The current schema itself rules out the part kinds rules
    rewrite (no release up to 2.68 loads them). ``False`` says nothing: the engine then
    validates with pydantic and runs the second pass."""

    def __init__(self, rules: tuple[Rule, ...], field: str | None = None) -> None:
        self._decoder = _decoder(_settled_history(rules), field)

    def __call__(self, output: bytes) -> bool:
        try:
            self._decoder.decode(output)
        except (msgspec.DecodeError, RecursionError):
            return False
        return True


@lru_cache(maxsize=16)
def settled_for(rules: tuple[Rule, ...], field: str | None) -> Settled:
    """The :class:`Settled` check of ``rules`` and ``field``, built once per process."""
    return Settled(rules, field)
