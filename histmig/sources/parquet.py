"""Parquet (pyarrow): a file (a directory of them, or a glob, is several inputs:
:func:`histmig.sources.input_paths`); streamed by row group and record batch.

Each row group, or each slice of a row group holding more than :data:`TASK_BYTES` of
messages, is a task (:class:`RowGroup`): the worker reads its rows from the file itself, batch
by batch, runs the messages column through the engine (histmig.sources.arrow) and sends back
the task's report and only what changes: for a Parquet output, the cells that change (their
positions and new values, Arrow buffers written to the pipe as they are); for a JSONL output,
the lines. The parent takes the results in order, merges the reports, and for a Parquet
output reads the rows again, batch by batch, puts the new cells in place and writes them as
one output row group. So memory holds about one task's rows per process, whatever the file
and row-group sizes, and row order, every other column, the schema (field order, field and
key-value metadata), the compression codec and the row-group boundaries (but where a row group
is sliced) reach the output unchanged, the same for any ``jobs``. A rejected row is written
unchanged (a row cannot be dropped without breaking the alignment) and reported.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from histmig.errors import ColumnError, partly_written
from histmig.report import Report
from histmig.sources import fs, partition_of
from histmig.sources.arrow import Cells, ColumnMigrator, find_id_column, find_messages_column, write_jsonl_rows
from histmig.sources.atomic import atomic_output, replaced, unwritable
from histmig.sources.base import Destination, Format, Input, Job, Task, TaskResult, Written, lazy
from histmig.sources.grouped import Conversations, ConversationsResult, Index, Migrated, Part, check_columns

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq
else:
    pa = lazy("pyarrow")
    pq = lazy("pyarrow.parquet")

SUFFIXES = (".parquet", ".pq")

BATCH_ROWS = 256
"""Rows per record batch read from a row group. A batch's cells exist several times at
once (Arrow, Python ``bytes``, outcomes), so memory grows with it; 256 rows of ~3 KB
histories hold peak RSS about 20 MB below 1,024 rows, at the same speed."""
READ_BUFFER = 1 << 20
"""Bytes read from a Parquet file at a time (rather than whole column chunks, which
pyarrow would keep until the next row group)."""
TASK_BYTES = 4 << 20
"""Bytes of messages a task covers, about: a row group whose messages column holds up to this
much is one task and one output row group; a larger one (pyarrow and pandas write up to a
million rows in one) is cut into slices of rows of about this size (the last maybe
smaller), each a task and an output row group (:func:`_slices`). So a process holds about
one slice whatever the row groups' size, and ``--jobs`` shares the rows of a file that is
one row group."""

PROBE_BATCH = 16
"""Rows a batch read to size a dictionary-encoded messages column (:func:`_bytes_per_row`)."""


@contextmanager
def parquet_sink(path: str, schema: pa.Schema, compression: str = "snappy") -> Iterator[Callable[[pa.Table], None]]:
    """A function that writes one table as one row group of the Parquet file ``path``
    (``schema``, ``compression``), written as :func:`~histmig.sources.atomic.replaced` writes
    a file: to a temporary file beside it (beside the file a link points to), renamed over it
    only when the block ends without an exception; a stream (``/dev/null``, a FIFO) as it is.
    A write that fails raises :class:`~histmig.errors.UnwritableOutput` naming ``path``."""
    with replaced(path) as out:
        with unwritable(path):
            writer = pq.ParquetWriter(out, schema, compression=compression)

        def write(table: pa.Table) -> None:
            with unwritable(path):
                writer.write_table(table, row_group_size=max(1, table.num_rows))

        with writer:
            yield write


def compression(metadata: pq.FileMetaData) -> str:
    """The compression codec of a Parquet file's first column chunk, as a writer names it
    (``snappy``, ``zstd``, ``none``, ...): the one its output is written with."""
    if metadata.num_row_groups == 0 or metadata.num_columns == 0:
        return "snappy"
    codec = metadata.row_group(0).column(0).compression.lower()
    return "none" if codec == "uncompressed" else codec


@dataclass(frozen=True)
class RowGroup(Task):
    """A row group of a Parquet file, or a slice of one, as a task: the file's ``path``, the
    ``group`` index, the number of its ``first_row`` in the file (rows are named ``row N``
    from 0), the messages ``column``, the ``id_column``, the ``output`` the result is for
    (``None``: a report only), and the slice: ``row_count`` rows (``None``: to the row
    group's end) from row ``offset`` of the row group; ``size``, its share of the row group's
    compressed bytes (for progress)."""

    path: str
    group: int
    first_row: int
    column: str
    id_column: str | None
    output: Literal["parquet", "jsonl"] | None
    offset: int = 0
    row_count: int | None = None
    size: int = 0

    def run(self, job: Job, slot: memoryview | None) -> GroupResult:
        """Read the task's rows from the file, batch by batch (:class:`BatchCursor`): only
        the messages and id columns for a Parquet output or none, every column for a JSONL
        one; migrate them. The file last used stays open for the next task of this process
        (:data:`_OPEN`). Raises :class:`~histmig.errors.ColumnError` for a file or
        column it cannot use, and pyarrow's errors for a row group it cannot read."""
        cursor, migrator = _opened(self, job)
        result = GroupResult(Report.in_memory())
        columns = (
            None
            if self.output == "jsonl"
            else list(dict.fromkeys(c for c in (self.column, self.id_column) if c is not None))
        )
        first = self.first_row
        for batch in cursor.take(self.group, self.offset, self.row_count, columns):
            rows = range(first, first + batch.num_rows)
            first += batch.num_rows
            if self.output == "jsonl":
                new_batch, cells = migrator.migrate(batch, rows, result.report)
                lines = io.BytesIO()
                write_jsonl_rows(lines, new_batch, self.column, migrator.kind, cells.rejected)
                result.jsonl.append(pa.py_buffer(lines.getvalue()))
            else:
                cells = migrator.migrate_cells(batch, rows, result.report)
                if self.output == "parquet":
                    result.cells.append(cells)
        result.last = f"row {first - 1}" if first > self.first_row else None
        pa.default_memory_pool().release_unused()
        return result


@dataclass
class GroupResult(TaskResult):
    """What a row group or slice came to: its ``report`` and, for a Parquet output, the
    ``cells`` that change, one :class:`~histmig.sources.arrow.Cells` a batch the worker read,
    in order; for a JSONL output, the ``jsonl`` lines of each batch."""

    cells: list[Cells] = field(default_factory=list)
    jsonl: list[Any] = field(default_factory=list)


_OPEN: dict[tuple[str, str, str | None, Job], tuple[BatchCursor, ColumnMigrator]] = {}
"""The file a process last read a task of, open, with its migrator (one entry at most;
cleared when a parent's input is closed)."""


def _opened(task: RowGroup, job: Job) -> tuple[BatchCursor, ColumnMigrator]:
    key = (task.path, task.column, task.id_column, job)
    if key not in _OPEN:
        _OPEN.clear()
        parquet = open_parquet(task.path)
        _OPEN[key] = (
            BatchCursor(parquet),
            ColumnMigrator(
                parquet.schema_arrow, task.column, task.path, job, task.id_column, _partition_keys(task.path)
            ),
        )
    return _OPEN[key]


def _partition_keys(path: str) -> list[str]:
    """The keys of the partition directories the file ``path`` lies in
    (``session_id=s1/part-0.parquet``): columns of its rows too, as Spark reads them."""
    return [found[0] for part in path.split("/")[:-1] if (found := partition_of(part)) is not None]


class BatchCursor:
    """The record batches of an open Parquet file's row groups, read forward: rows of a row
    group from where the last ones taken stopped, or further on, are read on from there (the
    rows between are read and dropped); any other rows start their row group again. So the
    slices of one row group, taken in order, read it once. Batches are cut where a slice
    begins or ends, whatever size pyarrow reads them in (it may read fewer than
    :data:`BATCH_ROWS` rows, as for cells of more than 2 GB a batch)."""

    def __init__(self, parquet: pq.ParquetFile) -> None:
        self.parquet = parquet
        self._key: tuple[int, tuple[str, ...] | None] | None = None
        self._batches: Iterator[pa.RecordBatch] = iter(())
        self._held: pa.RecordBatch | None = None
        self._row = 0

    def take(
        self, group: int, offset: int = 0, count: int | None = None, columns: list[str] | None = None
    ) -> Iterator[pa.RecordBatch]:
        """The rows ``offset`` to ``offset + count`` (``count`` ``None``: to the end) of row
        group ``group`` (``columns`` only, when given), as batches. Raises
        :class:`ValueError` when the row group ends before."""
        key = (group, None if columns is None else tuple(columns))
        if key != self._key or offset < self._row:
            self._key, self._batches, self._held, self._row = key, _batches(self.parquet, group, columns), None, 0
        end = None if count is None else offset + count
        while end is None or self._row < end:
            batch, self._held = (self._held, None) if self._held is not None else (next(self._batches, None), None)
            if batch is None:
                if end is None:
                    return
                raise ValueError(f"row group {group} has no row {self._row}")
            first, self._row = self._row, self._row + batch.num_rows
            start = max(offset - first, 0)
            stop = batch.num_rows if end is None else min(end - first, batch.num_rows)
            if stop < batch.num_rows:
                self._held, self._row = batch.slice(stop), first + stop
            if start < stop:
                yield batch if (start, stop) == (0, batch.num_rows) else batch.slice(start, stop - start)


def _first_cell(parquet: pq.ParquetFile, column: str) -> Any:
    """The first non-null cell of ``column`` among the first :data:`BATCH_ROWS` rows of
    ``parquet`` (``None`` when there is none): what the column holds, to tell the messages
    column by its content."""
    for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=[column], use_threads=False):
        return next((cell for cell in batch.column(0).to_pylist() if cell is not None), None)
    return None


