"""The Markdown report, for CI job summaries (a GitHub job summary takes at most 1 MiB): a
pass/fail line first, the summary table, then errors, warnings, findings and changes, then
(``check --reader``) which releases load each record, as many as fit in :data:`MAX_BYTES`,
and how many were left out."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TextIO

import orjson

from histmig.report import Rendering, Report, record_name, summary_label, summary_text
from histmig.report.escape import markdown
from histmig.report.rows import ChangeRow, FindingRow, ReaderRow

MAX_BYTES = 1 << 20
"""The most bytes (UTF-8) a Markdown report holds: what a GitHub Actions job summary takes."""

_ENDING = 1024
"""Bytes kept back for the notes saying what was left out (five at most, short)."""


class _Budget:
    """Writes lines to ``stream`` while they fit in :data:`MAX_BYTES` less :data:`_ENDING`
    bytes (UTF-8), the notes of what was left out in the whole of it; counts the lines that
    did not fit (``left``)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream, self.used, self.left = stream, 0, 0

    def write(self, text: str, note: bool = False) -> bool:
        """Write ``text`` whole if it fits (a ``note`` in the bytes kept back for notes), and
        say whether it did."""
        size = len(text.encode())
        if self.used + size > (MAX_BYTES if note else MAX_BYTES - _ENDING):
            return False
        self.stream.write(text)
        self.used += size
        return True

    def section(self, heading: str, lines: Iterable[str], total: int) -> None:
        """``heading`` and as many of ``lines`` (``total`` of them) as fit; a section none
        of whose lines fit is left out whole, and counted."""
        shown = 0
        for line in lines:
            if not self.write((heading if shown == 0 else "") + line):
                break
            shown += 1
        self.left += total - shown
        if 0 < shown < total:
            self.write(f"\n_{total - shown:,} more not shown here._\n", note=True)


def render(report: Report, stream: TextIO, how: Rendering = Rendering()) -> None:
    """Write the report as a Markdown document to ``stream``: a pass/fail line and the
    verdict (when the run is known), the summary in full, then the error, warning, finding
    and change lines (none with ``how.detail`` ``summary``) as long as the document stays
    within :data:`MAX_BYTES`, then how many lines were left out. The rows are read a batch at
    a time, so memory stays flat. Text from records and paths is escaped
    (:func:`histmig.report.escape.markdown`)."""
    out = _Budget(stream)
    run = report.run
    if run is None:
        out.write("# histmig report\n\n")
    else:
        mark = "✅ pass" if run.exit_code == 0 else f"❌ fail (exit {run.exit_code})"
        out.write(f"# {mark}: histmig {run.command}\n\n{markdown(run.verdict)}\n\n")
    lines = ["| summary | value |", "| --- | --- |"]
    for key, value in report.summary().items():
        lines.append(f"| {summary_label(report, key)} | {markdown(summary_text(value))} |")
    out.write("\n".join(lines) + "\n")
    if how.detail != "summary":
        errors = [
            f"- {record_name(row, markdown)} ({row['status']}): {markdown(line)}\n"
            for row in report.errors
            for line in row["errors"]
        ]
        out.section("\n## Errors\n\n", errors, len(errors))
        warnings = [
            f"- {record_name(row, markdown)}: {markdown(line)}\n" for row in report.warnings for line in row["warnings"]
        ]
        out.section("\n## Warnings\n\n", warnings, len(warnings))
        out.section("\n## Findings\n\n", _lines(report.finding_batches(), _finding_line), report.finding_rows)
        changes_heading = (
            "\n## Changes\n\n| record | message | part | rule | before -> after | cause | tool_call_id | evidence |\n"
            "| --- | --- | --- | --- | --- | --- | --- | --- |\n"
        )
        out.section(changes_heading, _lines(report.change_batches(), _change_line), sum(report.by_rule.values()))
        if report.reader is not None:
            readers_heading = (
                f"\n## Readers\n\n| record | {report.reader} loads it | releases that load it |\n| --- | --- | --- |\n"
            )
            out.section(
                readers_heading,
                _lines(report.reader_batches(), _reader_line),
                report.summary()["reader_loads"] + report.summary()["reader_cannot_load"],
            )
    if out.left:
        out.write(
            f"\n_{out.left:,} lines are not in this report: it is kept within {MAX_BYTES // 1024:,} KiB, what a "
            "CI job summary takes (the text report has them, the JSON report lists them all)._\n",
            note=True,
        )
    elif how.detail == "summary":
        out.write("\n_Summary only: the text and JSON reports list every change._\n", note=True)


def _lines(
    batches: Iterator[list[ChangeRow]] | Iterator[list[FindingRow]] | Iterator[list[ReaderRow]],
    line: Callable[[Any], str],
) -> Iterator[str]:
    for batch in batches:
        yield from map(line, batch)


def _change_line(row: ChangeRow) -> str:
    """One change row as a line of the changes table, ending in a newline."""
    part = "" if row.part is None else row.part
    removed = f" (removed: {markdown(orjson.dumps(row.removed).decode())})" if row.removed is not None else ""
    return (
        f"| {record_name(row, markdown)} | {row.message} | {part} | {row.rule} | {row.transition}{removed} "
        f"| {row.cause or ''} | {markdown(row.tool_call_id or '')} | {markdown(row.evidence)} ({row.certainty}) |\n"
    )


def _finding_line(row: FindingRow) -> str:
    """One finding row as a list item, ending in a newline."""
    part = "" if row.part is None else f".parts[{row.part}]"
    warning = " (warning)" if row.severity == "warning" else ""
    return (
        f"- {record_name(row, markdown)} messages[{row.message}]{part} {row.rule}{warning}: {markdown(row.text)} "
        f"({markdown(row.evidence)}, {row.certainty})\n"
    )


def _reader_line(row: ReaderRow) -> str:
    """One readers row as a line of the readers table, ending in a newline."""
    return f"| {record_name(row, markdown)} | {'yes' if row.loads else 'no'} | {row.words()} |\n"
