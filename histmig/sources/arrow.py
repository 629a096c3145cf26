"""One messages column of Arrow record batches through the engine; shared by the columnar
formats (Parquet, DuckDB). Not a format itself.

A cell is one record. A string or binary cell holds the record's JSON text (a bare history
as ``all_messages_json()`` writes it, or an envelope object) and goes through the engine's
record loop (:func:`histmig.engine.run_records`) as it is, so the JSONL and the columnar
paths share one loop; an unchanged cell is written back as the same bytes. A nested cell
(``list<struct>``, one struct per message) is turned into plain JSON data, migrated, and
built back into the column's *widened* type (:func:`widened_type`): the input type plus the
fields the rules write (``outcome``, ``retry``, ``instructions``). A nested column cannot
tell a null field from an absent one (every struct has every field): the engine sees a null
field as absent, except where a rule repairs nulls (:func:`histmig.rules.nulls_kept`), and
absent fields come back as null, but for the fields 2.68 refuses as null and reads absent as
their default (:func:`refused_nulls`: ``outcome``, ``state``, ``scope``, usage counts): a row
of a release that did not write one (a column widened with ``outcome``, or a mixed-era column)
gets that default, the value it means; ``check`` reports such a row as read invalid, as 2.68
refuses it. A migrated history the
widened type cannot hold (a value whose type changes, such as legacy ``{"args_json": ...}``
tool arguments becoming a string) is rejected and its cell kept unchanged. A null cell is
not a record: it is carried as it is and not counted. Every other column is untouched.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import accumulate
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import orjson

from histmig.engine import Plan, run_conversations, run_records
from histmig.errors import ColumnError, NotAHistory
from histmig.records import (
    ID_FIELDS,
    MESSAGE_FIELD_CANDIDATES,
    Conversation,
    Outcome,
    Record,
    check_messages,
    is_one_message,
    locate_messages,
)
from histmig.report import Report
from histmig.rules import nulls_kept, registry
from histmig.rules.base import is_json
from histmig.sources.base import Job, lazy

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy("pyarrow")

ColumnKind = Literal["text", "binary", "nested"]


@cache
def new_part_fields() -> tuple[Any, ...]:
    """Part fields the rules write (``outcome`` and ``retry``, a ``RetryInfo``
    ``struct<cause, attempt, max_retries>``), added to a nested column's part struct."""
    retry = pa.struct([("cause", pa.string()), ("attempt", pa.int64()), ("max_retries", pa.int64())])
    return (pa.field("outcome", pa.string()), pa.field("retry", retry))


@cache
def new_message_fields() -> tuple[Any, ...]:
    """Message fields the rules write (``instructions``), added to a nested column's message struct."""
    return (pa.field("instructions", pa.string()),)


def _storage(type_: pa.DataType) -> pa.DataType:
    return type_.storage_type if isinstance(type_, pa.BaseExtensionType) else type_


def column_kind(type_: pa.DataType) -> ColumnKind | None:
    """``text`` for a string column, ``binary`` for a binary one, ``nested`` for a list of
    structs (extension types are judged by their storage type); ``None`` for any other."""
    type_ = _storage(type_)
    if pa.types.is_string(type_) or pa.types.is_large_string(type_) or pa.types.is_string_view(type_):
        return "text"
    if pa.types.is_binary(type_) or pa.types.is_large_binary(type_) or pa.types.is_binary_view(type_):
        return "binary"
    if (pa.types.is_list(type_) or pa.types.is_large_list(type_)) and pa.types.is_struct(type_.value_type):
        return "nested"
    return None


