"""The Markdown report: a summary table, a table of changes, then findings, errors and warnings
as lists, then (``check --reader``) a table of which releases load each record."""

from __future__ import annotations

import re
from typing import TextIO

from histmig.report import Report, record_name
from histmig.report.rows import ChangeRow, FindingRow

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def render(report: Report, stream: TextIO) -> None:
    """Write the report as a Markdown document to ``stream``, the rows a batch at a time (so
    memory stays flat). Control characters become spaces and ``|`` is escaped."""
    lines = ["# histmig report", "", "| summary | value |", "| --- | --- |"]
    for key, value in report.summary().items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}: {v}" for k, v in value.items()) or "-"
        lines.append(f"| {key} | {_md(str(value))} |")
    lines += ["", "| record | message | part | rule | before -> after | cause | evidence |", "| --- | --- | --- | --- | --- | --- | --- |"]
    stream.write("\n".join(lines) + "\n")
    for batch in report.change_batches():
        stream.write("".join(_change_line(row) for row in batch))
    heading = "\n## Findings\n\n"
    for batch in report.finding_batches():
        stream.write(heading + "".join(_finding_line(row) for row in batch))
        heading = ""
    if report.errors:
        stream.write("\n## Errors\n\n")
        stream.writelines(f"- {_md(record_name(row))} ({row['status']}): {_md(line)}\n" for row in report.errors for line in row["errors"])
    if report.warnings:
        stream.write("\n## Warnings\n\n")
        stream.writelines(f"- {_md(record_name(row))}: {_md(line)}\n" for row in report.warnings for line in row["warnings"])
    heading = f"\n## Readers\n\n| record | {report.reader} loads it | releases that load it |\n| --- | --- | --- |\n"
    for batch in report.reader_batches():
        stream.write(heading + "".join(f"| {_md(record_name(row))} | {'yes' if row.loads else 'no'} | {row.words()} |\n" for row in batch))
        heading = ""


def _change_line(row: ChangeRow) -> str:
    """One change row as a line of the changes table, ending in a newline."""
    part = "" if row.part is None else row.part
    return (
        f"| {_md(record_name(row))} | {row.message} | {part} | {row.rule} | {row.before} -> {row.after} "
        f"| {row.cause or ''} | {_md(row.evidence)} ({row.certainty}) |\n"
    )


def _finding_line(row: FindingRow) -> str:
    """One finding row as a list item, ending in a newline."""
    part = "" if row.part is None else f".parts[{row.part}]"
    return f"- {_md(record_name(row))} messages[{row.message}]{part} {row.rule}: {_md(row.text)} ({_md(row.evidence)}, {row.certainty})\n"


def _md(text: str) -> str:
    return _CONTROL.sub(" ", text).replace("|", "\\|")
