"""The records of a columnar input grouped into conversations (``--conversation``,
``--order``): the rows of Parquet files (one file, or every file of a directory) and of a
DuckDB table, whose conversations may lie in any row group, batch or file. Shared by
:mod:`histmig.sources.parquet` and :mod:`histmig.sources.duckdb`; not a format itself.

Three passes, memory holding the index and the conversations in flight, never the input:

1. :class:`Index`: the rows are read once in storage order, only the conversation, order,
   messages and id columns: each row's keys, order value and place are kept (Arrow arrays, a
   few dozen bytes a row), its messages cell as the engine reads it
   (:func:`~histmig.sources.arrow.engine_cells`) appended to a temporary spill file.
2. The index is sorted by (conversation, order, part, row): nulls of the order last, equal
   values in storage order (a Parquet file's row order, the files in their order; a table's
   scan order). Consecutive rows of one conversation make it; a row whose conversation key is
   null is one of its own. :class:`Conversations` tasks, about :data:`TASK_BYTES` of records
   each, read their records from the spill by position (``pread``, in any worker) and go
   through :func:`~histmig.engine.run_conversations`; past ``--max-conversation-bytes`` a
   conversation is refused whole, unread.
3. The migrated records come back by place (:class:`Migrated`, spilled again): the format reads
   its rows once more in their own order and puts each in place
   (:meth:`~histmig.sources.arrow.ColumnMigrator.placed`), so every output keeps its rows, row
   order and schema.
"""

from __future__ import annotations

import os
import tempfile
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from histmig.engine import Plan, Stream, run_conversations
from histmig.errors import ColumnError
from histmig.records import Conversation, Grouping, Outcome, Record
from histmig.report import Report
from histmig.sources.arrow import ColumnKind, engine_cells, held_by, indices
from histmig.sources.base import Job, Task, TaskResult, lazy
from histmig.sources.jsonl import _descriptor
from histmig.sources.spill import worker_readable

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc
else:
    pa = lazy("pyarrow")
    pc = lazy("pyarrow.compute")

TASK_BYTES = 1 << 20
"""Bytes of records a task of conversations holds, about (whole conversations)."""
_NAMED = 4096
"""Conversations whose key values are made Python values at once, to name them."""


class Part(NamedTuple):
    """One part of a grouped input (a file of a directory; the one file or table): the
    ``source`` naming its records, its messages ``column``, of ``kind``, and for a nested one
    the output type that must hold a migrated record (``holds``)."""

    source: str
    column: str
    kind: ColumnKind
    holds: Any = None


Member = tuple[int, int, int, int, int]
"""A record of a conversation: ``(part, place, row, offset, length)``: the input part (a file
of a directory; ``0`` for one file or a table), the row's identity there (its row number, or a
table's ``rowid``), the row number that names it (``row N``), and its bytes' place in the spill."""


@dataclass
class ConversationsResult(TaskResult):
    """What a task of conversations came to: its ``report`` and the ``edits``, ``(part,
    place, output)`` of each record migrated (its new bytes) or rejected (``None``)."""

    edits: list[tuple[int, int, bytes | None]] = field(default_factory=list)
    touched: list[int] = field(default_factory=list)
    """The numbers of the conversations holding an edit."""


