"""The diff report: every change and every rejected record, a summary, three renderers.

JSON shape (documented in README "Report"): ``{"summary": {...}, "changes": [...],
"errors": [...], "warnings": [...]}``. ``summary`` reconciles ``records_in == changed +
unchanged + rejected``; ``invalid`` counts records that need no rule yet fail validation
(``check``); ``read_errors`` counts inputs that ended early or could not be read on.
"""

from __future__ import annotations

import io
import pickle
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from operator import itemgetter
from typing import IO, Any, TextIO

import orjson
from rich.console import COLOR_SYSTEMS, Console
from rich.markup import escape
from rich.style import Style
from rich.table import Table

from histmig.pipeline import Outcome

_COUNTS = ("records_in", "changed", "unchanged", "rejected", "invalid", "warnings", "read_errors")
_ROW_KEYS = ("source", "location", "id", "rule", "message", "part", "before", "after", "cause", "evidence", "certainty")
"""The keys of a change row (README "Report"), in order."""
_ROWS_PER_BATCH = 4096
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe(text: str) -> str:
    """``text`` with control characters shown as ``\\xNN`` and rich markup escaped, for a
    terminal: record ids and error messages come from record content."""
    return escape(_visible(text))


def _visible(text: str) -> str:
    """``text`` with control characters (but tab and newline) shown as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class Report:
    """Accumulates pipeline outcomes (:meth:`add`) and renders them.

    Counts are plain ints; error and warning rows are kept in memory (one per bad record);
    change rows, one per edited part and so as many as the archive's parts, are spilled in
    batches of :data:`_ROWS_PER_BATCH` to an anonymous temporary file (``spill``: another
    file, see :meth:`in_memory`) and read back when rendered, so memory stays flat whatever
    the archive size.
    """

    def __init__(self, spill: IO[bytes] | None = None) -> None:
        self.counts = Counter(dict.fromkeys(_COUNTS, 0))
        self._by_rule: Counter[str] = Counter()
        self._by_cause: Counter[str] = Counter()
        self._by_evidence: Counter[tuple[str, str]] = Counter()
        self._changes: IO[bytes] | None = spill
        self._rows: list[tuple[Any, ...]] = []
        self.errors: list[dict[str, Any]] = []
        self.warnings: list[dict[str, Any]] = []

    def add(self, outcome: Outcome) -> None:
        """Count ``outcome`` and keep its change rows and error lines."""
        record = outcome.record
        self.counts["records_in"] += 1
        self.counts[outcome.status] += 1
        changes = outcome.changes
        if outcome.status != "rejected" and changes:
            place = (record.source, record.location, record.record_id)
            self._rows += [place + change.as_row() for change in (sorted(changes, key=_position) if len(changes) > 1 else changes)]
            if len(self._rows) >= _ROWS_PER_BATCH:
                self._flush()
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

    def _flush(self) -> None:
        """Count the change rows gathered so far by rule, cause and evidence, and spill them
        as one pickled list."""
        if self._rows:
            rows = self._rows
            self._by_rule.update(map(itemgetter(3), rows))
            self._by_cause.update(filter(None, map(itemgetter(8), rows)))
            self._by_evidence.update(zip(map(itemgetter(9), rows), map(itemgetter(10), rows)))
            spill = self._changes = self._changes or tempfile.TemporaryFile()
            pickle.dump(self._rows, spill, pickle.HIGHEST_PROTOCOL)
            self._rows = []

    def __getstate__(self) -> dict[str, Any]:
        self._flush()
        return self.__dict__

    @classmethod
    def in_memory(cls) -> Report:
        """A report whose change rows stay in memory, to be sent to another process and
        :meth:`merge`-d there (one chunk's report)."""
        return cls(io.BytesIO())

    def merge(self, other: Report) -> None:
        """Add ``other``'s counts, change rows (after this report's own) and error and
        warning lines to this report. ``other`` is an :meth:`in_memory` report."""
        other._flush()
        self.counts.update(other.counts)
        self._by_rule.update(other._by_rule)
        self._by_cause.update(other._by_cause)
        self._by_evidence.update(other._by_evidence)
        rows = other._changes.getvalue() if isinstance(other._changes, io.BytesIO) else b""
        if rows:
            self._flush()
            self._changes = self._changes or tempfile.TemporaryFile()
            self._changes.write(rows)
        self.errors.extend(other.errors)
        self.warnings.extend(other.warnings)

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

    def iter_changes(self) -> Iterator[dict[str, Any]]:
        """The change rows in the order they were added, each a dict in the report's
        ``changes`` shape (README "Report"), read back from the spill file one at a time."""
        for batch in self._change_batches():
            yield from batch

    def _change_batches(self) -> Iterator[list[dict[str, Any]]]:
        """The change rows as :meth:`iter_changes` gives them, one spilled batch (at most
        :data:`_ROWS_PER_BATCH` rows, never empty) at a time."""
        self._flush()
        if self._changes is None:
            return
        self._changes.flush()
        end = self._changes.tell()
        self._changes.seek(0)
        try:
            while self._changes.tell() < end:
                batch = pickle.load(self._changes)
                if batch:
                    yield [dict(zip(_ROW_KEYS, row)) for row in batch]
        finally:
            self._changes.seek(end)

    @property
    def changes(self) -> list[dict[str, Any]]:
        """Every change row as a list (see :meth:`iter_changes`, which streams them)."""
        return list(self.iter_changes())

    def add_unchanged(self, count: int) -> None:
        """Count ``count`` records that were unchanged, valid and without warnings."""
        self.counts["records_in"] += count
        self.counts["unchanged"] += count

    def add_read_error(self, source: str, location: str, message: str) -> None:
        """Record that ``source`` could not be read past ``location`` (a truncated ``.gz``,
        an I/O error): what was read before is processed as usual."""
        self.counts["read_errors"] += 1
        self.errors.append({"source": source, "location": location, "id": None, "status": "unreadable", "errors": [message]})

    @property
    def needs_attention(self) -> bool:
        """True when any record changed, was rejected or is invalid (``check`` exits 1)."""
        return bool(self.counts["changed"] or self.counts["rejected"] or self.counts["invalid"] or self.counts["read_errors"])

    @property
    def failed(self) -> bool:
        """True when a record was rejected or the input could not be read to its end
        (``convert``/``audit`` exit 1)."""
        return bool(self.counts["rejected"] or self.counts["read_errors"])

    def summary(self) -> dict[str, Any]:
        """Counts, then parts by rule, by cause and by evidence (each sorted by key)."""
        return {
            **{key: self.counts[key] for key in _COUNTS},
            "parts_by_rule": dict(sorted(self.by_rule.items())),
            "parts_by_cause": dict(sorted(self.by_cause.items())),
            "parts_by_evidence": dict(sorted(self.by_evidence.items())),
        }

    def to_json(self) -> dict[str, Any]:
        """The whole report as plain JSON data."""
        return {"summary": self.summary(), "changes": self.changes, "errors": self.errors, "warnings": self.warnings}

    def render_text(self, stream: TextIO) -> None:
        """Write one line per change, then per error and warning line, to ``stream``, then
        the summary as a rich table.

        The lines are plain writes, a batch of change rows at a time, so memory stays flat
        whatever the number of rows; rule codes and statuses are styled only when rich shows
        colour on ``stream`` (a terminal; ``NO_COLOR`` drops the colours, not the bold).
        Record names, evidence and messages have their control characters shown as
        ``\\xNN``; nothing else of theirs is interpreted (no markup, no emoji codes).
        """
        console = Console(file=stream, highlight=False, soft_wrap=True)
        paint = _painter(console)
        for batch in self._change_batches():
            stream.write("".join(_text_line(row, paint) for row in batch))
        warning = paint("warning", "yellow")
        for row in self.errors:
            label = paint(row["status"], "yellow" if row["status"] == "invalid" else "red")
            stream.writelines(f"{_visible(_name(row))}: {label}: {_visible(line)}\n" for line in row["errors"])
        for row in self.warnings:
            stream.writelines(f"{_visible(_name(row))}: {warning}: {_visible(line)}\n" for line in row["warnings"])
        counts = Table(title="histmig summary", show_header=False)
        for key, value in self.summary().items():
            if isinstance(value, dict):
                value = ", ".join(f"{k}: {v}" for k, v in value.items()) or "-"
            counts.add_row(key, safe(str(value)))
        console.print(counts)

    def render_json(self, stream: TextIO) -> None:
        """Write the report as JSON to ``stream``: the same text as
        ``orjson.dumps(self.to_json(), option=orjson.OPT_INDENT_2) + b"\\n"`` decoded (the
        README "Report" shape, two-space indent), built a batch of change rows at a time
        instead of as one value, so memory stays flat whatever the number of rows."""
        stream.write(f"{{\n  \"summary\": {_indented(self.summary(), 1)},\n  \"changes\": [")
        separator = ""
        for batch in self._change_batches():
            rows = orjson.dumps(batch, option=orjson.OPT_INDENT_2).decode()
            stream.write(separator + rows[1:-2].replace("\n", "\n  "))
            separator = ","
        stream.write("\n  ]" if separator else "]")
        stream.write(f",\n  \"errors\": {_indented(self.errors, 1)},\n  \"warnings\": {_indented(self.warnings, 1)}\n}}\n")

    def render_markdown(self, stream: TextIO) -> None:
        """Write the report as a Markdown document to ``stream``: a summary table, a table
        of changes (written a batch of rows at a time, so memory stays flat), then the
        errors and warnings as lists. Control characters become spaces and ``|`` is escaped."""
        lines = ["# histmig report", "", "| summary | value |", "| --- | --- |"]
        for key, value in self.summary().items():
            if isinstance(value, dict):
                value = ", ".join(f"{k}: {v}" for k, v in value.items()) or "-"
            lines.append(f"| {key} | {_md(str(value))} |")
        lines += ["", "| record | message | part | rule | before -> after | cause | evidence |", "| --- | --- | --- | --- | --- | --- | --- |"]
        stream.write("\n".join(lines) + "\n")
        for batch in self._change_batches():
            stream.write("".join(_md_line(row) for row in batch))
        if self.errors:
            stream.write("\n## Errors\n\n")
            stream.writelines(f"- {_md(_name(row))} ({row['status']}): {_md(line)}\n" for row in self.errors for line in row["errors"])
        if self.warnings:
            stream.write("\n## Warnings\n\n")
            stream.writelines(f"- {_md(_name(row))}: {_md(line)}\n" for row in self.warnings for line in row["warnings"])


def _position(change: Any) -> tuple[int, int]:
    """Where a change is: its message, then its part (a message-level change first). Sorting
    by it is stable, so the changes to one part stay in the order the rules made them."""
    return (change.message, -1 if change.part is None else change.part)


def _painter(console: Console) -> Callable[[str, str], str]:
    """``paint(text, style)``: ``text`` wrapped in the ANSI codes of the rich ``style`` when
    ``console`` shows colour (its colour system, without colours under ``NO_COLOR``), else
    ``text`` unchanged."""
    if console.color_system is None:
        return lambda text, style: text
    system = COLOR_SYSTEMS[console.color_system]

    def paint(text: str, style: str) -> str:
        parsed = Style.parse(style)
        return (parsed.without_color if console.no_color else parsed).render(text, color_system=system)

    return paint


def _text_line(row: dict[str, Any], paint: Callable[[str, str], str]) -> str:
    """One change row as a line of the text report, ending in a newline."""
    part = "" if row["part"] is None else f".parts[{row['part']}]"
    cause = f" cause={row['cause']}" if row["cause"] else ""
    return (
        f"{_visible(_name(row))}: messages[{row['message']}]{part} {paint(row['rule'], 'bold')} "
        f"{row['before']} -> {row['after']}{cause} evidence={_visible(row['evidence'])} ({row['certainty']})\n"
    )


def _md_line(row: dict[str, Any]) -> str:
    """One change row as a line of the Markdown changes table, ending in a newline."""
    part = "" if row["part"] is None else row["part"]
    return (
        f"| {_md(_name(row))} | {row['message']} | {part} | {row['rule']} | {row['before']} -> {row['after']} "
        f"| {row['cause'] or ''} | {_md(row['evidence'])} ({row['certainty']}) |\n"
    )


def _indented(value: Any, level: int) -> str:
    """``value`` as two-space-indented JSON text, to be placed ``level`` levels deep."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode().replace("\n", "\n" + "  " * level)


def _name(row: dict[str, Any]) -> str:
    suffix = f" [{row['id']}]" if row.get("id") else ""
    return f"{row['source']}:{row['location']}{suffix}"


def _md(text: str) -> str:
    return _CONTROL.sub(" ", text).replace("|", "\\|")
