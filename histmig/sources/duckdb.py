"""DuckDB: a table of an embedded database file (no server).

The table is read as Arrow record batches (histmig.sources.arrow migrates the messages
column, JSON, VARCHAR, BLOB or nested), each a task run in this process (a connection cannot
cross a fork). ``convert`` writes to a Parquet or JSONL file, to a new table (``to_table``) or
back into the table (``in_place``); both table writes are one transaction, rolled back on any
error, so a failed or interrupted run leaves the database as it was. Table and column names
enter SQL only as quoted identifiers (:func:`quote`); values only as parameters or Arrow data.
A rejected row is written unchanged and reported.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from histmig import interrupt
from histmig.errors import ColumnError, UnwritableOutput, UsageError
from histmig.report import Report
from histmig.sources.arrow import Cells, ColumnMigrator, find_id_column, find_messages_column, indices, write_jsonl_rows
from histmig.sources.atomic import atomic_output
from histmig.sources.base import (
    Destination,
    Format,
    Input,
    Job,
    Skipped,
    Task,
    TaskResult,
    Written,
    folded,
    free_name,
    lazy,
    same_folded,
    starts_with,
)
from histmig.sources.grouped import Index, Migrated, Part, check_columns
from histmig.sources.parquet import parquet_sink
from histmig.sources.table import _VERIFY_BATCH, _digest, no_table, tables_said

duckdb = lazy("duckdb")
pa = lazy("pyarrow")

BATCH_ROWS = 2048
"""Rows per record batch read from the table."""
ROW_GROUP_ROWS = 16 * 1024
"""Rows per row group of a Parquet output."""

_ROWID = "__histmig_rowid"
_DIGEST = "__histmig_digest"
_UPDATES = "__histmig_updates"
_BATCH = "__histmig_batch"
"""The names histmig's own column alias, temporary table and registered batch take, or the
first free one after them (:func:`~histmig.sources.base.free_name`)."""


def quote(name: str) -> str:
    """``name`` as a DuckDB quoted identifier: in double quotes, inner quotes doubled."""
    return '"' + name.replace('"', '""') + '"'


def _duckdb_type(con: Any, type_: Any, via: str) -> str:
    """The DuckDB column type DuckDB gives an Arrow column of ``type_`` (registered as ``via``)."""
    con.register(via, pa.table({"v": pa.nulls(0, type_)}))  # not pa.array: see arrow.bytes_array
    try:
        return con.execute(f"DESCRIBE SELECT v FROM {quote(via)}").fetchall()[0][1]
    finally:
        con.unregister(via)


def _arrow_schema(con: Any, table: str) -> Any:
    relation = con.sql(f"SELECT * FROM {quote(table)} LIMIT 0")
    return (relation.to_arrow_table() if hasattr(relation, "to_arrow_table") else relation.fetch_arrow_table()).schema


def _insert(con: Any, table: str, data: Any, via: str) -> None:
    """Insert the Arrow ``data`` into the table ``table``, registered as ``via`` meanwhile."""
    con.register(via, data)
    try:
        con.execute(f"INSERT INTO {quote(table)} SELECT * FROM {quote(via)}")
    finally:
        con.unregister(via)


@dataclass
class BatchResult(TaskResult):
    """What a batch came to: its ``report``, the batch with its messages column migrated
    (``batch``) and the ``cells`` that changed."""

    batch: Any = None
    cells: Cells | None = None


@dataclass(frozen=True)
class Batch(Task):
    """A record batch of the table (``batch``), its first row's number (``first``) and the
    migrator of its column; run in this process."""

    batch: Any
    first: int
    migrator: ColumnMigrator

    def run(self, job: Job, slot: memoryview | None) -> BatchResult:
        """Migrate the batch's messages column (rows named ``row N``)."""
        result = BatchResult(Report.in_memory())
        rows = range(self.first, self.first + self.batch.num_rows)
        result.batch, result.cells = self.migrator.migrate(self.batch, rows, result.report)
        return result


