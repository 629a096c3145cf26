"""Reading OTLP JSON span exports (histmig.otel.spans): the collector's file-exporter lines of real
pydantic-ai spans (fixtures/otel-spans), attribute values, and lines that cannot be read."""

from __future__ import annotations

import io

import orjson
import pytest

from histmig.errors import SpanError
from histmig.otel.spans import (
    attribute_value,
    attributes_of,
    is_logfire_export,
    parse_export,
    parse_logfire_row,
    read_lines,
)
from tests.conftest import FIXTURES

SPANS = FIXTURES / "otel-spans"


def test_a_real_export_line_gives_its_spans_with_ids_times_and_plain_attributes() -> None:
    line = (SPANS / "v6" / "l_no_retry.otlp.jsonl").read_bytes().splitlines()[0]
    spans = parse_export(line, 1)
    assert [s.name for s in spans] == [
        "chat scripted_model",
        "execute_tool get_time",
        "chat scripted_model",
        "invoke_agent agent",
    ]
    run = spans[-1]
    assert run.parent_span_id is None
    assert {s.parent_span_id for s in spans[:-1]} == {run.span_id}
    assert len(run.trace_id) == 32 and len(run.span_id) == 16
    assert {s.trace_id for s in spans} == {run.trace_id}
    assert run.start_ns < spans[0].start_ns < spans[0].end_ns < run.end_ns
    assert run.attributes["gen_ai.conversation.id"] == "conv-l_no_retry"
    assert run.attributes["gen_ai.aggregated_usage.input_tokens"] == 110  # intValue "110" read as an int
    assert run.line == 1


def test_attribute_values_of_every_kind() -> None:
    assert attribute_value({"stringValue": "a"}) == "a"
    assert attribute_value({"intValue": "-7"}) == -7
    assert attribute_value({"doubleValue": 1.5}) == 1.5
    assert attribute_value({"boolValue": True}) is True
    assert attribute_value({"arrayValue": {"values": [{"stringValue": "stop"}, {"intValue": "2"}]}}) == ["stop", 2]
    assert attribute_value({"kvlistValue": {"values": [{"key": "k", "value": {"boolValue": False}}]}}) == {"k": False}
    assert attribute_value({"bytesValue": "AAE="}) == "AAE="
    assert attribute_value({}) is None
    assert attributes_of([{"key": "a", "value": {"intValue": "1"}}, {"key": "a", "value": {"intValue": "2"}}]) == {
        "a": 2
    }
    with pytest.raises(SpanError, match="unknown attribute value kind 'weirdValue'"):
        attribute_value({"weirdValue": 1})


