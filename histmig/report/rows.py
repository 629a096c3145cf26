"""The rows of a report, and where they wait until it is rendered.

A change row or a finding row is one per edited or found part, so as many as an archive has
parts: :class:`Spill` keeps them in batches in a temporary file, and gives them back, a batch
at a time, by name (:class:`ChangeRow`, :class:`FindingRow`).
"""

from __future__ import annotations

import io
import pickle
import tempfile
from collections.abc import Iterator
from typing import IO, Any, NamedTuple

from histmig.schema.releases import EVERY, describe, from_pairs


class ChangeRow(NamedTuple):
    """One change, where it was made (README "Report", ``changes[]``)."""

    source: str
    location: str
    id: str | None
    rule: str
    message: int
    part: int | None
    before: str
    after: str
    cause: str | None
    evidence: str
    certainty: str
    tool_call_id: str | None
    removed: Any

    @property
    def transition(self) -> str:
        """The part kinds the change goes between, as report lines show them:
        ``retry-prompt -> tool-return``, or the kind alone when it is kept (HM201 giving a
        ``tool-call`` its ``tool_call_id``: the line then names the field set)."""
        return self.before if self.before == self.after else f"{self.before} -> {self.after}"


class FindingRow(NamedTuple):
    """One finding, where it was found: of a rule that only reports, or whose fix was not
    applied (README "Report", ``findings[]``)."""

    source: str
    location: str
    id: str | None
    rule: str
    message: int
    part: int | None
    text: str
    evidence: str
    certainty: str
    severity: str


class ReaderRow(NamedTuple):
    """Which releases load one record as it was read (README "Report", ``readers[]``, ``check
    --reader``): whether the ``reader`` release ``loads`` it, the ``oldest`` release that does
    (``None``: none) and all that do as ``releases``, ``[since, before]`` pairs (``before``
    ``None``: every later release)."""

    source: str
    location: str
    id: str | None
    reader: str
    loads: bool
    oldest: str | None
    releases: list[list[str | None]]

    def words(self) -> str:
        """The releases that load the record, in words (``oldest 2.60.0, loaded from
        2.60.0``; ``every release loads it``; ``no release loads it``)."""
        spans = from_pairs(self.releases)
        if not spans or spans == EVERY:
            return f"{describe(spans)} loads it"
        return f"oldest {self.oldest}, loaded {describe(spans)}"


ROWS_PER_BATCH = 4096
"""Rows a :class:`Spill` gathers before it writes them out as one batch."""


class Spill:
    """Rows of one kind (``row_type``), added in order and read back in order, a batch at a
    time: gathered in memory, then pickled by :data:`ROWS_PER_BATCH` to ``file`` (an anonymous
    temporary file, made on the first batch, unless given). :meth:`in_memory` keeps its
    batches in a :class:`io.BytesIO` that :meth:`absorb` copies into another spill (one
    chunk's rows, sent from a worker)."""

    def __init__(self, row_type: type[NamedTuple], file: IO[bytes] | None = None) -> None:
        self.row_type = row_type
        self._file = file
        self._rows: list[tuple[Any, ...]] = []

    @classmethod
    def in_memory(cls, row_type: type[NamedTuple]) -> Spill:
        """A spill whose batches stay in memory, to be sent to another process."""
        return cls(row_type, io.BytesIO())

    def add(self, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]] | None:
        """Add ``rows`` (plain tuples in :attr:`row_type`'s field order); returns the rows
        gathered so far when they were just written out as a batch, else ``None``."""
        self._rows += rows
        return self.flush() if len(self._rows) >= ROWS_PER_BATCH else None

    def flush(self) -> list[tuple[Any, ...]] | None:
        """Write out the rows gathered so far as one batch; returns them (``None`` when
        there were none)."""
        if not self._rows:
            return None
        rows, self._rows = self._rows, []
        self._file = self._file or tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the spill)
        pickle.dump(rows, self._file, pickle.HIGHEST_PROTOCOL)
        return rows

    def absorb(self, other: Spill) -> None:
        """Add every row of ``other``, an :meth:`in_memory` spill already flushed, after this
        spill's own."""
        data = other._file.getvalue() if isinstance(other._file, io.BytesIO) else b""
        if data:
            self.flush()
            self._file = self._file or tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the spill)
            self._file.write(data)

    def batches(self) -> Iterator[list[Any]]:
        """The rows in the order they were added, as :attr:`row_type` instances, one batch
        (never empty) at a time, read back from the file."""
        self.flush()
        if self._file is None:
            return
        self._file.flush()
        end = self._file.tell()
        self._file.seek(0)
        make = self.row_type._make
        try:
            while self._file.tell() < end:
                batch = pickle.load(self._file)
                if batch:
                    yield [make(row) for row in batch]
        finally:
            self._file.seek(end)
