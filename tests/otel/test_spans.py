"""Reading OTLP JSON span exports (histmig.otel.spans): the collector's file-exporter lines of real
pydantic-ai spans (fixtures/otel-spans), attribute values, and lines that cannot be read."""

from __future__ import annotations

import io

import orjson
import pytest

from histmig.errors import SpanError
from histmig.otel.spans import attribute_value, attributes_of, parse_export, read_lines
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
    with pytest.raises(SpanError, match=r"^line 2: not an OTLP export request"):
        parse_export(b'{"resourceLogs": []}', 2)
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