@dataclass(frozen=True)
class Conversations(Task):
    """Conversations of a columnar input as a task: each one's ``members`` in its order (a
    worker reads their bytes from the ``spill``: path, device, inode), its ``name``, ``note``
    and, past the limit, why it is ``refused``
    (:class:`~histmig.records.Conversation`) and ``number`` in the input; each record's id
    (``ids``, ``None`` without an id column); the input's ``parts``."""

    spill: tuple[str, int, int]
    parts: tuple[Part, ...]
    groups: tuple[tuple[Member, ...], ...]
    numbers: tuple[int, ...]
    ids: tuple[tuple[str | None, ...], ...] | None
    names: tuple[str, ...]
    notes: tuple[str | None, ...]
    refused: tuple[str | None, ...]
    errors: dict[tuple[int, int], str] = field(default_factory=dict)
    """What a record is told whatever the engine says, by (conversation, record) in the task."""
    size: int = 0

    def run(self, job: Job, slot: memoryview | None) -> ConversationsResult:
        """Read each conversation's records and put it through ``job``'s processor. Never
        raises for bad input."""
        fd = _descriptor(self.spill)
        result = ConversationsResult(Report.in_memory())

        parts = self.parts

        def conversations() -> Iterator[tuple[Conversation, list[tuple[Member, str | None, int, str | None]]]]:
            for at, (members, name, note, refused) in enumerate(zip(self.groups, self.names, self.notes, self.refused)):
                ids = self.ids[at] if self.ids is not None else (None,) * len(members)
                records = tuple(
                    Record(b"" if refused else os.pread(fd, length, offset), parts[part].source, f"row {row}", id_)
                    for (part, _, row, offset, length), id_ in zip(members, ids)
                )
                number = self.numbers[at]
                told = [self.errors.get((at, n)) for n in range(len(members))]
                yield Conversation(records, name, note, refused), list(zip(members, ids, [number] * len(ids), told))

        def accept(member: tuple[Member, str | None, int, str | None], outcome: Outcome) -> Outcome:
            (part, place, *_), id_, number, told = member
            if self.ids is not None and id_ is None and outcome.record.record_id is not None:
                outcome.record = Record(outcome.record.raw, outcome.record.source, outcome.record.location)
            if told is not None:
                outcome.errors.append(told)
            if outcome.status != "unchanged":
                result.edits.append((part, place, outcome.output))
                if not result.touched or result.touched[-1] != number:
                    result.touched.append(number)
            return outcome

        processor = job.processor()
        if any(part.holds is not None for part in parts) and isinstance(processor, Stream):
            processor = _Holding(processor.plan, {part.source: part for part in parts})
        run_conversations(conversations(), processor, result.report, accept)  # type: ignore[arg-type]
        return result


class _Holding(Stream):
    """The engine over conversations whose records a nested messages column must hold migrated
    (:func:`~histmig.sources.arrow.held_by`; ``parts`` by source): when one record's cannot be,
    the whole conversation is rejected, every record kept as it is (no default written in a row
    of it either), rather than written in part."""

    def __init__(self, plan: Plan, parts: dict[str, Part]) -> None:
        super().__init__(plan)
        self._parts = parts

    def conversation(self, conversation: Conversation, *told: Any) -> list[Outcome]:
        outcomes = super().conversation(conversation, *told)  # told: what else Stream.conversation takes
        held = []
        for outcome in outcomes:
            part = self._parts[outcome.record.source]
            changed = outcome.status == "changed" and part.holds is not None
            held.append(held_by(outcome, part.column, part.holds)[0] if changed else outcome)
        bad = next((outcome for outcome in held if outcome.status == "rejected"), None)
        if bad is None:
            return held
        said = f"rejected with its conversation ({conversation.name}): {bad.record.name} cannot be held by its column"
        return [
            outcome
            if outcome.status == "rejected"
            else Outcome(outcome.record, "rejected", None, outcome.changes, [said], outcome.warnings, outcome.findings)
            for outcome in held
        ]


def _own(column: pa.Array) -> pa.Array:
    """A copy of ``column`` holding only its own buffers: an array a database hands over through
    Arrow's C interface (DuckDB's) keeps its whole batch alive, the messages included."""
    return column.take(indices(range(len(column))))


def _null_free(type_: pa.DataType) -> pa.DataType:
    """A key column's type as it is sorted: a dictionary's values."""
    return type_.value_type if pa.types.is_dictionary(type_) else type_


_SORTABLE = "a string, a number, a boolean, a date, a time, a timestamp, a duration or binary"
"""The types a conversation or order column may have, in words: those Arrow sorts and compares."""


def _sortable(type_: pa.DataType) -> bool:
    """Whether Arrow sorts and compares values of ``type_`` (a dictionary's: its values'), which
    telling conversations apart and ordering their rows takes (:meth:`Index._sorted`); a column
    of all nulls (``null``) is one too. Not a nested type, an interval, a half float or a view."""
    type_ = _null_free(type_)
    return not pa.types.is_float16(type_) and any(
        test(type_)
        for test in (
            pa.types.is_integer,
            pa.types.is_floating,
            pa.types.is_decimal,
            pa.types.is_boolean,
            pa.types.is_string,
            pa.types.is_large_string,
            pa.types.is_binary,
            pa.types.is_large_binary,
            pa.types.is_fixed_size_binary,
            pa.types.is_date,
            pa.types.is_time,
            pa.types.is_timestamp,
            pa.types.is_duration,
            pa.types.is_null,
        )
    )