def find_messages_column(
    schema: pa.Schema,
    name: str | None = None,
    *,
    where: str = "",
    first: Callable[[str], Any] | None = None,
    one: bool = False,
) -> str:
    """The messages column of ``schema``: ``name`` when given, else the first of
    :data:`~histmig.records.MESSAGE_FIELD_CANDIDATES` present with a usable type, else the
    only column that holds histories whatever its name (``chat-history``): a ``list<struct>``
    column whose structs have ``kind`` and ``parts``, or a text or binary column whose first
    non-null cell (``first(column)``, when given) is a history or an envelope holding one, or
    with ``one`` (``--conversation``) one message (:func:`holds_history`).
    Raises :class:`ColumnError` (prefixed with ``where``) when there is none, when several
    columns hold histories, or when the type is unusable (``name``'s, or with none found, a
    candidate's: ``column 'messages' is int64``)."""
    prefix = f"{where}: " if where else ""
    if name is not None:
        if name not in schema.names:
            raise ColumnError(f"{prefix}no column {name!r} (columns: {', '.join(schema.names)})")
        if column_kind(schema.field(name).type) is None:
            raise _unusable(schema, name, prefix)
        return name
    for candidate in MESSAGE_FIELD_CANDIDATES:
        if candidate in schema.names and column_kind(schema.field(candidate).type) is not None:
            return candidate
    found = [
        f.name
        for f in schema
        if (column_kind(f.type) == "nested" and {"kind", "parts"} <= {c.name for c in _storage(f.type).value_type})
        or (column_kind(f.type) in ("text", "binary") and first is not None and holds_history(first(f.name), one))
    ]
    if len(found) == 1:
        return found[0]
    if found:
        raise ColumnError(
            f"{prefix}several columns hold histories ({', '.join(found)}): name one with --messages-column"
        )
    named = next((candidate for candidate in MESSAGE_FIELD_CANDIDATES if candidate in schema.names), None)
    if named is not None:  # a column of a history's name, but of another type: said as it is
        raise _unusable(schema, named, prefix)
    raise ColumnError(
        f"{prefix}cannot tell the messages column (name it with --messages-column; columns: {', '.join(schema.names)})"
    )


def _unusable(schema: pa.Schema, name: str, prefix: str) -> ColumnError:
    return ColumnError(
        f"{prefix}column {name!r} is {schema.field(name).type}: expected JSON text, binary or list<struct>"
    )


def holds_history(cell: Any, one: bool = False) -> bool:
    """Whether a text or binary cell is JSON holding a history (bare, or in an envelope): a
    list of messages (:func:`~histmig.records.check_messages`; a list of numbers is not one);
    with ``one``, or one message (:func:`~histmig.records.is_one_message`: a store of one
    message a row, whose rows ``--conversation`` puts together)."""
    if cell is None:
        return False
    if one and is_one_message(cell.encode() if isinstance(cell, str) else bytes(cell)):
        return True
    try:
        check_messages(locate_messages(orjson.loads(cell)).messages)
    except (orjson.JSONDecodeError, NotAHistory):
        return False
    return True


def find_id_column(
    schema: pa.Schema, name: str | None = None, *, key: str | None = None, where: str = ""
) -> str | None:
    """The column whose value names each row in the report: ``name`` (``--id-column``) when
    given, else the table's one-column primary ``key``, else the first of
    :data:`~histmig.records.ID_FIELDS` (``id``, ``conversation_id``, ``record_id``) present
    as a string or integer column, as a JSONL envelope's id is found; ``None`` when there is
    none (rows are then named by number only). Shared by every columnar format. Raises
    :class:`ColumnError` (prefixed with ``where``) for a ``name`` the schema lacks."""
    if name is not None:
        if name not in schema.names:
            raise ColumnError(
                f"{where + ': ' if where else ''}no id column {name!r} (columns: {', '.join(schema.names)})"
            )
        return name
    for candidate in (key, *ID_FIELDS):
        if candidate is not None and candidate in schema.names and _names_a_row(schema.field(candidate).type):
            return candidate
    return None


def _names_a_row(type_: pa.DataType) -> bool:
    type_ = _storage(type_)
    return (
        pa.types.is_integer(type_)
        or pa.types.is_string(type_)
        or pa.types.is_large_string(type_)
        or pa.types.is_string_view(type_)
    )


def _merge(struct: Any, additions: Sequence[Any]) -> Any:
    fields = list(struct)
    for add in additions:
        index = struct.get_field_index(add.name)
        if index < 0:
            fields.append(add)
        elif pa.types.is_null(fields[index].type):
            fields[index] = fields[index].with_type(add.type)
        elif pa.types.is_struct(fields[index].type) and pa.types.is_struct(add.type):
            fields[index] = fields[index].with_type(_merge(fields[index].type, list(add.type)))
    return pa.struct(fields)


def _list_like(list_type: pa.DataType, value_type: pa.DataType) -> pa.DataType:
    value_field = list_type.value_field.with_type(value_type)
    return pa.large_list(value_field) if pa.types.is_large_list(list_type) else pa.list_(value_field)


