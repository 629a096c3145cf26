"""Spans read back from an OpenTelemetry export: OTLP JSON lines as a Collector's file exporter
writes them (one ``{"resourceSpans": [...]}`` export request a line, gzipped or not:
:func:`histmig.sources.atomic.input_stream` reads both).

The OTLP JSON mapping (opentelemetry-proto, ``ExportTraceServiceRequest``): ids are hex strings,
times are nanoseconds since the epoch written as decimal strings, attribute values are
``AnyValue`` objects (``stringValue``, ``intValue`` as a decimal string, ``doubleValue``,
``boolValue``, ``arrayValue.values``, ``kvlistValue.values``, ``bytesValue`` in base64).

And as Logfire's query API returns rows of its ``records`` table (``row_oriented=true``: one JSON
document ``{"columns": [...], "rows": [...]}``, the columns its SQL reference documents:
``trace_id``, ``span_id``, ``parent_span_id``, ``span_name``, ``start_timestamp`` and
``end_timestamp`` as ISO 8601 text, ``otel_status_code`` ``UNSET``/``OK``/``ERROR`` and
``attributes`` an object whose values the span's ``logfire.json_schema`` declares objects or
arrays are JSON values rather than text). :func:`parse_logfire` reads it; its spans are numbered
by row.

A line that is not an export request (truncated JSON, another shape) raises :class:`SpanError`
naming the line; a span inside it without ids raises it naming the span's place.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, BinaryIO

import orjson

from histmig.errors import SpanError
from histmig.records import MESSAGE_FIELD_CANDIDATES


@dataclass(frozen=True)
class Span:
    """One span: ``trace_id`` and ``span_id`` as lower-case hex, ``parent_span_id`` hex or ``None``
    for a root, ``start_ns`` and ``end_ns`` nanoseconds since the epoch, ``attributes`` as plain
    values (:func:`attribute_value`), ``status_code`` the OTLP code (0 unset, 1 ok, 2 error),
    ``line`` the 1-based line of the export it came from (``unit`` ``"row"``: the row of a Logfire
    export)."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(repr=False)
    status_code: int
    line: int
    unit: str = "line"

    @property
    def place(self) -> str:
        """Where the span was read, as an error names it: ``line 3`` (OTLP) or ``row 3`` (Logfire)."""
        return f"{self.unit} {self.line}"


def attribute_value(value: Any) -> Any:
    """An OTLP JSON ``AnyValue`` as a plain value: ``intValue`` as ``int``, arrays as lists,
    key-value lists as dicts, ``bytesValue`` kept as its base64 text. Raises
    :class:`SpanError` for an object that is none of the ``AnyValue`` kinds."""
    if not isinstance(value, dict):
        raise SpanError(f"attribute value is not an AnyValue object: {value!r:.80}")
    if not value:
        return None
    kind, inner = next(iter(value.items()))
    if kind == "stringValue" or kind == "bytesValue":
        return inner
    if kind == "intValue":
        return int(inner)
    if kind == "doubleValue":
        return float(inner)
    if kind == "boolValue":
        return bool(inner)
    if kind == "arrayValue":
        return [attribute_value(item) for item in (inner or {}).get("values", [])]
    if kind == "kvlistValue":
        return {kv["key"]: attribute_value(kv.get("value", {})) for kv in (inner or {}).get("values", [])}
    raise SpanError(f"unknown attribute value kind {kind!r}")


def attributes_of(items: Any) -> dict[str, Any]:
    """An OTLP ``attributes`` list (``[{"key", "value"}]``) as a dict, later keys winning."""
    if not isinstance(items, list):
        raise SpanError("attributes is not a list")
    return {item["key"]: attribute_value(item.get("value", {})) for item in items}


