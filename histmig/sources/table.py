"""A table of a SQL database, read in key order by keyset pages and written back row by row;
shared by the PostgreSQL and SQLite formats (:mod:`histmig.sources.postgres`,
:mod:`histmig.sources.sqlite`). Not a format itself.

Reading: the rows are read in the order of their key (the primary key, or ``--key-column``), a
page at a time (``SELECT ... WHERE (key) >= (last key read) ORDER BY key LIMIT n``, ``n``
chosen so that a page holds about :data:`PAGE_BYTES` of messages), so memory holds a few pages
whatever the table's size, and no transaction stays open between pages (but for the writes
that ask for one). The row of the last key read is asked again and dropped: a key seen twice
(a ``--key-column`` that is not unique, with which keyset pages would skip rows) or a null key
stops the run with an error rather than leave rows out silently. Each row is named by its
key (``id=42``) in every report line. The messages cell is read as the bytes of the stored
text (each format's SQL for it), and each page is a task that carries its cells (depth 1,
like stdin chunks), so ``--jobs`` workers migrate them and send back the migrated texts; the
parent writes, in page order.

Writing: only the rows the migration changed are written (an unchanged row gets no UPDATE: no
new row version, no trigger fired), each by ``UPDATE ... SET messages = new WHERE key = k AND
messages = the value read``. A row another client wrote after histmig read it is therefore
never overwritten: it is *skipped*, counted and named in the report
(:class:`~histmig.sources.base.Skipped`), and a second run migrates it. When the UPDATEs are
committed is the format's (PostgreSQL: a transaction a page, or one for the table; SQLite: one
at the end). ``--to-table`` copies every row into a new table and updates the changed ones
there; a Parquet or JSONL output gets every column of every row. A rejected row is left as it
is and reported.
"""

from __future__ import annotations

import hashlib
import itertools
from abc import abstractmethod
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple

from histmig import interrupt
from histmig.engine import Plan, run_conversations, run_records
from histmig.errors import ColumnError, UnwritableOutput, UsageError
from histmig.records import MESSAGE_FIELD_CANDIDATES, Conversation, Outcome, Record
from histmig.report import Report
from histmig.sources.arrow import holds_history, jsonl_line
from histmig.sources.atomic import atomic_output
from histmig.sources.base import Destination, Format, Input, Job, Skipped, Task, TaskResult, Written, lazy

pa = lazy("pyarrow")

PAGE_BYTES = 2 << 20
"""Bytes of messages a page holds, about: the next page asks for as many rows as the last
page's rows averaged would fill this (from :data:`FIRST_PAGE_ROWS` rows to
:data:`MAX_PAGE_ROWS`)."""
FIRST_PAGE_ROWS = 64
MAX_PAGE_ROWS = 4096
ROW_GROUP_BYTES = 16 << 20
"""Bytes of messages gathered into one row group of a Parquet output (pages are smaller)."""

Kind = Literal["text", "binary"]
"""How a messages column stores its JSON: as text (``json``, ``jsonb``, ``text``) or bytes."""


class Column(NamedTuple):
    """A column of the table: its ``name`` and its ``type`` as the database names it."""

    name: str
    type: str


class RowUpdate(NamedTuple):
    """A migrated row to write: its ``key`` values, the messages ``stored`` (as read: the
    UPDATE's condition), the ``new`` value (a parameter of the column's type), where it
    is for the report (``location``, ``id``), and under ``--conversation`` the number of its
    conversation in the run (:class:`Seen`)."""

    key: tuple[Any, ...]
    stored: Any
    new: Any
    location: str
    id: str | None
    conversation: int | None = None


@dataclass
class PageResult(TaskResult):
    """What a page came to: its ``report``, the migrated texts by position in the page
    (``outputs``) and the positions of rejected rows (``rejected``)."""

    outputs: dict[int, bytes] = field(default_factory=dict)
    rejected: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Page(Task):
    """A page of rows as a task: the table's name (``source``), each row's messages bytes
    (``cells``, ``None`` for a null cell: not a record, left as it is), location (``names``,
    its key: ``id=42``) and ``ids`` (``--id-column``), and the ``rows`` as read, which stay
    in the parent (:meth:`sent`) for the writes; under ``--conversation``, the page's
    ``conversations`` (whole: a page never cuts one), in order."""

    source: str
    cells: tuple[bytes | None, ...]
    names: tuple[str, ...]
    ids: tuple[str | None, ...] | None = None
    rows: tuple[tuple[Any, ...], ...] = ()
    size: int = 0
    conversations: tuple[Seen, ...] | None = None
    columns: tuple[str, ...] = ()
    """The table's columns (:meth:`~histmig.engine.Plan.for_columns`)."""

    @property
    def depth(self) -> int:
        return 1

    def sent(self) -> Page:
        """The page as a worker needs it: without its rows."""
        return replace(self, rows=())

    def run(self, job: Job, slot: memoryview | None) -> PageResult:
        """Put every non-null cell through ``job``'s processor
        (:func:`~histmig.engine.run_records`); keep the migrated texts and the rejected
        positions. Never raises for bad input."""
        result = PageResult(Report.in_memory())
        ids = self.ids
        if isinstance(job, Plan):
            job = job.for_columns(self.columns)

        def record(raw: bytes, i: int) -> Record:
            return Record(raw, self.source, self.names[i], None if ids is None else ids[i])

        def accept(i: int, outcome: Outcome) -> Outcome:
            if (
                ids is not None and ids[i] is None and outcome.record.record_id is not None
            ):  # a null id names no record, not the envelope's
                outcome.record = outcome.record._replace(record_id=None)
            if outcome.status == "changed":
                result.outputs[i] = outcome.output  # type: ignore[assignment]  # changed: it has output bytes
            elif outcome.status == "rejected":
                result.rejected.append(i)
            return outcome

        if self.conversations is None:
            run_records(
                ((raw, i) for i, raw in enumerate(self.cells) if raw is not None),
                job.processor(),
                result.report,
                record,
                accept,
            )
        else:
            grouped, processor = self._grouped(record), job.processor()
            run_conversations(grouped, processor, result.report, accept, quiet_too=False)  # type: ignore[arg-type]
        result.last = self.names[-1] if self.names else None
        return result

    def _grouped(self, record: Callable[[bytes, int], Record]) -> Iterator[tuple[Conversation, list[int]]]:
        """Each conversation of the page with the positions of its records (a null cell is
        none)."""
        cells = self.cells
        for seen in self.conversations or ():
            at = [i for i in range(seen.start, seen.end) if cells[i] is not None]
            if at:
                raws = [cells[i] for i in at]
                yield Conversation.read(raws, record, at, seen.name, seen.note, seen.refused), at  # type: ignore[arg-type]