def open_parquet(path: str) -> pq.ParquetFile:
    """``path`` opened for reading :data:`READ_BUFFER` bytes at a time, with no column
    chunk read (``pre_buffer``) and kept whole. Raises :class:`~histmig.errors.ColumnError`
    when it is not a Parquet file pyarrow can open."""
    source = fs.open_input(path) if fs.is_url(path) else path
    try:
        return pq.ParquetFile(source, buffer_size=READ_BUFFER, pre_buffer=False)
    except (OSError, pa.ArrowException) as exc:
        raise ColumnError(f"{path}: {exc}") from exc


def _batches(parquet: pq.ParquetFile, group: int, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
    """The record batches of row group ``group`` (``columns`` only, when given), of
    :data:`BATCH_ROWS` rows but the last, or fewer where pyarrow cuts them (a string column
    of more than 2 GB a batch)."""
    return parquet.iter_batches(batch_size=BATCH_ROWS, row_groups=[group], columns=columns, use_threads=False)


class ParquetInput(Input):
    """One Parquet file opened for a run, written to ``output`` (``None``: not written) as
    ``output_format``; its tasks are its row groups and slices (:func:`_slices`)."""

    window = 2
    """A row group's result may hold every cell of its messages column: at most two a worker
    wait for their turn (measured: no slower than four)."""

    def __init__(
        self,
        path: str,
        output: str | None,
        output_format: str | None,
        job: Job,
        messages_column: str | None,
        id_column: str | None,
    ) -> None:
        self.name = path
        self.size = fs.size(path)
        self._stack = ExitStack()
        self._parquet = open_parquet(path)
        schema = self._parquet.schema_arrow
        column = find_messages_column(
            schema, messages_column, where=path, first=lambda name: _first_cell(self._parquet, name)
        )
        self._migrator = ColumnMigrator(
            schema, column, path, job, find_id_column(schema, id_column, where=path), _partition_keys(path)
        )
        self._output = output
        self._output_format: Literal["parquet", "jsonl"] | None = (
            output_format if output is not None else None  # type: ignore[assignment]  # one of the two
        )
        self._emit: Callable[[RowGroup, GroupResult], None] = lambda task, result: None

    def __enter__(self) -> ParquetInput:
        if self._output_format == "jsonl":
            out = self._stack.enter_context(atomic_output(self._output))  # type: ignore[arg-type]  # there is one
            self._emit = lambda task, result: out.writelines(result.jsonl)
        elif self._output_format == "parquet":
            write = self._stack.enter_context(
                parquet_sink(
                    self._output,  # type: ignore[arg-type]  # an output format: there is an output
                    self._migrator.output_schema,
                    compression(self._parquet.metadata),
                )
            )
            cursor = BatchCursor(self._parquet)
            self._emit = lambda task, result: write(_migrated_group(cursor, task, self._migrator, result.cells))
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: Any) -> None:
        _OPEN.clear()
        self._stack.__exit__(kind, *rest)

    def tasks(self) -> Iterator[RowGroup]:
        metadata = self._parquet.metadata
        tasks, first = [], 0
        for group in range(metadata.num_row_groups):
            tasks += _slices(
                self._parquet,
                RowGroup(self.name, group, first, self._migrator.column, self._migrator.id_column, self._output_format),
            )
            first += metadata.row_group(group).num_rows
        pa.default_memory_pool().release_unused()
        return iter(tasks)

    def write(self, task: Task, result: TaskResult, slot: memoryview | None) -> None:
        assert isinstance(task, RowGroup) and isinstance(result, GroupResult)
        self._emit(task, result)
        pa.default_memory_pool().release_unused()

    def written(self) -> Written:
        return Written(rejected="rows") if self._output is not None else Written()


