"""The JSON report (README "Report"), streamed a batch of rows at a time."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, TextIO

import orjson

from histmig.report import Rendering, Report, json_row


def render(report: Report, stream: TextIO, how: Rendering = Rendering()) -> None:
    """Write the report as JSON to ``stream``: the same text as ``orjson.dumps(
    report.to_json(how.timestamp), option=orjson.OPT_INDENT_2) + b"\\n"`` decoded (two-space
    indent), built a batch of rows at a time instead of as one value, so memory stays flat
    whatever the number of rows. Every row is given whatever ``how.detail`` says: the JSON
    report is the complete record."""
    stream.write("{\n")
    for key, value in report.json_head(how.timestamp).items():
        stream.write(f'  "{key}": {_indented(value, 1)},\n')
    _rows(stream, "changes", report.change_batches())
    _rows(stream, "findings", report.finding_batches())
    if report.reader is not None:
        _rows(stream, "readers", report.reader_batches())
    errors = [json_row(row, "errors") for row in report.errors]
    warnings = [json_row(row, "warnings") for row in report.warnings]
    stream.write(f'  "errors": {_indented(errors, 1)},\n  "warnings": {_indented(warnings, 1)}\n}}\n')


def _rows(stream: TextIO, key: str, batches: Iterator[Sequence[NamedTuple]]) -> None:
    """``"key": [rows],`` with the rows of ``batches``, each an object, two-space indented."""
    stream.write(f'  "{key}": [')
    separator = ""
    for batch in batches:
        rows = orjson.dumps([json_row(row._asdict()) for row in batch], option=orjson.OPT_INDENT_2).decode()
        stream.write(separator + rows[1:-2].replace("\n", "\n  "))
        separator = ","
    stream.write("\n  ],\n" if separator else "],\n")


def _indented(value: Any, level: int) -> str:
    """``value`` as two-space-indented JSON text, to be placed ``level`` levels deep."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode().replace("\n", "\n" + "  " * level)
