"""Record: one stored conversation as it travels through the engine, and its Outcome.

A record is the bytes a source read (a JSONL line, a whole ``.json`` file, a Parquet or
DuckDB cell) plus where they came from, so every message can name the file and the line
or row. The envelope (every field around the messages) is never touched by rules. An
:class:`Outcome` is what the engine made of it, which the source writes and the report
counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import orjson

from histmig.schema.releases import Release, Spans, includes

if TYPE_CHECKING:
    from histmig.rules.base import Change, Finding

MESSAGE_FIELD_CANDIDATES = ("messages", "all_messages", "history", "message_history", "conversation")
"""Envelope fields tried, in order, when ``--messages-field`` is not given."""


@dataclass(frozen=True)
class Record:
    """One record read from a source.

    ``raw`` is the record's JSON text as stored (UTF-8 bytes, no line terminator);
    ``source`` the file name (``-`` for stdin); ``location`` a human position such as
    ``line 12`` or ``row 5``; ``record_id`` the record's id: a Parquet or DuckDB id
    column's, given with the record, else the envelope's (:func:`envelope_id`), filled in
    once the pipeline has parsed the record.
    """

    raw: bytes
    source: str
    location: str
    record_id: str | None = None

    @property
    def name(self) -> str:
        """``file:location`` (and ``[id]`` when known), as used in every error line."""
        suffix = f" [{self.record_id}]" if self.record_id else ""
        return f"{self.source}:{self.location}{suffix}"


class NotAHistory(ValueError):
    """The record holds no message list: neither a JSON array nor an object with a
    messages field (named, or found among :data:`MESSAGE_FIELD_CANDIDATES`)."""


def _looks_like_history(value: Any) -> bool:
    return isinstance(value, list) and (
        not value or (isinstance(value[0], dict) and "kind" in value[0] and "parts" in value[0])
    )


def locate_messages(
    obj: Any, field: str | None = None, looks_like: Callable[[Any], bool] = _looks_like_history, what: str = "messages"
) -> tuple[list[Any], str | None]:
    """Find the history inside a parsed record.

    Returns ``(messages, field)``: a bare array is its own history (``field`` ``None``); an
    object's history is ``obj[field]`` when ``field`` is given, else the first candidate
    field holding a list, else the only non-empty field ``looks_like`` accepts (a list of
    messages; the OTel export passes its own test and ``what``). Raises
    :class:`NotAHistory` naming what was found instead.
    """
    if isinstance(obj, list):
        return obj, None
    if not isinstance(obj, dict):
        raise NotAHistory(f"expected a JSON array or object, got {_json_kind(obj)}")
    if field is not None:
        if not isinstance(obj.get(field), list):
            raise NotAHistory(f"field {field!r} is missing or not an array")
        return obj[field], field
    for candidate in MESSAGE_FIELD_CANDIDATES:
        if isinstance(obj.get(candidate), list):
            return obj[candidate], candidate
    found = [key for key, value in obj.items() if looks_like(value) and value]
    if len(found) == 1:
        return obj[found[0]], found[0]
    present = next((key for key in MESSAGE_FIELD_CANDIDATES if key in obj), None)
    if present is not None:
        raise NotAHistory(f"field {present!r} is not an array (if the {what} are in another field, name it with --messages-field)")
    raise NotAHistory(f"no {what} field found (name it with --messages-field)")


def _json_kind(value: Any) -> str:
    """What ``value``, parsed from JSON, is in JSON's words: a string, a number, true, false or null."""
    if value is None or isinstance(value, bool):
        return orjson.dumps(value).decode()
    return "a string" if isinstance(value, str) else "a number"


ID_FIELDS = ("id", "conversation_id", "record_id")


def envelope_id(obj: Any) -> str | None:
    """The record's own id, for reports: the first of :data:`ID_FIELDS` an envelope object
    holds as a string or integer; ``None`` for a bare history or an envelope without one."""
    if not isinstance(obj, dict):
        return None
    for key in ID_FIELDS:
        value = obj.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return str(value)
    return None


Status = Literal["unchanged", "changed", "rejected"]


class Readers(NamedTuple):
    """Which releases load a record as it was read (``check --reader``, framework-facts §3):
    the ``reader`` release asked about, and the ``spans`` of releases that load the record
    (:mod:`histmig.schema.releases`; none for a record that is no history). A release may load
    a record that a newer one refuses (a retried ``tool-return``: ignored before 1.67.0,
    refused from 1.67.0 before 2.60.0)."""

    reader: Release
    spans: Spans

    @property
    def loads(self) -> bool:
        """Whether the ``reader`` release loads the record."""
        return includes(self.spans, self.reader)

    @property
    def oldest(self) -> str | None:
        """The oldest release that loads the record (``None``: none does)."""
        return str(self.spans[0].since) if self.spans else None

    def row(self) -> tuple[str, bool, str | None, list[list[str | None]]]:
        """``(reader, loads, oldest, releases)`` as plain data, ``releases`` as ``[since,
        before]`` pairs (``before`` ``None``: every later release)."""
        return str(self.reader), self.loads, self.oldest, [[str(span.since), span.before and str(span.before)] for span in self.spans]


@dataclass(slots=True)
class Outcome:
    """What the engine made of one record: ``status``; ``output``, the bytes to write (the
    original bytes unless ``changed``; ``None`` when ``rejected``); the ``changes``;
    ``findings`` of rules whose fix was not applied; ``errors``, one ``path: message`` line
    per problem (why it was rejected, or, for an unchanged record under ``validate_all``, why
    it is not valid); ``warnings``, parts carried unchanged that no release up to 2.68 wrote
    (an unknown ``part_kind``); ``readers``, which releases load it (``check --reader``)."""

    record: Record
    status: Status
    output: bytes | None
    changes: list[Change] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    readers: Readers | None = None

    @property
    def quiet(self) -> bool:
        """Unchanged, valid, and nothing to say: only counted in a report."""
        return self.status == "unchanged" and not self.errors and not self.warnings and not self.findings and self.readers is None
