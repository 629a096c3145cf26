"""The JSON report (README "Report"), streamed a batch of rows at a time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TextIO

import orjson

from histmig.report import Rendering, Report


def render(report: Report, stream: TextIO, how: Rendering = Rendering()) -> None:
    """Write the report as JSON to ``stream``: the same text as ``orjson.dumps(
    report.to_json(how.timestamp), option=orjson.OPT_INDENT_2) + b"\\n"`` decoded (two-space
    indent), built a batch of rows at a time (:meth:`~histmig.report.Report.json_shape`)
    instead of as one value, so memory stays flat whatever the number of rows. Every row is
    given whatever ``how.detail`` says: the JSON report is the complete record."""
    sections = list(report.json_shape(how.timestamp))
    stream.write("{\n")
    for n, (key, value, rows) in enumerate(sections, 1):
        stream.write(f'  "{key}": ')
        if rows:
            _rows(stream, value)
        else:
            stream.write(_indented(value, 1))
        stream.write(",\n" if n < len(sections) else "\n")
    stream.write("}\n")


def _rows(stream: TextIO, batches: Iterator[list[dict[str, Any]]]) -> None:
    """``[rows]`` with the row objects of ``batches``, two-space indented one level deep."""
    stream.write("[")
    separator = ""
    for batch in batches:
        rows = orjson.dumps(batch, option=orjson.OPT_INDENT_2).decode()
        stream.write(separator + rows[1:-2].replace("\n", "\n  "))
        separator = ","
    stream.write("\n  ]" if separator else "]")


def _indented(value: Any, level: int) -> str:
    """``value`` as two-space-indented JSON text, to be placed ``level`` levels deep."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode().replace("\n", "\n" + "  " * level)
