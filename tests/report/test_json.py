"""The JSON report (histmig.report.json): an audit record of the run (README "Report"),
streamed a batch of rows at a time, the same text as one ``orjson.dumps`` of
:meth:`Report.to_json`; places as numbers, evidence and certainty apart, an error's path and
message apart; the start time the only value that differs between two runs."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
from typer.testing import CliRunner

from histmig import __version__, api
from histmig.cli import app
from histmig.options import Options
from histmig.report import SKIPPED, Rendering, Report, place
from tests.conftest import CORPUS
from tests.report.conftest import ORPHAN, legacy_report, reader_report, rendered, skipped_report


def test_streamed_json_is_the_one_dump(tmp_path: Path, batch_size: int) -> None:
    report, source = legacy_report(tmp_path)
    summary = report.summary()
    assert (
        summary["records_in"],
        summary["changed"],
        summary["unchanged"],
        summary["rejected"],
        summary["warnings"],
    ) == (215, 139, 74, 2, 7)
    assert sum(summary["parts_by_rule"].values()) == len(report.changes) == 271
    assert summary["findings"] == 0 and summary["findings_by_rule"] == {"HM407": 6}
    for timestamp in (True, False):
        streamed = rendered(report, "json", Rendering(timestamp=timestamp)).encode()
        assert streamed == orjson.dumps(report.to_json(timestamp), option=orjson.OPT_INDENT_2) + b"\n"
    data = orjson.loads(streamed)
    assert list(data) == ["run", "summary", "changes", "findings", "errors", "warnings"]
    assert data["changes"][-1] == {
        "source": source,
        "line": 214,
        "id": "f\x1b[1m",
        "rule": "HM102",
        "message": 0,
        "part": 1,
        "before": "retry-prompt",
        "after": "retry-feedback",
        "cause": "model_retry",
        "evidence": "free-text",
        "certainty": "default",
        "tool_call_id": None,
        "removed": None,
    }
    assert data["findings"][0] == {
        "source": source,
        "line": 82,
        "id": "v1.0.18/m_deferred_tool_model_retry",
        "rule": "HM407",
        "message": 3,
        "part": 0,
        "text": "tool-call 'run_job' (pyd_ai_f93a0b6a98114066a071244304e8e723) of the last response has no result yet",
        "evidence": "frontier",
        "certainty": "exact",
        "severity": "warning",
    }
    assert data["errors"] == [
        {
            "source": source,
            "line": 213,
            "id": None,
            "status": "rejected",
            "errors": [
                {
                    "path": None,
                    "message": "invalid JSON: unexpected character, expected a string key at character 2 of the record",
                }
            ],
        },
        {
            "source": source,
            "line": 215,
            "id": "b",
            "status": "rejected",
            "errors": [{"path": None, "message": "no messages field found (name it with --messages-field)"}],
        },
    ]
    assert data["warnings"] == [
        {
            "source": source,
            "line": 214,
            "id": "f\x1b[1m",
            "warnings": [
                {"path": "messages[0].parts[0]", "message": "unknown part_kind 'hologram', carried unchanged"}
            ],
        }
    ]
    assert {"evidence": "error-list", "certainty": "shape", "parts": 41} in data["summary"]["parts_by_evidence"]


def test_a_removed_part_is_written_whole_in_its_change(tmp_path: Path) -> None:
    source = tmp_path / "orphan.jsonl"
    source.write_bytes(ORPHAN)
    report = orjson.loads(rendered(api.audit(str(source), Options(unsafe_fixes=True)).report, "json"))
    assert report["summary"]["changed"] == 1 and report["findings"] == []
    assert report["changes"] == [
        {
            "source": str(source),
            "line": 1,
            "id": None,
            "rule": "HM401",
            "message": 2,
            "part": 1,
            "before": "tool-return",
            "after": "absent",
            "cause": None,
            "evidence": "orphaned",
            "certainty": "exact",
            "tool_call_id": None,
            "removed": {"part_kind": "tool-return", "tool_name": "t", "content": "late", "tool_call_id": "gone"},
        }
    ]


def test_the_run_is_recorded_with_its_options_inputs_and_start_time(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    args = [
        "check",
        str(CORPUS / "all.jsonl"),
        str(CORPUS / "v0.0.20" / "c_unknown_tool.json"),
        "--select",
        "HM1,HM2",
        "--ignore",
        "HM103",
        "--report",
        str(report),
        "--report-format",
        "json",
        "-q",
    ]
    assert CliRunner().invoke(app, args).exit_code == 1
    run = orjson.loads(report.read_bytes())["run"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", run.pop("started"))
    assert run == {
        "histmig": __version__,
        "command": "check",
        "options": {
            "select": ["HM1,HM2"],
            "ignore": ["HM103"],
            "unsafe_fixes": False,
            "causes": "inferred",
            "messages_field": None,
            "format": None,
            "messages_column": None,
            "id_column": None,
            "table": None,
            "schema": None,
            "key_column": None,
            "single_transaction": False,
            "target": None,
            "attempts": False,
            "counting": "current",
            "max_retries": None,
            "conversation": [],
            "order": None,
            "max_conversation_bytes": 64 << 20,
            "rules": ["HM201", "HM202", "HM203", "HM204", "HM101", "HM102"],
            "rejects": None,
            "in_place": False,
            "to_table": None,
            "overwrite": False,
            "strict": False,
            "engine": "local",
        },
        "inputs": [str(CORPUS / "all.jsonl"), str(CORPUS / "v0.0.20" / "c_unknown_tool.json")],
        "output": None,
    }
    first = report.read_bytes()
    assert CliRunner().invoke(app, [*args, "--no-timestamp"]).exit_code == 1
    second = report.read_bytes()
    assert b'"started"' not in second and b'"started"' in first
    assert CliRunner().invoke(app, [*args, "--no-timestamp", "--jobs", "1"]).exit_code == 1
    assert report.read_bytes() == second


def test_places_are_numbers() -> None:
    assert [
        place(where)
        for where in ("line 12", "row 0", "after line 7", "after row 3", "file", "record", "after the start", "toy 1")
    ] == [
        {"line": 12},
        {"row": 0},
        {"after_line": 7},
        {"after_row": 3},
        {},
        {},
        {},
        {"key": "toy 1"},
    ]


def test_an_empty_and_a_rejects_only_report_render(tmp_path: Path) -> None:
    report = Report()
    assert rendered(report, "json").encode() == orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2) + b"\n"
    assert orjson.loads(rendered(report, "json"))["changes"] == []
    source = tmp_path / "bad.jsonl"
    source.write_bytes(b"{not json\n")
    rejected = api.audit(str(source), Options(jobs=1)).report
    assert (
        rendered(rejected, "json").encode() == orjson.dumps(rejected.to_json(True), option=orjson.OPT_INDENT_2) + b"\n"
    )


def test_a_skipped_row_is_counted_and_an_error_entry() -> None:
    data = orjson.loads(rendered(skipped_report(), "json"))
    assert (data["summary"]["skipped"], data["summary"]["changed"]) == (1, 1)
    assert data["errors"] == [
        {
            "source": "db:chats",
            "key": "id=2",
            "id": "c-2",
            "status": "skipped",
            "errors": [{"path": None, "message": SKIPPED}],
        }
    ]


def test_streamed_json_with_readers_is_the_one_dump(tmp_path: Path, batch_size: int) -> None:
    report, _ = reader_report(tmp_path)
    streamed = rendered(report, "json").encode()
    assert streamed == orjson.dumps(report.to_json(True), option=orjson.OPT_INDENT_2) + b"\n"
    assert list(orjson.loads(streamed)) == ["run", "summary", "changes", "findings", "readers", "errors", "warnings"]
