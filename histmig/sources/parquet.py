"""Parquet source and sink (pyarrow), streamed by record batch.

Input is a file, a directory (its ``*.parquet`` files, sorted) or a glob. Each input row
group is read batch by batch, migrated (histmig.sources.arrow) and written as one output
row group, so memory holds about one row group whatever the file size, and row order,
row-group boundaries, every other column, the schema (field order, field and key-value
metadata) and the compression codec reach the output unchanged. A rejected row is written
unchanged (a row cannot be dropped without breaking the alignment) and reported.
"""

from __future__ import annotations

import glob
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from histmig.pipeline import Options
from histmig.report import Report
from histmig.sources import atomic_output, new_file_mode
from histmig.sources.arrow import ColumnMigrator, find_messages_column, write_jsonl_rows
from histmig.tabular import PARQUET_SUFFIXES, ColumnError

BATCH_ROWS = 1024
"""Rows per record batch read from a row group."""

_GLOB_CHARS = frozenset("*?[")


def input_files(path: str) -> list[str]:
    """The Parquet files ``path`` names: itself, a directory's ``*.parquet``/``*.pq``
    files, or a glob's matches, sorted. Raises :class:`ColumnError` when there are none."""
    if os.path.isdir(path):
        files = sorted(str(p) for p in Path(path).iterdir() if p.name.lower().endswith(PARQUET_SUFFIXES) and p.is_file())
    elif _GLOB_CHARS & set(path):
        files = sorted(p for p in glob.glob(path) if os.path.isfile(p))
    else:
        files = [path] if os.path.isfile(path) else []
    if not files:
        raise ColumnError(f"{path}: no Parquet file found")
    return files


@contextmanager
def parquet_sink(path: str, schema: pa.Schema, compression: str = "snappy") -> Iterator[Callable[[pa.Table], None]]:
    """A function that writes one table as one row group of the Parquet file ``path``
    (``schema``, ``compression``); the file is written to a temporary file in the same
    directory and renamed over ``path`` only when the block ends without an exception."""
    target = Path(path)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.fchmod(fd, new_file_mode(target))
    os.close(fd)
    try:
        with pq.ParquetWriter(tmp_name, schema, compression=compression) as writer:
            yield lambda table: writer.write_table(table, row_group_size=max(1, table.num_rows))
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def _compression(metadata: pq.FileMetaData) -> str:
    if metadata.num_row_groups == 0 or metadata.num_columns == 0:
        return "snappy"
    codec = metadata.row_group(0).column(0).compression.lower()
    return "none" if codec == "uncompressed" else codec


def _outputs(files: list[str], output_path: str) -> list[str]:
    if len(files) == 1 and not os.path.isdir(output_path):
        return [output_path]
    names = [os.path.basename(f) for f in files]
    if len(set(names)) != len(names):
        raise ColumnError(f"{output_path}: two inputs share a file name")
    os.makedirs(output_path, exist_ok=True)
    return [os.path.join(output_path, name) for name in names]


def run_parquet(
    input_path: str,
    output_path: str | None,
    options: Options,
    *,
    messages_column: str | None = None,
    id_column: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> Report:
    """Migrate the messages column of every row of the Parquet input ``input_path`` and
    return the report. With ``output_path``: one input file goes to that file (``.jsonl``:
    one JSON object a row; otherwise Parquet); several go to the directory ``output_path``
    under their own names. ``progress`` gets the compressed bytes of each row group read.
    Raises :class:`~histmig.sources.arrow.ColumnError` (exit 2) for a missing input or
    column, and pyarrow's errors for an unreadable file."""
    files = input_files(input_path)
    outputs = _outputs(files, output_path) if output_path is not None else [None] * len(files)
    report = Report()
    for path, out in zip(files, outputs):
        _run_file(path, out, options, messages_column, id_column, progress, report)
    return report


def _run_file(
    path: str,
    output_path: str | None,
    options: Options,
    messages_column: str | None,
    id_column: str | None,
    progress: Callable[[int], None] | None,
    report: Report,
) -> None:
    try:
        parquet = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise ColumnError(f"{path}: {exc}") from exc
    schema = parquet.schema_arrow
    column = find_messages_column(schema, messages_column, where=path)
    migrator = ColumnMigrator(schema, column, path, options, id_column)
    first_row = 0

    def batches(group: int) -> Iterator[tuple[pa.RecordBatch, list]]:
        nonlocal first_row
        for batch in parquet.iter_batches(batch_size=BATCH_ROWS, row_groups=[group], use_threads=False):
            new_batch, outcomes = migrator.migrate(batch, range(first_row, first_row + batch.num_rows))
            first_row += batch.num_rows
            for outcome in outcomes:
                if outcome is not None:
                    report.add(outcome)
            yield new_batch, outcomes
        if progress is not None:
            meta = parquet.metadata.row_group(group)
            progress(sum(meta.column(i).total_compressed_size for i in range(meta.num_columns)))

    if output_path is None:
        for group in range(parquet.num_row_groups):
            for _ in batches(group):
                pass
    elif output_path.lower().endswith(".jsonl"):
        with atomic_output(output_path) as out:
            for group in range(parquet.num_row_groups):
                for batch, outcomes in batches(group):
                    write_jsonl_rows(out, batch, column, migrator.kind, outcomes)
    else:
        with parquet_sink(output_path, migrator.output_schema, _compression(parquet.metadata)) as write:
            for group in range(parquet.num_row_groups):
                write(pa.Table.from_batches([batch for batch, _ in batches(group)], migrator.output_schema))
