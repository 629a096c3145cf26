"""The report: every change, finding and rejected record of a run, and its summary.

:class:`Report` accumulates the engine's outcomes (counts, and rows by name: change and
finding rows spilled to a temporary file, :mod:`histmig.report.rows`); the renderers
(:mod:`histmig.report.text`, :mod:`~histmig.report.json`, :mod:`~histmig.report.markdown`)
write it out, a batch of rows at a time, so memory stays flat whatever the archive size.

JSON shape (README "Report"): ``{"run": {...}, "summary": {...}, "changes": [...],
"findings": [...], "errors": [...], "warnings": [...]}``. ``run`` is the audit record of
the run (:class:`RunInfo`); ``summary`` reconciles ``records_in == changed + unchanged +
rejected + skipped``; ``fragments`` (given when there are any) counts the records that look
like pieces of a conversation stored over several records (:attr:`Report.fragments`);
``invalid`` counts records that need no rule yet fail validation
(``check``); ``findings`` counts what rules found and did not fix (a rule that only reports,
an unsafe fix without ``--unsafe-fixes``), ``warnings`` the findings of severity
``warning``, the unknown parts carried unchanged and the fixes not applied to a conversation's
layout (a warning line each, :func:`warning_rule` tells which); ``skipped`` counts database rows
migrated but not written because another client wrote them after histmig read them (each
also an ``errors`` entry with status ``skipped``, naming the row by its key; its change rows
stay listed, as what histmig would have written); ``read_errors`` counts inputs that ended
early or could not be read on. In the JSON shape a row's place is numbers (:func:`place`)
and an error or warning line is its ``path`` and ``message`` apart; :attr:`Report.changes`,
:attr:`Report.errors` and :attr:`Report.warnings` keep them as the text lines say them.
Under ``check --reader`` the report also has one ``readers`` row a record (which releases
load it, :class:`~histmig.report.rows.ReaderRow`) and their counts in the summary
(``reader``, ``reader_loads``, ``reader_cannot_load``, ``oldest_releases``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Literal

from histmig.problems import Warned, parts_of
from histmig.records import Outcome
from histmig.report.rows import ChangeRow, FindingRow, ReaderRow, Spill
from histmig.rules.pairing import CALL_NAME, CODES
from histmig.schema.releases import release

COUNTS = ("records_in", "changed", "unchanged", "rejected", "skipped", "invalid", "warnings", "findings", "read_errors")
"""The counts of a report's summary, in order."""

SKIPPED = (
    "written by another client after histmig read it; left as that client wrote it (run histmig again to migrate it)"
)
"""The error line of a skipped row (:meth:`Report.add_skipped`)."""

SKIPPED_WITH_CONVERSATION = (
    "not written: another client wrote its conversation (a row of it changed, added or deleted) after histmig read "
    "it, so the whole conversation was left as it is (run histmig again to migrate it)"
)
"""The error line of a row skipped with its conversation (``--conversation``), which need not
be the row that changed (:meth:`Report.add_skipped`)."""

FRONTIER = CODES["frontier"]
"""The rule of the calls of a history's last response (HM407)."""

Detail = Literal["auto", "full", "summary"]


@dataclass(frozen=True)
class Rendering:
    """How a report is rendered (the CLI's ``--report-detail`` and ``--no-timestamp``):
    ``detail`` ``full`` (a line a change and finding), ``summary`` (counts, errors and
    warnings only) or ``auto`` (full up to :data:`DETAIL_ROWS` change and finding rows, else
    the summary, saying so; the Markdown report is capped at 1 MiB whatever it is); and
    whether the JSON report gives the run's start time (``timestamp``: the one value that
    differs between two runs of the same command); and the ``baseline`` entries
    (:class:`~histmig.report.baseline.Entry`, ``check --baseline``) the GitHub report leaves out."""

    detail: Detail = "auto"
    timestamp: bool = True
    baseline: tuple[Any, ...] = ()


DETAIL_ROWS = 1000
"""Change and finding rows past which ``--report-detail auto`` shows the summary only."""