def widened_type(messages_type: pa.DataType) -> pa.DataType:
    """The output type of a nested messages column: ``messages_type`` (``list<struct>``)
    with :func:`new_message_fields` added to the message struct and :func:`new_part_fields`
    to the struct of its ``parts`` list; fields already present keep their place and type
    (a struct gains missing subfields; a null-typed field takes the new type)."""
    message = messages_type.value_type
    fields = list(message)
    index = message.get_field_index("parts")
    if index >= 0:
        parts = fields[index].type
        if (pa.types.is_list(parts) or pa.types.is_large_list(parts)) and pa.types.is_struct(parts.value_type):
            fields[index] = fields[index].with_type(_list_like(parts, _merge(parts.value_type, new_part_fields())))
    return _list_like(messages_type, _merge(pa.struct(fields), new_message_fields()))


Defaults = dict[str, dict[str, tuple[Any, tuple[str, ...]]]]
"""By message ``kind`` or part ``part_kind`` (and ``"usage"``), the fields pydantic-ai 2.68 refuses
as null but reads, when absent, as their default, with that default and the older names it is
also read by (``input_tokens``: ``request_tokens``), whose value comes first."""


@cache
def refused_nulls() -> Defaults:
    """The :data:`Defaults` of the current schema (:mod:`histmig.schema.current`, docs/framework.md
    §3.1): each model's fields whose type takes no null and whose default is a plain value
    (``outcome: 'success'``, ``state: 'complete'``, ``scope: 'conversation'``, the usage counts'
    0), by the ``kind``/``part_kind`` the model is chosen by. A nested column holds every field
    of its struct in every row, so a field a later release added is null in an older row, where
    it was absent: 2.68 loads that row only with the default written in its place (or, for a
    field also read by an older name, that name's value: the value 2.68 reads the row's own
    release's field as)."""
    import typing

    from histmig.schema import current

    found: Defaults = {}
    for model in vars(current).values():
        if not (isinstance(model, type) and issubclass(model, current.OpenModel)):
            continue
        fields = model.model_fields
        part, message = fields.get("part_kind"), fields.get("kind")
        name = (
            "usage"
            if model is current.RequestUsage
            else part.default
            if part is not None
            else message.default
            if message is not None and message.default in ("request", "response")
            else None
        )
        if not isinstance(name, str):
            continue
        found[name] = {
            key: (info.default, _older_names(key, info.validation_alias))
            for key, info in fields.items()
            if key not in ("kind", "part_kind")
            and isinstance(info.default, (str, int, float))
            and type(None) not in typing.get_args(info.annotation)
        }
    return found


def _older_names(key: str, alias: Any) -> tuple[str, ...]:
    """The other names a field is read by (an ``AliasChoices``' choices but its own)."""
    choices = getattr(alias, "choices", ())
    return tuple(choice for choice in choices if isinstance(choice, str) and choice != key)


StructFields = tuple[dict[str, Any], dict[str, Any], dict[str, Any]]
"""The fields (name: Arrow type) of a nested messages column's message, part and usage structs."""


def struct_fields(messages_type: pa.DataType) -> StructFields:
    """The :data:`StructFields` of a nested messages column's type (a struct it lacks: none)."""
    message = _storage(messages_type).value_type

    def of(struct: Any) -> dict[str, Any]:
        return {f.name: f.type for f in struct} if struct is not None and pa.types.is_struct(struct) else {}

    def field(name: str) -> Any:
        index = message.get_field_index(name)
        return message.field(index).type if index >= 0 else None

    parts = field("parts")
    listed = parts is not None and (pa.types.is_list(parts) or pa.types.is_large_list(parts))
    return of(message), of(parts.value_type if listed else None), of(field("usage"))


def _holds(type_: Any, default: Any) -> bool:
    """Whether a field of Arrow ``type_`` holds ``default`` (a text, a flag, a count or a number)."""
    if isinstance(default, bool):
        return bool(pa.types.is_boolean(type_))
    if isinstance(default, str):
        return bool(pa.types.is_string(type_) or pa.types.is_large_string(type_))
    if isinstance(default, float):
        return bool(pa.types.is_floating(type_))
    return bool(pa.types.is_integer(type_) or pa.types.is_floating(type_))


Place = tuple[dict[str, Any], str, Any, str]
"""A null of :func:`refused_nulls` in a nested cell: the dict holding it, the field, its
default and its path (``messages[0].parts[1].outcome``)."""


