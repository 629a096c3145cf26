"""The report: every change, finding and rejected record of a run, and its summary.

:class:`Report` accumulates the engine's outcomes (counts, and rows by name: change and
finding rows spilled to a temporary file, :mod:`histmig.report.rows`); the renderers
(:mod:`histmig.report.text`, :mod:`~histmig.report.json`, :mod:`~histmig.report.markdown`)
write it out, a batch of rows at a time, so memory stays flat whatever the archive size.

JSON shape (README "Report"): ``{"summary": {...}, "changes": [...], "findings": [...],
"errors": [...], "warnings": [...]}``. ``summary`` reconciles ``records_in == changed +
unchanged + rejected``; ``invalid`` counts records that need no rule yet fail validation
(``check``); ``findings`` counts what rules found and did not fix (an unsafe fix without
``--unsafe-fixes``); ``read_errors`` counts inputs that ended early or could not be read on.
Under ``check --reader`` the report also has one ``readers`` row a record (which releases
load it, :class:`~histmig.report.rows.ReaderRow`) and their counts in the summary
(``reader``, ``reader_loads``, ``reader_cannot_load``, ``oldest_releases``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from operator import itemgetter
from typing import Any

from histmig.records import Outcome
from histmig.report.rows import ChangeRow, FindingRow, ReaderRow, Spill
from histmig.schema.releases import release

COUNTS = ("records_in", "changed", "unchanged", "rejected", "invalid", "warnings", "findings", "read_errors")
"""The counts of a report's summary, in order."""

_RULE, _CAUSE, _EVIDENCE, _CERTAINTY = (itemgetter(ChangeRow._fields.index(name)) for name in ("rule", "cause", "evidence", "certainty"))