def test_a_truncated_line_is_an_error_naming_it() -> None:
    line = (SPANS / "v5" / "a_tool_model_retry.otlp.jsonl").read_bytes().splitlines()[0]
    with pytest.raises(SpanError, match=r"^line 7: invalid JSON"):
        parse_export(line[: len(line) // 2], 7)


def test_a_line_that_is_not_an_export_request_is_an_error() -> None:
    with pytest.raises(SpanError, match=r"^line 2: not an OTLP export request \(no resourceSpans list\)$"):
        parse_export(b'{"resourceLogs": []}', 2)


@pytest.mark.parametrize("line", [b'[{"kind": "request", "parts": []}]', b'{"id": 1, "messages": []}', b"[]"])
def test_a_stored_history_given_as_spans_is_named_as_one(line: bytes) -> None:
    with pytest.raises(SpanError) as raised:
        parse_export(line, 4)
    assert str(raised.value) == (
        "line 4: not an OTLP export request (no resourceSpans list); it holds a stored history: histmig convert, "
        "audit and check read it as it is"
    )


@pytest.mark.parametrize("line", [b"[1, 2]", b"[null]", b'{"messages": null}', b'[{"parts": []}]', b'"text"'])
def test_a_line_holding_nothing_histmig_knows_is_named_as_no_export_request_alone(line: bytes) -> None:
    with pytest.raises(SpanError) as raised:
        parse_export(line, 5)
    assert str(raised.value) == "line 5: not an OTLP export request (no resourceSpans list)"


@pytest.mark.parametrize(
    "line",
    [b'{"id": 1, "messages": [{"role": "user", "parts": []}]}', b'[{"role": "assistant", "parts": []}]'],
)
def test_what_histmig_otel_writes_given_as_spans_is_named_as_no_history(line: bytes) -> None:
    """``otel`` and ``from-otel`` are no round trip: ``otel`` writes a history's GenAI messages
    (a ``role`` each), not the spans a traced run exports."""
    with pytest.raises(SpanError) as raised:
        parse_export(line, 3)
    assert str(raised.value) == (
        "line 3: not an OTLP export request (no resourceSpans list); it holds OpenTelemetry GenAI messages "
        "(as histmig otel writes them), which are no history to recover: from-otel reads the spans a traced run "
        "exported"
    )


def test_a_line_whose_resource_spans_are_not_read_is_an_error() -> None:
    with pytest.raises(SpanError, match=r"resourceSpans\[0\]: no scopeSpans list"):
        parse_export(b'{"resourceSpans": [{"scopeSpans": 3}]}', 1)


def test_a_span_without_ids_is_an_error_naming_its_place() -> None:
    raw = orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "ab", "name": "x"}]}]}]})
    with pytest.raises(SpanError, match=r"line 3: resourceSpans\[0\].scopeSpans\[0\].spans\[0\]: span without"):
        parse_export(raw, 3)


def test_ids_are_read_as_lower_case_hex() -> None:
    raw = orjson.dumps(
        {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "AB12", "spanId": "CD", "parentSpanId": ""}]}]}]}
    )
    (span,) = parse_export(raw, 1)
    assert (span.trace_id, span.span_id, span.parent_span_id) == ("ab12", "cd", None)


def test_lines_are_numbered_from_one_and_blank_ones_skipped() -> None:
    assert list(read_lines(io.BytesIO(b"a\n\n  \nb\n"))) == [(1, b"a\n"), (4, b"b\n")]


def test_a_logfire_row_gives_the_same_span_as_the_otlp_line() -> None:
    otlp = parse_export((SPANS / "v6" / "e_output_tool_validation.otlp.jsonl").read_bytes().splitlines()[0], 1)
    export = orjson.loads((SPANS / "logfire" / "v6" / "e_output_tool_validation.json").read_bytes())
    assert is_logfire_export(export)
    rows = [parse_logfire_row(row, n) for n, row in enumerate(export["rows"], start=1)]
    assert [(s.trace_id, s.span_id, s.parent_span_id, s.name, s.status_code) for s in rows] == [
        (s.trace_id, s.span_id, s.parent_span_id, s.name, s.status_code) for s in otlp
    ]
    assert [s.start_ns // 1000 for s in rows] == [s.start_ns // 1000 for s in otlp]  # microseconds in Logfire
    run = rows[-1]
    assert run.place == "row 3"
    # Logfire holds what logfire.json_schema declares objects as JSON values
    assert run.attributes["final_result"] == {"city": "Paris", "population": 2100000}
    assert orjson.loads(otlp[-1].attributes["pydantic_ai.all_messages"]) == run.attributes["pydantic_ai.all_messages"]


def test_a_logfire_row_without_ids_or_times_is_an_error_naming_the_row() -> None:
    with pytest.raises(SpanError, match=r"^row 4: row without trace_id or span_id"):
        parse_logfire_row({"span_id": "ab"}, 4)
    with pytest.raises(SpanError, match=r"^row 2: span ab: start_timestamp: "):
        parse_logfire_row({"trace_id": "cd", "span_id": "ab", "start_timestamp": "yesterday"}, 2)
    with pytest.raises(SpanError, match=r"^row 1: span ab: attributes are not JSON"):
        parse_logfire_row({"trace_id": "cd", "span_id": "ab", "attributes": "{"}, 1)