def _span(raw: dict[str, Any], line: int, where: str) -> Span:
    trace_id, span_id = raw.get("traceId"), raw.get("spanId")
    if not isinstance(trace_id, str) or not isinstance(span_id, str) or not trace_id or not span_id:
        raise SpanError(f"line {line}: {where}: span without traceId or spanId")
    try:
        return Span(
            trace_id=trace_id.lower(),
            span_id=span_id.lower(),
            parent_span_id=(raw.get("parentSpanId") or "").lower() or None,
            name=str(raw.get("name", "")),
            start_ns=int(raw.get("startTimeUnixNano", 0)),
            end_ns=int(raw.get("endTimeUnixNano", 0)),
            attributes=attributes_of(raw.get("attributes", [])),
            status_code=int((raw.get("status") or {}).get("code", 0)),
            line=line,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise SpanError(f"line {line}: span {span_id}: {exc}") from exc


def _what_it_holds(obj: object) -> str:
    """What a line that is no export request holds, when it is something histmig knows, as
    the end of its error: a stored history (empty, or its first message a request or a
    response, read by ``convert``), or the OpenTelemetry GenAI messages ``histmig otel``
    writes (``role`` for ``kind``), which hold no history to recover; ``""`` for anything else
    (``[1, 2]``, ``{"messages": null}``)."""
    if isinstance(obj, dict):
        field = next((k for k in MESSAGE_FIELD_CANDIDATES if k in obj), None)
        obj = obj[field] if field is not None else None
    if not isinstance(obj, list):
        return ""
    first = obj[0] if obj else {"kind": "request"}  # an empty history is a history
    if not isinstance(first, dict):
        return ""
    if first.get("kind") in ("request", "response"):
        return "; it holds a stored history: histmig convert, audit and check read it as it is"
    if "role" in first:
        return (
            "; it holds OpenTelemetry GenAI messages (as histmig otel writes them), which are no history to recover: "
            "from-otel reads the spans a traced run exported"
        )
    return ""


def parse_export(raw: bytes, line: int) -> list[Span]:
    """The spans of one export request line, in the order written. Raises :class:`SpanError`
    naming ``line`` for invalid JSON, a line that is not ``{"resourceSpans": [...]}``, or a
    span that cannot be read."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise SpanError(f"line {line}: invalid JSON: {exc}") from exc
    if not isinstance(obj, dict) or not isinstance(obj.get("resourceSpans"), list):
        raise SpanError(f"line {line}: not an OTLP export request (no resourceSpans list){_what_it_holds(obj)}")
    spans: list[Span] = []
    for r_index, resource in enumerate(obj["resourceSpans"]):
        scopes = resource.get("scopeSpans", []) if isinstance(resource, dict) else None
        if not isinstance(scopes, list):
            raise SpanError(f"line {line}: resourceSpans[{r_index}]: no scopeSpans list")
        for s_index, scope in enumerate(scopes):
            raw_spans = scope.get("spans", []) if isinstance(scope, dict) else None
            if not isinstance(raw_spans, list):
                raise SpanError(f"line {line}: resourceSpans[{r_index}].scopeSpans[{s_index}]: no spans list")
            for index, raw_span in enumerate(raw_spans):
                where = f"resourceSpans[{r_index}].scopeSpans[{s_index}].spans[{index}]"
                if not isinstance(raw_span, dict):
                    raise SpanError(f"line {line}: {where}: not an object")
                spans.append(_span(raw_span, line, where))
    return spans


def read_lines(stream: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines of a span file (a stream :func:`histmig.sources.atomic.input_stream`
    opened, so gunzipped already), numbered from 1."""
    for number, raw in enumerate(stream, start=1):
        if raw.strip():
            yield number, raw


_STATUS_CODES = {"UNSET": 0, "OK": 1, "ERROR": 2}


def is_logfire_export(obj: Any) -> bool:
    """Whether a parsed JSON document is a Logfire row-oriented query result."""
    return isinstance(obj, dict) and isinstance(obj.get("rows"), list) and isinstance(obj.get("columns"), list)


def _nanoseconds(text: Any, where: str) -> int:
    if not isinstance(text, str):
        raise SpanError(f"{where}: timestamp is not ISO 8601 text")
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise SpanError(f"{where}: {exc}") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    delta = moment - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def parse_logfire_row(row: Any, number: int) -> Span:
    """One row of a Logfire ``records`` query result (1-based ``number``) as a :class:`Span`.
    Raises :class:`SpanError` naming the row for a row without ids, times or an attributes
    object."""
    where = f"row {number}"
    if not isinstance(row, dict):
        raise SpanError(f"{where}: not an object")
    trace_id, span_id = row.get("trace_id"), row.get("span_id")
    if not isinstance(trace_id, str) or not isinstance(span_id, str) or not trace_id or not span_id:
        raise SpanError(f"{where}: row without trace_id or span_id")
    attributes = row.get("attributes") or {}
    if isinstance(attributes, str):
        try:
            attributes = orjson.loads(attributes)
        except orjson.JSONDecodeError as exc:
            raise SpanError(f"{where}: span {span_id}: attributes are not JSON: {exc}") from exc
    if not isinstance(attributes, dict):
        raise SpanError(f"{where}: span {span_id}: attributes are not an object")
    return Span(
        trace_id=trace_id.lower(),
        span_id=span_id.lower(),
        parent_span_id=(row.get("parent_span_id") or "").lower() or None,
        name=str(row.get("span_name", "")),
        start_ns=_nanoseconds(row.get("start_timestamp"), f"{where}: span {span_id}: start_timestamp"),
        end_ns=_nanoseconds(row.get("end_timestamp"), f"{where}: span {span_id}: end_timestamp"),
        attributes=attributes,
        status_code=_STATUS_CODES.get(str(row.get("otel_status_code") or "UNSET"), 0),
        line=number,
        unit="row",
    )
