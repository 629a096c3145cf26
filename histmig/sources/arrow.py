"""One messages column of Arrow record batches through the pipeline; shared by the Parquet
and DuckDB sources.

A cell is one record. A string or binary cell holds the record's JSON text (a bare history
as ``all_messages_json()`` writes it, or an envelope object) and goes through
:func:`histmig.pipeline.process` as it is, so the JSONL and the columnar paths share one
pipeline; an unchanged cell is written back as the same bytes. A nested cell
(``list<struct>``, one struct per message) is turned into plain JSON data, migrated, and
built back into the column's *widened* type (:func:`widened_type`): the input type plus the
fields the rules write (``outcome``, ``retry``, ``instructions``). A nested column cannot
tell a null field from an absent one (every struct has every field): the pipeline sees a
null field as absent, except ``tool_call_id`` and ``timestamp`` (:data:`NULLS_KEPT`), and
absent fields come back as null. A migrated history the
widened type cannot hold (a value whose type changes, such as legacy ``{"args_json": ...}``
tool arguments becoming a string) is rejected and its cell kept unchanged. A null cell is
not a record: it is carried as it is and not counted. Every other column is untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import orjson
import pyarrow as pa

from histmig.pipeline import Options, Outcome, process
from histmig.records import MESSAGE_FIELD_CANDIDATES, Record
from histmig.tabular import ColumnError

ColumnKind = Literal["text", "binary", "nested"]

RETRY_TYPE = pa.struct([("cause", pa.string()), ("attempt", pa.int64()), ("max_retries", pa.int64())])
"""Arrow type of a part's ``retry`` (``RetryInfo``) in a widened nested column."""

NEW_PART_FIELDS = (pa.field("outcome", pa.string()), pa.field("retry", RETRY_TYPE))
"""Part fields the rules write (HM101/HM102), added to a nested column's part struct."""

NEW_MESSAGE_FIELDS = (pa.field("instructions", pa.string()),)
"""Message fields the rules write (HM204), added to a nested column's message struct."""


NULLS_KEPT = frozenset({"tool_call_id", "timestamp"})
"""Fields whose null a nested cell passes to the pipeline: legacy releases wrote them as
null, and rules repair exactly that (HM201, HM202). Any other null field is dropped."""


def _storage(type_: pa.DataType) -> pa.DataType:
    return type_.storage_type if isinstance(type_, pa.ExtensionType) else type_


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


def find_messages_column(schema: pa.Schema, name: str | None = None, *, where: str = "") -> str:
    """The messages column of ``schema``: ``name`` when given, else the first of
    :data:`~histmig.records.MESSAGE_FIELD_CANDIDATES` present with a usable type, else the
    only ``list<struct>`` column whose structs have ``kind`` and ``parts``. Raises
    :class:`ColumnError` (prefixed with ``where``) when there is none or the type is unusable."""
    prefix = f"{where}: " if where else ""
    if name is not None:
        if name not in schema.names:
            raise ColumnError(f"{prefix}no column {name!r} (columns: {', '.join(schema.names)})")
        if column_kind(schema.field(name).type) is None:
            raise ColumnError(f"{prefix}column {name!r} is {schema.field(name).type}: expected JSON text, binary or list<struct>")
        return name
    for candidate in MESSAGE_FIELD_CANDIDATES:
        if candidate in schema.names and column_kind(schema.field(candidate).type) is not None:
            return candidate
    nested = [
        f.name
        for f in schema
        if column_kind(f.type) == "nested" and {"kind", "parts"} <= {c.name for c in _storage(f.type).value_type}
    ]
    if len(nested) == 1:
        return nested[0]
    raise ColumnError(f"{prefix}cannot tell the messages column (name it with --messages-column)")