def check_columns(source: str, schema: pa.Schema, grouping: Grouping, ties: Sequence[str] = ()) -> None:
    """Check the ``schema`` of ``source`` (a file's, a table's) before its rows are grouped by
    ``grouping`` (``ties``: :class:`Index`'s). Raises :class:`ColumnError` naming ``source`` for a
    conversation, order or tie column it lacks or of a type that cannot be sorted and compared
    (:func:`_sortable`), with what a key or an order may be."""
    keys = () if grouping.whole else grouping.keys
    sorted_by = [("--conversation", "a key", name) for name in keys]
    sorted_by += [("--order", "an order", grouping.order)] if grouping.order is not None else []
    sorted_by += [("primary key", "a key", name) for name in ties]
    names = schema.names
    for what, must, name in sorted_by:
        if name not in names:
            raise ColumnError(f"{source}: no column {name!r} (columns: {', '.join(names)})")
        type_ = schema.field(name).type
        if not _sortable(type_):
            raise ColumnError(f"{source}: {what} column {name!r} is {type_}: {must} must be {_SORTABLE}")


class Index:
    """The rows of a columnar input as :func:`Index.add` is given them in storage order (see the
    module docstring, pass 1), and the :class:`Conversations` they make (:meth:`tasks`, pass
    2). ``grouping`` says which columns; ``parts`` are the input's; ``ties``, the columns that
    order a conversation's rows of equal order values before their storage order (a table's
    primary key); ``digests``:
    each row's ``digest`` column is kept too (a table's stored value as read, which a write
    in place compares with what the row holds then), and each conversation's rows
    (:attr:`rows`)."""

    def __init__(
        self,
        grouping: Grouping,
        parts: Sequence[Part],
        digests: bool = False,
        ties: Sequence[str] = (),
    ) -> None:
        self.grouping = grouping
        self.parts = tuple(parts)
        self.ties = tuple(ties)
        self._ties: list[list[Any]] = [[] for _ in self.ties]
        self._spill, self.spill = worker_readable(".cells")  # closed by close
        self._keys: list[list[Any]] = [[] for _ in self.key_columns]
        self._order: list[Any] = []
        self._places = array("q")
        self._rows = array("q")
        self._parts = array("q")
        self._offsets = array("q")
        self._lengths = array("q")
        self._ids: list[str | None] = []
        self._errors: dict[int, str] = {}
        self._has_ids = False
        self._digests: list[Any] | None = [] if digests else None
        self._at = 0
        self.rows: dict[int, list[int]] = {}
        """With ``digests``, by conversation number: its rows (for :meth:`row`)."""
        self.conversations: dict[int, tuple[tuple[Any, ...] | None, int]] = {}
        """With ``digests``, by conversation number: its key values (``None``: a row of its own)
        and the place of its first row."""

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The conversation's columns (none for ``--conversation '*'``)."""
        return () if self.grouping.whole else self.grouping.keys

    @property
    def columns(self) -> list[str]:
        """The columns a batch given to :meth:`add` holds besides the messages and id columns."""
        return list(dict.fromkeys([*self.key_columns, *filter(None, [self.grouping.order]), *self.ties]))

    def add(
        self,
        part: int,
        batch: pa.RecordBatch,
        rows: Sequence[int],
        places: Sequence[int] | None = None,
        id_column: str | None = None,
        digest: str | None = None,
        errors: dict[int, str] | None = None,
    ) -> None:
        """Index the rows of ``batch`` (of part ``part``; named ``row N`` by ``rows``, identified
        by ``places``, by default the same) and spill their messages; ``errors``, by 0-based
        row of the batch, what each record is told whatever the engine says (``check``'s
        refused nulls of a nested column: :meth:`~histmig.sources.arrow.ColumnMigrator.refusals`).
        Raises :class:`ColumnError` as :func:`check_columns` does."""
        check_columns(self.parts[part].source, batch.schema, self.grouping, self.ties)
        cells = engine_cells(batch.column(self.parts[part].column), self.parts[part].kind)
        places = rows if places is None else places
        for keys, name in zip(self._keys, self.key_columns):
            keys.append(_own(batch.column(name)))
        if self.grouping.order is not None:
            self._order.append(_own(batch.column(self.grouping.order)))
        for ties, name in zip(self._ties, self.ties):
            ties.append(_own(batch.column(name)))
        count = batch.num_rows
        for i, line in (errors or {}).items():
            self._errors[len(self._parts) + i] = line
        self._has_ids = self._has_ids or id_column is not None
        if id_column is not None:
            self._ids += [None if value is None else str(value) for value in batch.column(id_column).to_pylist()]
        else:
            self._ids += [None] * count
        if digest is not None and self._digests is not None:
            self._digests += batch.column(digest).to_pylist()
        self._parts.extend([part] * count)
        self._places.extend(places)
        self._rows.extend(rows)
        at, offsets, lengths = self._at, self._offsets, self._lengths
        for cell in cells:
            if cell is None:  # not a record: a null cell is kept as it is, at no place in the spill
                offsets.append(-1)
                lengths.append(0)
            else:
                offsets.append(at)
                lengths.append(len(cell))
                at += len(cell)
        self._spill.write(b"".join(cell for cell in cells if cell is not None))  # one write a batch
        self._at = at

    def _sorted(self) -> tuple[Any, list[int], list[pa.Array]]:
        """The rows in conversation order (their indices in the index), where each
        conversation starts among them, and each one's key values (an array a key column; a
        null one: a row of its own). Told apart in Arrow: no row's key becomes a Python value."""
        count = len(self._parts)
        columns: dict[str, Any] = {}
        try:
            for n, chunks in enumerate(self._keys):
                key = pa.chunked_array(chunks).combine_chunks()
                if pa.types.is_null(key.type):  # every row null: each a conversation of its own; compared as numbers
                    key = key.cast(pa.int64())
                columns[f"k{n}"] = key.cast(_null_free(key.type)) if pa.types.is_dictionary(key.type) else key
            named = [("order", self._order)] if self.grouping.order is not None else []
            for name, chunks in [*named, *((f"t{n}", ties) for n, ties in enumerate(self._ties))]:
                values = pa.chunked_array(chunks)
                columns[name] = values.cast(_null_free(values.type)) if pa.types.is_dictionary(values.type) else values
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise ColumnError(
                f"{self.parts[0].source}: the conversation or order columns differ in type ({exc})"
            ) from exc
        columns["part"] = indices(self._parts)
        columns["place"] = indices(self._places)
        table = pa.table(columns)
        order = pc.sort_indices(table, sort_keys=[(name, "ascending", "at_end") for name in table.column_names])
        keys = [table.column(f"k{n}").take(order) for n in range(len(self._keys))]
        starts = [0] if count else []
        if keys and count > 1:  # a conversation starts where a key differs from the row before's, or either is null
            changed = None
            for key in keys:
                differs = pc.not_equal(key.slice(1), key.slice(0, count - 1))
                differs = pc.or_kleene(differs, pc.is_null(differs))  # no Python scalar: pa.scalar imports pandas
                changed = differs if changed is None else pc.or_(changed, differs)
            starts += [at + 1 for at in pc.indices_nonzero(changed).to_pylist()]
        held = [key.take(indices(starts)) for key in keys]
        del table, keys
        pa.default_memory_pool().release_unused()
        rows = array("Q")  # the indices as machine integers, not Python ones (and no NumPy, which imports pandas)
        rows.frombytes(order.buffers()[1].to_pybytes()[: 8 * len(order)])
        return rows, starts, held

    def tasks(self) -> Iterator[Conversations]:
        """The input's conversations as tasks, in conversation order (see the module docstring)."""
        self._spill.flush()
        order, starts, held = self._sorted()
        keys = self.key_columns
        alone = f"no conversation key ({', '.join(keys)} null): a conversation of its own"
        batch: list[tuple[list[int], str, str | None, int, int]] = []
        size = 0
        number = 0
        several = len(self.parts) > 1
        offsets, lengths = self._offsets, self._lengths
        ends = [*starts[1:], len(order)]

        def named(i: int) -> str:
            row = f"row {self._rows[i]}"
            return f"{self.parts[self._parts[i]].source}:{row}" if several else row

        def conversations() -> Iterator[tuple[list[int], str, str | None, tuple[Any, ...] | None]]:
            for first in range(0, len(ends), _NAMED):  # the key values of a block of conversations at a time
                values = list(zip(*(key.slice(first, _NAMED).to_pylist() for key in held))) if held else None
                for n in range(first, min(first + _NAMED, len(ends))):
                    rows = order[starts[n] : ends[n]].tolist()
                    found = values[n - first] if values is not None else ()
                    if None in found:
                        yield rows, named(rows[0]), alone, None
                    else:
                        yield rows, self.grouping.named(found), None, found

        for rows, name, note, values_ in conversations():
            if self._digests is not None:
                self.rows[number] = rows
                self.conversations[number] = (values_, self._places[rows[0]])
            number += 1
            records = rows if len(rows) == 1 and offsets[rows[0]] >= 0 else [i for i in rows if offsets[i] >= 0]
            if not records:
                continue
            held_bytes = lengths[records[0]] if len(records) == 1 else sum(lengths[i] for i in records)
            batch.append((records, name, note, number - 1, held_bytes))
            size += held_bytes
            if size >= TASK_BYTES:
                yield self._task(batch, size)
                batch, size = [], 0
        if batch:
            yield self._task(batch, size)

    def _task(self, batch: list[tuple[list[int], str, str | None, int, int]], size: int) -> Conversations:
        """The task of ``batch``'s conversations: each one's records (their indices), name, note,
        number and bytes."""
        parts, places, rows, offsets, lengths, ids = (
            self._parts,
            self._places,
            self._rows,
            self._offsets,
            self._lengths,
            self._ids,
        )
        refusal = self.grouping.refusal
        return Conversations(
            self.spill,
            self.parts,
            tuple(
                tuple((parts[i], places[i], rows[i], offsets[i], lengths[i]) for i in records) for records, *_ in batch
            ),
            tuple(number for *_, number, _ in batch),
            tuple(tuple(ids[i] for i in records) for records, *_ in batch) if self._has_ids else None,
            tuple(name for _, name, *_ in batch),
            tuple(note for _, _, note, *_ in batch),
            tuple(refusal(name, held, len(records)) for records, name, _, _, held in batch),
            {
                (n, at): self._errors[i]
                for n, (records, *_) in enumerate(batch)
                for at, i in enumerate(records)
                if i in self._errors
            }
            if self._errors
            else {},
            size,
        )

    def row(self, i: int) -> tuple[int, int, str | None, Any]:
        """Row ``i`` of the index (:attr:`rows`): its place, number, id and, with ``digests``,
        digest."""
        return self._places[i], self._rows[i], self._ids[i], self._digests[i] if self._digests is not None else None

    def close(self) -> None:
        """Remove the spill."""
        self._spill.close()


