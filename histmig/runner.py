"""The documented Python functions behind the CLI (sqlite-utils style: every command is a
thin shell over one of these).

:func:`run` streams one input through the pipeline and, for ``convert``, writes the
migrated archive and the rejects file atomically.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Callable
from contextlib import ExitStack
from typing import BinaryIO

from histmig.parallel import map_chunks, read_chunks, write_chunk
from histmig.pipeline import Options, process
from histmig.records import Record
from histmig.report import Report
from histmig.sources import atomic_output, detect_format, open_input
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
    only when something is rejected; a rejects file already there (an earlier run's, maybe
    the only copy of its records) is added to, never replaced. Without it (``audit``/``check``) nothing is written.
    ``fmt`` overrides format detection. ``output_path`` may equal ``input_path`` (in place):
    the input is read to its end before the new file replaces it. Raises
    :class:`~histmig.sources.UnreadableInput` when the input cannot be opened or its format
    told; bad records never raise, and an input that ends early (a truncated ``.gz``) is
    reported (:meth:`~histmig.report.Report.add_read_error`) after what was read is written.
    A Parquet or DuckDB input (``table`` holds its options) goes to
    :func:`histmig.tabular.run_tabular`. ``jobs`` worker processes share the records of a
    JSONL input (:func:`~histmig.parallel.map_chunks`; 1: in this process) or the row
    groups of a Parquet one (a DuckDB input runs in this process); output and report are
    the same for any ``jobs``.
    """
    if is_tabular(input_path, table):
        return run_tabular(input_path, output_path, options, table or TableOptions(), progress=progress, jobs=jobs)
    fmt_ = detect_format(input_path, fmt)
    report = Report()
    if rejects_path is None and output_path is not None:
        rejects_path = default_rejects_path(output_path)
    with ExitStack() as stack:
        stream = stack.enter_context(open_input(input_path))
        if fmt_ == "json":
            _run_document(stream, input_path, output_path, rejects_path, options, report, stack)
            return report
        out = stack.enter_context(atomic_output(output_path)) if output_path is not None else None
        opened: list[BinaryIO] = []

        def rejects() -> BinaryIO:
            if not opened:
                opened.append(stack.enter_context(atomic_output(rejects_path, keep=True)))
            return opened[0]

        last = "the start"
        try:
            for chunk, result in map_chunks(read_chunks(stream, input_path), options, jobs):
                report.merge(result.report)
                last = result.last or last
                if progress is not None:
                    progress(result.consumed)
                if out is not None:
                    write_chunk(chunk.data, result.edits, out, rejects if rejects_path is not None else None)
        except (EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
            report.add_read_error(input_path, f"after {last}", f"input ends early or cannot be read further: {exc}")
    return report


def _run_document(
    stream: BinaryIO, source: str, output_path: str | None, rejects_path: str | None, options: Options, report: Report, stack: ExitStack
) -> None:
    """A ``.json`` input: the whole file is one record; a rejected one goes to the rejects
    file and no output is written. A migrated document ends with a newline when the input
    did."""
    record = Record(stream.read(), source, "file")
    outcome = process(record, options)
    report.add(outcome)
    if output_path is None:
        return
    if outcome.status == "rejected" and rejects_path is not None:
        stack.enter_context(atomic_output(rejects_path, keep=True)).write(record.raw + b"\n")
        return
    if outcome.output is None or outcome.output is record.raw:
        stack.enter_context(atomic_output(output_path)).write(record.raw)
        return
    line_end = b"\n" if record.raw.endswith(b"\n") else b""
    stack.enter_context(atomic_output(output_path)).write(outcome.output + line_end)