def open_file(path: str, destination: Destination, options: Any, job: Job) -> list[Input]:
    """The Parquet file ``path`` for ``destination``: written to ``destination.output`` (``.jsonl``:
    one JSON object a row; otherwise Parquet); under ``--conversation``, its rows grouped
    (:class:`GroupedParquet`). Raises :class:`~histmig.errors.ColumnError` for an unreadable
    file or a missing or unusable column."""
    if options.grouping is not None:
        return open_together([(path, destination)], options, job)
    return [
        ParquetInput(path, destination.output, destination.written_as, job, options.messages_column, options.id_column)
    ]


def open_together(files: list[tuple[str, Destination]], options: Any, job: Job) -> list[Input]:
    """The Parquet ``files`` of one input (a directory's), each with its destination, as one
    input whose rows make conversations (``--conversation``, :class:`GroupedParquet`)."""
    return [GroupedParquet(files, options, job)]


class GroupedParquet(Input):
    """Parquet files, one or a directory's, whose rows make conversations (``--conversation``,
    ``--order``; :mod:`histmig.sources.grouped`): a conversation's rows may lie in any row
    group of any of the files. Each file is read three times: its conversation, order,
    messages and id columns to index it (the messages spilled to a temporary file), its
    conversations' records from the spill, migrated (tasks on the workers), then, for an
    output, its rows again in their order, each migrated cell put in place, written to the
    file's own output as :class:`ParquetInput` writes it (its schema, codec and row groups)."""

    window = 2
    size = None  # a progress bar counts the records' bytes, which the files' compressed size does not tell

    def __init__(self, files: list[tuple[str, Destination]], options: Any, job: Job) -> None:
        self.name = files[0][0] if len(files) == 1 else f"{len(files)} Parquet files"
        self._files = files
        self._grouping = options.grouping
        self._stack = ExitStack()
        self._opened: list[pq.ParquetFile] = []
        self._migrators: list[ColumnMigrator] = []
        for path, _ in files:
            parquet = open_parquet(path)
            schema = parquet.schema_arrow
            check_columns(path, schema, self._grouping)  # before any row is read
            column = find_messages_column(
                schema, options.messages_column, where=path, first=partial(_first_cell, parquet), one=True
            )
            self._opened.append(parquet)
            self._migrators.append(
                ColumnMigrator(schema, column, path, job, find_id_column(schema, options.id_column, where=path))
            )
        parts = [
            Part(path, m.column, m.kind, m.output_type if m.kind == "nested" else None)
            for (path, _), m in zip(files, self._migrators)
        ]
        self._index = Index(self._grouping, parts)
        self._stack.callback(self._index.close)
        self._migrated = Migrated()
        self._stack.callback(self._migrated.close)

    def __exit__(self, kind: type[BaseException] | None, *rest: Any) -> None:
        try:
            if kind is None:
                outputs = [destination.output or path for path, destination in self._files]
                for part in range(len(self._files)):
                    try:
                        self._write_out(part)
                    except OSError as exc:  # the files before it are written: say so
                        raise partly_written(exc, outputs[:part], outputs[part + 1 :]) from exc
        except BaseException as failed:
            self._stack.__exit__(type(failed), failed, failed.__traceback__)
            raise
        self._stack.__exit__(kind, *rest)

    def tasks(self) -> Iterator[Conversations]:
        index = self._index
        for part, (parquet, migrator) in enumerate(zip(self._opened, self._migrators)):
            columns = list(dict.fromkeys([*index.columns, migrator.column, *filter(None, [migrator.id_column])]))
            missing = [name for name in columns if name not in parquet.schema_arrow.names]
            if missing:
                raise ColumnError(
                    f"{migrator.source}: no column {missing[0]!r} (columns: {', '.join(parquet.schema_arrow.names)})"
                )
            first = 0
            for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=columns, use_threads=False):
                rows = range(first, first + batch.num_rows)
                refused = migrator.refusals(batch.column(migrator.column))
                index.add(part, batch, rows, id_column=migrator.id_column, errors=refused)
                first += batch.num_rows
        pa.default_memory_pool().release_unused()
        yield from index.tasks()

    def write(self, task: Task, result: TaskResult, slot: memoryview | None) -> None:
        assert isinstance(result, ConversationsResult)
        self._migrated.add(result)

    def _write_out(self, part: int) -> None:
        """Write file ``part`` to its output (if it has one) as :class:`ParquetInput` would,
        with its migrated cells in place."""
        path, destination = self._files[part]
        if destination.output is None:
            return
        parquet, migrator = self._opened[part], self._migrators[part]
        cursor = BatchCursor(parquet)
        if destination.written_as == "jsonl":
            with atomic_output(destination.output) as out:
                first = 0
                for group in range(parquet.metadata.num_row_groups):
                    for batch in cursor.take(group):
                        column = batch.column(migrator.index)
                        cells = migrator.placed(column, *self._migrated.of(part, range(first, first + len(column))))
                        write_jsonl_rows(
                            out, migrator.with_cells(batch, cells), migrator.column, migrator.kind, cells.rejected
                        )
                        first += batch.num_rows
            return
        with parquet_sink(destination.output, migrator.output_schema, compression(parquet.metadata)) as write:
            first = 0
            for group in range(parquet.metadata.num_row_groups):
                for task in _slices(
                    parquet, RowGroup(path, group, first, migrator.column, migrator.id_column, "parquet")
                ):
                    table = pa.Table.from_batches(
                        list(cursor.take(group, task.offset, task.row_count)), migrator.schema
                    )
                    rows = range(task.first_row, task.first_row + table.num_rows)
                    column = table.column(migrator.index)
                    write(_with_cells(table, migrator, [migrator.placed(column, *self._migrated.of(part, rows))]))
                    pa.default_memory_pool().release_unused()
                first += parquet.metadata.row_group(group).num_rows

    def written(self) -> Written:
        return Written(rejected="rows") if any(d.output is not None for _, d in self._files) else Written()


