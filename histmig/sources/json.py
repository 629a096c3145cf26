"""JSON source: a ``.json`` file holding one history (as ``all_messages_json()`` writes
it), or one object whose messages field holds it. The whole file is one record."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from histmig.records import Record


def read_document(stream: BinaryIO, source: str) -> Iterator[Record]:
    """Yield the whole file as one :class:`Record` (``location`` ``file``)."""
    yield Record(stream.read(), source, "file")


def write_document(out: BinaryIO, data: bytes) -> None:
    """Write the record's bytes as the whole file."""
    out.write(data)
