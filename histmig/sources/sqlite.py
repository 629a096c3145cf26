"""SQLite: a table (or a view) of a database file, through the standard library's sqlite3.

INPUT is a file whose first bytes say SQLite (``SQLite format 3``), whatever its name
(``.sqlite``, ``.sqlite3``, ``.db``: a ``.db`` file DuckDB wrote goes to DuckDB), or any file
with ``--format sqlite``. ``--table`` names the table, whose rows are read by keyset pages in
the order of its primary key, else its ``rowid``, or ``--key-column``
(:mod:`histmig.sources.table`). The messages column holds JSON as ``TEXT`` or ``BLOB`` (any
declared type: SQLite stores each value with its own class), read as the bytes of the value;
a migrated value is written back with the class it had.

Writes: ``--in-place`` and ``--to-table`` gather the changed rows in a temporary table as the
pages come (the database itself is not locked meanwhile: an application goes on writing), and
write them at the end in one transaction, each UPDATE conditional on the value read
(``--to-table``: the new table created, every row copied, the changed ones updated). A
database another connection holds locked is waited for :data:`LOCK_WAIT` seconds, then the
run stops with an error saying so and nothing written. A Parquet or JSONL output is read
page by page. The database is opened read-only unless the run writes to it, and never
created.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing
from typing import Any
from urllib.parse import quote as url_quote

from histmig.errors import ColumnError, UnreadableInput, UnwritableOutput
from histmig.sources.base import Format, free_name, lazy, same_folded, starts_with
from histmig.sources.duckdb import quote
from histmig.sources.table import Column, Kind, Page, PageResult, RowUpdate, Seen, TableInput, no_table

pa = lazy("pyarrow")

MAGIC = b"SQLite format 3\0"
"""The first bytes of every SQLite database file."""

LOCK_WAIT = 5.0
"""Seconds a statement waits for a lock another connection holds before the run stops."""

_CHANGES = "__histmig_changes"
"""The temporary table the changed rows are gathered in (:meth:`SqliteTable._free_name`)."""
_SCRATCH = "__histmig_new_table"
"""The copy ``--to-table --overwrite`` fills before it takes the replaced table's name."""
_BATCH_ROWS = 1000
_BATCH_CONVERSATIONS = 200
"""Conversations whose gathered rows are written by one round (their rows found again together)."""


def affinity(declared: str) -> str:
    """The type affinity of a column's declared type, by SQLite's rules (datatype3.html
    §3.1): ``INTEGER``, ``TEXT``, ``BLOB``, ``REAL`` or ``NUMERIC``."""
    upper = declared.upper()
    if "INT" in upper:
        return "INTEGER"
    if any(word in upper for word in ("CHAR", "CLOB", "TEXT")):
        return "TEXT"
    if "BLOB" in upper or not upper:
        return "BLOB"
    if any(word in upper for word in ("REAL", "FLOA", "DOUB")):
        return "REAL"
    return "NUMERIC"