@dataclass(frozen=True)
class RunInfo:
    """What a run was, for the report as an audit record: the ``histmig`` version, the
    ``command``, its ``options`` as given (plain JSON data, the rules that ran among them),
    the ``inputs`` read (every file) and the ``output``, when it ``started`` (UTC, ISO 8601,
    to the second), its ``verdict`` line and ``exit_code``. Made by :func:`histmig.run.result.recorded`."""

    histmig: str
    command: str
    options: dict[str, Any]
    inputs: list[str]
    output: str | None
    started: str
    verdict: str
    exit_code: int

    @property
    def checks(self) -> bool:
        """Whether the command only says what would change (``audit``, ``check``)."""
        return self.command in ("audit", "check")

    def to_json(self, timestamp: bool = True) -> dict[str, Any]:
        """The ``run`` object of the JSON report; ``started`` only with ``timestamp``."""
        data = {
            "histmig": self.histmig,
            "command": self.command,
            "options": self.options,
            "inputs": self.inputs,
            "output": self.output,
        }
        return {**data, "started": self.started} if timestamp else data


_RULE, _CAUSE, _EVIDENCE, _CERTAINTY = (
    itemgetter(ChangeRow._fields.index(name)) for name in ("rule", "cause", "evidence", "certainty")
)


class Report:
    """Accumulates outcomes (:meth:`add`): counts; error and warning rows (one per bad
    record, kept in memory); change and finding rows (one per part, spilled,
    :class:`~histmig.report.rows.Spill`). :meth:`in_memory` makes a report whose rows stay in
    memory, to be sent from a worker and :meth:`merge`-d."""

    def __init__(
        self, changes: Spill | None = None, findings: Spill | None = None, readers: Spill | None = None
    ) -> None:
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
        self.digests: dict[tuple[str, str], str] = {}
        self.flagged = 0  # records unchanged and valid but with a finding of severity error
        self._last_calls_open = 0  # records with an HM407 finding not of a fragment
        self.run: RunInfo | None = None
        self._pieces: set[str] = set()
        self._open_ends: dict[str, list[tuple[str, str]]] = {}

    @classmethod
    def in_memory(cls) -> Report:
        """A report whose rows stay in memory, to be sent to another process."""
        return cls(Spill.in_memory(ChangeRow), Spill.in_memory(FindingRow), Spill.in_memory(ReaderRow))

    def add(self, outcome: Outcome) -> None:
        """Count ``outcome`` and keep its change and finding rows (:func:`change_rows`,
        :func:`finding_rows`) and its error and warning lines."""
        record = outcome.record
        self.counts["records_in"] += 1
        self.counts[outcome.status] += 1
        if outcome.digest is not None:
            self.digests[record.source, record.location] = outcome.digest
        changes = change_rows(outcome)
        if changes:
            place = (record.source, record.location, record.record_id)
            self._counted(self._changes.add([place + row for row in changes]))
        if outcome.status == "rejected":
            self._pieces.update(outcome.conversations)  # the calls it may answer, kept in the rejects
        if outcome.findings:
            place = (record.source, record.location, record.record_id)
            warned = sum(finding.severity == "warning" for finding in outcome.findings)
            if outcome.status == "unchanged" and not outcome.errors and warned < len(outcome.findings):
                self.flagged += 1
            self.counts["findings"] += len(outcome.findings) - warned
            self.counts["warnings"] += warned
            self._findings_by_rule.update(finding.code for finding in outcome.findings)
            if any(finding.code == FRONTIER and finding.certainty != "fragment" for finding in outcome.findings):
                self._last_calls_open += 1
            if any(finding.certainty == "fragment" for finding in outcome.findings):
                self.counts["fragments"] += 1
                self._pieces.update(outcome.conversations)
            elif outcome.status != "rejected":
                for name in outcome.conversations:
                    self._open_ends.setdefault(name, []).append((record.source, record.location))
            self._findings.add([place + row for row in finding_rows(outcome)])
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
        self._pieces |= other._pieces
        for name, places in other._open_ends.items():
            self._open_ends.setdefault(name, []).extend(places)
        self.digests.update(other.digests)
        self.flagged += other.flagged
        self._last_calls_open += other._last_calls_open

    def _continued(self) -> set[tuple[str, str]]:
        """The records (``(source, location)``) whose last response's calls are without results
        and that name a conversation (:attr:`~histmig.records.Outcome.conversations`) another
        record names too, a fragment (:func:`histmig.rules.pairing.fragment`: the next run's
        record, starting with their results) or another such record, or one of those calls a
        fragment answers (:func:`~histmig.rules.pairing.call_names`; two records leaving one
        call id open are not told apart from two histories reusing an id): pieces of a
        conversation stored over several records, whose calls the rest of it may answer. Told
        once every record is in (any order of records, any number of workers, the same)."""
        return {
            place
            for name, places in self._open_ends.items()
            if name in self._pieces or (len(places) > 1 and not name.startswith(CALL_NAME))
            for place in places
        }

    def answered(self) -> frozenset[str]:
        """The calls (:func:`~histmig.rules.pairing.call_names`) a record leaves open and a
        fragment answers: what :attr:`histmig.engine.Plan.answered` is given from a first
        pass."""
        return frozenset(name for name in self._open_ends if name.startswith(CALL_NAME) and name in self._pieces)

    @property
    def last_calls_open(self) -> int:
        """The records with calls of their last response without results (HM407) that are not
        :attr:`fragments`: under ``--unsafe-fixes`` without ``--conversation``, those whose
        calls stayed open as naming a conversation another record may continue
        (:meth:`histmig.engine.Plan.for_record`)."""
        return self._last_calls_open - len(self._continued())

    @property
    def fragments(self) -> int:
        """The records that look like pieces of a conversation stored over several records: those
        with a finding of certainty ``fragment`` (:func:`histmig.rules.pairing.fragment`), and
        those :meth:`_continued` tells."""
        return self.counts["fragments"] + len(self._continued())

    def add_unchanged(self, count: int) -> None:
        """Count ``count`` records that were unchanged, valid and without anything to say."""
        self.counts["records_in"] += count
        self.counts["unchanged"] += count

    def add_skipped(self, source: str, location: str, record_id: str | None, conversation: bool = False) -> None:
        """Record that the migrated row at ``location`` (its key) of ``source`` was not
        written: another client wrote it after histmig read it, and an UPDATE conditional on
        the value read leaves it as that client wrote it, or (``conversation``) wrote a row of
        its conversation, which is written whole or not at all. It moves from ``changed`` to
        ``skipped``, with an ``errors`` entry of status ``skipped``."""
        self.counts["changed"] -= 1
        self.counts["skipped"] += 1
        said = SKIPPED_WITH_CONVERSATION if conversation else SKIPPED
        self.errors.append(
            {"source": source, "location": location, "id": record_id, "status": "skipped", "errors": [said]}
        )

    def add_read_error(self, source: str, location: str, message: str) -> None:
        """Record that ``source`` could not be read past ``location`` (a truncated ``.gz``,
        an I/O error): what was read before is processed as usual."""
        self.counts["read_errors"] += 1
        self.errors.append(
            {"source": source, "location": location, "id": None, "status": "unreadable", "errors": [message]}
        )

    @property
    def finding_rows(self) -> int:
        """The findings, of either severity: a row each."""
        return sum(self._findings_by_rule.values())

    def findings_of(self, code: str) -> int:
        """The findings of the rule ``code``, of either severity."""
        return self._findings_by_rule[code]

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
        return Counter(
            {evidence_label(evidence, certainty): count for (evidence, certainty), count in self._by_evidence.items()}
        )

    def change_batches(self) -> Iterator[list[ChangeRow]]:
        """The change rows in the order they were added, a batch at a time."""
        self._flush()
        return self._changes.batches()

    def finding_batches(self) -> Iterator[list[FindingRow]]:
        """The finding rows in the order they were added, a batch at a time; those of the last
        response's calls of a record :meth:`_continued` tells are of certainty ``fragment``."""
        self._flush()
        continued = self._continued()
        if not continued:
            return self._findings.batches()
        return (
            [
                row._replace(certainty="fragment")
                if row.rule == FRONTIER and (row.source, row.location) in continued
                else row
                for row in batch
            ]
            for batch in self._findings.batches()
        )

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
        return bool(
            counts["changed"] or counts["rejected"] or counts["invalid"] or counts["findings"] or counts["read_errors"]
        )

    @property
    def failed(self) -> bool:
        """True when a record was rejected, a row skipped, a record the ``--target`` release
        cannot load was kept as it is (``invalid``: a run without ``--target`` counts none), or
        the input could not be read to its end (``convert``/``audit`` exit 1)."""
        return bool(
            self.counts["rejected"] or self.counts["skipped"] or self.counts["invalid"] or self.counts["read_errors"]
        )

    def summary(self) -> dict[str, Any]:
        """Counts, then parts by rule, by cause and by evidence, and findings by rule (each
        sorted by key): :func:`summary_of` this report's tallies; under ``check --reader``,
        then the ``reader`` release, how many records it loads and cannot load, and how many
        records each release is the oldest to load (``oldest_releases``, in release order,
        ``none`` last)."""
        self._flush()
        counts = {**self.counts, "fragments": self.fragments}
        summary = summary_of(counts, self._by_rule, self._by_cause, self._by_evidence, self._findings_by_rule)
        if self._reader is not None:
            oldest = sorted(
                self._oldest.items(), key=lambda item: (item[0] is None, release(item[0]) if item[0] else None)
            )
            summary.update(
                reader=self._reader,
                reader_loads=self._reader_loads[True],
                reader_cannot_load=self._reader_loads[False],
                oldest_releases={str(name or "none"): count for name, count in oldest},
            )
        return summary

    def json_head(self, timestamp: bool = True) -> dict[str, Any]:
        """The ``run`` (when known) and ``summary`` of the JSON report."""
        head = {"run": self.run.to_json(timestamp)} if self.run is not None else {}
        return {**head, "summary": self.summary()}

    def json_shape(self, timestamp: bool = False) -> Iterator[tuple[str, Any, bool]]:
        """The JSON report (README "Report"), its one shape, in order: each key with its
        value and whether the value is rows (``True``: an iterator of batches of row objects,
        for a renderer to stream; ``False``: the value itself). :meth:`to_json` and the JSON
        renderer (:mod:`histmig.report.json`) both follow it."""
        for key, value in self.json_head(timestamp).items():
            yield key, value, False
        yield "changes", ([json_row(row._asdict()) for row in batch] for batch in self.change_batches()), True
        yield "findings", ([json_row(row._asdict()) for row in batch] for batch in self.finding_batches()), True
        if self._reader is not None:
            yield "readers", ([json_row(row._asdict()) for row in batch] for batch in self.reader_batches()), True
        yield "errors", [json_row(row, "errors") for row in self.errors], False
        yield "warnings", [json_row(row, "warnings") for row in self.warnings], False

    def to_json(self, timestamp: bool = False) -> dict[str, Any]:
        """The whole report as the JSON report gives it (:meth:`json_shape`), without the
        start time unless ``timestamp``."""
        return {
            key: [row for batch in value for row in batch] if rows else value
            for key, value, rows in self.json_shape(timestamp)
        }