class Seen(NamedTuple):
    """One conversation of a page (``--conversation``): its rows ``start`` to ``end`` in the
    page, its ``number`` in the run, its ``name`` and ``note``
    (:class:`~histmig.records.Conversation`), why it is ``refused`` (past
    ``--max-conversation-bytes``), the SQL condition (``where``, with ``params``) that finds
    its rows, and the :func:`_digest` of its rows as read, which a write compares with what
    they hold then (``""`` until a write needs it, :meth:`TableInput.read_as`); ``keyed``:
    found by its conversation key instead (``params``: the key of its first row, whose
    conversation key the database compares; ``where`` none), so that the conversations of a
    page are found again by one statement."""

    start: int
    end: int
    number: int
    name: str
    note: str | None
    refused: str | None
    where: str
    params: tuple[Any, ...]
    digest: str
    keyed: bool = False


_VERIFY_BATCH = 200
"""Conversations found again by one statement when their changed rows are written."""
_SAVEPOINT = "histmig_conversations"
"""The savepoint a batch of conversations' writes is rolled back to (:meth:`TableInput.apply_conversations`)."""


def _conversation(change: RowUpdate) -> int | None:
    return change.conversation


def _digest(rows: Sequence[Sequence[Any]]) -> str:
    """What a conversation's rows hold, in 64 hex digits whatever their order: a SHA-256 of
    each row's key values, stored messages and checked columns
    (:meth:`TableInput._checked`), sorted, a bytes value (a driver may give a ``memoryview``)
    by its own SHA-256 (not its ``repr``, which costs a few times more). Two reads of the same
    rows give the same digest; a row added, deleted or rewritten in between, another."""
    held = sorted(
        repr(
            tuple(
                hashlib.sha256(value).digest() if isinstance(value, (bytes, bytearray, memoryview)) else value
                for value in row
            )
        ).encode()
        for row in rows
    )
    return hashlib.sha256(b"\n".join(held)).hexdigest()


def _all_locked(rows: Sequence[Sequence[Any]], locked: set[str] | None, k: int) -> bool:
    """Whether each of ``rows`` (its key its first ``k`` values) is among the rows ``locked``
    (:meth:`TableInput._locked`: their keys' ``repr``, as a NaN equals itself there; ``None``:
    the database locks no rows, its transaction holds them all)."""
    return locked is None or all(repr(tuple(row[:k])) in locked for row in rows)


def row_name(key: Sequence[str], values: Sequence[Any]) -> str:
    """A row's location in report lines: its key, ``id=42`` (``tenant=7,id=42``)."""
    if len(key) == 1:  # a row at a time: the common key of one column without a join
        return f"{key[0]}={values[0]}"
    return ",".join(f"{name}={value}" for name, value in zip(key, values))


def row_names(key: Sequence[str], rows: Sequence[Sequence[Any]]) -> tuple[str, ...]:
    """The :func:`row_name` of each of ``rows``, each starting with its ``key`` values."""
    if len(key) == 1:  # as row_name's, without a call a row
        column = key[0]
        return tuple([f"{column}={row[0]}" for row in rows])
    k = len(key)
    return tuple([row_name(key, row[:k]) for row in rows])


def tables_said(tables: Sequence[str]) -> str:
    """A database's ``tables`` in words, for an error line (the first 20)."""
    return f"its tables: {', '.join(tables[:20])}{', ...' if len(tables) > 20 else ''}" if tables else "it has no table"


def no_table(where: str, table: str, tables: Sequence[str], within: str = "") -> ColumnError:
    """The error of a ``--table`` the database ``where`` does not hold (``within``: the schema
    looked in, in words), naming the ``tables`` it holds (:func:`tables_said`)."""
    return ColumnError(f"{where}: no table {table!r}{within} ({tables_said(tables)})")