class SqliteTable(TableInput):
    """A SQLite table opened for a run (see the module docstring)."""

    PARAM = "?"
    DISTINCT = "IS NOT"  # IS DISTINCT FROM is SQLite 3.39's

    @staticmethod
    def display(location: str) -> str:
        return location

    def _connect(self, write: bool) -> None:
        path = self.location
        if not os.path.isfile(path):
            raise ColumnError(f"{path}: no such file")
        uri = f"file:{url_quote(os.path.abspath(path))}?mode="
        try:
            # a writer killed mid-transaction: SQLite rolls its journal back at the first read, which needs write access
            if not write and os.path.exists(path + "-journal"):
                with closing(sqlite3.connect(uri + "rw", uri=True, timeout=LOCK_WAIT)) as recovering:
                    recovering.execute("SELECT count(*) FROM sqlite_master").fetchall()
            self._con = sqlite3.connect(
                uri + ("rw" if write else "ro"), uri=True, timeout=LOCK_WAIT, isolation_level=None
            )
            self._con.execute("SELECT count(*) FROM sqlite_master").fetchall()
        except sqlite3.Error as exc:
            self._disconnect()
            raise UnreadableInput(f"{path}: {self._problem(exc)}") from exc

    @staticmethod
    def _problem(exc: sqlite3.Error) -> str:
        """``exc`` in plain words; a lock another connection holds says how long it was waited for."""
        if "locked" in str(exc) or "busy" in str(exc):
            return f"the database is locked by another connection (waited {LOCK_WAIT:g} s); nothing was written"
        return str(exc)

    def quote(self, name: str) -> str:
        return quote(name)

    def _relation(self) -> str:
        return quote(self.table)

    def _exists(self, table: str) -> bool:
        return bool(
            self._query(
                "SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = ? COLLATE NOCASE", [table]
            )
        )

    def _equal_as_read(self) -> bool:
        """In a table declared without a ``COLLATE`` clause every column compares as ``BINARY``,
        as Python compares the values read (SQLite stores a NaN as NULL); a view's columns may
        carry its tables' collations. The window a flag needs costs SQLite a copy of every row
        read (about a quarter of a grouped run's time)."""
        rows = self._query(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ? COLLATE NOCASE", [self.table]
        )
        return len(rows) == 1 and isinstance(rows[0][0], str) and "COLLATE" not in rows[0][0].upper()

    def _columns(self) -> list[Column]:
        rows = self._query("SELECT name, type FROM pragma_table_info(?) ORDER BY cid", [self.table])
        if not rows:
            held = self._query(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
                "AND name NOT LIKE 'sqlite!_%' ESCAPE '!' ORDER BY name"
            )
            raise no_table(self.name, self.table, [row[0] for row in held])
        return [Column(*row) for row in rows]

    def _primary_key(self) -> tuple[str, ...]:
        key = tuple(
            row[0]
            for row in self._query("SELECT name FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk", [self.table])
        )
        return key or self._hidden_columns()

    def _hidden_columns(self) -> tuple[str, ...]:
        return (
            ("rowid",)
            if self._query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [self.table])
            else ()
        )

    def _kind(self, column: Column) -> Kind | None:
        return "binary" if "BLOB" in column.type.upper() else "text"

    def _stored(self, column: str, kind: Kind) -> tuple[str, ...]:
        return (f"CAST({quote(column)} AS BLOB)", f"typeof({quote(column)})")

    def _new_value(self, output: bytes, stored: tuple[Any, ...]) -> Any:
        return output.decode() if stored[1] == "text" else output

    def _query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._con.execute(statement, params).fetchall()
        except sqlite3.Error as exc:
            raise UnreadableInput(f"{self.name}: {self._problem(exc)}") from exc

    def _update(self, statement: str, params: list[tuple[Any, ...]]) -> list[bool]:
        cursor = self._con.cursor()
        done = []
        for row in params:
            cursor.execute(statement, row)
            done.append(cursor.rowcount == 1)
        return done

    def _arrow_type(self, column: Column) -> Any:
        return {"INTEGER": pa.int64, "TEXT": pa.string, "BLOB": pa.binary, "REAL": pa.float64}.get(
            affinity(column.type), lambda: None
        )()

    def _as_text(self, expression: str) -> str:
        return f"CAST({expression} AS TEXT)"

    def _begin(self) -> None:
        if not (self._destination.in_place or self._destination.to_table is not None):
            return
        keys = ", ".join(f"k{i}" for i in range(len(self.key)))
        self._changes = quote(self._free_name(_CHANGES))
        self._query(
            f"CREATE TEMP TABLE {self._changes} "
            f"(seq INTEGER PRIMARY KEY, new, stored, location, id, conversation, {keys})"
        )
        self._seen: dict[int, Seen] = {}
        self._write = self._gather

    def _free_name(self, name: str) -> str:
        """:func:`~histmig.sources.base.free_name` among the database's names (tables, views,
        indexes, triggers, this connection's temporary ones), the table's and ``--to-table``'s."""
        rows = self._query("SELECT name FROM sqlite_master UNION ALL SELECT name FROM sqlite_temp_master")
        return free_name(name, [*(row[0] for row in rows), self.table, self._destination.to_table])

    def _gather(self, page: Page, result: PageResult) -> None:
        """Keep a page's changed rows in the temporary table, for :meth:`_finish` (and, under
        ``--conversation``, what their conversations held when read)."""
        marks = ", ".join("?" * (5 + len(self.key)))
        changes = self.changes(page, result)
        rows = [(c.new, c.stored, c.location, c.id, c.conversation, *c.key) for c in changes]
        numbers = {c.conversation for c in changes}
        self._seen.update(
            (seen.number, self.read_as(page, seen)) for seen in page.conversations or () if seen.number in numbers
        )
        try:
            self._con.executemany(
                f"INSERT INTO temp.{self._changes} (new, stored, location, id, conversation, "
                f"{', '.join(f'k{i}' for i in range(len(self.key)))}) VALUES ({marks})",
                rows,
            )
        except sqlite3.Error as exc:
            raise UnwritableOutput(f"{self.name}: {self._problem(exc)}") from exc

    def _finish(self, ok: bool) -> None:
        """Write the gathered rows in one transaction (``ok``): the new table first for
        ``--to-table``. Raises :class:`~histmig.errors.UnwritableOutput`, nothing
        written, when the database stays locked or a write fails."""
        destination = self._destination
        if not ok or not (destination.in_place or destination.to_table is not None):
            return
        con = self._con
        try:
            con.execute("BEGIN IMMEDIATE")
            try:
                table = self._relation()
                if destination.to_table is not None:
                    table = self._copy(destination.to_table)
                if self.grouping is None:
                    seq = 0
                    while rows := con.execute(
                        f"SELECT * FROM temp.{self._changes} WHERE seq > ? ORDER BY seq LIMIT {_BATCH_ROWS}", [seq]
                    ).fetchall():
                        self.apply(table, [_change(row) for row in rows])
                        seq = rows[-1][0]
                else:
                    seen = list(self._seen.values())
                    for start in range(0, len(seen), _BATCH_CONVERSATIONS):
                        batch = seen[start : start + _BATCH_CONVERSATIONS]
                        marks = ", ".join("?" * len(batch))
                        rows = con.execute(
                            f"SELECT * FROM temp.{self._changes} WHERE conversation IN ({marks}) "
                            "ORDER BY conversation, seq",
                            [one.number for one in batch],
                        ).fetchall()
                        self.apply_conversations(
                            table, Page("", (), (), conversations=tuple(batch)), list(map(_change, rows))
                        )
                if destination.to_table is not None:
                    self._put_in_place(table, destination.to_table)
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:  # not after a COMMIT an interrupt came too late to stop
                    con.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise UnwritableOutput(f"{self.name}: {self._problem(exc)}") from exc

    def _index_columns(self) -> list[tuple[str, ...]]:
        names = [row[0] for row in self._query("SELECT name FROM pragma_index_list(?)", [self.table])]
        return [
            tuple(row[0] for row in self._query("SELECT name FROM pragma_index_info(?) ORDER BY seqno", [name]))
            for name in names
        ]

    def _ordered(self, statement: str) -> Iterator[list[tuple[Any, ...]]]:
        try:
            cursor = self._con.execute(statement)
            while rows := cursor.fetchmany(_BATCH_ROWS):
                yield rows
        except sqlite3.Error as exc:
            raise UnreadableInput(f"{self.name}: {self._problem(exc)}") from exc

    def _copy(self, to_table: str) -> str:
        """Create a table with the input's columns (declared types, ``NOT NULL``, primary key)
        and copy every row into it: ``to_table``, or with ``--overwrite`` a new table that
        :meth:`_put_in_place` then renames to it (the table read may be a view of the table
        replaced: it is read before that one is dropped); returns it quoted."""
        info = self._query('SELECT name, type, "notnull", pk FROM pragma_table_info(?) ORDER BY cid', [self.table])
        columns = [
            f"{quote(name)} {quote(type_) if type_ else ''}{' NOT NULL' if notnull else ''}"
            for name, type_, notnull, _ in info
        ]
        key = [quote(name) for name, _, _, pk in sorted(info, key=lambda row: row[3]) if pk]
        columns += [f"PRIMARY KEY ({', '.join(key)})"] if key else []
        new = quote(self._free_name(_SCRATCH) if self._destination.overwrite else to_table)
        names = ", ".join(quote(row[0]) for row in info)
        self._con.execute(f"CREATE TABLE {new} ({', '.join(columns)})")
        self._con.execute(f"INSERT INTO {new} ({names}) SELECT {names} FROM {self._relation()}")
        return new

    def _put_in_place(self, table: str, to_table: str) -> None:
        """With ``--overwrite``: drop ``to_table`` and rename ``table`` (quoted: the copy
        :meth:`_copy` filled) to it, in the run's one transaction (the old table stays if the
        run fails)."""
        if self._destination.overwrite:
            self._con.execute(f"DROP TABLE IF EXISTS {quote(to_table)}")
            self._con.execute(f"ALTER TABLE {table} RENAME TO {quote(to_table)}")


def _change(row: tuple[Any, ...]) -> RowUpdate:
    """A gathered row of the temporary table as the :class:`~histmig.sources.table.RowUpdate` it keeps."""
    return RowUpdate(tuple(row[6:]), row[2], row[1], row[3], row[4], row[5])


FORMAT = Format(
    name="sqlite",
    suffixes=(".sqlite", ".sqlite3", ".db"),
    open=SqliteTable.open,
    written_as=("parquet", "jsonl"),
    claims=lambda path: starts_with(path, MAGIC),
    columnar=True,
    description="SQLite",
    same_table=same_folded,
    companions=("-wal", "-shm", "-journal"),  # a write-ahead log's commits, its index, a rollback journal
)
SqliteTable.FORMAT = FORMAT