@cache
def _nullable_absent() -> dict[str, tuple[str, ...]]:
    """By message ``kind``, part ``part_kind`` and ``"usage"``, the fields the current schema
    lets a history leave out but takes no null in (its plain form, :data:`histmig.schema.PLAIN_CURRENT`,
    read without building the models), but those whose null a rule repairs
    (:func:`histmig.rules.nulls_kept`): where :func:`refused_nulls` may have a default. In the
    schema's order: the places of a cell, and its error line, come in one order."""
    from histmig.schema import PLAIN_CURRENT

    kept = nulls_kept(registry())

    def of(fields: dict[str, Any]) -> tuple[str, ...]:
        return tuple(
            name
            for name, field in fields.items()
            if not field.get("required", True)
            and field["schema"].get("type") not in ("nullable", "any")  # these take a null
            and name not in kept
            and name not in ("kind", "part_kind")
        )

    found: dict[str, tuple[str, ...]] = {}
    for kind, message in PLAIN_CURRENT["items_schema"]["choices"].items():
        fields = message["fields"]
        found[kind] = of(fields)
        for part_kind, part in fields["parts"]["schema"]["items_schema"]["choices"].items():
            found[part_kind] = of(part["fields"])
        if "usage" in fields:
            found["usage"] = of(fields["usage"]["schema"]["fields"])
    return found


def null_places(messages: list[Any], fields: StructFields) -> list[Place]:
    """Where ``messages`` (a nested cell, as read or as it will be written: a field of the
    column's struct that a dict lacks is null there) holds null in a field of
    :func:`refused_nulls`, in the history's order. The schema models are built only for a cell that
    holds a null where the schema takes none (:func:`_nullable_absent`)."""
    candidates = _nullable_absent()
    message_fields, part_fields, usage_fields = fields
    found: list[Place] = []

    def look(node: Any, names: dict[str, Any], tag: Any, path: str) -> None:
        if not (isinstance(node, dict) and isinstance(tag, str)):
            return
        for key in candidates.get(tag, ()):
            if key in names and node.get(key) is None and key in (defaults := refused_nulls().get(tag, {})):
                default, older = defaults[key]
                value = next((node[name] for name in older if node.get(name) is not None), default)
                if _holds(names[key], value):
                    found.append((node, key, value, f"{path}.{key}"))

    for m_index, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        where = f"messages[{m_index}]"
        kind = message.get("kind")
        look(message, message_fields, kind, where)
        if kind == "response" and "usage" in message_fields and message.get("usage") is None:
            usage = {key: default for key, (default, _) in refused_nulls()["usage"].items() if key in usage_fields}
            found.append((message, "usage", usage, f"{where}.usage"))  # 2.68's RequestUsage(): every count 0
        elif kind == "response":
            look(message.get("usage"), usage_fields, "usage", f"{where}.usage")
        parts = message.get("parts")
        for p_index, part in enumerate(parts if isinstance(parts, list) else []):
            tag = part.get("part_kind") if isinstance(part, dict) else None
            look(part, part_fields, tag, f"{where}.parts[{p_index}]")
    return found


def _defaults_filled(messages: list[Any], fields: StructFields) -> list[Place]:
    """Write, in place, the default of each of :func:`null_places` (a ``tool-return`` without an
    ``outcome`` gets ``"success"``, a message without a ``state`` ``"complete"``: what 2.68 reads
    an absent one as); the places filled. The column would otherwise hold null there, which 2.68
    refuses (a literal or a count, not optional)."""
    places = null_places(messages, fields)
    for node, key, default, _ in places:
        node[key] = default
    return places


def refused_line(places: list[Place]) -> str:
    """The error line of a nested cell holding :func:`null_places` as read (``check``): the paths
    (the first five, and how many more) and what ``convert`` writes."""
    paths = ", ".join(place[3] for place in places[:5]) + (f" and {len(places) - 5} more" if len(places) > 5 else "")
    return (
        f"{paths}: null, which pydantic-ai 2.68 refuses (a field of the column's struct that this row's release did "
        "not write); convert writes the value an absent one is read as"
    )


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _engine_value(value: Any, kept: frozenset[str]) -> Any:
    """A nested cell's value as the engine sees it: null fields dropped but for ``kept``."""
    if isinstance(value, dict):
        return {k: _engine_value(v, kept) for k, v in value.items() if v is not None or k in kept}
    if isinstance(value, list):
        return [_engine_value(v, kept) for v in value]
    return value


def held_by(outcome: Outcome, column: str, type_: pa.DataType) -> tuple[Outcome, Any]:
    """A changed ``outcome`` of a cell of the nested ``column`` and its migrated messages, as
    the column's output type ``type_`` holds them; when it cannot, the outcome ``rejected``
    (the cell kept), saying why."""
    messages = orjson.loads(outcome.output or b"null")
    problem = _carry_problem(messages, type_)
    if problem is None:
        return outcome, messages
    error = f"column {column!r} cannot hold the migrated messages: {problem}"
    return Outcome(outcome.record, "rejected", None, outcome.changes, [error]), None


