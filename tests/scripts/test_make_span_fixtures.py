"""The span fixtures are what pydantic-ai 2.68 records, as a collector and Logfire's export write it:
a scenario run afresh gives the committed spans' shape, with the same ids, and rebuilds equal to
its own ``all_messages()``."""

from __future__ import annotations

import asyncio
import importlib.util
import sys

import orjson
import pytest

from histmig.otel.history import group_runs, rebuild
from histmig.otel.spans import parse_export, parse_logfire_row
from tests.conftest import FIXTURES, ROOT
from tests.otel.test_history import comparable

_SPEC = importlib.util.spec_from_file_location("make_span_fixtures", ROOT / "scripts" / "make_span_fixtures.py")
make = sys.modules["make_span_fixtures"] = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(make)


def _names(lines: list[str]) -> list[list[str]]:
    return [[span.name for span in parse_export(line.encode(), n)] for n, line in enumerate(lines, start=1)]


@pytest.mark.filterwarnings("ignore:Instrumentation format versions 2, 3, and 4 are deprecated")
@pytest.mark.parametrize("version", (2, 6))
def test_a_scenario_run_afresh_gives_the_committed_spans_and_rebuilds_equal(version: int) -> None:
    committed = (FIXTURES / "otel-spans" / f"v{version}" / "i_multi_run.otlp.jsonl").read_text().splitlines()
    seed = (version - 1) * 100 + list(make.SCENARIOS).index("i_multi_run")  # as main() numbers them
    lines, histories = asyncio.run(make.run_scenario("i_multi_run", version, True, seed))
    assert _names(lines) == _names(committed)
    fresh = [span for n, line in enumerate(lines, start=1) for span in parse_export(line.encode(), n)]
    old = [span for n, line in enumerate(committed, start=1) for span in parse_export(line.encode(), n)]
    assert [(s.trace_id, s.span_id, s.parent_span_id) for s in fresh] == [
        (s.trace_id, s.span_id, s.parent_span_id) for s in old
    ]
    runs, _ = group_runs(fresh)
    for end, stored in enumerate(histories):
        assert comparable(rebuild(runs[: end + 1]).messages, "i_multi_run") == comparable(stored, "i_multi_run")


def test_collector_json_has_hex_ids_and_string_nanoseconds() -> None:
    line = orjson.loads((FIXTURES / "otel-spans" / "v5" / "l_no_retry.otlp.jsonl").read_bytes().splitlines()[0])
    span = line["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert all(c in "0123456789abcdef" for c in span["traceId"] + span["spanId"])
    assert isinstance(span["startTimeUnixNano"], str) and span["startTimeUnixNano"].isdigit()
    assert isinstance(span["kind"], int)


def test_logfire_rows_carry_the_records_columns() -> None:
    lines = (FIXTURES / "otel-spans" / "v5" / "l_no_retry.otlp.jsonl").read_text().splitlines()
    export = make.logfire_rows(lines)
    assert [c["name"] for c in export["columns"]] == list(export["rows"][0])
    assert export == orjson.loads((FIXTURES / "otel-spans" / "logfire" / "v5" / "l_no_retry.json").read_bytes())
    spans = [parse_logfire_row(row, n) for n, row in enumerate(export["rows"], start=1)]
    assert [s.span_id for s in spans] == [s.span_id for s in parse_export(lines[0].encode(), 1)]