class Migrated:
    """The records a run migrated or rejected, by part and place, as the tasks' results come
    (:meth:`add`): the new bytes spilled to a temporary file, only their places held; read
    back a batch of rows at a time (:meth:`of`) to put them in place."""

    def __init__(self) -> None:
        self._spill: IO[bytes] = tempfile.TemporaryFile(prefix="histmig-")  # noqa: SIM115 (closed by close)
        self._edits: dict[int, dict[int, tuple[int, int] | None]] = {}
        self.touched: set[int] = set()
        """The numbers of the conversations holding an edit."""

    def add(self, result: ConversationsResult) -> None:
        """Keep the edits of ``result``."""
        self.touched.update(result.touched)
        for part, place, output in result.edits:
            if output is None:
                self._edits.setdefault(part, {})[place] = None
            else:
                self._edits.setdefault(part, {})[place] = (self._spill.tell(), len(output))
                self._spill.write(output)

    def drop(self, part: int, places: Sequence[int]) -> list[int]:
        """Forget the edits of ``places`` of ``part`` (a conversation that will not be written);
        the places among them that held a migrated record."""
        edits = self._edits.get(part, {})
        return [place for place in places if edits.pop(place, None) is not None]

    def of(self, part: int, places: Sequence[int]) -> tuple[dict[int, bytes], list[int]]:
        """The edits of the rows at ``places`` (a batch's rows) of ``part``: the migrated texts by
        position in ``places``, and the positions rejected."""
        edits = self._edits.get(part)
        if not edits:
            return {}, []
        outputs: dict[int, bytes] = {}
        rejected: list[int] = []
        self._spill.flush()
        fd = self._spill.fileno()
        wanted = ((i, place) for i, place in enumerate(places) if place in edits)
        for i, place in wanted:
            spot = edits[place]
            if spot is None:
                rejected.append(i)
            else:
                outputs[i] = os.pread(fd, spot[1], spot[0])
        return outputs, rejected

    def close(self) -> None:
        """Remove the spill."""
        self._spill.close()