class TableInput(Input):
    """A table of a database opened for a run (see the module docstring). A format
    subclasses it with its connection and SQL (the abstract methods); this class reads the
    pages, makes the tasks and writes the results.

    ``location`` is the database (a path, a URL); ``options`` gives ``table``,
    ``messages_column``, ``key_column``, ``id_column``. The table is looked at when the
    input is made (a connection opened and closed, so that none crosses the fork of the
    workers), and connected to again on entering the ``with`` block. Raises
    :class:`~histmig.errors.UsageError` without ``--table`` or for a ``--to-table`` naming the table read,
    and :class:`~histmig.errors.ColumnError` for a missing table or column, a column of
    a type histmig cannot migrate, or a table without a key."""

    window = 2
    PARAM = "?"
    """The driver's parameter placeholder."""
    DISTINCT = "IS DISTINCT FROM"
    """The SQL operator saying two values differ, a null equal to a null."""
    FORMAT: Format

    def __init__(self, location: str, destination: Destination, options: Any, job: Job) -> None:
        what = self.FORMAT.description
        if options.table is None:
            raise UsageError(f"{self.display(location)}: a {what} input needs --table")
        self.location, self._destination, self._job, self._options = location, destination, job, options
        self.table = options.table
        self.name = f"{self.display(location)}:{self.table}"
        self._con: Any = None
        self._connect(write=False)
        try:
            self._inspect(options)
        finally:
            self._disconnect()
        self._stack = ExitStack()
        self._skipped: list[Skipped] = []
        self._write: Callable[[Page, PageResult], None] = lambda page, result: None
        self._flush: Callable[[], None] = lambda: None

    @classmethod
    def open(cls, location: str, destination: Destination, options: Any, job: Job) -> list[Input]:
        """The table ``options.table`` of the database ``location``, for ``destination``: the
        format's :data:`~histmig.sources.base.Opener`."""
        return [cls(location, destination, options, job)]

    # ------------------------------------------------------------ what a format provides

    @staticmethod
    @abstractmethod
    def display(location: str) -> str:
        """``location`` as report lines name it (a URL without its password)."""

    @abstractmethod
    def _connect(self, write: bool) -> None:
        """Open ``self._con`` (``write``: for a run that writes). Raises
        :class:`~histmig.errors.UnreadableInput` when it cannot."""

    def _disconnect(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    @abstractmethod
    def quote(self, name: str) -> str:
        """``name`` as a quoted identifier."""

    @abstractmethod
    def _relation(self) -> str:
        """The table (maybe schema-qualified), quoted."""

    @abstractmethod
    def _columns(self) -> list[Column]:
        """The table's columns, in order. Raises :class:`ColumnError` when there is no such
        table."""

    @abstractmethod
    def _primary_key(self) -> tuple[str, ...]:
        """The columns of the table's own key (``()`` when it has none)."""

    @abstractmethod
    def _kind(self, column: Column) -> Kind | None:
        """How ``column`` stores a history, ``None`` when it cannot hold one."""

    @abstractmethod
    def _stored(self, column: str, kind: Kind) -> tuple[str, ...]:
        """SQL expressions read for the messages column (of ``kind``): the first gives its bytes
        (and is the UPDATE's condition), others what :meth:`_new_value` needs."""

    @abstractmethod
    def _new_value(self, output: bytes, stored: tuple[Any, ...]) -> Any:
        """The parameter that stores the migrated text ``output`` in the messages column of
        a row whose stored values were ``stored``."""

    @abstractmethod
    def _query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of ``statement``. Raises :class:`~histmig.errors.UnreadableInput`
        for a database error."""

    @abstractmethod
    def _update(self, statement: str, params: list[tuple[Any, ...]]) -> list[bool]:
        """Run ``statement`` (an UPDATE of one row) once for each of ``params``; whether each
        updated its row."""

    @abstractmethod
    def _arrow_type(self, column: Column) -> Any:
        """The Arrow type of ``column`` in a Parquet output (``None``: its text form)."""

    @abstractmethod
    def _as_text(self, expression: str) -> str:
        """SQL of ``expression``'s text form."""

    def _file_expression(self, column: Column) -> str:
        """The SQL read for ``column`` of a Parquet output: the column, or its text form when
        it has no Arrow type (:meth:`_arrow_type`); a JSONL output reads the column itself."""
        quoted = self.quote(column.name)
        return quoted if self._arrow_type(column) is not None else self._as_text(quoted)

    def _begin(self) -> None:
        """Set up the run on entering: transactions (on ``self._stack``, committed when it
        closes without an error), and for ``--in-place`` and ``--to-table`` the writer of a
        page (``self._write``: :meth:`changes`, :meth:`apply`)."""

    def _finish(self, ok: bool) -> None:
        """Commit what was written (``ok``) or roll it back, before the connection closes."""

    # ------------------------------------------------------------ the table

    def _inspect(self, options: Any) -> None:
        columns = self._columns()
        names = [c.name for c in columns]
        by_name = dict(zip(names, columns))
        name = options.messages_column
        if name is None:
            name = next(
                (c for c in MESSAGE_FIELD_CANDIDATES if c in by_name and self._kind(by_name[c]) is not None), None
            ) or self._holding(columns, options.grouping is not None)
        elif name not in by_name:
            raise ColumnError(f"{self.name}: no column {name!r} (columns: {', '.join(names)})")
        kind = self._kind(by_name[name])
        if kind is None:
            raise ColumnError(f"{self.name}: column {name!r} is {by_name[name].type}: expected JSON text or bytes")
        key = (options.key_column,) if options.key_column is not None else self._primary_key()
        if not key:
            raise ColumnError(f"{self.name}: no primary key; name a unique column with --key-column")
        self.note: str | None = None
        hidden = self._hidden_columns()
        if options.key_column is None and hidden and key != hidden and not self._unique(key):
            nulls, rows = self._nulls(key)
            self.note = (
                f"{self.name}: the primary key ({', '.join(key)}) is null on "
                f"{'every row' if nulls == rows else f'{nulls} of {rows} rows'}; "
                f"rows are read in {hidden[0]} order and named by it"
            )
            key = hidden
        for column, what in [*((k, "key column") for k in key), (options.id_column, "id column")]:
            if column is not None and column not in by_name and column not in self._hidden_columns():
                raise ColumnError(f"{self.name}: no {what} {column!r}")
        if (
            self._destination.to_table is not None
            and not self._destination.overwrite
            and self._exists(self._destination.to_table)
        ):
            raise UnwritableOutput(
                f"{self.display(self.location)}: table {self._destination.to_table!r} already exists "
                "(--overwrite replaces it)"
            )
        grouping = options.grouping
        if grouping is not None:
            grouped = [*(("--conversation", c) for c in (() if grouping.whole else grouping.keys))]
            grouped += [("--order", grouping.order)] if grouping.order is not None else []
            for what, column in grouped:
                if column not in by_name and column not in self._hidden_columns():
                    raise ColumnError(f"{self.name}: no column {column!r} (columns: {', '.join(names)})")
                if column in by_name and not self._sorts(column):
                    raise ColumnError(
                        f"{self.name}: {what} column {column!r} is {by_name[column].type}, whose values the database "
                        f"can neither sort nor compare: name a column of another type, or read the table through a "
                        f"view that casts it to text"
                    )
        self.grouping = grouping
        self._indexes = self._index_columns() if grouping is not None else []
        self.columns, self.column, self.kind, self.key = columns, name, kind, key
        self.stored = self._stored(name, kind)
        shadowed = key == hidden and any(column.lower() in hidden for column in names)  # a column named rowid
        if grouping is not None and (options.key_column is not None or shadowed):
            twice = self._twice(key)  # a conversation's rows are not read in key order: not seen as they are read
            if twice is not None:
                raise self._not_unique(twice)

    def _holding(self, columns: list[Column], one: bool) -> str:
        """The one column of ``columns`` that holds histories whatever its name (the chat-app
        example's ``message_list``): a text or bytes column whose first non-null value is a
        history or an envelope holding one, or with ``one`` (``--conversation``) one message
        (a store of one message a row), as a Parquet column is found
        (:func:`~histmig.sources.arrow.find_messages_column`); with none, a column of a
        candidate's name (``messages``) of another type, for the caller to name with its type.
        Raises :class:`ColumnError` when none does and there is no such column (naming
        ``--conversation`` when, without it, a column holds one message a row), or several do."""
        found, messages = [], []
        for column in columns:
            kind = self._kind(column)
            if kind is None:
                continue
            stored, quoted = self._stored(column.name, kind)[0], self.quote(column.name)
            first = self._query(f"SELECT {stored} FROM {self._relation()} WHERE {quoted} IS NOT NULL LIMIT 1")
            cell = self._cell(first[0][0]) if first else None
            if cell is not None and holds_history(cell, one):
                found.append(column.name)
            elif cell is not None and holds_history(cell, True):
                messages.append(column.name)
        if len(found) == 1:
            return found[0]
        if found:
            raise ColumnError(
                f"{self.name}: several columns hold histories ({', '.join(found)}): name one with --messages-column"
            )
        names = {column.name for column in columns}
        named = next((candidate for candidate in MESSAGE_FIELD_CANDIDATES if candidate in names), None)
        if named is not None:  # a column of a history's name, but of another type: said with its type
            return named
        if messages:
            raise ColumnError(
                f"{self.name}: column {messages[0]!r} holds one message a row, not a history: put each conversation "
                "together with --conversation KEY --order KEY (docs/layouts.md)"
            )
        raise ColumnError(f"{self.name}: cannot tell the messages column (name it with --messages-column)")

    def _unique(self, key: tuple[str, ...]) -> bool:
        """Whether ``key`` is non-null on every row: SQLite lets a primary key that is not an
        ``INTEGER PRIMARY KEY`` be null, on any number of rows (the chat-app example's ``id INT
        PRIMARY KEY``, never set, is null on every row); it keeps the non-null ones unique."""
        return not self._query(f"SELECT 1 FROM {self._relation()} WHERE {self._null(key)} LIMIT 1")

    def _twice(self, key: tuple[str, ...]) -> tuple[Any, ...] | None:
        """A value of ``key`` two rows hold, or ``None``: asked, a scan of the table, of a
        grouped run's key that no primary key makes unique (``--key-column``, or a hidden
        ``rowid`` a column of that name hides)."""
        columns = ", ".join(map(self.quote, key))
        found = self._query(
            f"SELECT {columns} FROM {self._relation()} WHERE NOT ({self._null(key)}) "
            f"GROUP BY {columns} HAVING count(*) > 1 LIMIT 1"
        )
        return tuple(found[0]) if found else None

    def _nulls(self, key: tuple[str, ...]) -> tuple[int, int]:
        """How many rows have ``key`` null, of how many: a whole scan, so asked only once
        :meth:`_unique` found one, to say in the note which of the two a table is (the
        chat-app example's key is null on every row)."""
        [(found, rows)] = self._query(
            f"SELECT count(*) FILTER (WHERE {self._null(key)}), count(*) FROM {self._relation()}"
        )
        return found, rows

    def _null(self, key: tuple[str, ...]) -> str:
        """The SQL condition that a row's ``key`` is null (any of its columns)."""
        return " OR ".join(f"{self.quote(c)} IS NULL" for c in key)

    def _hidden_columns(self) -> tuple[str, ...]:
        """Key columns a table has besides those it lists (SQLite's ``rowid``)."""
        return ()

    def _sorts(self, column: str) -> bool:
        """Whether the database sorts and compares the values of ``column`` (a conversation or
        order column): SQLite any value."""
        return True

    @abstractmethod
    def _exists(self, table: str) -> bool:
        """Whether ``table`` exists (beside the input's)."""

    def _selected(self) -> tuple[list[str], list[Column]]:
        """The SQL read for each row: the key, the stored messages, then the ``extra``
        columns (every other column for a file output; else the ``--id-column``)."""
        output = self._destination.output
        if output is not None:
            extra = [c for c in self.columns if c.name != self.column]
        else:
            id_column = self._options.id_column
            extra = [c for c in self.columns if c.name == id_column and id_column not in self.key]
        parquet = output is not None and self._destination.written_as == "parquet"
        selected = [*map(self.quote, self.key), *self.stored]
        selected += [self._file_expression(c) if parquet else self.quote(c.name) for c in extra]
        return selected, extra

    # ------------------------------------------------------------ reading

    def tasks(self) -> Iterator[Page]:
        if self.grouping is not None:
            yield from self._conversations()
            return
        selected, extra = self._selected()
        key, k, s = self.key, len(self.key), len(self.stored)
        names = tuple(column.name for column in self.columns)
        keys = ", ".join(map(self.quote, key))
        marks = ", ".join([self.PARAM] * k)
        head = f"SELECT {', '.join(selected)} FROM {self._relation()}"
        tail = f" ORDER BY {keys} LIMIT {self.PARAM}"
        one_key = key[0] if len(key) == 1 and key[0] not in self._hidden_columns() else None
        id_column = self._options.id_column or one_key
        id_at = (  # without --id-column, a one-column key (a uuid primary key) is the id, as on DuckDB
            key.index(id_column)
            if id_column in key
            else next((k + s + i for i, c in enumerate(extra) if c.name == id_column), None)
        )
        if (
            self._options.key_column is not None
        ):  # keyset pages never reach a null key where the engine sorts nulls last (PostgreSQL)
            nulls = self._query(
                f"SELECT {keys} FROM {self._relation()} WHERE "
                f"{' OR '.join(f'{self.quote(c)} IS NULL' for c in key)} LIMIT 1",
                [],
            )
            if nulls:
                raise ColumnError(
                    f"{self.name}: a row has a null key ({row_name(key, nulls[0])}); name a unique non-null "
                    "column with --key-column"
                )
        last: tuple[Any, ...] | None = None
        limit = FIRST_PAGE_ROWS
        while True:
            if last is None:
                rows = self._query(head + tail, [limit])
            else:
                rows = self._query(f"{head} WHERE ({keys}) >= ({marks}){tail}", [*last, limit + 1])
            asked = limit + (last is not None)
            fresh = self._fresh(rows, last)
            if not fresh:
                return
            cells = tuple(self._cell(row[k]) for row in fresh)
            size = sum(len(c) for c in cells if c is not None)
            yield Page(
                self.name,
                cells,
                row_names(key, fresh),
                None if id_at is None else tuple(None if row[id_at] is None else str(row[id_at]) for row in fresh),
                tuple(fresh),
                size,
                columns=names,
            )
            if len(rows) < asked:
                return
            last = tuple(fresh[-1][:k])
            limit = max(1, min(MAX_PAGE_ROWS, PAGE_BYTES * len(fresh) // max(size, 1)))

    def _id_at(self, extra: list[Column]) -> int | None:
        """Where a row read holds the ``--id-column`` (``None``: not given)."""
        id_column, key = self._options.id_column, self.key
        if id_column in key:
            return key.index(id_column)
        return next((len(key) + len(self.stored) + i for i, c in enumerate(extra) if c.name == id_column), None)

    def _conversations(self) -> Iterator[Page]:
        """The pages of a table whose rows make conversations (``--conversation``): every row
        read by one query in (conversation, order, key) order, streamed
        (:meth:`_ordered`), cut into pages of whole conversations of about
        :data:`PAGE_BYTES`. Where a conversation starts the database says, by its own equality
        (a collation, ``char(n)``, NaN), as it sorted them, unless the values read compare as it
        compares them (:meth:`_equal_as_read`). A row whose conversation key is null
        is a conversation of its own, and says so. A conversation past
        ``--max-conversation-bytes`` is refused whole."""
        grouping = self.grouping
        selected, extra = self._selected()
        key, k = self.key, len(self.key)
        groups = [] if grouping.whole else list(grouping.keys)
        order = self._nulls_last(self.quote(grouping.order)) if grouping.order else []
        ordered = ", ".join([*map(self.quote, groups), *order, *map(self.quote, key)])
        n = self._width = len(selected)
        checked = self._checked()
        flagged = bool(groups) and not self._equal_as_read()  # where a conversation starts, the database says
        starts = " OR ".join(f"lag({c}) OVER (ORDER BY {ordered}) {self.DISTINCT} {c}" for c in map(self.quote, groups))
        columns = ", ".join([*selected, *checked, *([f"({starts})"] if flagged else [])])
        statement = f"SELECT {columns} FROM {self._relation()} ORDER BY {ordered}"
        id_at = self._id_at(extra)
        g = len(groups)
        rows: list[tuple[Any, ...]] = []
        cells: list[bytes | None] = []
        seen: list[Seen] = []
        size = held = start = number = 0  # held: the bytes of the conversation open, from rows[start]
        current: Any = None
        opened: tuple[str, tuple[Any, ...], str, str | None, bool] | None = None  # its where, params, name, note, keyed
        by_key = f" WHERE {self._among(1)}"

        def page() -> Page:
            return Page(
                self.name,
                tuple(cells),
                row_names(key, rows),
                None if id_at is None else tuple([None if row[id_at] is None else str(row[id_at]) for row in rows]),
                tuple(rows),
                size,
                tuple(seen),
            )

        def close() -> Seen:
            where, params, name, note, keyed = opened  # type: ignore[misc]  # a conversation is open
            refused = grouping.refusal(name, held, len(rows) - start, "rows")
            return Seen(start, len(rows), number - 1, name, note, refused, where, params, "", keyed)

        for batch in self._ordered(statement):  # the columns selected, then the checked ones (kept for read_as)
            for row in batch:
                if None in row[:k]:
                    raise ColumnError(
                        f"{self.name}: a row has a null key ({row_name(key, row[:k])}); "
                        "name a unique non-null column with --key-column"
                    )
                values = row[n : n + g]
                if opened is None or None in values or (row[-1] if flagged else values != current):
                    if opened is not None:
                        seen.append(close())
                        if size >= PAGE_BYTES:
                            yield page()
                            rows, cells, seen, size = [], [], [], 0
                    alone = None in values
                    current, start, held = values, len(rows), 0
                    where, params, name, note = self._conversation_of(groups, values, row[:k], alone, by_key)
                    opened = where, params, name, note, bool(groups) and not alone
                    number += 1
                rows.append(row)
                cell = row[k]
                if cell is not None:
                    if type(cell) is not bytes:
                        cell = self._cell(cell)
                    size += len(cell)
                    held += len(cell)
                cells.append(cell)
        if opened is not None:
            seen.append(close())
            yield page()

    def _equal_as_read(self) -> bool:
        """Whether the conversation key values read compare in Python as the database compares
        them, so that the ordered read needs no flag of where a conversation starts (a window
        over every row read): the format tells from the columns' types and collations (by
        default, never: ``char(n)``, collations, NaN, types read as others)."""
        return False

    def _conversation_of(
        self, groups: list[str], values: tuple[Any, ...], key: tuple[Any, ...], alone: bool, by_key: str
    ) -> tuple[str, tuple[Any, ...], str, str | None]:
        """The SQL condition finding a conversation's rows, its parameters, its name and
        note: for a row whose conversation key is null, by the row's own ``key``
        (``by_key``, built once a run), the whole table (``--conversation '*'``), or none for
        one found by its key ``values`` in ``groups`` (:meth:`_unchanged` joins its rows to
        its first row's ``key``, the parameters)."""
        if alone:
            said = f"no conversation key ({', '.join(groups)} null): a conversation of its own"
            return by_key, key, row_name(self.key, key), said
        if not groups:
            return "", (), f"the whole table {self.table}", None
        return "", key, row_name(groups, values), None

    def _checked(self) -> list[str]:
        """The SQL read for a row besides its key and messages that a write in place checks it
        still holds (:meth:`read_as`): its conversation key columns and ``--order`` column, so
        that a row the application moved to another conversation or place is not overwritten."""
        grouping = self.grouping
        groups = [] if grouping is None or grouping.whole else list(grouping.keys)
        return [*map(self.quote, groups), *([self.quote(grouping.order)] if grouping and grouping.order else [])]

    def _ordered(self, statement: str) -> Iterator[list[tuple[Any, ...]]]:
        """The rows of ``statement`` as they come (one query, not pages), in batches: a format
        streams them from a cursor."""
        yield self._query(statement)

    def unchanged_since(self, seen: Seen) -> bool:
        """Whether the rows of conversation ``seen`` still hold what they held when read: the
        same rows (none added, none deleted), each with the same messages, conversation key and
        order (:meth:`_checked`); the rows are locked until the transaction ends where the
        database can (:meth:`_locking`)."""
        keys = ", ".join(map(self.quote, self.key))
        read = ", ".join([keys, self.stored[0], *self._checked()])
        rows, locked = self._locked(read, keys, f" FROM {self._relation()}{seen.where}", list(seen.params))
        return _digest(rows) == seen.digest and _all_locked(rows, locked, len(self.key))

    def _locked(
        self, read: str, keys: str, rest: str, params: Sequence[Any]
    ) -> tuple[list[tuple[Any, ...]], set[str] | None]:
        """The columns ``read`` of the rows of ``SELECT ... rest`` (``rest`` from its ``FROM``
        on), locked until the transaction ends where the database can (:meth:`_locking`), as
        they are once the locks are held: a statement that waited for another transaction's
        locks reads what was there when it began (PostgreSQL's READ COMMITTED), not a row that
        transaction added, so the rows are locked first, reading only their ``keys``, then read;
        and the keys locked (:func:`_all_locked`; ``None`` where the database locks no rows): a
        row read then that was not locked (moved away and back meanwhile) may still change."""
        locking = self._locking()
        locked = None
        if locking:
            locked = {repr(tuple(row)) for row in self._query(f"SELECT {keys}{rest}{locking}", params)}
        return self._query(f"SELECT {read}{rest}", params), locked

    def _nulls_last(self, column: str) -> list[str]:
        """The ``ORDER BY`` terms of ``column`` ascending, a null after every value (a row
        without an order value ends its conversation), in SQL every database here reads."""
        return [f"{column} IS NULL", column]

    def _locking(self) -> str:
        """The clause that locks the rows a statement reads until the transaction ends
        (``FOR UPDATE``; SQLite's write transaction holds the whole database)."""
        return ""

    def _fresh(self, rows: list[tuple[Any, ...]], last: tuple[Any, ...] | None) -> list[tuple[Any, ...]]:
        """``rows`` without the row of the ``last`` key read (asked again; gone if it was
        deleted meanwhile). Raises :class:`ColumnError` for a key seen twice or a null key."""
        k = len(self.key)
        start = 0
        while last is not None and start < len(rows) and tuple(rows[start][:k]) == last:
            start += 1
        previous = last
        if start > 1:
            raise self._not_unique(last)  # type: ignore[arg-type]  # start > 1: last is a key
        for row in rows[start:]:
            values = tuple(row[:k])
            if None in values:
                raise ColumnError(
                    f"{self.name}: a row has a null key ({row_name(self.key, values)}); name a unique non-null "
                    "column with --key-column"
                )
            if values == previous:
                raise self._not_unique(values)
            previous = values
        return rows[start:]

    def _not_unique(self, values: tuple[Any, ...]) -> ColumnError:
        return ColumnError(
            f"{self.name}: key {row_name(self.key, values)} is on two rows; name a unique column with --key-column"
        )

    @staticmethod
    def _cell(value: Any) -> bytes | None:
        """The messages bytes of a stored value (a number is its JSON text: not a history)."""
        if value is None or isinstance(value, bytes):
            return value
        if isinstance(value, (bytearray, memoryview)):
            return bytes(value)
        return str(value).encode()

    # ------------------------------------------------------------ writing

    def __enter__(self) -> TableInput:
        destination = self._destination
        self._connect(write=destination.in_place or destination.to_table is not None)
        try:
            self._begin()
            if destination.output is not None:
                self._write = self._file(destination.output)
        except BaseException as failed:  # a transaction begun is rolled back, an output discarded
            self._stack.__exit__(type(failed), failed, failed.__traceback__)
            self._disconnect()
            raise
        return self

    def __exit__(  # type: ignore[override]  # Input's takes the three as *_
        self, kind: type[BaseException] | None, error: BaseException | None, trace: Any
    ) -> None:
        try:
            try:
                if kind is None:
                    self._flush()
                self._finish(kind is None)
                if kind is None:
                    interrupt.commit_begins()  # from here, the run ends as a finished one
            except BaseException as failed:  # the outputs are then discarded, not renamed
                self._stack.__exit__(type(failed), failed, failed.__traceback__)
                raise
            self._stack.__exit__(kind, error, trace)
        finally:
            self._disconnect()

    def write(self, task: Task, result: TaskResult, slot: memoryview | None) -> None:
        assert isinstance(task, Page) and isinstance(result, PageResult)
        self._write(task, result)

    def changes(self, page: Page, result: PageResult) -> list[RowUpdate]:
        """The rows of ``page`` its ``result`` migrated, in page order."""
        k, s = len(self.key), len(self.stored)
        found = []
        starts = [seen.start for seen in page.conversations or ()]
        for i in sorted(result.outputs):
            row = page.rows[i]
            found.append(
                RowUpdate(
                    tuple(row[:k]),
                    row[k],
                    self._new_value(result.outputs[i], tuple(row[k : k + s])),
                    page.names[i],
                    None if page.ids is None else page.ids[i],
                    page.conversations[bisect_right(starts, i) - 1].number if page.conversations else None,
                )
            )
        return found

    def apply_conversations(self, table: str, page: Page, changes: Sequence[RowUpdate]) -> None:
        """:meth:`apply` under ``--conversation``: a conversation's changed rows are written
        only if its rows still hold what was read (:meth:`unchanged_since`, in the write's
        transaction), and only all together: when the UPDATE of one of them updates no row (a
        trigger that leaves it undone), the writes of the batch are rolled back to a savepoint
        and done again without that conversation. A conversation not written has every changed
        row skipped, as the application left it, for a rerun to complete."""
        by_number = {seen.number: seen for seen in page.conversations or ()}
        grouped = [(number, list(group)) for number, group in itertools.groupby(changes, key=_conversation)]
        fresh = self._unchanged([self.read_as(page, by_number[number]) for number, _ in grouped])  # type: ignore[index]
        ready: list[RowUpdate] = []
        for number, rows in grouped:
            if number in fresh:
                ready += rows
            else:
                self._skipped += [Skipped(self.name, c.location, c.id, conversation=True) for c in rows]
        statement = self.update_statement(table)
        while ready:
            self._query(f"SAVEPOINT {_SAVEPOINT}")
            done = self._update(statement, [(c.new, *c.key, c.stored) for c in ready])
            undone = {c.conversation for c, updated in zip(ready, done) if not updated}
            if undone:
                self._query(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")
            self._query(f"RELEASE SAVEPOINT {_SAVEPOINT}")
            if not undone:
                return
            self._skipped += [
                Skipped(self.name, c.location, c.id, conversation=True) for c in ready if c.conversation in undone
            ]
            ready = [c for c in ready if c.conversation not in undone]

    def read_as(self, page: Page, seen: Seen) -> Seen:
        """``seen`` with the :func:`_digest` of its rows as ``page`` read them (its rows, in
        this process), unless it has it already: taken only of a conversation a write
        concerns, not of every conversation read."""
        if seen.digest:
            return seen
        k, n = len(self.key), self._width
        rows = page.rows[seen.start : seen.end]
        checks = n + len(self._checked())
        return seen._replace(digest=_digest([(*row[: k + 1], *row[n:checks]) for row in rows]))

    def _unchanged(self, seen: list[Seen]) -> set[int]:
        """The numbers of the conversations of ``seen`` whose rows still hold what was read:
        those found by their conversation key by one statement a batch (a table without an
        index on it is scanned once a batch, not once a conversation), each row read with the
        key of its conversation's first row, the database joining them by its own equality (a
        row moved from one conversation to another counts against both); the others one by one
        (:meth:`unchanged_since`). The rows are locked as there."""
        fresh = {one.number for one in seen if not one.keyed and self.unchanged_since(one)}
        keyed = [one for one in seen if one.keyed]
        groups = self.grouping.keys if self.grouping is not None else ()
        relation, k = self._relation(), len(self.key)
        firsts = ", ".join(
            [
                *(f"{self.quote(c)} AS {self.quote(f'histmig key {i}')}" for i, c in enumerate(self.key)),
                *(f"{self.quote(c)} AS {self.quote(f'histmig group {i}')}" for i, c in enumerate(groups)),
            ]
        )
        same = " AND ".join(
            f"{relation}.{self.quote(c)} = f.{self.quote(f'histmig group {i}')}" for i, c in enumerate(groups)
        )
        # as read_as digests a row; the key named by its table: SQLite's rowid of a join would be ambiguous
        keys = ", ".join(f"{relation}.{self.quote(c)}" for c in self.key)
        read = ", ".join(
            [*(f"f.{self.quote(f'histmig key {i}')}" for i in range(k)), keys, self.stored[0], *self._checked()]
        )
        for start in range(0, len(keyed), _VERIFY_BATCH):
            batch = keyed[start : start + _VERIFY_BATCH]
            rows, locked = self._locked(
                read,
                keys,
                f" FROM {relation} JOIN (SELECT {firsts} FROM {relation} WHERE {self._among(len(batch))}) "
                f"AS f ON {same}",
                [value for one in batch for value in one.params],
            )
            held: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
            for row in rows:
                held.setdefault(tuple(row[:k]), []).append(tuple(row[k:]))
            fresh |= {
                one.number
                for one in batch
                if _digest(mine := held.get(tuple(one.params), [])) == one.digest and _all_locked(mine, locked, k)
            }
        return fresh

    def _among(self, count: int) -> str:
        """The SQL condition that a row's key is one of ``count`` keys given as parameters,
        each compared with the column (a ``char(n)`` key padded as it is; a ``VALUES`` list
        would be typed apart)."""
        columns = list(map(self.quote, self.key))
        if len(columns) == 1:
            return f"{columns[0]} IN ({', '.join([self.PARAM] * count)})"
        one = "(" + " AND ".join(f"{c} = {self.PARAM}" for c in columns) + ")"
        return "(" + " OR ".join([one] * count) + ")"

    def update_statement(self, table: str) -> str:
        """The UPDATE of one row of ``table`` (quoted), conditional on its stored messages:
        parameters new value, key values, stored bytes."""
        keys = ", ".join(map(self.quote, self.key))
        marks = ", ".join([self.PARAM] * len(self.key))
        return (
            f"UPDATE {table} SET {self.quote(self.column)} = {self.PARAM} WHERE ({keys}) = ({marks}) AND "
            f"{self.stored[0]} = {self.PARAM}"
        )

    def apply(self, table: str, changes: Sequence[RowUpdate]) -> None:
        """Write ``changes`` to ``table`` (quoted) by :meth:`update_statement`; a row whose
        messages are no longer those read is left alone and counted as skipped."""
        if not changes:
            return
        done = self._update(self.update_statement(table), [(c.new, *c.key, c.stored) for c in changes])
        self._skipped += [Skipped(self.name, c.location, c.id) for c, updated in zip(changes, done) if not updated]

    def written(self) -> Written:
        destination = self._destination
        notes = ([self.note] if self.note is not None else []) + self._notes()
        if not destination.writes:
            return Written(notes=notes)
        return Written(
            rejected="rows",
            skipped=list(self._skipped),
            named=self.name if destination.in_place else None,
            notes=notes,
        )

    def _notes(self) -> list[str]:
        """Under ``--conversation``, when no index of the table starts with the conversation and order
        columns: that one would let the database read the rows in that order instead of
        sorting the table first. The statement names its index (SQLite requires a name;
        PostgreSQL's own default, ``TABLE_COLUMNS_idx``), so it runs as printed on both."""
        grouping = self.grouping
        if grouping is None:
            return []
        wanted = (*(() if grouping.whole else grouping.keys), *filter(None, [grouping.order]))
        if not wanted or any(tuple(index[: len(wanted)]) == wanted for index in self._indexes):
            return []
        columns = ", ".join(map(self.quote, wanted))
        index = self.quote("_".join([self.table, *wanted, "idx"]))
        return [
            f"{self.name}: no index on ({columns}), so the table was sorted to read it conversation by conversation; "
            f"CREATE INDEX {index} ON {self._relation()} ({columns}) would let it be read in that order"
        ]

    def _index_columns(self) -> list[tuple[str, ...]]:
        """The columns of each index of the table, in order (none known: ``[]``)."""
        return []

    def _file(self, output: str) -> Callable[[Page, PageResult], None]:
        """A writer of every row of each page to the Parquet or JSONL file ``output``,
        written atomically."""
        _, extra = self._selected()
        k, s = len(self.key), len(self.stored)
        at = {c.name: k + s + i for i, c in enumerate(extra)}

        def cells(page: Page, result: PageResult) -> list[bytes | None]:
            return [result.outputs.get(i, cell) for i, cell in enumerate(page.cells)]

        if self._destination.written_as == "jsonl":
            out = self._stack.enter_context(atomic_output(output))

            def write_lines(page: Page, result: PageResult) -> None:
                rejected = set(result.rejected)
                for i, (row, raw) in enumerate(zip(page.rows, cells(page, result))):
                    values = {c.name: None if c.name == self.column else row[at[c.name]] for c in self.columns}
                    out.write(jsonl_line(values, self.column, raw, i in rejected))

            return write_lines
        from histmig.sources.parquet import parquet_sink

        types = [
            pa.binary()
            if c.name == self.column and self.kind == "binary"
            else pa.string()
            if c.name == self.column
            else self._arrow_type(c) or pa.string()
            for c in self.columns
        ]
        schema = pa.schema([pa.field(c.name, t) for c, t in zip(self.columns, types)])
        sink = self._stack.enter_context(parquet_sink(output, schema))
        pending: list[Any] = []
        held = [0]

        def write_rows(page: Page, result: PageResult) -> None:
            arrays = []
            for column, type_ in zip(self.columns, types):
                if column.name == self.column:
                    array = pa.array(cells(page, result), pa.binary())
                    arrays.append(array if self.kind == "binary" else array.view(pa.string()))
                    continue
                values = [row[at[column.name]] for row in page.rows]
                try:
                    arrays.append(pa.array(values, type_))
                except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
                    raise ColumnError(
                        f"{self.name}: column {column.name!r} ({column.type}) holds a value Parquet cannot store "
                        f"as {type_} "
                        f"(rows {page.names[0]} to {page.names[-1]}: {exc}); write a .jsonl output instead"
                    ) from exc
            pending.append(pa.record_batch(arrays, schema=schema))
            held[0] += page.size
            if held[0] >= ROW_GROUP_BYTES:
                flush()

        def flush() -> None:
            if pending:
                sink(pa.Table.from_batches(pending, schema))
                pending.clear()
                held[0] = 0

        self._flush = flush
        return write_rows
