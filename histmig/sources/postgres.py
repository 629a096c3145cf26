"""PostgreSQL: a table (or a view) of a server, through psycopg 3; no ORM.

INPUT is a ``postgresql://`` or ``postgres://`` URL; with ``--format postgres``, a libpq
connection string (``host=/run/postgresql dbname=app``) or a database name, what it does not
say coming from the ``PG*`` environment variables, as libpq does (an empty INPUT: all of
it). ``--table`` (``--schema``, default the search path) names the table, whose rows are
read by keyset pages in the order of its primary key or ``--key-column``
(:mod:`histmig.sources.table`). The messages column is ``jsonb``, ``json``, ``text``,
``varchar`` or ``bytea`` (UTF-8 JSON), read as the bytes of its text: a ``jsonb`` value's
text is PostgreSQL's own (keys sorted by length then bytes, one space after ``:`` and ``,``),
so "unchanged" there means the same JSON value.

Writes: ``--in-place`` updates the changed rows only, a ``READ COMMITTED`` transaction a page
(or one for the table with ``--single-transaction``), each UPDATE conditional on the value
read; ``--to-table``
creates the new table (``LIKE`` the input, with its defaults, constraints and indexes),
copies every row and updates the changed ones, in one ``REPEATABLE READ`` transaction; a
Parquet or JSONL output is read in one ``REPEATABLE READ READ ONLY`` transaction, a snapshot
of the table. ``audit`` and ``check`` read page by page outside any transaction. Identifiers
enter SQL only as quoted identifiers (``psycopg.sql.Identifier``), values only as parameters.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from histmig import redact
from histmig.errors import UnreadableInput, UnwritableOutput, UsageError
from histmig.sources.base import Destination, Format, Job, Written, lazy
from histmig.sources.table import Column, Kind, Page, PageResult, RowUpdate, TableInput, no_table

psycopg = lazy("psycopg")
pq = lazy("psycopg.pq")
sql = lazy("psycopg.sql")
pa = lazy("pyarrow")

SCHEMES = ("postgresql://", "postgres://")

MAX_NAME_BYTES = 63
"""The longest name PostgreSQL keeps whole (``NAMEDATALEN - 1``, in bytes of UTF-8): a longer
one it cuts short without an error, so that ``--to-table`` could name the table read."""

_FETCH_ROWS = 512
"""Rows a server-side cursor fetches at a time (``--conversation``)."""

EQUAL_AS_READ = frozenset({"bool", "int2", "int4", "int8", "text", "varchar", "date", "uuid"})
"""Key types whose values compare in Python, as psycopg reads them, as PostgreSQL compares
them (text: under a deterministic collation)."""

TEXT_TYPES = frozenset({"json", "jsonb", "text", "varchar"})
"""Column types (base types of a domain) whose text a history may be."""

ARROW_TYPES = {
    "bool": "bool_",
    "int2": "int16",
    "int4": "int32",
    "int8": "int64",
    "float4": "float32",
    "float8": "float64",
    "text": "string",
    "varchar": "string",
    "bpchar": "string",
    "name": "string",
    "bytea": "binary",
    "date": "date32",
}
"""Arrow types of PostgreSQL types in a Parquet output (by pyarrow factory name); timestamps
below; any other type is written as its text (``numeric``, ``uuid``, ``json``, arrays...)."""

_CONNINFO = re.compile(r"\s*(\w+)\s*=")
"""The start of a libpq connection string: a keyword and ``=``."""

_SECRET_KEYWORDS = ("password", "sslpassword", "oauth_client_secret", "scram_client_key", "scram_server_key")


def _claims(location: str) -> bool:
    """Whether the INPUT ``location`` is a PostgreSQL one: a ``postgresql://`` URL, or a
    libpq connection string (it starts with one of libpq's keywords and ``=``). Such a
    location is never taken for a path nor globbed, whatever characters its password holds."""
    if location.startswith(SCHEMES):
        return True
    start = _CONNINFO.match(location)
    if start is None:
        return False
    try:
        keywords = {option.keyword.decode() for option in pq.Conninfo.get_defaults()}
    except ImportError:  # no libpq: a keyword= string is still PostgreSQL's, for _connect to say what is missing
        return True
    return start[1] in keywords


class PostgresTable(TableInput):
    """A PostgreSQL table opened for a run (see the module docstring). Raises
    :class:`~histmig.errors.UnreadableInput` when psycopg is missing or the server cannot
    be reached (``--single-transaction`` without ``--in-place`` is refused by the plan,
    :mod:`histmig.run.plan`)."""

    PARAM = "%s"
    _not_copied: tuple[str, ...] = ()  # what a --to-table table does not have (_uncopied)

    def __init__(self, location: str, destination: Destination, options: Any, job: Job) -> None:
        for flag, name in (
            ("--table", options.table),
            ("--to-table", destination.to_table),
            ("--schema", options.schema),
        ):
            if name is not None and len(name.encode()) > MAX_NAME_BYTES:
                raise UsageError(
                    f"{self.display(location)}: {flag} {name!r} is {len(name.encode())} bytes long; PostgreSQL names "
                    f"are at most {MAX_NAME_BYTES} bytes (it would cut this one short, naming another table)"
                )
        self._schema = options.schema
        super().__init__(location, destination, options, job)

    @staticmethod
    def display(location: str) -> str:
        """``location`` without its password (:func:`histmig.redact.location`)."""
        return redact.location(location) or "postgres"

    def _connect(self, write: bool) -> None:
        location = self.location
        given = location.startswith(SCHEMES) or "=" in location or not location
        try:
            connect = psycopg.connect
        except ImportError as exc:
            raise UnreadableInput(
                f"{self.display(location)}: reading PostgreSQL needs psycopg 3 and libpq: pip install "
                f"'psycopg[binary]' ({exc})"
            ) from exc
        if given:
            self._check_secrets(location)
        try:
            self._con = connect(location if given else "", autocommit=True, **({} if given else {"dbname": location}))
        except psycopg.Error as exc:
            raise UnreadableInput(
                f"{self.display(location)}: cannot connect: {redact.message(str(exc).strip(), location)}"
            ) from exc

    def _check_secrets(self, location: str) -> None:
        """Refuse (:class:`~histmig.sources.base.UsageError`) a location libpq cannot parse,
        or whose secrets libpq reads otherwise than as written (``app:p@ss@host``: libpq's
        password is ``p``, its host ``ss@host``; ``app:sec/ret@host``: no password, port
        ``sec``), before connecting: libpq's messages about it would quote the password's
        pieces, and the password shown hidden would not be the one used."""
        try:
            parsed = psycopg.conninfo.conninfo_to_dict(location)
        except psycopg.ProgrammingError as exc:
            raise UsageError(
                f"{self.display(location)}: not a connection string libpq can read: "
                f"{redact.message(str(exc).strip(), location)}"
            ) from exc
        read = sorted(str(parsed[key]) for key in _SECRET_KEYWORDS if parsed.get(key))
        if read != sorted(secret for secret in redact.secrets(location) if secret):
            how = (
                "percent-encode '@', '/', ':' and spaces in a URL's user and password (%40, %2F, %3A, %20)"
                if location.startswith(SCHEMES)
                else "quote a value holding a space or a quote: password='a b\\'c'"
            )
            raise UsageError(f"{self.display(location)}: libpq would not read the password as written; {how}")

    def _identifier(self, *names: str) -> str:
        """``names`` (a schema and a table, or a column) as one quoted identifier, as text."""
        return sql.Identifier(*names).as_string(self._con)

    def quote(self, name: str) -> str:
        return self._identifier(name).replace("%", "%%")  # every statement has parameters: '%' is doubled

    def _qualified(self, table: str) -> str:
        """``table`` in ``--schema`` (else as the search path finds it), quoted for a statement."""
        return self._identifier(*filter(None, (self._schema, table))).replace("%", "%%")

    def _relation(self) -> str:
        return self._qualified(self.table)

    def _oid(self, table: str) -> int | None:
        return self._query("SELECT to_regclass(%s)::oid", [self._identifier(*filter(None, (self._schema, table)))])[0][
            0
        ]

    def _exists(self, table: str) -> bool:
        return self._oid(table) is not None

    def _columns(self) -> list[Column]:
        oid = self._oid(self.table)
        if oid is None:
            rows = self._query(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = "
                + ("%s" if self._schema else "ANY(current_schemas(false))")
                + " ORDER BY table_name",
                [self._schema] if self._schema else [],
            )
            within = f" in schema {self._schema!r}" if self._schema else ""
            raise no_table(self.name, self.table, [row[0] for row in rows], within)
        self._table_oid = oid
        rows = self._query(
            "SELECT a.attname, COALESCE(b.typname, t.typname) FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
            "LEFT JOIN pg_type b ON b.oid = t.typbasetype AND t.typtype = 'd' "
            "WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            [oid],
        )
        return [Column(*row) for row in rows]

    def _primary_key(self) -> tuple[str, ...]:
        rows = self._query(
            "SELECT a.attname FROM pg_index i CROSS JOIN unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) "
            "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
            "WHERE i.indrelid = %s AND i.indisprimary ORDER BY k.n",
            [self._table_oid],
        )
        return tuple(row[0] for row in rows)

    def _kind(self, column: Column) -> Kind | None:
        return "text" if column.type in TEXT_TYPES else "binary" if column.type == "bytea" else None

    def _stored(self, column: str, kind: Kind) -> tuple[str, ...]:
        quoted = self.quote(column)
        return (quoted if kind == "binary" else f"convert_to({quoted}::text, 'UTF8')",)

    def _new_value(self, output: bytes, stored: tuple[Any, ...]) -> Any:
        return output if self.kind == "binary" else output.decode()

    def _query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:  # results in binary: a bytea comes as its bytes, not as hex text twice its size
            cursor = self._con.cursor(binary=True).execute(statement, params)
            return cursor.fetchall() if cursor.description is not None else []
        except psycopg.Error as exc:
            raise UnreadableInput(f"{self.name}: {str(exc).strip()}") from exc

    def _index_columns(self) -> list[tuple[str, ...]]:
        rows = self._query(
            "SELECT i.indexrelid, a.attname FROM pg_index i "
            "CROSS JOIN unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) "
            "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
            "WHERE i.indrelid = %s ORDER BY i.indexrelid, k.n",
            [self._table_oid],
        )
        indexes: dict[int, list[str]] = {}
        for index, column in rows:
            indexes.setdefault(index, []).append(column)
        return [tuple(columns) for columns in indexes.values()]

    def _ordered(self, statement: str) -> Iterator[list[tuple[Any, ...]]]:
        """The rows of ``statement`` from one server-side cursor (``WITH HOLD``: it outlives
        the page transactions of an in-place run on the same connection), a batch at a time."""
        try:
            with self._con.cursor("histmig_conversations", binary=True, withhold=True) as cursor:
                cursor.execute(statement)
                while rows := cursor.fetchmany(_FETCH_ROWS):
                    yield rows
        except psycopg.Error as exc:
            raise UnreadableInput(f"{self.name}: {str(exc).strip()}") from exc

    def _sorts(self, column: str) -> bool:
        """Whether PostgreSQL plans an order by ``column`` and a comparison of two of its values
        (not ``json``, ``xml``, ``point``: no ordering or equality operator), asked of the
        planner alone (``EXPLAIN``, nothing read)."""
        quoted = self.quote(column)
        try:
            self._query(f"EXPLAIN SELECT 1 FROM {self._relation()} ORDER BY {quoted}")
            self._query(f"EXPLAIN SELECT 1 FROM {self._relation()} WHERE {quoted} IS DISTINCT FROM {quoted}")
        except UnreadableInput:
            return False
        return True

    def _equal_as_read(self) -> bool:
        """Whether every conversation key column is of a base type whose values PostgreSQL
        holds equal exactly when the values read are equal in Python (:data:`EQUAL_AS_READ`),
        text under a deterministic collation (equal only when their bytes are): then the
        ordered read needs no window flagging where a conversation starts (about a sixth of
        the read of 100,000 rows of one message). Not ``char(n)`` (padded), a float or a
        numeric (NaN, ``1.0`` and ``1.00``), ``citext``, a nondeterministic collation, an
        enum or a domain."""
        keys = list(self.grouping.keys) if self.grouping is not None else []
        rows = self._query(
            "SELECT t.typname, t.typtype, COALESCE(c.collisdeterministic, true) FROM pg_attribute a "
            "JOIN pg_type t ON t.oid = a.atttypid LEFT JOIN pg_collation c ON c.oid = a.attcollation "
            "WHERE a.attrelid = %s AND a.attname = ANY(%s) AND a.attnum > 0 AND NOT a.attisdropped",
            [self._table_oid, keys],
        )
        return len(rows) == len(keys) and all(
            kind == "b" and name in EQUAL_AS_READ and deterministic for name, kind, deterministic in rows
        )

    def _nulls_last(self, column: str) -> list[str]:
        # the order as an index on (conversation, order) holds it: read from the index, not sorted again
        return [f"{column} NULLS LAST"]

    def _locking(self) -> str:
        return " FOR UPDATE"

    def _update(self, statement: str, params: list[tuple[Any, ...]]) -> list[bool]:
        try:
            with self._con.cursor() as cursor:
                cursor.executemany(statement + " RETURNING 1", params, returning=True)
                done = [cursor.fetchone() is not None]
                while cursor.nextset():
                    done.append(cursor.fetchone() is not None)
        except psycopg.Error as exc:
            raise UnwritableOutput(f"{self.name}: {str(exc).strip()}") from exc
        return done

    def _arrow_type(self, column: Column) -> Any:
        if column.type in ("timestamp", "timestamptz"):
            return pa.timestamp("us", tz="UTC" if column.type == "timestamptz" else None)
        factory = ARROW_TYPES.get(column.type)
        return getattr(pa, factory)() if factory else None

    def _as_text(self, expression: str) -> str:
        return f"{expression}::text"

    def _begin(self) -> None:
        destination, con = self._destination, self._con
        if destination.output is not None or destination.to_table is not None:
            con.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            con.read_only = destination.output is not None
        elif destination.in_place:  # each statement sees what others committed before it, whatever the server's default
            con.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
        if destination.in_place and not self._options.single_transaction:
            self._write = self._page_transaction
            return
        if destination.writes:
            self._stack.enter_context(con.transaction())
        if destination.in_place:
            self._write = lambda page, result: self._apply_page(self._relation(), page, result)
        elif destination.to_table is not None:
            new = self._qualified(destination.to_table)
            if destination.overwrite:  # in the run's one transaction: the old table stays if the run fails
                self._query(f"DROP TABLE IF EXISTS {new}")
            self._query(
                f"CREATE TABLE {new} (LIKE {self._relation()} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING "
                "INDEXES)"
            )
            self._query(f"INSERT INTO {new} SELECT * FROM {self._relation()}")
            self._write = lambda page, result: self.apply(new, self.changes(page, result))
            self._not_copied = self._uncopied()

    def _uncopied(self) -> tuple[str, ...]:
        """What ``CREATE TABLE (LIKE ...)`` leaves out of the new table: the read table's
        foreign keys and triggers (PostgreSQL's LIKE copies neither; a trigger copied would
        fire on histmig's own writes), in words (``2 foreign keys``)."""
        oid = self._oid(self.table)
        counts = self._query(
            "SELECT (SELECT count(*) FROM pg_constraint WHERE conrelid = %s AND contype = 'f'), "
            "(SELECT count(*) FROM pg_trigger WHERE tgrelid = %s AND NOT tgisinternal)",
            [oid, oid],
        )[0]
        return tuple(
            f"{count} {what if count == 1 else what + 's'}"
            for count, what in zip(counts, ("foreign key", "trigger"))
            if count
        )

    def written(self) -> Written:
        return replace(super().written(), not_copied=self._not_copied)

    def _page_transaction(self, page: Page, result: PageResult) -> None:
        """Write a page's changed rows in a transaction of their own."""
        changes = self.changes(page, result)
        if changes:
            with self._con.transaction():
                self._apply_page(self._relation(), page, result, changes)

    def _apply_page(self, table: str, page: Page, result: PageResult, changes: list[RowUpdate] | None = None) -> None:
        """Write a page's changed rows over the input, in the transaction open: under
        ``--conversation``, a conversation at a time, its rows locked and compared with what
        was read (:meth:`~histmig.sources.table.TableInput.apply_conversations`)."""
        changes = self.changes(page, result) if changes is None else changes
        if self.grouping is None:
            self.apply(table, changes)
        else:
            self.apply_conversations(table, page, changes)


FORMAT = Format(
    name="postgres",
    suffixes=(),
    open=PostgresTable.open,
    written_as=("parquet", "jsonl"),
    claims=_claims,
    columnar=True,
    description="PostgreSQL",
    same_table=str.__eq__,
    display=PostgresTable.display,
)
PostgresTable.FORMAT = FORMAT
