"""JSONL sources: ``.jsonl``/``.ndjson`` (optionally gzipped) and stdin, one record a line.

A record is either a bare history array or an object whose messages field is
auto-detected (histmig.records). Blank lines are not records: they are carried to the
output as they are and not counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from histmig.records import Record


def read_lines(stream: BinaryIO, source: str) -> Iterator[Record | bytes]:
    """Yield a :class:`Record` per non-blank line of ``stream`` (``raw`` without the line
    terminator, ``location`` ``line N``, 1-based), and the raw bytes of each blank line so
    the writer can carry it."""
    for number, line in enumerate(stream, start=1):
        raw = line.rstrip(b"\n")
        if not raw.strip():
            yield raw
            continue
        yield Record(raw, source, f"line {number}")


def write_line(out: BinaryIO, data: bytes) -> None:
    """Write one record (or carried blank line) followed by a newline."""
    out.write(data)
    out.write(b"\n")