def engine_cells(column: pa.Array, kind: ColumnKind) -> list[bytes | None]:
    """The records of a messages column as the engine reads them: a text or binary cell's
    bytes; a nested cell's value as JSON text, null fields dropped but those a rule repairs
    (:func:`~histmig.rules.nulls_kept`); ``None`` for a null cell (not a record)."""
    if kind != "nested":
        return _raw_cells(column)
    kept = nulls_kept(registry())
    return [None if value is None else orjson.dumps(_engine_value(value, kept)) for value in column.to_pylist()]


def _carry_problem(messages: Any, type_: pa.DataType) -> str | None:
    """Why a nested column of ``type_`` cannot hold ``messages`` (``None`` when it can: the
    value built back from Arrow equals ``messages``, nulls and absent fields alike)."""
    try:
        back = pa.array([messages], type=type_).to_pylist()[0]
    except (pa.ArrowException, TypeError, ValueError) as exc:
        return str(exc).splitlines()[0]
    if _without_nulls(back) != _without_nulls(messages):
        return "a field or value has no place in the column's type"
    return None


Observer = Callable[[int, Outcome], None]
"""Told ``(i, outcome)`` for a cell ``i`` of a batch that went the engine's full way
(:meth:`ColumnMigrator.migrate_cells`)."""


class CellGroup(NamedTuple):
    """The cells of one conversation in a batch (``--conversation``): their ``rows``, 0-based
    in the batch and in the conversation's order, and the conversation's ``name``, ``note``
    and ``refused`` (:class:`~histmig.records.Conversation`)."""

    rows: Sequence[int]
    name: str
    note: str | None = None
    refused: str | None = None


class Cells(NamedTuple):
    """New values for some cells of one batch's messages column: ``positions``, ascending
    0-based rows of the batch, and ``values``, one a position, of the column's output type;
    ``length`` is the batch's number of rows; ``changed`` and ``rejected``, the rows whose
    record was migrated, and rejected (kept unchanged); ``filled``, the other rows whose value
    the widening changed (a null 2.68 refuses given its default: :func:`_defaults_filled`), and
    ``repaired``, the rows (migrated or filled) that held such a null as read, which must be
    written even where nothing is migrated. Built by
    :meth:`ColumnMigrator.migrate_cells`, put in place by :meth:`ColumnMigrator.apply`."""

    positions: list[int]
    values: pa.Array
    length: int
    changed: list[int] = []  # noqa: RUF012 (a NamedTuple's default, only read)
    rejected: list[int] = []  # noqa: RUF012 (a NamedTuple's default, only read)
    filled: list[int] = []  # noqa: RUF012 (a NamedTuple's default, only read)
    repaired: list[int] = []  # noqa: RUF012 (a NamedTuple's default, only read)


