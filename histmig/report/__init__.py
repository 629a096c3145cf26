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
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from operator import itemgetter
from typing import Any

from histmig.records import Outcome
from histmig.report.rows import ChangeRow, FindingRow, Spill

COUNTS = ("records_in", "changed", "unchanged", "rejected", "invalid", "warnings", "findings", "read_errors")
"""The counts of a report's summary, in order."""

_RULE, _CAUSE, _EVIDENCE, _CERTAINTY = (itemgetter(ChangeRow._fields.index(name)) for name in ("rule", "cause", "evidence", "certainty"))


class Report:
    """Accumulates outcomes (:meth:`add`): counts; error and warning rows (one per bad
    record, kept in memory); change and finding rows (one per part, spilled,
    :class:`~histmig.report.rows.Spill`). :meth:`in_memory` makes a report whose rows stay in
    memory, to be sent from a worker and :meth:`merge`-d."""

    def __init__(self, changes: Spill | None = None, findings: Spill | None = None) -> None:
        self.counts: Counter[str] = Counter(dict.fromkeys(COUNTS, 0))
        self._by_rule: Counter[str] = Counter()
        self._by_cause: Counter[str] = Counter()
        self._by_evidence: Counter[tuple[str, str]] = Counter()
        self._findings_by_rule: Counter[str] = Counter()
        self._changes = changes or Spill(ChangeRow)
        self._findings = findings or Spill(FindingRow)
        self.errors: list[dict[str, Any]] = []
        self.warnings: list[dict[str, Any]] = []

    @classmethod
    def in_memory(cls) -> Report:
        """A report whose rows stay in memory, to be sent to another process."""
        return cls(Spill.in_memory(ChangeRow), Spill.in_memory(FindingRow))

    def add(self, outcome: Outcome) -> None:
        """Count ``outcome`` and keep its change and finding rows (:func:`change_rows`,
        :func:`finding_rows`) and its error and warning lines."""
        record = outcome.record
        self.counts["records_in"] += 1
        self.counts[outcome.status] += 1
        changes = change_rows(outcome)
        if changes:
            place = (record.source, record.location, record.record_id)
            self._counted(self._changes.add([place + row for row in changes]))
        if outcome.findings:
            place = (record.source, record.location, record.record_id)
            self.counts["findings"] += len(outcome.findings)
            self._findings_by_rule.update(finding.code for finding in outcome.findings)
            self._findings.add([place + row for row in finding_rows(outcome)])
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
        self._changes.absorb(other._changes)
        self._findings.absorb(other._findings)
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
        return Counter({evidence_label(evidence, certainty): count for (evidence, certainty), count in self._by_evidence.items()})

    def change_batches(self) -> Iterator[list[ChangeRow]]:
        """The change rows in the order they were added, a batch at a time."""
        self._flush()
        return self._changes.batches()

    def finding_batches(self) -> Iterator[list[FindingRow]]:
        """The finding rows in the order they were added, a batch at a time."""
        self._flush()
        return self._findings.batches()

    @property
    def changes(self) -> list[dict[str, Any]]:
        """Every change row in the report's ``changes`` shape (README "Report")."""
        return [row._asdict() for batch in self.change_batches() for row in batch]

    @property
    def findings(self) -> list[dict[str, Any]]:
        """Every finding row in the report's ``findings`` shape (README "Report")."""
        return [row._asdict() for batch in self.finding_batches() for row in batch]

    @property
    def needs_attention(self) -> bool:
        """True when any record changed, was rejected, is invalid, has a finding, or an input
        could not be read to its end (``check`` exits 1)."""
        counts = self.counts
        return bool(counts["changed"] or counts["rejected"] or counts["invalid"] or counts["findings"] or counts["read_errors"])

    @property
    def failed(self) -> bool:
        """True when a record was rejected or the input could not be read to its end
        (``convert``/``audit`` exit 1)."""
        return bool(self.counts["rejected"] or self.counts["read_errors"])

    def summary(self) -> dict[str, Any]:
        """Counts, then parts by rule, by cause and by evidence, and findings by rule (each
        sorted by key): :func:`summary_of` this report's tallies."""
        self._flush()
        return summary_of(self.counts, self._by_rule, self._by_cause, self._by_evidence, self._findings_by_rule)

    def to_json(self) -> dict[str, Any]:
        """The whole report as plain JSON data."""
        return {"summary": self.summary(), "changes": self.changes, "findings": self.findings, "errors": self.errors, "warnings": self.warnings}


PLACE_FIELDS = 3
"""The first fields of a change or finding row say where it is (``source``, ``location``,
``id``); the others are what the record's own rows hold."""


def change_rows(outcome: Outcome) -> list[tuple[Any, ...]]:
    """The change rows of ``outcome`` without their place (the fields of
    :class:`~histmig.report.rows.ChangeRow` after :data:`PLACE_FIELDS`), in the order of
    their places (message, then part; a message-level change first), the changes to one
    part in the order they were made; none for a rejected record (it is kept unchanged)."""
    changes = outcome.changes
    if outcome.status == "rejected" or not changes:
        return []
    ordered = sorted(changes, key=_position) if len(changes) > 1 else changes
    return [(c.rule, c.message, c.part, c.before, c.after, c.cause, c.evidence, c.certainty) for c in ordered]


def finding_rows(outcome: Outcome) -> list[tuple[Any, ...]]:
    """The finding rows of ``outcome`` without their place (the fields of
    :class:`~histmig.report.rows.FindingRow` after :data:`PLACE_FIELDS`), in the order of
    their places."""
    return [tuple(finding) for finding in sorted(outcome.findings, key=_position)]


def evidence_label(evidence: str, certainty: str) -> str:
    """How the summary names a kind of evidence: ``error-list (shape)``."""
    return f"{evidence} ({certainty})"


def summary_of(
    counts: Mapping[str, int],
    by_rule: Mapping[str, int],
    by_cause: Mapping[str, int],
    by_evidence: Mapping[tuple[str, str], int],
    findings_by_rule: Mapping[str, int],
) -> dict[str, Any]:
    """A report's summary (README "Report") from its tallies: ``counts`` (by the names of
    :data:`COUNTS`, a missing one 0), then edited parts by rule, by cause and by
    ``(evidence, certainty)`` (named by :func:`evidence_label`), and findings by rule, each
    sorted by key. :meth:`Report.summary` and :func:`histmig.spark.summarize` both give it."""
    return {
        **{key: counts.get(key, 0) for key in COUNTS},
        "parts_by_rule": dict(sorted(by_rule.items())),
        "parts_by_cause": dict(sorted(by_cause.items())),
        "parts_by_evidence": dict(sorted((evidence_label(*key), count) for key, count in by_evidence.items())),
        "findings_by_rule": dict(sorted(findings_by_rule.items())),
    }


def _position(change: Any) -> tuple[int, int]:
    """Where a change or finding is: its message, then its part (a message-level one first).
    Sorting by it is stable, so the changes to one part stay in the order they were made."""
    return (change.message, -1 if change.part is None else change.part)


def record_name(row: dict[str, Any] | ChangeRow | FindingRow) -> str:
    """``source:location`` and ``[id]`` when known: how every line names a record."""
    source, location, id_ = (row["source"], row["location"], row.get("id")) if isinstance(row, dict) else (row.source, row.location, row.id)
    return f"{source}:{location}" + (f" [{id_}]" if id_ else "")