class Report:
    """Accumulates outcomes (:meth:`add`): counts; error and warning rows (one per bad
    record, kept in memory); change and finding rows (one per part, spilled,
    :class:`~histmig.report.rows.Spill`). :meth:`in_memory` makes a report whose rows stay in
    memory, to be sent from a worker and :meth:`merge`-d."""

    def __init__(self, changes: Spill | None = None, findings: Spill | None = None, readers: Spill | None = None) -> None:
        self.counts: Counter[str] = Counter(dict.fromkeys(COUNTS, 0))
        self._by_rule: Counter[str] = Counter()
        self._by_cause: Counter[str] = Counter()
        self._by_evidence: Counter[tuple[str, str]] = Counter()
        self._findings_by_rule: Counter[str] = Counter()
        self._changes = changes or Spill(ChangeRow)
        self._findings = findings or Spill(FindingRow)
        self._readers = readers or Spill(ReaderRow)
        self._reader: str | None = None
        self._reader_loads: Counter[bool] = Counter()
        self._oldest: Counter[str | None] = Counter()
        self.errors: list[dict[str, Any]] = []
        self.warnings: list[dict[str, Any]] = []

    @classmethod
    def in_memory(cls) -> Report:
        """A report whose rows stay in memory, to be sent to another process."""
        return cls(Spill.in_memory(ChangeRow), Spill.in_memory(FindingRow), Spill.in_memory(ReaderRow))

    def add(self, outcome: Outcome) -> None:
        """Count ``outcome`` and keep its change and finding rows and its error and warning
        lines; a record's changes are kept in the order of their places (message, then part;
        a message-level change first), the changes to one part in the order they were made."""
        record = outcome.record
        self.counts["records_in"] += 1
        self.counts[outcome.status] += 1
        changes = outcome.changes
        if outcome.status != "rejected" and changes:
            place = (record.source, record.location, record.record_id)
            ordered = sorted(changes, key=_position) if len(changes) > 1 else changes
            self._counted(self._changes.add([place + (c.rule, c.message, c.part, c.before, c.after, c.cause, c.evidence, c.certainty) for c in ordered]))
        if outcome.findings:
            place = (record.source, record.location, record.record_id)
            self.counts["findings"] += len(outcome.findings)
            self._findings_by_rule.update(finding.code for finding in outcome.findings)
            self._findings.add([place + tuple(finding) for finding in sorted(outcome.findings, key=_position)])
        if outcome.readers is not None:
            reader, loads, oldest, releases = outcome.readers.row()
            self._reader = reader
            self._reader_loads[loads] += 1
            self._oldest[oldest] += 1
            self._readers.add([(record.source, record.location, record.record_id, reader, loads, oldest, releases)])
        if not outcome.errors and not outcome.warnings:
            return
        where = {"source": record.source, "location": record.location, "id": record.record_id}
        if outcome.errors:
            if outcome.status == "unchanged":
                self.counts["invalid"] += 1
            status = "invalid" if outcome.status == "unchanged" else outcome.status
            self.errors.append({**where, "status": status, "errors": outcome.errors})
        if outcome.warnings:
            self.counts["warnings"] += len(outcome.warnings)
            self.warnings.append({**where, "warnings": outcome.warnings})

    def _counted(self, rows: list[tuple[Any, ...]] | None) -> None:
        """Count change rows just written out, by rule, cause and evidence."""
        if rows:
            self._by_rule.update(map(_RULE, rows))
            self._by_cause.update(filter(None, map(_CAUSE, rows)))
            self._by_evidence.update(zip(map(_EVIDENCE, rows), map(_CERTAINTY, rows)))

    def _flush(self) -> None:
        self._counted(self._changes.flush())
        self._findings.flush()
        self._readers.flush()

    def __getstate__(self) -> dict[str, Any]:
        self._flush()
        return self.__dict__

    def merge(self, other: Report) -> None:
        """Add ``other``'s counts, rows (after this report's own) and error and warning lines
        to this report. ``other`` is an :meth:`in_memory` report."""
        other._flush()
        self._flush()
        self.counts.update(other.counts)
        self._by_rule.update(other._by_rule)
        self._by_cause.update(other._by_cause)
        self._by_evidence.update(other._by_evidence)
        self._findings_by_rule.update(other._findings_by_rule)
        self._reader = self._reader or other._reader
        self._reader_loads.update(other._reader_loads)
        self._oldest.update(other._oldest)
        self._changes.absorb(other._changes)
        self._findings.absorb(other._findings)
        self._readers.absorb(other._readers)
        self.errors.extend(other.errors)
        self.warnings.extend(other.warnings)

    def add_unchanged(self, count: int) -> None:
        """Count ``count`` records that were unchanged, valid and without anything to say."""
        self.counts["records_in"] += count
        self.counts["unchanged"] += count

    def add_read_error(self, source: str, location: str, message: str) -> None:
        """Record that ``source`` could not be read past ``location`` (a truncated ``.gz``,
        an I/O error): what was read before is processed as usual."""
        self.counts["read_errors"] += 1
        self.errors.append({"source": source, "location": location, "id": None, "status": "unreadable", "errors": [message]})

    @property
    def by_rule(self) -> Counter[str]:
        """Edited parts by rule code."""
        self._flush()
        return self._by_rule

    @property
    def by_cause(self) -> Counter[str]:
        """Edited parts by the ``RetryInfo.cause`` written (parts given none not counted)."""
        self._flush()
        return self._by_cause

    @property
    def by_evidence(self) -> Counter[str]:
        """Edited parts by ``evidence (certainty)``."""
        self._flush()
        return Counter({f"{evidence} ({certainty})": count for (evidence, certainty), count in self._by_evidence.items()})

    def change_batches(self) -> Iterator[list[ChangeRow]]:
        """The change rows in the order they were added, a batch at a time."""
        self._flush()
        return self._changes.batches()

    def finding_batches(self) -> Iterator[list[FindingRow]]:
        """The finding rows in the order they were added, a batch at a time."""
        self._flush()
        return self._findings.batches()

    def reader_batches(self) -> Iterator[list[ReaderRow]]:
        """The readers rows (``check --reader``: one a record) in the order they were added, a
        batch at a time."""
        self._flush()
        return self._readers.batches()

    @property
    def reader(self) -> str | None:
        """The release asked about with ``check --reader`` (``None``: none was)."""
        return self._reader

    @property
    def changes(self) -> list[dict[str, Any]]:
        """Every change row in the report's ``changes`` shape (README "Report")."""
        return [row._asdict() for batch in self.change_batches() for row in batch]

    @property
    def findings(self) -> list[dict[str, Any]]:
        """Every finding row in the report's ``findings`` shape (README "Report")."""
        return [row._asdict() for batch in self.finding_batches() for row in batch]

    @property
    def readers(self) -> list[dict[str, Any]]:
        """Every readers row in the report's ``readers`` shape (README "Report")."""
        return [row._asdict() for batch in self.reader_batches() for row in batch]

    @property
    def needs_attention(self) -> bool:
        """True when any record changed, was rejected, is invalid, has a finding, or an input
        could not be read to its end (``check`` exits 1)."""
        counts = self.counts
        return bool(counts["changed"] or counts["rejected"] or counts["invalid"] or counts["findings"] or counts["read_errors"])

    @property
    def failed(self) -> bool:
        """True when a record was rejected, a record the ``--target`` release cannot load was
        kept as it is (``invalid``: a run without ``--target`` counts none), or the input
        could not be read to its end (``convert``/``audit`` exit 1)."""
        return bool(self.counts["rejected"] or self.counts["invalid"] or self.counts["read_errors"])

    def summary(self) -> dict[str, Any]:
        """Counts, then parts by rule, by cause and by evidence, and findings by rule (each
        sorted by key); under ``check --reader``, then the ``reader`` release, how many records
        it loads and cannot load, and how many records each release is the oldest to load
        (``oldest_releases``, in release order, ``none`` last)."""
        summary = {
            **{key: self.counts[key] for key in COUNTS},
            "parts_by_rule": dict(sorted(self.by_rule.items())),
            "parts_by_cause": dict(sorted(self.by_cause.items())),
            "parts_by_evidence": dict(sorted(self.by_evidence.items())),
            "findings_by_rule": dict(sorted(self._findings_by_rule.items())),
        }
        if self._reader is not None:
            oldest = sorted(self._oldest.items(), key=lambda item: (item[0] is None, release(item[0]) if item[0] else None))
            summary.update(
                reader=self._reader,
                reader_loads=self._reader_loads[True],
                reader_cannot_load=self._reader_loads[False],
                oldest_releases={str(name or "none"): count for name, count in oldest},
            )
        return summary

    def to_json(self) -> dict[str, Any]:
        """The whole report as plain JSON data (``readers`` only under ``check --reader``)."""
        readers = {"readers": self.readers} if self._reader is not None else {}
        return {"summary": self.summary(), "changes": self.changes, "findings": self.findings, **readers, "errors": self.errors, "warnings": self.warnings}


def _position(change: Any) -> tuple[int, int]:
    """Where a change or finding is: its message, then its part (a message-level one first).
    Sorting by it is stable, so the changes to one part stay in the order they were made."""
    return (change.message, -1 if change.part is None else change.part)


def record_name(row: dict[str, Any] | ChangeRow | FindingRow) -> str:
    """``source:location`` and ``[id]`` when known: how every line names a record."""
    source, location, id_ = (row["source"], row["location"], row.get("id")) if isinstance(row, dict) else (row.source, row.location, row.id)
    return f"{source}:{location}" + (f" [{id_}]" if id_ else "")
