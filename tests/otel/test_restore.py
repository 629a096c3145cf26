"""``from-otel`` over span files (histmig.otel.restore): one history a conversation or a run,
report rows, rejects by file, line and span id (never dropped), content off, gzip, paths."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import orjson
import pytest

from histmig.errors import SamePath, UsageError
from histmig.otel.restore import from_otel
from tests.conftest import FIXTURES
from tests.otel.test_history import comparable

SPANS = FIXTURES / "otel-spans"


def lines(path: Path) -> list[Any]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def truth(version_dir: str, scenario: str) -> list[list[dict[str, Any]]]:
    return orjson.loads((SPANS / version_dir / f"{scenario}.messages.json").read_bytes())


def test_each_conversation_once_from_its_last_run(tmp_path: Path) -> None:
    files = [str(SPANS / "v5" / f"{s}.otlp.jsonl") for s in ("i_multi_run", "a_tool_model_retry", "m_deferred_tool")]
    out = tmp_path / "h.jsonl"
    restored = from_otel(files, str(out))
    assert restored.exit_code == 0 and restored.written == 3
    records = lines(out)
    # in the order of each conversation's first run (a ran before i), not of the files given
    assert [r["conversation_id"] for r in records] == [
        "conv-a_tool_model_retry",
        "conv-i_multi_run",
        "conv-m_deferred_tool",
    ]
    first = records[1]
    assert list(first)[:4] == ["trace_id", "span_id", "conversation_id", "run_id"]
    assert first["run_id"] == "run-i_multi_run-1"
    assert first["attributes"]["final_result"] == "You told me the sky is blue."
    assert "pydantic_ai.all_messages" not in first["attributes"]
    assert comparable(first["messages"], "i_multi_run") == comparable(truth("v5", "i_multi_run")[1], "i_multi_run")
    report = lines(tmp_path / "h.jsonl.report.jsonl")
    assert [row["status"] for row in report] == ["written"] * 3
    assert [row["raised"] for row in report] == [False] * 3
    assert report[1]["source"] == "pydantic_ai.all_messages"
    assert "response.timestamp" in report[1]["derived"]
    assert "response.provider_name" in report[1]["unknowable"]
    assert not (tmp_path / "h.jsonl.rejects.jsonl").exists()


def test_a_run_that_raised_is_said_in_its_report_row(tmp_path: Path) -> None:
    out = tmp_path / "h.jsonl"
    from_otel([str(SPANS / "v6" / "k_tool_retries_exhausted.otlp.jsonl")], str(out))
    (row,) = lines(tmp_path / "h.jsonl.report.jsonl")
    assert (row["status"], row["raised"], row["source"]) == (
        "written",
        True,
        "gen_ai.input.messages+gen_ai.output.messages",
    )


def test_runs_all_writes_every_run(tmp_path: Path) -> None:
    out = tmp_path / "h.jsonl"
    from_otel([str(SPANS / "v3" / "i_multi_run.otlp.jsonl")], str(out), runs="all")
    records = lines(out)
    assert [r["run_id"] for r in records] == ["run-i_multi_run-0", "run-i_multi_run-1"]
    for record, stored in zip(records, truth("v3", "i_multi_run")):
        assert comparable(record["messages"], "i_multi_run") == comparable(stored, "i_multi_run")


def test_unknown_runs_value_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--runs must be one of last, all"):
        from_otel([str(SPANS / "v5" / "l_no_retry.otlp.jsonl")], str(tmp_path / "o.jsonl"), runs="first")


def test_gzipped_spans_give_the_same_bytes(tmp_path: Path) -> None:
    source = SPANS / "v4" / "j_rich_content.otlp.jsonl"
    zipped = tmp_path / "spans.otlp.jsonl.gz"
    zipped.write_bytes(gzip.compress(source.read_bytes()))
    from_otel([str(source)], str(tmp_path / "a.jsonl"))
    from_otel([str(zipped)], str(tmp_path / "b.jsonl"))
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert (tmp_path / "a.jsonl").stat().st_size > 0


def test_content_off_writes_no_history_and_says_what_the_spans_recorded(tmp_path: Path) -> None:
    out = tmp_path / "h.jsonl"
    restored = from_otel([str(SPANS / "v6-no-content" / "c_unknown_tool.otlp.jsonl")], str(out))
    assert (restored.written, restored.no_content, restored.exit_code) == (0, 1, 1)
    assert out.read_bytes() == b""
    (row,) = lines(tmp_path / "h.jsonl.report.jsonl")
    assert row["status"] == "no-content"
    assert row["recorded"]["tool_calls"] == [
        {"id": "call_c1", "name": "get_wether"},
        {"id": "call_c2", "name": "get_weather"},
    ]
    assert "recorded without content" in restored.verdict


def _bad_spans(tmp_path: Path) -> Path:
    """A span file of three good runs and three bad lines: a truncated line, a run span without
        messages (its model request spans' messages gone too), another framework's agent span, and the
    first line again (a collector that retried an export)."""
    good = (SPANS / "v5" / "a_tool_model_retry.otlp.jsonl").read_bytes().splitlines()[0]
    messageless = orjson.loads((SPANS / "v5" / "g_text_output.otlp.jsonl").read_bytes().splitlines()[0])
    for span in messageless["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        span["attributes"] = [a for a in span["attributes"] if "messages" not in a["key"]]
    foreign = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "0af7651916cd43dd8448eb211c80319c",
                                "spanId": "b7ad6b7169203331",
                                "name": "invoke_agent helper",
                                "startTimeUnixNano": "1",
                                "endTimeUnixNano": "2",
                                "attributes": [
                                    {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
                                    {"key": "gen_ai.agent.name", "value": {"stringValue": "helper"}},
                                ],
                            }
                        ]
                    }
                ]
            }
        ]
    }
    path = tmp_path / "spans.jsonl"
    path.write_bytes(b"\n".join([good, good[:500], orjson.dumps(messageless), orjson.dumps(foreign), good]) + b"\n")
    return path


def test_bad_spans_are_rejected_by_line_and_span_id_never_dropped(tmp_path: Path) -> None:
    spans = _bad_spans(tmp_path)
    out = tmp_path / "h.jsonl"
    restored = from_otel([str(spans)], str(out))
    assert restored.exit_code == 1
    assert restored.written == 1  # the good run (twice in the file: one conversation)
    rejects = lines(tmp_path / "h.jsonl.rejects.jsonl")
    assert [(r["line"], r.get("span_id")) for r in rejects] == [
        (2, None),
        (4, "b7ad6b7169203331"),
        (3, "0000019700000002"),
    ]
    assert rejects[0]["error"].startswith("line 2: invalid JSON")
    assert "another framework" in rejects[1]["error"]
    assert "has no pydantic_ai.all_messages" in rejects[2]["error"]
    raw_lines = spans.read_bytes().decode().splitlines()
    assert [r["raw"] for r in rejects] == [raw_lines[1], raw_lines[3], raw_lines[2]]
    assert all(r["file"] == str(spans) for r in rejects)
    assert restored.rejected == [f"{spans}: {r['error']}" for r in rejects]
    report = lines(tmp_path / "h.jsonl.report.jsonl")
    assert [row["status"] for row in report] == ["written", "rejected"]


def test_an_output_that_is_an_input_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    spans = tmp_path / "s.jsonl"
    spans.write_bytes((SPANS / "v5" / "l_no_retry.otlp.jsonl").read_bytes())
    before = spans.read_bytes()
    with pytest.raises(SamePath, match="OUTPUT"):
        from_otel([str(spans)], str(tmp_path / "." / "s.jsonl"))
    with pytest.raises(SamePath, match="--report"):
        from_otel([str(spans)], str(tmp_path / "o.jsonl"), report=str(spans))
    assert spans.read_bytes() == before
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("version", (2, 3, 4, 5, 6))
def test_a_logfire_export_of_the_same_spans_gives_the_same_histories(tmp_path: Path, version: int) -> None:
    otlp = sorted(str(p) for p in (SPANS / f"v{version}").glob("*.otlp.jsonl"))
    logfire = sorted(str(p) for p in (SPANS / "logfire" / f"v{version}").glob("*.json"))
    assert len(otlp) == len(logfire) == 14
    assert from_otel(otlp, str(tmp_path / "a.jsonl")).exit_code == 0
    assert from_otel(logfire, str(tmp_path / "b.jsonl")).exit_code == 0
    a, b = lines(tmp_path / "a.jsonl"), lines(tmp_path / "b.jsonl")
    assert [r["messages"] for r in a] == [r["messages"] for r in b]
    assert [r["span_id"] for r in a] == [r["span_id"] for r in b]


def test_a_bad_logfire_row_is_rejected_by_row(tmp_path: Path) -> None:
    export = orjson.loads((SPANS / "logfire" / "v5" / "l_no_retry.json").read_bytes())
    export["rows"].insert(1, {"span_id": "ffff", "span_name": "broken"})
    path = tmp_path / "logfire.json"
    path.write_bytes(orjson.dumps(export, option=orjson.OPT_INDENT_2))  # one document over many lines
    restored = from_otel([str(path)], str(tmp_path / "h.jsonl"))
    assert (restored.written, restored.exit_code) == (1, 1)
    (reject,) = lines(tmp_path / "h.jsonl.rejects.jsonl")
    assert (reject["row"], reject["error"]) == (2, "row 2: row without trace_id or span_id")
    assert orjson.loads(reject["raw"]) == {"span_id": "ffff", "span_name": "broken"}


def test_max_retries_fills_a_recovered_retry_s_budget_and_without_it_leaves_it_null(tmp_path: Path) -> None:
    """``--max-retries`` as ``convert --attempts --max-retries`` takes it: the retry feedback no
    tool span recorded gets the output budget given, said derived in its report row; without
    it, ``max_retries`` stays null and is said unknowable, as before."""
    spans = str(SPANS / "v5" / "f_output_validator_text.otlp.jsonl")
    given, alone = tmp_path / "given.jsonl", tmp_path / "alone.jsonl"
    assert from_otel([spans], str(given), max_retries="tools=4,output=2").exit_code == 0
    assert from_otel([spans], str(alone)).exit_code == 0

    def retries(path: Path) -> list[dict[str, Any]]:
        return [
            p["retry"] for m in lines(path)[0]["messages"] for p in m["parts"] if p["part_kind"] == "retry-feedback"
        ]

    assert retries(given) == [{"cause": "model_retry", "attempt": 1, "max_retries": 2}]
    assert retries(alone) == [{"cause": "model_retry", "attempt": 1, "max_retries": None}]
    (row,) = lines(tmp_path / "given.jsonl.report.jsonl")
    assert "retry-feedback.retry.max_retries" in row["derived"]
    assert "retry-feedback.retry.max_retries" not in row["unknowable"]
    (row,) = lines(tmp_path / "alone.jsonl.report.jsonl")
    assert "retry-feedback.retry.max_retries" in row["unknowable"]
    # a recorded retry keeps what its tool span recorded
    recorded = tmp_path / "recorded.jsonl"
    from_otel([str(SPANS / "v5" / "a_tool_model_retry.otlp.jsonl")], str(recorded), max_retries="tools=7")
    assert [p["retry"] for m in lines(recorded)[0]["messages"] for p in m["parts"] if p.get("retry")] == [
        {"cause": "model_retry", "attempt": 1, "max_retries": 1}
    ]


def test_max_retries_that_does_not_parse_is_a_usage_error_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--max-retries: 'outpt=1' is not tools=N, output=N or tool:NAME=N"):
        from_otel([str(SPANS / "v5" / "l_no_retry.otlp.jsonl")], str(tmp_path / "h.jsonl"), max_retries="outpt=1")
    assert list(tmp_path.iterdir()) == []
