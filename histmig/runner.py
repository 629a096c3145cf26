"""The documented Python functions behind the CLI (sqlite-utils style: every command is a
thin shell over one of these).

:func:`run` streams one input through the pipeline and, for ``convert``, writes the
migrated archive and the rejects file atomically.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import BinaryIO

from histmig.parallel import outcomes
from histmig.pipeline import Options
from histmig.records import Record
from histmig.report import Report
from histmig.sources import Format, atomic_output, detect_format, open_input
from histmig.sources.json import read_document, write_document
from histmig.sources.jsonl import read_lines, write_line
from histmig.tabular import TableOptions, is_tabular, run_tabular

Progress = Callable[[int], None]
"""Called with the number of input bytes just consumed."""


def default_rejects_path(output: str) -> str | None:
    """Where rejected records go when ``--rejects`` is not given: ``OUTPUT.rejects.jsonl``
    beside a file output; ``None`` for stdout (rejected records are then written to the
    output unchanged, so nothing is dropped)."""
    return None if output == "-" else f"{output}.rejects.jsonl"


def input_size(path: str) -> int | None:
    """The size in bytes of a regular, uncompressed input file (for a progress bar), else ``None``."""
    if path == "-" or path.lower().endswith(".gz"):
        return None
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def _records(stream: BinaryIO, source: str, fmt: Format) -> Iterator[Record | bytes]:
    return read_lines(stream, source) if fmt == "jsonl" else read_document(stream, source)


def run(
    input_path: str,
    output_path: str | None = None,
    options: Options = Options(),
    *,
    fmt: str | None = None,
    rejects_path: str | None = None,
    progress: Progress | None = None,
    table: TableOptions | None = None,
    jobs: int = 1,
) -> Report:
    """Run the pipeline over ``input_path`` and return the :class:`~histmig.report.Report`.

    With ``output_path`` (``convert``), every record is written in input order: the
    migrated bytes, or the original bytes when nothing changed; a rejected record goes,
    unchanged, to ``rejects_path`` (default :func:`default_rejects_path`), which is created
    only when something is rejected. Without it (``audit``/``check``) nothing is written.
    ``fmt`` overrides format detection. ``output_path`` may equal ``input_path`` (in place):
    the input is read to its end before the new file replaces it. Raises
    :class:`~histmig.sources.UnreadableInput` when the input cannot be opened or its format
    told; bad records never raise, and an input that ends early (a truncated ``.gz``) is
    reported (:meth:`~histmig.report.Report.add_read_error`) after what was read is written.
    A Parquet or DuckDB input (``table`` holds its options) goes to
    :func:`histmig.tabular.run_tabular`. ``jobs`` worker processes share the records of a
    JSON/JSONL input (:func:`~histmig.parallel.outcomes`; 1: in this process); output and
    report are the same for any ``jobs``.
    """
    if is_tabular(input_path, table):
        return run_tabular(input_path, output_path, options, table or TableOptions(), progress=progress)
    fmt_ = detect_format(input_path, fmt)
    report = Report()
    if rejects_path is None and output_path is not None:
        rejects_path = default_rejects_path(output_path)
    write = write_line if fmt_ == "jsonl" else write_document
    with ExitStack() as stack:
        stream = stack.enter_context(open_input(input_path))
        out: BinaryIO | None = None
        rejects: BinaryIO | None = None
        last = "the start"
        try:
            for item, outcome in outcomes(_records(stream, input_path, fmt_), options, jobs):
                if isinstance(item, bytes):
                    if output_path is not None:
                        out = out or stack.enter_context(atomic_output(output_path))
                        write_line(out, item)
                    continue
                last = item.location
                report.add(outcome)
                if progress is not None:
                    progress(len(item.raw) + 1)
                if output_path is None:
                    continue
                if outcome.status == "rejected" and rejects_path is not None:
                    rejects = rejects or stack.enter_context(atomic_output(rejects_path))
                    write_line(rejects, item.raw)
                    continue
                out = out or stack.enter_context(atomic_output(output_path))
                write(out, item.raw if outcome.output is None else outcome.output)
        except (EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
            report.add_read_error(input_path, f"after {last}", f"input ends early or cannot be read on: {exc}")
        if output_path is not None and out is None and fmt_ == "jsonl":
            stack.enter_context(atomic_output(output_path))
    return report