UNKNOWN_PART = "unknown-part"
"""The rule of a warning line of a part of an unknown ``part_kind`` carried unchanged (``check
--strict`` fails on it)."""


def warning_rule(line: str) -> str:
    """The rule a warning line of a record (:attr:`~histmig.records.Outcome.warnings`) is of, as
    its GitHub title and baseline entry name it: a :class:`~histmig.problems.Warned` line's (the
    code of a fix not applied to a conversation's layout, or ``conversation``), else
    :data:`UNKNOWN_PART`."""
    return line.rule if isinstance(line, Warned) else UNKNOWN_PART


def unknown_parts(report: Report) -> tuple[int, int]:
    """``(parts, records)``: the parts of an unknown ``part_kind`` (a newer release's) carried
    unchanged, a warning line each (:func:`warning_rule`), and the records holding them."""
    counted = [sum(warning_rule(line) == UNKNOWN_PART for line in row["warnings"]) for row in report.warnings]
    return sum(counted), sum(map(bool, counted))


def summary_label(report: Report, key: str) -> str:
    """How the text and Markdown summaries name a count: as :data:`COUNTS` does, but under
    ``audit`` and ``check``, which write nothing, ``changed`` is ``would change`` and
    ``rejected`` ``would be rejected``."""
    if report.run is not None and report.run.checks and key in ("changed", "rejected"):
        return "would change" if key == "changed" else "would be rejected"
    return key