@dataclass
class ColumnMigrator:
    """Migrates the ``column`` of record batches whose schema is ``schema``.

    ``source`` names the input in every record (a file name); ``job`` is what the cells go
    through (a :class:`~histmig.engine.Plan`); ``id_column`` names the column whose value
    becomes each record's id in the report (else the envelope's id). :meth:`migrate` returns
    the batch with that column replaced; :meth:`migrate_cells` only the cells that change,
    which :meth:`apply` puts in place. ``columns``: the rows' columns besides the schema's (a
    partition directory's keys; a table's columns a pass in place does not read), which with
    the schema's say whether the rows name conversations (:meth:`~histmig.engine.Plan.for_columns`).
    Raises :class:`ColumnError` at construction when a column is missing or unusable.
    """

    schema: pa.Schema
    column: str
    source: str
    job: Job
    id_column: str | None = None
    columns: Sequence[str] = ()

    def __post_init__(self) -> None:
        if isinstance(self.job, Plan):
            self.job = self.job.for_columns([*self.schema.names, *self.columns])
        self.index = self.schema.get_field_index(self.column)
        self.input_type = self.schema.field(self.column).type
        kind = column_kind(self.input_type)
        if self.index < 0 or kind is None:
            raise ColumnError(f"{self.source}: no usable column {self.column!r}")
        if self.id_column is not None and self.id_column not in self.schema.names:
            raise ColumnError(f"{self.source}: no id column {self.id_column!r}")
        self.kind: ColumnKind = kind
        self.output_type = widened_type(self.input_type) if kind == "nested" else self.input_type
        nested = kind == "nested"
        none: StructFields = ({}, {}, {})
        self.read_fields = struct_fields(self.input_type) if nested else none
        self.written_fields = struct_fields(self.output_type) if nested else none
        # check judges each row as stored (its nulls 2.68 refuses are errors); the others write defaults there
        self.reports_nulls = nested and isinstance(self.job, Plan) and self.job.validate_all

    @property
    def output_schema(self) -> pa.Schema:
        """``schema`` with the messages column's type widened (nested) or kept; same field
        order, field metadata and schema metadata."""
        return self.schema.set(self.index, self.schema.field(self.index).with_type(self.output_type))

    def migrate(
        self,
        batch: pa.RecordBatch,
        rows: Sequence[int],
        report: Report,
        observe: Observer | None = None,
        groups: Sequence[CellGroup] | None = None,
    ) -> tuple[pa.RecordBatch, Cells]:
        """Run every cell of the messages column of ``batch`` (of ``schema``) through the
        engine, into ``report``; ``rows`` holds each row's number (0-based) for its
        ``location`` (``row N``); ``observe`` and ``groups`` as for :meth:`migrate_cells`.
        Returns the batch with the column migrated (:meth:`migrate_cells`, :meth:`with_cells`)
        and the cells that changed."""
        cells = self.migrate_cells(batch, rows, report, observe, groups)
        if not cells.positions and self.kind != "nested":
            return batch, cells
        return self.with_cells(batch, cells), cells

    def with_cells(self, batch: pa.RecordBatch, cells: Cells) -> pa.RecordBatch:
        """``batch`` (of ``schema``) with its messages column :meth:`apply`-d ``cells``,
        so of :attr:`output_schema`."""
        return batch.set_column(
            self.index, self.output_schema.field(self.index), self.apply(batch.column(self.index), cells)
        )

    def migrate_cells(
        self,
        batch: pa.RecordBatch,
        rows: Sequence[int],
        report: Report,
        observe: Observer | None = None,
        groups: Sequence[CellGroup] | None = None,
    ) -> Cells:
        """Run every cell of the messages column of ``batch`` through the engine's record loop
        (:func:`~histmig.engine.run_records`), into ``report`` (the columns are found by name:
        ``batch`` may hold only the messages and id columns); ``rows`` holds each row's
        number for its ``location``. With ``groups`` (``--conversation``: every row of the
        batch in one), each group's cells go through the engine as one conversation
        (:func:`~histmig.engine.run_conversations`). ``observe(i, outcome)``, when given, is
        told the final outcome of each cell ``i`` (0-based in ``batch``) that went the full
        way (a cell the screen passed is unchanged and has nothing to say, and is not told;
        every cell of a group is told). Returns the cells that change (a text or binary
        column: the changed ones; a nested column: all, widened). A null cell is not a
        record: it is kept and not counted."""
        column = batch.column(self.column)
        ids = batch.column(self.id_column).to_pylist() if self.id_column is not None else None
        nested = self.kind == "nested"
        values = column.to_pylist() if nested else _raw_cells(column)
        kept = nulls_kept(registry()) if nested else frozenset()
        positions: list[int] = []
        rejected: list[int] = []
        refused = (
            {
                i: places
                for i, value in enumerate(values)
                if value is not None and (places := null_places(value, self.read_fields))
            }
            if self.reports_nulls
            else {}
        )

        def raw(value: Any) -> bytes:
            """A cell's record as the engine reads it: a text or binary cell's bytes, a nested one's as JSON."""
            return orjson.dumps(_engine_value(value, kept)) if nested else value

        def cells() -> Any:
            for i, value in enumerate(values):
                if value is not None:
                    yield (raw(value) if nested else value), i  # a text cell's bytes without a call

        def conversations() -> Any:
            for group in groups or ():
                held = [i for i in group.rows if values[i] is not None]
                if held:
                    records = tuple(record(raw(values[i]), i) for i in held)
                    yield Conversation(records, group.name, group.note, group.refused), held

        def record(raw: bytes, i: int) -> Record:
            return Record(raw, self.source, f"row {rows[i]}", None if ids is None or ids[i] is None else str(ids[i]))

        def accept(i: int, outcome: Outcome) -> Outcome:
            if (
                ids is not None and ids[i] is None and outcome.record.record_id is not None
            ):  # a null id names no record, not the envelope's
                outcome.record = outcome.record._replace(record_id=None)
            if outcome.status == "changed":
                outcome = self._store(values, i, outcome)
                if outcome.status == "changed":
                    positions.append(i)
            if outcome.status == "rejected":
                rejected.append(i)
            if i in refused and self.reports_nulls:
                outcome.errors.append(refused_line(refused[i]))
            if observe is not None:
                observe(i, outcome)
            return outcome

        if groups is None:
            run_records(cells(), self.job.processor(), report, record, accept)
        else:
            run_conversations(conversations(), self.job.processor(), report, accept)  # type: ignore[arg-type]
        if nested:
            return self._nested_cells(values, positions, rejected)
        changed: list[bytes] = [values[i] for i in positions]  # type: ignore[misc]  # a changed cell is not null
        return Cells(positions, self._array(changed), len(values), positions, rejected)

    def _nested_cells(self, values: list[Any], positions: list[int], rejected: list[int]) -> Cells:
        """The :class:`Cells` of a nested column's every cell (``values``, the migrated ones,
        at ``positions``, in place; ``rejected`` ones as read), widened, each null 2.68 refuses
        given its default but in ``check`` (:func:`_defaults_filled`)."""
        filled: list[int] = []
        repaired: list[int] = []
        if not self.reports_nulls:
            unfilled, migrated = set(rejected), set(positions)
            read = self.read_fields[0].keys() | self.read_fields[1].keys() | self.read_fields[2].keys()
            for i, value in enumerate(values):
                if value is None or i in unfilled:
                    continue
                places = _defaults_filled(value, self.written_fields)
                if places and i not in migrated:
                    filled.append(i)
                if any(key in read for _, key, _, _ in places):  # the column held the null: the row must be written
                    repaired.append(i)
        return Cells(
            list(range(len(values))),
            pa.array(values, type=self.output_type),
            len(values),
            positions,
            rejected,
            filled,
            repaired,
        )

    def refusals(self, column: pa.Array) -> dict[int, str]:
        """In ``check`` (:attr:`reports_nulls`), the error line of each cell of a nested
        ``column`` holding a null 2.68 refuses (:func:`null_places`), by its 0-based row; for
        records judged elsewhere than their batch (:mod:`histmig.sources.grouped`)."""
        if not self.reports_nulls:
            return {}
        return {
            i: refused_line(places)
            for i, value in enumerate(column.to_pylist())
            if value is not None and (places := null_places(value, self.read_fields))
        }

    def _store(self, values: list[Any], i: int, outcome: Outcome) -> Outcome:
        """Put a changed outcome's output in ``values[i]``; a nested column that cannot
        hold it keeps the original value and the outcome becomes ``rejected``."""
        output = outcome.output or b""
        if self.kind != "nested":
            values[i] = output
            return outcome
        outcome, messages = held_by(outcome, self.column, self.output_type)
        if outcome.status == "changed":
            values[i] = messages
        return outcome

    def placed(self, column: pa.Array | pa.ChunkedArray, outputs: dict[int, bytes], rejected: Sequence[int]) -> Cells:
        """The :class:`Cells` that put ``outputs`` (migrated JSON texts by 0-based row of
        ``column``, the messages column of some rows) in place, ``rejected`` rows kept: a
        text or binary column's changed cells; a nested column's every cell, widened (as
        :meth:`migrate_cells` gives them). For records migrated elsewhere than the rows'
        batch (a conversation's records, :mod:`histmig.sources.grouped`)."""
        changed = sorted(outputs)
        if self.kind != "nested":
            return Cells(changed, self._array([outputs[i] for i in changed]), len(column), changed, sorted(rejected))
        values = column.to_pylist()
        for i in changed:
            values[i] = orjson.loads(outputs[i])
        return self._nested_cells(values, changed, sorted(rejected))

    def _array(self, outputs: list[bytes]) -> pa.Array:
        """The migrated JSON texts ``outputs`` as an array of the (text or binary) column's
        type; text is built as binary and viewed as text, without a copy (the engine
        writes UTF-8 only)."""
        type_ = self.input_type
        storage = _storage(type_)
        built = bytes_array(outputs, _binary_layout(storage))
        if built.type != storage:
            built = built.view(storage)
        return pa.ExtensionArray.from_storage(type_, built) if isinstance(type_, pa.BaseExtensionType) else built

    def apply(self, column: pa.Array, cells: Cells) -> pa.Array:
        """``column`` (the messages column of a batch of ``cells.length`` rows) with
        ``cells`` in place, of the output type: :meth:`pieces` concatenated. Raises
        :class:`ValueError` when ``column`` is not as long as the batch ``cells`` were made
        from."""
        pieces = self.pieces(column, cells)
        return pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces)

    def pieces(self, column: pa.Array | pa.ChunkedArray, cells: Cells) -> list[pa.Array | pa.ChunkedArray]:
        """``column`` (the messages column of a batch of ``cells.length`` rows, an array or
        a chunked one) with ``cells`` in place, as the runs of unchanged and of new cells,
        in order: slices of ``column`` and of ``cells.values``, nothing copied. Raises
        :class:`ValueError` when ``column`` is not as long as the batch ``cells`` were made
        from."""
        if len(column) != cells.length:
            raise ValueError(f"{self.source}: cells of a {cells.length}-row batch given for {len(column)} rows")
        positions = cells.positions
        if len(positions) == len(column):
            return [cells.values]
        if not positions:
            return [column]
        pieces = []
        kept = 0
        first = 0
        for k in range(len(positions)):
            if k + 1 == len(positions) or positions[k + 1] != positions[k] + 1:
                pieces.append(column.slice(kept, positions[first] - kept))
                pieces.append(cells.values.slice(first, k + 1 - first))
                kept, first = positions[k] + 1, k + 1
        pieces.append(column.slice(kept))
        return pieces


