"""DuckDB source and sinks: a table of an embedded database file (no server).

The table is read as Arrow record batches (histmig.sources.arrow migrates the messages
column, JSON, VARCHAR, BLOB or nested). ``convert`` writes to a Parquet or JSONL file, to a
new table (``to_table``) or back into the table (``in_place``); both table writes are one
transaction, rolled back on any error, so a failed or interrupted run leaves the database
as it was. Table and column names enter SQL only as quoted identifiers (:func:`quote`);
values only as parameters or Arrow data. A rejected row is written unchanged and reported.
A DuckDB input runs in one process whatever ``--jobs`` says (unlike a Parquet one).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack

import duckdb
import pyarrow as pa

from histmig.pipeline import Options
from histmig.report import Report
from histmig.sources import atomic_output
from histmig.sources.arrow import BatchOutcomes, ColumnMigrator, find_messages_column, write_jsonl_rows
from histmig.sources.parquet import parquet_sink
from histmig.tabular import ColumnError

BATCH_ROWS = 2048
"""Rows per record batch read from the table."""
ROW_GROUP_ROWS = 16 * 1024
"""Rows per row group of a Parquet output."""

_ROWID = "__histmig_rowid"
_UPDATES = "__histmig_updates"
_BATCH = "__histmig_batch"


def quote(name: str) -> str:
    """``name`` as a DuckDB quoted identifier: in double quotes, inner quotes doubled."""
    return '"' + name.replace('"', '""') + '"'


def _duckdb_type(con: duckdb.DuckDBPyConnection, type_: pa.DataType) -> str:
    """The DuckDB column type DuckDB gives an Arrow column of ``type_``."""
    con.register(_BATCH, pa.table({"v": pa.array([], type=type_)}))
    try:
        return con.execute(f"DESCRIBE SELECT v FROM {quote(_BATCH)}").fetchall()[0][1]
    finally:
        con.unregister(_BATCH)


def _arrow_schema(con: duckdb.DuckDBPyConnection, table: str) -> pa.Schema:
    relation = con.sql(f"SELECT * FROM {quote(table)} LIMIT 0")
    return (relation.to_arrow_table() if hasattr(relation, "to_arrow_table") else relation.fetch_arrow_table()).schema


def _column_types(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, str]:
    return {row[0]: row[1] for row in con.execute(f"DESCRIBE {quote(table)}").fetchall()}


def _insert(con: duckdb.DuckDBPyConnection, target: str, data: pa.Table | pa.RecordBatch) -> None:
    con.register(_BATCH, data)
    try:
        con.execute(f"INSERT INTO {quote(target)} SELECT * FROM {quote(_BATCH)}")
    finally:
        con.unregister(_BATCH)


def run_duckdb(
    path: str,
    output_path: str | None,
    options: Options,
    *,
    table: str | None,
    messages_column: str | None = None,
    id_column: str | None = None,
    to_table: str | None = None,
    in_place: bool = False,
) -> Report:
    """Migrate the messages column of every row of ``table`` in the DuckDB file ``path``
    and return the report. Writes to ``output_path`` (``.jsonl``: one JSON object a row;
    otherwise Parquet), to the new table ``to_table``, or into ``table`` itself
    (``in_place``); with none of them, nothing is written (``audit``/``check``). Raises
    :class:`~histmig.sources.arrow.ColumnError` (exit 2) for a missing file, table or
    column and for conflicting destinations; any error while writing a table rolls the
    transaction back and propagates."""
    if table is None:
        raise ColumnError(f"{path}: a DuckDB input needs --table")
    if sum((output_path is not None, to_table is not None, in_place)) > 1:
        raise ColumnError(f"{path}: give one of OUTPUT, --to-table and --in-place")
    if not os.path.isfile(path):
        raise ColumnError(f"{path}: no such file")
    writes = in_place or to_table is not None
    try:
        con = duckdb.connect(path, read_only=not writes)
    except duckdb.Error as exc:
        raise ColumnError(f"{path}: {exc}") from exc
    with con:
        found = con.execute("SELECT 1 FROM information_schema.tables WHERE table_name = ?", [table]).fetchall()
        if not found:
            raise ColumnError(f"{path}: no table {table!r}")
        if to_table is not None and con.execute("SELECT 1 FROM information_schema.tables WHERE table_name = ?", [to_table]).fetchall():
            raise ColumnError(f"{path}: table {to_table!r} already exists")
        source = f"{path}:{table}"
        types = _column_types(con, table)
        arrow_schema = _arrow_schema(con, table)
        column = find_messages_column(arrow_schema, messages_column, where=source)
        if id_column is not None and id_column not in types:
            raise ColumnError(f"{source}: no id column {id_column!r}")
        report = Report()
        if in_place:
            _in_place(con, table, column, id_column, source, options, report)
        elif to_table is not None:
            _to_table(con, table, to_table, column, id_column, source, options, report)
        else:
            _to_file(con, table, output_path, column, id_column, source, options, report)
        return report


def _batches(
    con: duckdb.DuckDBPyConnection, query: str, migrator_args: dict, report: Report
) -> Iterator[tuple[ColumnMigrator, pa.RecordBatch, BatchOutcomes]]:
    """Read ``query`` on a cursor of ``con`` batch by batch and yield each migrated batch."""
    with con.cursor() as cursor:
        relation = cursor.sql(query)
        reader = relation.to_arrow_reader(BATCH_ROWS) if hasattr(relation, "to_arrow_reader") else relation.fetch_record_batch(BATCH_ROWS)
        migrator = ColumnMigrator(reader.schema, **migrator_args)
        row = 0
        for batch in reader:
            new_batch, outcomes = migrator.migrate(batch, range(row, row + batch.num_rows))
            row += batch.num_rows
            outcomes.add_to(report)
            yield migrator, new_batch, outcomes


def _to_file(con, table, output_path, column, id_column, source, options, report) -> None:
    args = {"column": column, "source": source, "options": options, "id_column": id_column}
    batches = _batches(con, f"SELECT * FROM {quote(table)}", args, report)
    if output_path is None:
        for _ in batches:
            pass
        return
    with ExitStack() as stack:
        if output_path.lower().endswith(".jsonl"):
            out = stack.enter_context(atomic_output(output_path))
            for migrator, batch, outcomes in batches:
                write_jsonl_rows(out, batch, column, migrator.kind, outcomes)
            return
        write = None
        pending: list[pa.RecordBatch] = []
        for migrator, batch, _ in batches:
            if write is None:
                write = stack.enter_context(parquet_sink(output_path, migrator.output_schema))
                schema = migrator.output_schema
            pending.append(batch)
            if sum(b.num_rows for b in pending) >= ROW_GROUP_ROWS:
                write(pa.Table.from_batches(pending, schema))
                pending = []
        if write is None:
            empty = _arrow_schema(con, table)
            schema = ColumnMigrator(empty, column, source, options, id_column).output_schema
            write = stack.enter_context(parquet_sink(output_path, schema))
        if pending:
            write(pa.Table.from_batches(pending, schema))


def _to_table(con, table, to_table, column, id_column, source, options, report) -> None:
    args = {"column": column, "source": source, "options": options, "id_column": id_column}
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(f"CREATE TABLE {quote(to_table)} AS SELECT * FROM {quote(table)} LIMIT 0")
        altered = False
        for migrator, batch, _ in _batches(con, f"SELECT * FROM {quote(table)}", args, report):
            if not altered and migrator.output_type != migrator.input_type:
                new_type = _duckdb_type(con, migrator.output_type)
                con.execute(f"ALTER TABLE {quote(to_table)} ALTER {quote(column)} SET DATA TYPE {new_type}")
            altered = True
            _insert(con, to_table, batch)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def _in_place(con, table, column, id_column, source, options, report) -> None:
    args = {"column": column, "source": source, "options": options, "id_column": id_column}
    selected = [f"rowid AS {quote(_ROWID)}", quote(column)] + ([quote(id_column)] if id_column not in (None, column) else [])
    query = f"SELECT {', '.join(selected)} FROM {quote(table)}"
    con.execute("BEGIN TRANSACTION")
    try:
        created = False
        migrator = None
        for migrator, batch, outcomes in _batches(con, query, args, report):
            changed = outcomes.positions("changed")
            if not changed:
                continue
            rows = pa.table(
                {
                    "rid": batch.column(_ROWID).take(changed),
                    "value": batch.column(column).take(changed),
                }
            )
            if not created:
                con.register(_BATCH, rows)
                con.execute(f"CREATE TEMP TABLE {quote(_UPDATES)} AS SELECT * FROM {quote(_BATCH)} LIMIT 0")
                con.unregister(_BATCH)
                created = True
            _insert(con, _UPDATES, rows)
        if created and migrator is not None:
            if migrator.output_type != migrator.input_type:
                new_type = _duckdb_type(con, migrator.output_type)
                con.execute(f"ALTER TABLE {quote(table)} ALTER {quote(column)} SET DATA TYPE {new_type}")
            con.execute(
                f"UPDATE {quote(table)} SET {quote(column)} = u.value FROM {quote(_UPDATES)} AS u "
                f"WHERE {quote(table)}.rowid = u.rid"
            )
            con.execute(f"DROP TABLE {quote(_UPDATES)}")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