def _merge(struct: pa.StructType, additions: Sequence[pa.Field]) -> pa.StructType:
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
    with :data:`NEW_MESSAGE_FIELDS` added to the message struct and :data:`NEW_PART_FIELDS`
    to the struct of its ``parts`` list; fields already present keep their place and type
    (a struct gains missing subfields; a null-typed field takes the new type)."""
    message = messages_type.value_type
    fields = list(message)
    index = message.get_field_index("parts")
    if index >= 0:
        parts = fields[index].type
        if (pa.types.is_list(parts) or pa.types.is_large_list(parts)) and pa.types.is_struct(parts.value_type):
            fields[index] = fields[index].with_type(_list_like(parts, _merge(parts.value_type, NEW_PART_FIELDS)))
    return _list_like(messages_type, _merge(pa.struct(fields), NEW_MESSAGE_FIELDS))


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _pipeline_value(value: Any) -> Any:
    """A nested cell's value as the pipeline sees it: null fields dropped but for
    :data:`NULLS_KEPT`."""
    if isinstance(value, dict):
        return {k: _pipeline_value(v) for k, v in value.items() if v is not None or k in NULLS_KEPT}
    if isinstance(value, list):
        return [_pipeline_value(v) for v in value]
    return value


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


@dataclass
class ColumnMigrator:
    """Migrates the ``column`` of record batches whose schema is ``schema``.

    ``source`` names the input in every record (a file name); ``id_column`` names the column
    whose value becomes each record's id in the report (else the envelope's id).
    :meth:`migrate` returns the batch with that column replaced and one outcome per row
    (``None`` for a null cell). Raises :class:`ColumnError` at construction when a column is
    missing or unusable.
    """

    schema: pa.Schema
    column: str
    source: str
    options: Options = field(default_factory=Options)
    id_column: str | None = None

    def __post_init__(self) -> None:
        self.index = self.schema.get_field_index(self.column)
        self.input_type = self.schema.field(self.column).type
        kind = column_kind(self.input_type)
        if self.index < 0 or kind is None:
            raise ColumnError(f"{self.source}: no usable column {self.column!r}")
        if self.id_column is not None and self.id_column not in self.schema.names:
            raise ColumnError(f"{self.source}: no id column {self.id_column!r}")
        self.kind: ColumnKind = kind
        self.output_type = widened_type(self.input_type) if kind == "nested" else self.input_type

    @property
    def output_schema(self) -> pa.Schema:
        """``schema`` with the messages column's type widened (nested) or kept; same field
        order, field metadata and schema metadata."""
        return self.schema.set(self.index, self.schema.field(self.index).with_type(self.output_type))

    def migrate(self, batch: pa.RecordBatch, rows: Sequence[int]) -> tuple[pa.RecordBatch, list[Outcome | None]]:
        """Run every cell of the messages column of ``batch`` through the pipeline; ``rows``
        holds each row's number (0-based) for its ``location`` (``row N``)."""
        column = batch.column(self.index)
        ids = batch.column(self.id_column).to_pylist() if self.id_column is not None else None
        values = column.to_pylist()
        outcomes: list[Outcome | None] = []
        replaced = False
        for i, value in enumerate(values):
            if value is None:
                outcomes.append(None)
                continue
            if self.kind == "nested":
                raw = orjson.dumps(_pipeline_value(value))
            else:
                raw = value.encode() if isinstance(value, str) else value
            outcome = process(Record(raw, self.source, f"row {rows[i]}"), self.options)
            if ids is not None:
                outcome.record = replace(outcome.record, record_id=None if ids[i] is None else str(ids[i]))
            if outcome.status == "changed":
                outcome = self._store(values, i, outcome)
                replaced = replaced or outcome.status == "changed"
            outcomes.append(outcome)
        if not replaced and self.kind != "nested":
            return batch, outcomes
        new_column = self._array(values, column)
        return batch.set_column(self.index, self.output_schema.field(self.index), new_column), outcomes

    def _store(self, values: list[Any], i: int, outcome: Outcome) -> Outcome:
        """Put a changed outcome's output in ``values[i]``; a nested column that cannot
        hold it keeps the original value and the outcome becomes ``rejected``."""
        output = outcome.output or b""
        if self.kind != "nested":
            values[i] = output.decode() if self.kind == "text" else output
            return outcome
        messages = orjson.loads(output)
        problem = _carry_problem(messages, self.output_type)
        if problem is not None:
            error = f"column {self.column!r} cannot hold the migrated messages: {problem}"
            return Outcome(outcome.record, "rejected", None, outcome.changes, [error])
        values[i] = messages
        return outcome

    def _array(self, values: list[Any], column: pa.Array) -> pa.Array:
        if self.kind == "nested":
            return pa.array(values, type=self.output_type)
        type_ = column.type
        if isinstance(type_, pa.ExtensionType):
            return pa.ExtensionArray.from_storage(type_, pa.array(values, type=type_.storage_type))
        return pa.array(values, type=type_)


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", "backslashreplace")
    return str(value)


def write_jsonl_rows(out: Any, batch: pa.RecordBatch, column: str, kind: ColumnKind, outcomes: Sequence[Outcome | None]) -> None:
    """Write each row of ``batch`` to the binary stream ``out`` as one JSON object a line,
    columns in schema order. A text or binary messages cell is inlined as the JSON it holds
    (the JSONL source then reads it with ``--messages-field COLUMN``); a cell that is not
    JSON (a rejected record) is written as a string. Timestamps are RFC 3339 strings; other
    values without a JSON form (decimals, binary) are written as strings."""
    for row, outcome in zip(batch.to_pylist(), outcomes):
        cell = row[column]
        if kind != "nested" and cell is not None:
            raw = cell.encode() if isinstance(cell, str) else bytes(cell)
            if outcome is None or outcome.status != "rejected" or _is_json(raw):
                row[column] = orjson.Fragment(raw)
            else:
                row[column] = raw.decode("utf-8", "backslashreplace")
        out.write(orjson.dumps(row, default=_json_default, option=orjson.OPT_NON_STR_KEYS))
        out.write(b"\n")


def _is_json(raw: bytes) -> bool:
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return True