def _slices(parquet: pq.ParquetFile, group: RowGroup) -> list[RowGroup]:
    """The tasks of row group ``group`` of ``parquet``: itself, or, when its messages
    column holds more than :data:`TASK_BYTES` (:func:`_bytes_per_row`), slices of as many
    rows each (the last maybe fewer), about that size, in order."""
    meta = parquet.metadata.row_group(group.group)
    size = sum(meta.column(i).total_compressed_size for i in range(meta.num_columns))
    rows = meta.num_rows
    if rows <= BATCH_ROWS:
        return [replace(group, size=size)]
    limit = max(1, int(TASK_BYTES / _bytes_per_row(parquet, group, meta)))
    if rows <= limit:
        return [replace(group, size=size)]
    per_slice = -(-rows // -(-rows // limit))
    return [
        replace(
            group,
            first_row=group.first_row + offset,
            offset=offset,
            row_count=min(per_slice, rows - offset),
            size=size * min(per_slice, rows - offset) // rows,
        )
        for offset in range(0, rows, per_slice)
    ]


def _bytes_per_row(parquet: pq.ParquetFile, group: RowGroup, meta: pq.RowGroupMetaData) -> float:
    """Bytes a row of ``group``'s messages column takes once read, about: its column
    chunks' uncompressed size over the rows; for a dictionary-encoded column, whose stored
    size tells little (a repeated cell is stored once), at least that of its first rows as
    read: :data:`BATCH_ROWS` of them, or fewer when they reach :data:`TASK_BYTES`. ``meta`` is the
    row group's metadata; it has rows."""
    schema = parquet.schema_arrow
    index = schema.get_field_index(group.column)
    first_leaf = sum(_leaves(schema.field(i).type) for i in range(index))
    chunks = [meta.column(i) for i in range(first_leaf, first_leaf + _leaves(schema.field(index).type))]
    stored = sum(chunk.total_uncompressed_size for chunk in chunks) / meta.num_rows
    if not any(chunk.has_dictionary_page for chunk in chunks):
        return max(stored, 1.0)
    rows = size = 0
    for batch in parquet.iter_batches(
        batch_size=PROBE_BATCH, row_groups=[group.group], columns=[group.column], use_threads=False
    ):
        rows, size = rows + batch.num_rows, size + batch.nbytes
        if rows >= BATCH_ROWS or size >= TASK_BYTES:
            break
    return max(stored, 1.0, size / rows if rows else 0.0)


def _leaves(type_: pa.DataType) -> int:
    """How many Parquet leaf columns a field of Arrow type ``type_`` is stored as."""
    if isinstance(type_, pa.BaseExtensionType):
        return _leaves(type_.storage_type)
    if pa.types.is_struct(type_):
        return sum(_leaves(field.type) for field in type_)
    if pa.types.is_map(type_):
        return _leaves(type_.key_type) + _leaves(type_.item_type)
    if (
        pa.types.is_list(type_)
        or pa.types.is_large_list(type_)
        or pa.types.is_fixed_size_list(type_)
        or pa.types.is_list_view(type_)
        or pa.types.is_large_list_view(type_)
    ):
        return _leaves(type_.value_type)
    return 1


def _migrated_group(cursor: BatchCursor, task: RowGroup, migrator: ColumnMigrator, cells: list[Cells]) -> pa.Table:
    """The rows of ``task`` (a row group or a slice of one), read again from ``cursor``,
    with ``cells`` (one :class:`~histmig.sources.arrow.Cells` a batch the worker read, in
    order) in place: the messages column becomes a chunked array of the unchanged runs and
    the new cells (:meth:`~histmig.sources.arrow.ColumnMigrator.pieces`), so the batches
    read here need not be those the worker read. Raises :class:`ValueError` when the cells
    are not of as many rows."""
    table = pa.Table.from_batches(list(cursor.take(task.group, task.offset, task.row_count)), migrator.schema)
    column = table.column(migrator.index)
    if sum(batch.length for batch in cells) != len(column):
        raise ValueError(
            f"{migrator.source}: row group {task.group} has {len(column)} rows from row {task.offset}, its cells "
            f"{sum(batch.length for batch in cells)}"
        )
    return _with_cells(table, migrator, cells)


def _with_cells(table: pa.Table, migrator: ColumnMigrator, cells: list[Cells]) -> pa.Table:
    """``table`` (rows of ``migrator``'s schema) with ``cells``, one
    :class:`~histmig.sources.arrow.Cells` a run of its rows, in order, in place of its messages."""
    column = table.column(migrator.index)
    pieces: list[pa.Array] = []
    start = 0
    for batch in cells:
        for piece in migrator.pieces(column.slice(start, batch.length), batch):
            pieces += piece.chunks if isinstance(piece, pa.ChunkedArray) else [piece]
        start += batch.length
    messages = pa.chunked_array(pieces, type=migrator.output_type)
    return table.set_column(migrator.index, migrator.output_schema.field(migrator.index), messages)


FORMAT = Format(
    name="parquet",
    suffixes=SUFFIXES,
    open=open_file,
    written_as=("parquet", "jsonl"),
    columnar=True,
    description="Parquet",
    in_directories=True,
    open_together=open_together,
)