_OFFSETS = {"binary": "i", "large_binary": "q"}
"""The offsets' ``array`` typecode of each binary layout."""


def bytes_array(values: Sequence[bytes], type_: pa.DataType) -> pa.Array:
    """An array of the binary layout ``type_`` holding ``values`` (bytes, none null), built
    from its offsets and data buffers. ``pa.array`` of a Python list first asks pyarrow's
    pandas shim whether the list is a pandas object, which imports pandas wherever it is
    installed: 0.9 s of start-up in each process that converts a Parquet file (pyarrow 26,
    ``python -X importtime``). A layout without offsets (``binary_view``) is left to
    ``pa.array``. Raises ``OverflowError`` past ``binary``'s 2 GiB of data in one batch (of
    256 Parquet cells or 2,048 DuckDB ones: cells of 1 MB on average or more)."""
    typecode = _OFFSETS.get(str(type_))
    if typecode is None:
        return pa.array(values, type=type_)
    ends = array(typecode, [0])
    ends.extend(accumulate(map(len, values)))
    return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(ends), pa.py_buffer(b"".join(values))])


def indices(values: Sequence[int]) -> pa.Array:
    """``values`` (row positions) as an ``int64`` array for ``take``, built from its buffer:
    a Python list given to a compute function goes through ``pa.array`` (see
    :func:`bytes_array`)."""
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(array("q", values))])