def place(location: str) -> dict[str, Any]:
    """Where a record is, as numbers: ``line 12`` is ``{"line": 12}``, ``row 5``
    ``{"row": 5}``; ``after line 12`` (an input that ended early, read to line 12)
    ``{"after_line": 12}``; the whole of a document (``file``), a record given alone
    (``record``) or nothing read yet (``after the start``) no field; any other place (a
    database key) ``{"key": location}``."""
    after = location.startswith("after ")
    kind, _, number = location.removeprefix("after ").partition(" ")
    if kind in ("line", "row") and number.isdigit():
        return {f"after_{kind}" if after else kind: int(number)}
    if location in ("file", "record", "after the start"):
        return {}
    return {"key": location}


def json_row(row: dict[str, Any], lines: str | None = None) -> dict[str, Any]:
    """A report row (a change, finding, error or warning, as :class:`Report` keeps it) as the
    JSON report gives it: its ``location`` as :func:`place` numbers, right after ``source``,
    and its ``lines`` (``errors``, ``warnings``) as ``{"path", "message"}`` objects."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if key == "location":
            out.update(place(value))
        elif key == lines:
            out[key] = [dict(zip(("path", "message"), parts_of(line))) for line in value]
        else:
            out[key] = value
    return out


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
    return [
        (c.rule, c.message, c.part, c.before, c.after, c.cause, c.evidence, c.certainty, c.tool_call_id, c.removed)
        for c in ordered
    ]


def finding_rows(outcome: Outcome) -> list[tuple[Any, ...]]:
    """The finding rows of ``outcome`` without their place (the fields of
    :class:`~histmig.report.rows.FindingRow` after :data:`PLACE_FIELDS`), in the order of
    their places."""
    return [tuple(finding) for finding in sorted(outcome.findings, key=_position)]


def evidence_label(evidence: str, certainty: str) -> str:
    """How the summary names a kind of evidence: ``error-list (shape)``."""
    return f"{evidence} ({certainty})"


def summary_text(value: Any) -> str:
    """A summary value as the text and Markdown reports write it: a count as it is, a tally
    as ``key: count, ...`` (evidence by :func:`evidence_label`), ``-`` when empty."""
    if isinstance(value, dict):
        return ", ".join(f"{key}: {count}" for key, count in value.items()) or "-"
    if isinstance(value, list):
        return ", ".join(f"{evidence_label(row['evidence'], row['certainty'])}: {row['parts']}" for row in value) or "-"
    return str(value)


def summary_of(
    counts: Mapping[str, int],
    by_rule: Mapping[str, int],
    by_cause: Mapping[str, int],
    by_evidence: Mapping[tuple[str, str], int],
    findings_by_rule: Mapping[str, int],
) -> dict[str, Any]:
    """A report's summary (README "Report") from its tallies: ``counts`` (by the names of
    :data:`COUNTS`, a missing one 0; ``fragments`` when there are any), then edited parts by rule, by cause and
    by ``(evidence, certainty)`` (a list of ``{"evidence", "certainty", "parts"}`` objects, the
    JSON report's shape too), and findings by rule, each sorted by key.
    :meth:`Report.summary` and :func:`histmig.spark.summarize` both give it."""
    fragments = counts.get("fragments", 0)
    return {
        **{key: counts.get(key, 0) for key in COUNTS},
        **({"fragments": fragments} if fragments else {}),
        "parts_by_rule": dict(sorted(by_rule.items())),
        "parts_by_cause": dict(sorted(by_cause.items())),
        "parts_by_evidence": [
            {"evidence": evidence, "certainty": certainty, "parts": count}
            for (evidence, certainty), count in sorted(by_evidence.items())
        ],
        "findings_by_rule": dict(sorted(findings_by_rule.items())),
    }


def _position(change: Any) -> tuple[int, int]:
    """Where a change or finding is: its message, then its part (a message-level one first).
    Sorting by it is stable, so the changes to one part stay in the order they were made."""
    return (change.message, -1 if change.part is None else change.part)


def record_name(row: dict[str, Any] | ChangeRow | FindingRow | ReaderRow, shown: Callable[[str], str] = str) -> str:
    """``source:location`` and ``[id]`` when known and not the location's key value itself (a
    row whose key is its id, ``id=42``, says it once): how every line names a record; each of
    the three as ``shown`` gives it (:mod:`histmig.report.escape`: they come from paths and
    records), histmig's own ``:`` and brackets as they are."""
    source, location, id_ = (
        (row["source"], row["location"], row.get("id")) if isinstance(row, dict) else (row.source, row.location, row.id)
    )
    if not id_ or location.partition("=")[2] == id_:
        return f"{shown(source)}:{shown(location)}"
    return f"{shown(source)}:{shown(location)} [{shown(id_)}]"