class DuckdbTable(Input):
    """A DuckDB table opened for a run (see the module docstring): read by batches, written to
    ``destination``."""

    in_process = True
    _not_copied: tuple[str, ...] = ()  # what a --to-table table does not have (_uncopied)
    _begun = False  # the write transaction

    def __init__(self, path: str, destination: Destination, options: Any, job: Job) -> None:
        table = options.table
        self.name = f"{path}:{table}"
        self.size = os.path.getsize(path)
        self._table, self._destination, self._job = table, destination, job
        self._stack = ExitStack()
        self._grouped_stack = ExitStack()  # the index and spills of a grouped run, removed last
        self._skipped: list[Skipped] = []
        try:
            self._con = self._stack.enter_context(
                duckdb.connect(path, read_only=not (destination.in_place or destination.to_table is not None))
            )
        except duckdb.Error as exc:
            raise ColumnError(f"{path}: {exc}") from exc
        try:
            if table is None:
                raise UsageError(f"{path}: a DuckDB input needs --table ({tables_said(self._tables())})")
            if not self._exists(table):
                raise no_table(path, table, self._tables())
            if destination.in_place and self._exists(table, "VIEW"):
                raise UsageError(f"{path}: {table!r} is a view, which --in-place cannot write; use --to-table")
            if destination.to_table is not None and self._exists(destination.to_table) and not destination.overwrite:
                raise UnwritableOutput(
                    f"{path}: table {destination.to_table!r} already exists (--overwrite replaces it)"
                )
            schema = _arrow_schema(self._con, table)
            self._column = find_messages_column(
                schema,
                options.messages_column,
                where=self.name,
                first=self._first_cell,
                one=options.grouping is not None,
            )
            keys = self._constraints("PRIMARY KEY")
            self._id_column = find_id_column(
                schema,
                options.id_column,
                key=keys[0][0] if len(keys) == 1 and len(keys[0]) == 1 else None,
                where=self.name,
            )
            taken = [row[0] for row in self._con.execute("SELECT table_name FROM information_schema.tables").fetchall()]
            self._batch = free_name(_BATCH, [*taken, table, destination.to_table])
            self._updates_table = free_name(_UPDATES, [*taken, table, destination.to_table, self._batch])
            self._rowid = free_name(_ROWID, schema.names)
            self._digest = free_name(_DIGEST, [*schema.names, self._rowid])
            self._grouping = options.grouping
            if self._grouping is not None:
                self._prepare_grouping(schema)
        except BaseException:
            self._stack.close()
            raise
        self._job = job
        self._names = schema.names  # a pass in place reads the messages alone: the table's columns
        self._write: Callable[[Any], None] = lambda result: None  # a BatchResult; grouped, a ConversationsResult
        self._write_rows: Callable[[BatchResult], None] = self._write
        self._finish: Callable[[], None] = lambda: None

    def _exists(self, table: str, kind: str = "%") -> bool:
        """Whether the database has a table (``kind`` ``VIEW``: a view) named ``table``, as
        DuckDB compares names (:func:`~histmig.sources.base.folded`)."""
        names = self._con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_type LIKE ?", [kind]
        ).fetchall()
        return any(folded(name) == folded(table) for (name,) in names)

    def _first_cell(self, column: str) -> Any:
        """The first non-null cell of ``column`` of the table, or ``None``."""
        row = self._con.execute(
            f"SELECT {quote(column)} FROM {quote(self._table)} WHERE {quote(column)} IS NOT NULL LIMIT 1"
        ).fetchone()
        return None if row is None else row[0]

    def _columns(self) -> list[tuple[str, str, bool, str | None]]:
        """Each column of the table in its order: its name, SQL type (``UUID``,
        ``DECIMAL(18,3)``), whether it is nullable and its default's SQL."""
        return self._con.execute(
            "SELECT column_name, data_type, is_nullable, column_default FROM duckdb_columns() WHERE table_name = ? AND "
            "database_name = current_database() ORDER BY column_index",
            [self._table],
        ).fetchall()

    @property
    def _types(self) -> dict[str, str]:
        """Each column's SQL type, by name (:meth:`_columns`)."""
        return {name: data_type for name, data_type, *_ in self._columns()}

    def _constraints(self, kind: str) -> list[list[str]]:
        """The columns of each ``kind`` constraint (``PRIMARY KEY``, ``UNIQUE``) of the table."""
        return [
            list(row[0])
            for row in self._con.execute(
                "SELECT constraint_column_names FROM duckdb_constraints() WHERE table_name = ? AND database_name = "
                "current_database() AND constraint_type = ? ORDER BY constraint_index",
                [self._table, kind],
            ).fetchall()
        ]

    def _tables(self) -> list[str]:
        """The database's tables, for an error line."""
        query = "SELECT table_name FROM information_schema.tables ORDER BY table_name"
        return [row[0] for row in self._con.execute(query).fetchall()]

    def __enter__(self) -> DuckdbTable:
        destination = self._destination
        if destination.in_place or destination.to_table is not None:
            if not (destination.in_place and self._grouping is not None):  # grouped: when the rows are written
                self._begin()
            if destination.in_place:
                self._write, self._finish = self._updates()
            else:
                self._write, self._finish = self._inserts(destination.to_table)  # type: ignore[arg-type]  # a table
        elif destination.output is not None:
            self._write, self._finish = self._file(destination.output)
        if self._grouping is not None:
            self._write_rows, finish = self._write, self._finish
            self._write = self._migrated.add

            def replayed() -> None:
                self._replay()
                finish()

            self._finish = replayed
        return self

    def _begin(self) -> None:
        """Begin the run's write transaction, committed when the run ends well."""
        self._con.execute("BEGIN TRANSACTION")
        self._begun = True
        self._stack.callback(self._con.execute, "COMMIT")

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        error = rest[0] if rest and isinstance(rest[0], BaseException) else None
        if kind is None:
            try:
                self._finish()
                interrupt.commit_begins()  # from here, the run ends as a finished one
            except BaseException as exc:
                self.__exit__(type(exc), exc, None)  # rolled back; an interrupt says so
                if isinstance(exc, duckdb.Error):
                    raise UnwritableOutput(f"{self.name}: {str(exc).strip()}") from exc
                raise
            self._stack.close()
            self._grouped_stack.close()
            return
        if self._destination.in_place or self._destination.to_table is not None:
            self._stack.pop_all()  # the COMMIT is not run
            try:
                if self._begun:
                    self._con.execute("ROLLBACK")
            finally:
                self._con.close()
                self._grouped_stack.close()
            if isinstance(error, KeyboardInterrupt) or interrupt.received():
                raise interrupt.Interrupted(f"{self.name} is as it was") from error
        else:
            self._stack.__exit__(kind, *rest)  # type: ignore[arg-type]
            self._grouped_stack.close()

    def tasks(self) -> Iterator[Task]:
        if self._grouping is not None:
            yield from self._conversations()
            return
        with self._con.cursor() as cursor:
            reader = self._reader(cursor, self._scan())
            migrator = ColumnMigrator(reader.schema, self._column, self.name, self._job, self._id_column, self._names)
            self.migrator = migrator
            row = 0
            for batch in reader:
                yield Batch(batch, row, migrator)
                row += batch.num_rows

    def _scan(self) -> str:
        """The query of a pass over the table in scan order: in place, each row's ``rowid``, its
        messages and its id (what the UPDATE needs), else every column (what a file or a new
        table gets)."""
        if not self._destination.in_place:
            return f"SELECT * FROM {quote(self._table)}"
        selected = [f"rowid AS {quote(self._rowid)}", quote(self._column)]
        selected += [quote(self._id_column)] if self._id_column not in (None, self._column) else []
        return f"SELECT {', '.join(selected)} FROM {quote(self._table)}"

    def _reader(self, cursor: Any, query: str) -> Any:
        """The Arrow batches of ``query`` (``BATCH_ROWS`` rows each) on ``cursor``. Raises
        :class:`ColumnError` naming the table for what DuckDB refuses."""
        try:
            relation = cursor.sql(query)
            return (
                relation.to_arrow_reader(BATCH_ROWS)
                if hasattr(relation, "to_arrow_reader")
                else relation.fetch_record_batch(BATCH_ROWS)
            )
        except duckdb.Error as exc:
            raise ColumnError(f"{self.name}: {str(exc).strip()}") from exc

    def write(self, task: Task, result: TaskResult, slot: memoryview | None) -> None:
        try:
            self._write(result)
        except (duckdb.Error, RuntimeError) as exc:  # RuntimeError: DuckDB's "Query interrupted"
            interrupt.reraise(exc)
            if not isinstance(exc, duckdb.Error):
                raise
            raise UnwritableOutput(f"{self.name}: {str(exc).strip()}") from exc

    def written(self) -> Written:
        if not self._destination.writes:
            return Written()
        return Written(rejected="rows", not_copied=self._not_copied, skipped=list(self._skipped))

    # ------------------------------------------------------------ rows grouped into conversations

    def _prepare_grouping(self, schema: Any) -> None:
        """Check the conversation and order columns and set up the index
        (:mod:`histmig.sources.grouped`). Raises :class:`ColumnError` as
        :func:`~histmig.sources.grouped.check_columns` does."""
        grouping = self._grouping
        keys = self._constraints("PRIMARY KEY")
        ties = keys[0] if keys else ()
        check_columns(self.name, schema, grouping, ties)
        self._read_as = migrator = ColumnMigrator(schema, self._column, self.name, self._job, self._id_column)
        part = Part(self.name, self._column, migrator.kind, migrator.output_type if migrator.kind == "nested" else None)
        self.size = None  # a progress bar counts the records' bytes, which the file's size does not tell
        self._index = Index(grouping, [part], digests=self._destination.in_place, ties=ties)
        self._grouped_stack.callback(self._index.close)
        self._migrated = Migrated()
        self._grouped_stack.callback(self._migrated.close)

    def _conversations(self) -> Iterator[Task]:
        """The table's conversations (:class:`~histmig.sources.grouped.Index`): its rows read
        once in scan order, named ``row N`` as an ungrouped run names them, a conversation's rows
        in ``--order``, then primary key order (scan order without one); in place each is
        identified by its ``rowid`` and :meth:`_row_digest` kept, which the write compares."""
        index = self._index
        columns = list(dict.fromkeys([*index.columns, self._column, *filter(None, [self._id_column])]))
        selected = [f"rowid AS {quote(self._rowid)}", *map(quote, columns)]
        if self._destination.in_place:
            selected.append(f"{self._row_digest()} AS {quote(self._digest)}")
        with self._con.cursor() as cursor:
            reader = self._reader(cursor, f"SELECT {', '.join(selected)} FROM {quote(self._table)}")
            row = 0
            in_place = self._destination.in_place
            for batch in reader:
                rows = range(row, row + batch.num_rows)
                places = batch.column(self._rowid).to_pylist() if in_place else None
                refused = self._read_as.refusals(batch.column(self._column))
                index.add(0, batch, rows, places, self._id_column, self._digest if in_place else None, refused)
                row += batch.num_rows
        yield from index.tasks()

    def _replay(self) -> None:
        """Read the table again in scan order and hand every batch, its migrated cells in place,
        to the run's writer (a file, the new table, the UPDATE in place: as an ungrouped run
        does); in place, within the write transaction, after the conversations whose rows changed
        since they were read are left out (:meth:`_unchanged`)."""
        in_place = self._destination.in_place
        if in_place:
            self._begin()
            touched = sorted(self._migrated.touched)
            fresh = self._unchanged(touched)
            for number in touched:
                if number in fresh:
                    continue
                rows = [self._index.row(i) for i in self._index.rows[number]]
                dropped = set(self._migrated.drop(0, [place for place, *_ in rows]))
                self._skipped += [
                    Skipped(self.name, f"row {n}", id_, conversation=True)
                    for place, n, id_, _ in rows
                    if place in dropped
                ]
        with self._con.cursor() as cursor:
            reader = self._reader(cursor, self._scan())
            self.migrator = migrator = ColumnMigrator(
                reader.schema, self._column, self.name, self._job, self._id_column
            )
            row = 0
            for batch in reader:
                places = batch.column(self._rowid).to_pylist() if in_place else range(row, row + batch.num_rows)
                cells = migrator.placed(batch.column(migrator.index), *self._migrated.of(0, places))
                self._write_rows(BatchResult(Report.in_memory(), batch=migrator.with_cells(batch, cells), cells=cells))
                row += batch.num_rows

    def _row_digest(self) -> str:
        """SQL of what a write in place checks a row still holds: an MD5 of its messages and of
        each conversation, order and primary key column (:attr:`Index.columns`), each column's
        own MD5 (``NULL`` for a null) so that no two rows' values run together, so that a row the
        application moved to another conversation or place is not overwritten."""
        columns = dict.fromkeys([self._column, *self._index.columns])
        each = ", ".join(f"md5(CAST({quote(column)} AS VARCHAR))" for column in columns)
        return f"md5(CAST(list_value({each}) AS VARCHAR))"

    def _unchanged(self, numbers: list[int]) -> set[int]:
        """The conversations of ``numbers`` whose rows hold what they held when read: the same
        rows (by ``rowid``: none added, none deleted), each with the same messages, conversation key,
        order and primary key (:meth:`_row_digest`),
        compared as SQLite's and PostgreSQL's are (:func:`~histmig.sources.table._digest`); read
        in the write transaction, so no other connection commits a change to them unnoticed (it
        would conflict with the UPDATE, which then fails the run, nothing written)."""
        index, fresh = self._index, set()
        keys = list(index.key_columns)
        read = [*map(quote, keys), "rowid", self._row_digest()]
        g = len(keys)
        # each key as the column's own type (a UUID is no VARCHAR to DuckDB), read back through Arrow, as the index
        # read it (a UUID as its text)
        types = self._types
        typed = "(" + ", ".join(f"CAST(? AS {types[key]})" for key in keys) + ")"
        for start in range(0, len(numbers), _VERIFY_BATCH):
            batch = numbers[start : start + _VERIFY_BATCH]
            alone = [n for n in batch if index.conversations[n][0] is None]
            keyed = [n for n in batch if index.conversations[n][0] is not None]
            held: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
            if keyed and g:
                marks = ", ".join(typed for _ in keyed)
                params = [value for n in keyed for value in index.conversations[n][0]]  # type: ignore[union-attr]
                where = f" WHERE ({', '.join(map(quote, keys))}) IN (VALUES {marks})"
            else:
                params, where = [], ""
            if keyed:
                now = self._con.sql(f"SELECT {', '.join(read)} FROM {quote(self._table)}{where}", params=params)
                for row in zip(*(column.to_pylist() for column in now.to_arrow_table().columns)):
                    held.setdefault(row[:g], []).append(row[g:])
            for n in keyed:
                read_then = [(place, digest) for place, _, _, digest in map(index.row, index.rows[n])]
                if _digest(held.get(index.conversations[n][0], [])) == _digest(read_then):  # type: ignore[arg-type]
                    fresh.add(n)
            for n in alone:
                place = index.conversations[n][1]
                now = self._con.execute(
                    f"SELECT {', '.join(read[g:])} FROM {quote(self._table)} WHERE rowid = ?", [place]
                )
                read_then = [(p, digest) for p, _, _, digest in map(index.row, index.rows[n])]
                if _digest(now.fetchall()) == _digest(read_then):
                    fresh.add(n)
        return fresh

    def _uncopied(self) -> tuple[str, ...]:
        """What :meth:`_create_like` leaves out of a ``--to-table`` table: the read table's
        foreign keys and indexes (``CREATE INDEX``; its primary key's and unique constraints'
        are copied with them), in words (``1 foreign key``, ``2 indexes``)."""
        foreign = len(self._constraints("FOREIGN KEY"))
        indexes = self._con.execute(
            "SELECT count(*) FROM duckdb_indexes() WHERE table_name = ? AND database_name = current_database()",
            [self._table],
        ).fetchall()[0][0]
        named = ((foreign, "foreign key", "foreign keys"), (indexes, "index", "indexes"))
        return tuple(f"{count} {one if count == 1 else many}" for count, one, many in named if count)

    def _file(self, output: str) -> tuple[Callable[[BatchResult], None], Callable[[], None]]:
        """Writers of a Parquet or JSONL file: each batch as it comes (JSONL) or in row
        groups of :data:`ROW_GROUP_ROWS` rows (Parquet)."""
        if self._destination.written_as == "jsonl":
            out = self._stack.enter_context(atomic_output(output))
            return (
                lambda result: write_jsonl_rows(
                    out, result.batch, self._column, self.migrator.kind, result.cells.rejected
                )
            ), lambda: None
        pending: list[Any] = []
        sink: list[Callable[[Any], None]] = []

        def flush() -> None:
            if not sink:
                schema = ColumnMigrator(
                    _arrow_schema(self._con, self._table), self._column, self.name, self._job, self._id_column
                ).output_schema
                sink.append(self._stack.enter_context(parquet_sink(output, schema)))
            if pending:
                sink[0](pa.Table.from_batches(pending, pending[0].schema))
                pending.clear()

        def write(result: BatchResult) -> None:
            pending.append(result.batch)
            if sum(b.num_rows for b in pending) >= ROW_GROUP_ROWS:
                flush()

        return write, flush

    def _inserts(self, to_table: str) -> tuple[Callable[[BatchResult], None], Callable[[], None]]:
        """A writer of each batch into the new table ``to_table``, created at the first batch
        as the table read is (:meth:`_create_like`: its columns, types, defaults, NOT NULL,
        PRIMARY KEY, UNIQUE and CHECK constraints; the messages column widened when the
        migration widens it), replacing one of that name with ``--overwrite``; and the finish,
        which creates it for a table read without rows."""
        created: list[bool] = []

        def create() -> None:
            if self._destination.overwrite:
                self._con.execute(f"DROP TABLE IF EXISTS {quote(to_table)}")
            self._con.execute(self._create_like(to_table))
            self._not_copied = self._uncopied()
            created.append(True)

        def write(result: BatchResult) -> None:
            if not created:
                create()
            _insert(self._con, to_table, result.batch, self._batch)

        def finish() -> None:
            if not created:
                create()

        return write, finish

    def _create_like(self, to_table: str) -> str:
        """``CREATE TABLE to_table (...)`` with the table's columns and constraints, the
        messages column of the migrator's output type."""
        migrator = self.migrator
        widened = (
            _duckdb_type(self._con, migrator.output_type, self._batch)
            if migrator.output_type != migrator.input_type
            else None
        )
        columns = []
        for name, data_type, nullable, default in self._columns():
            column = f"{quote(name)} {widened if widened and name == self._column else data_type}"
            column += "" if nullable else " NOT NULL"
            column += f" DEFAULT ({default})" if default is not None else ""
            columns.append(column)
        for kind in ("PRIMARY KEY", "UNIQUE"):
            columns += [f"{kind} ({', '.join(map(quote, names))})" for names in self._constraints(kind)]
        columns += [
            row[0]
            for row in self._con.execute(
                "SELECT constraint_text FROM duckdb_constraints() WHERE table_name = ? AND database_name = "
                "current_database() AND constraint_type = 'CHECK' ORDER BY constraint_index",
                [self._table],
            ).fetchall()
        ]
        return f"CREATE TABLE {quote(to_table)} ({', '.join(columns)})"

    def _updates(self) -> tuple[Callable[[BatchResult], None], Callable[[], None]]:
        """A writer of each batch's changed cells into a temporary table, and the UPDATE of
        the table from it at the end (the column widened first when the migration widens it)."""
        created: list[bool] = []
        migrated: list[bool] = []

        def write(result: BatchResult) -> None:
            cells: Cells = result.cells  # type: ignore[assignment]  # a written batch has cells
            migrated.extend([True] if cells.changed or cells.repaired else [])  # a null 2.68 refuses: written
            changed = sorted(cells.changed + cells.filled)  # widening rewrites every row: a filled one too
            if not changed:
                return
            taken = indices(changed)
            rows = pa.table(
                {
                    "rid": result.batch.column(self._rowid).take(taken),
                    "value": result.batch.column(self._column).take(taken),
                }
            )
            if not created:
                self._con.register(self._batch, rows)
                self._con.execute(
                    f"CREATE TEMP TABLE {quote(self._updates_table)} AS SELECT * FROM {quote(self._batch)} LIMIT 0"
                )
                self._con.unregister(self._batch)
                created.append(True)
            _insert(self._con, self._updates_table, rows, self._batch)

        def finish() -> None:
            if not created:
                return
            if not migrated:  # only filled rows: the column is not widened, so they keep what they hold
                self._con.execute(f"DROP TABLE {quote(self._updates_table)}")
                return
            migrator = self.migrator
            if migrator.output_type != migrator.input_type:
                new_type = _duckdb_type(self._con, migrator.output_type, self._batch)
                self._con.execute(
                    f"ALTER TABLE {quote(self._table)} ALTER {quote(self._column)} SET DATA TYPE {new_type}"
                )
            self._con.execute(
                f"UPDATE {quote(self._table)} SET {quote(self._column)} = u.value "
                f"FROM {quote(self._updates_table)} AS u "
                f"WHERE {quote(self._table)}.rowid = u.rid"
            )
            self._con.execute(f"DROP TABLE {quote(self._updates_table)}")

        return write, finish


def open_table(path: str, destination: Destination, options: Any, job: Job) -> list[Input]:
    """The table ``options.table`` of the DuckDB file ``path``, for ``destination``. Raises
    :class:`~histmig.errors.UsageError` without ``--table`` or with two destinations,
    and :class:`~histmig.errors.ColumnError` for a missing file, table or column."""
    return [DuckdbTable(path, destination, options, job)]


FORMAT = Format(
    name="duckdb",
    suffixes=(".duckdb", ".db", ".ddb"),
    open=open_table,
    written_as=("parquet", "jsonl"),
    claims=lambda path: starts_with(
        path, b"DUCK", 8
    ),  # a DuckDB file's header, whatever its name (.db is SQLite's too)
    columnar=True,
    description="DuckDB",
    same_table=same_folded,
    companions=(".wal",),  # its write-ahead log
)