def _binary_layout(type_: pa.DataType) -> pa.DataType:
    """The binary type with the layout of the string or binary type ``type_``, whose
    arrays are viewed as it without a copy."""
    if pa.types.is_string(type_):
        return pa.binary()
    if pa.types.is_large_string(type_):
        return pa.large_binary()
    if pa.types.is_string_view(type_):
        return pa.binary_view()
    return type_


def _raw_cells(column: pa.Array) -> list[bytes | None]:
    """The cells of a text or binary column as ``bytes`` (no UTF-8 decoding)."""
    storage = column.storage if isinstance(column, pa.ExtensionArray) else column
    return storage.view(_binary_layout(storage.type)).to_pylist()


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", "backslashreplace")
    return str(value)


def write_jsonl_rows(out: Any, batch: pa.RecordBatch, column: str, kind: ColumnKind, rejected: Collection[int]) -> None:
    """Write each row of ``batch`` to the binary stream ``out`` as one JSON object a line
    (:func:`jsonl_line`), columns in schema order; a nested messages cell is written as the
    JSON value it holds."""
    rejected = set(rejected)
    for i, row in enumerate(batch.to_pylist()):
        cell = row[column]
        raw = None if kind == "nested" or cell is None else (cell.encode() if isinstance(cell, str) else bytes(cell))
        out.write(jsonl_line(row, column, raw, i in rejected))


def jsonl_line(row: dict[str, Any], column: str, raw: bytes | None, rejected: bool) -> bytes:
    """``row`` (column name to value, in column order) as one JSON object and a newline. When
    ``raw`` is given, it is the text or binary messages cell, inlined as the JSON it holds
    (the JSONL source then reads it with ``--messages-field COLUMN``); a ``rejected`` cell
    that is not JSON is written as a string. Timestamps are RFC 3339 strings; other values
    without a JSON form (decimals, binary) are written as strings."""
    if raw is not None:
        row[column] = orjson.Fragment(raw) if not rejected or is_json(raw) else raw.decode("utf-8", "backslashreplace")
    return orjson.dumps(row, default=_json_default, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE)
