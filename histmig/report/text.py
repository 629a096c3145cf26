"""The text report (stderr by default): a line per change, finding, error and warning (the
change and finding lines only up to :data:`~histmig.report.DETAIL_ROWS` of them, unless
asked), then the summary as a table."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

import orjson
from rich.console import COLOR_SYSTEMS, Console
from rich.markup import escape
from rich.style import Style
from rich.table import Table

from histmig.report import DETAIL_ROWS, Rendering, Report, record_name, summary_label, summary_text
from histmig.report.escape import terminal
from histmig.report.rows import ChangeRow, FindingRow, ReaderRow


def render(report: Report, stream: TextIO, how: Rendering = Rendering()) -> None:
    """Write one line per change and finding, then per error and warning line, then (``check
    --reader``) one per record the reader release cannot load, with the releases that can,
    to ``stream``, then the summary as a rich table.

    The change and finding lines are left out with ``how.detail`` ``summary``, and with
    ``auto`` past :data:`~histmig.report.DETAIL_ROWS` of them (a line says so, and how to see
    them); error and warning lines are always written. Under ``audit`` and ``check`` the
    summary says what *would* change. The lines are plain writes, a batch of rows at a time,
    so memory stays flat whatever the number of rows; rule codes and statuses are styled only
    when rich shows colour on ``stream`` (a terminal; ``NO_COLOR`` drops the colours, not the
    bold). Record names, evidence and messages are shown inert
    (:func:`histmig.report.escape.terminal`: a control character, line separator or bidi
    override as its code); nothing else of theirs is interpreted (no markup, no emoji codes).
    """
    console = Console(file=stream, highlight=False, soft_wrap=True, emoji=False)
    paint = _painter(console)
    rows = sum(report.by_rule.values()) + report.finding_rows
    if how.detail == "full" or (how.detail == "auto" and rows <= DETAIL_ROWS):
        for batch in report.change_batches():
            stream.write("".join(_change_line(row, paint) for row in batch))
        for found in report.finding_batches():
            stream.write("".join(_finding_line(row, paint) for row in found))
    elif how.detail == "auto":
        stream.write(
            f"({rows:,} change and finding lines not shown, more than {DETAIL_ROWS:,}: --report-detail full "
            "shows them, --report-format json lists them)\n"
        )
    warning = paint("warning", "yellow")
    for row in report.errors:
        label = paint(row["status"], "yellow" if row["status"] in ("invalid", "skipped") else "red")
        stream.writelines(f"{record_name(row, terminal)}: {label}: {terminal(line)}\n" for line in row["errors"])
    for row in report.warnings:
        stream.writelines(f"{record_name(row, terminal)}: {warning}: {terminal(line)}\n" for line in row["warnings"])
    for readers in report.reader_batches():
        stream.write("".join(_reader_line(row, paint) for row in readers if not row.loads))
    counts = Table(title="histmig summary", show_header=False)
    for key, value in report.summary().items():
        counts.add_row(summary_label(report, key), escape(terminal(summary_text(value))))
    console.print(counts)


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


def _where(row: ChangeRow | FindingRow) -> str:
    part = "" if row.part is None else f".parts[{row.part}]"
    return f"{record_name(row, terminal)}: messages[{row.message}]{part}"


def _change_line(row: ChangeRow, paint: Callable[[str, str], str]) -> str:
    """One change row as a line, ending in a newline."""
    cause = f" cause={row.cause}" if row.cause else ""
    assigned = f" tool_call_id={terminal(row.tool_call_id)}" if row.tool_call_id else ""
    removed = f" removed={terminal(orjson.dumps(row.removed).decode())}" if row.removed is not None else ""
    return (
        f"{_where(row)} {paint(row.rule, 'bold')} {row.transition}{cause}{assigned} "
        f"evidence={terminal(row.evidence)} ({row.certainty}){removed}\n"
    )


def _finding_line(row: FindingRow, paint: Callable[[str, str], str]) -> str:
    """One finding row as a line, ending in a newline: ``found`` for an error, ``warning`` for
    a warning."""
    label = "warning" if row.severity == "warning" else "found"
    return (
        f"{_where(row)} {paint(row.rule, 'bold')} {paint(label, 'yellow')}: {terminal(row.text)} "
        f"evidence={terminal(row.evidence)} ({row.certainty})\n"
    )


def _reader_line(row: ReaderRow, paint: Callable[[str, str], str]) -> str:
    """A record the reader release cannot load, and the releases that can, as a line ending
    in a newline."""
    return (
        f"{record_name(row, terminal)}: {paint('not loaded', 'yellow')}: {row.reader} cannot load it; {row.words()}\n"
    )
