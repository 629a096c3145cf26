"""The GitHub Actions report (``--report-format github``): one workflow command a line, as
ruff's ``--output-format github`` writes them, so each finding is an annotation on the run and,
for a file in the repository, on its line.

``::error file=chats.jsonl,line=12,title=histmig HM406::messages[1].parts[0] tool-call 'w' (c1)
has no result``: ``error`` for what fails ``check`` (a change a record needs, a finding of
severity ``error``, an invalid or rejected record), ``warning`` for what does not (HM407, a
part of an unknown ``part_kind``, a fix not applied to a conversation's layout, titled by its
rule, a skipped row); under ``convert`` a change is a ``notice``.
A JSONL record names its ``line``; a Parquet row, a ``.json`` document and a database row
name no line, the message says the row (a database row: its table and key, and no ``file``,
the database being no file of the repository). Values are escaped as workflow commands
require: ``%``, CR and LF in the message, and ``:`` and ``,`` too in a property; any other
control character (an escape sequence in a file name) is shown as its code. Entries of
the run's baseline (``check --baseline``) are left out: only what is new is annotated.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, TextIO

from histmig.report import UNKNOWN_PART, Rendering, Report, warning_rule
from histmig.report.escape import terminal
from histmig.report.rows import ChangeRow, FindingRow
from histmig.rules.base import ABSENT_PART

_LINE = re.compile(r"line (\d+)\Z")


def _message(text: str) -> str:
    """``text`` as a workflow command's message: ``%``, CR and LF escaped as GitHub reads them,
    and every other control or invisible character shown as its code (:func:`terminal`): a log
    is read on a terminal too, and an escape sequence in a file name or an id would act there."""
    return terminal(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _property(text: str) -> str:
    return _message(text).replace(":", "%3A").replace(",", "%2C")


def command(level: str, source: str, location: str, record_id: str | None, title: str, text: str) -> str:
    """One workflow command (a line): ``::LEVEL file=…,line=…,title=…::MESSAGE`` for the
    record at ``location`` of ``source``."""
    named = f" [{record_id}]" if record_id else ""
    line = _LINE.match(location)
    if "=" in location:  # a database row, named by its key: the table and key go in the message
        where, text = "", f"{source} {location}{named}: {text}"
    elif line is not None:
        where, text = f"file={_property(source)},line={line.group(1)},", f"{location}{named}: {text}"
    else:
        where, text = f"file={_property(source)},", f"{location}{named}: {text}"
    return f"::{level} {where}title={_property(title)}::{_message(text)}\n"


def render(report: Report, stream: TextIO, how: Rendering = Rendering()) -> None:
    """Write one workflow command per change, finding, error and warning line of ``report``
    to ``stream``, but those of ``how.baseline`` (see the module docstring). The rows are
    read a batch at a time, so memory stays flat."""
    from histmig.report.baseline import line_entry, row_entry

    known = Counter(entry.key for entry in how.baseline)

    def new(entry: Any) -> bool:
        if known[entry.key] > 0:
            known[entry.key] -= 1
            return False
        return True

    checking = report.run is None or report.run.command == "check"
    change = "error" if checking else "notice"
    for batch in report.change_batches():
        stream.writelines(_row(change, row) for row in batch if new(row_entry(report, row)))
    for found in report.finding_batches():
        stream.writelines(
            _row("warning" if finding.severity == "warning" else "error", finding)
            for finding in found
            if finding.severity == "warning" or new(row_entry(report, finding))
        )
    for row in report.errors:
        level = "warning" if row["status"] == "skipped" else "error"
        for line in row["errors"]:
            if level == "warning" or new(line_entry(report, row, row["status"], line)):
                stream.write(
                    command(level, row["source"], row["location"], row.get("id"), f"histmig {row['status']}", line)
                )
    for row in report.warnings:
        for line in row["warnings"]:
            rule = warning_rule(line)
            if rule != UNKNOWN_PART or new(line_entry(report, row, rule, line)):
                title = "histmig unknown part" if rule == UNKNOWN_PART else f"histmig {rule}"
                stream.write(command("warning", row["source"], row["location"], row.get("id"), title, line))


def _row(level: str, row: ChangeRow | FindingRow) -> str:
    place = f"messages[{row.message}]" + ("" if row.part is None else f".parts[{row.part}]")
    if isinstance(row, FindingRow):
        said = row.text
    elif row.before == ABSENT_PART:
        said = f"convert adds a {row.after} part (evidence {row.evidence})"
    elif row.after == ABSENT_PART:
        said = f"convert removes this {row.before} (evidence {row.evidence})"
    else:
        what = row.transition if row.before != row.after else f"this {row.before}"
        said = f"convert rewrites {what} (evidence {row.evidence})"
    return command(level, row.source, row.location, row.id, f"histmig {row.rule}", f"{place}: {said}")
