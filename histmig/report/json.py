"""The JSON report (README "Report"), streamed a batch of rows at a time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple, TextIO

import orjson

from histmig.report import Report


def render(report: Report, stream: TextIO) -> None:
    """Write the report as JSON to ``stream``: the same text as
    ``orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2) + b"\\n"`` decoded (two-space
    indent), built a batch of rows at a time instead of as one value, so memory stays flat
    whatever the number of rows."""
    stream.write(f"{{\n  \"summary\": {_indented(report.summary(), 1)},\n")
    _rows(stream, "changes", report.change_batches())
    _rows(stream, "findings", report.finding_batches())
    if report.reader is not None:
        _rows(stream, "readers", report.reader_batches())
    stream.write(f"  \"errors\": {_indented(report.errors, 1)},\n  \"warnings\": {_indented(report.warnings, 1)}\n}}\n")


def _rows(stream: TextIO, key: str, batches: Iterator[list[NamedTuple]]) -> None:
    """``"key": [rows],`` with the rows of ``batches``, each an object, two-space indented."""
    stream.write(f"  \"{key}\": [")
    separator = ""
    for batch in batches:
        rows = orjson.dumps([row._asdict() for row in batch], option=orjson.OPT_INDENT_2).decode()
        stream.write(separator + rows[1:-2].replace("\n", "\n  "))
        separator = ","
    stream.write("\n  ],\n" if separator else "],\n")


def _indented(value: Any, level: int) -> str:
    """``value`` as two-space-indented JSON text, to be placed ``level`` levels deep."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode().replace("\n", "\n" + "  " * level)
