"""The JSON report (histmig.report.json) is streamed a batch of rows at a time, and is the same
text as one ``orjson.dumps`` of :meth:`Report.to_json` (README "Report")."""

from __future__ import annotations

from pathlib import Path

import orjson

from histmig import api
from histmig.options import Options
from histmig.report import SKIPPED, Report
from tests.report.conftest import ORPHAN, legacy_report, rendered, skipped_report


def test_streamed_json_is_the_one_dump(tmp_path: Path, batch_size: int) -> None:
    report, source = legacy_report(tmp_path)
    summary = report.summary()
    assert (summary["records_in"], summary["changed"], summary["unchanged"], summary["rejected"], summary["warnings"]) == (215, 139, 74, 2, 7)
    assert sum(summary["parts_by_rule"].values()) == len(report.changes) == 271
    assert [row["location"] for row in report.errors] == ["line 213", "line 215"]
    assert report.warnings == [{"source": source, "location": "line 214", "id": "f\x1b[1m", "warnings": ["messages[0].parts[0]: unknown part_kind 'hologram', carried unchanged"]}]
    assert summary["findings"] == 0 and summary["findings_by_rule"] == {"HM407": 6}
    streamed = rendered(report, "json").encode()
    assert streamed == orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2) + b"\n"
    assert orjson.loads(streamed)["changes"][-1] == {
        "source": source, "location": "line 214", "id": "f\x1b[1m", "rule": "HM102", "message": 0, "part": 1,
        "before": "retry-prompt", "after": "retry-feedback", "cause": "model_retry", "evidence": "free-text", "certainty": "default", "removed": None,
    }
    assert orjson.loads(streamed)["findings"][0] == {
        "source": source, "location": "line 82", "id": "v1.0.18/m_deferred_tool_model_retry", "rule": "HM407", "message": 3, "part": 0,
        "text": "tool-call 'run_job' (pyd_ai_f93a0b6a98114066a071244304e8e723) of the last response has no result yet",
        "evidence": "frontier", "certainty": "exact", "severity": "warning",
    }


def test_a_removed_part_is_written_whole_in_its_change(tmp_path: Path) -> None:
    source = tmp_path / "orphan.jsonl"
    source.write_bytes(ORPHAN)
    report = orjson.loads(rendered(api.audit(str(source), Options(unsafe_fixes=True)).report, "json"))
    assert report["summary"]["changed"] == 1 and report["findings"] == []
    assert report["changes"] == [
        {
            "source": str(source), "location": "line 1", "id": None, "rule": "HM401", "message": 1, "part": 1, "before": "tool-return",
            "after": "absent", "cause": None, "evidence": "orphaned", "certainty": "exact",
            "removed": {"part_kind": "tool-return", "tool_name": "t", "content": "late", "tool_call_id": "gone"},
        }
    ]


def test_an_empty_and_a_rejects_only_report_render(tmp_path: Path) -> None:
    report = Report()
    assert rendered(report, "json").encode() == orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2) + b"\n"
    assert orjson.loads(rendered(report, "json"))["changes"] == []
    source = tmp_path / "bad.jsonl"
    source.write_bytes(b"{not json\n")
    rejected = api.audit(str(source)).report
    assert rendered(rejected, "json").encode() == orjson.dumps(rejected.to_json(), option=orjson.OPT_INDENT_2) + b"\n"


def test_a_skipped_row_is_counted_and_an_error_entry() -> None:
    data = orjson.loads(rendered(skipped_report(), "json"))
    assert (data["summary"]["skipped"], data["summary"]["changed"]) == (1, 1)
    assert data["errors"] == [{"source": "db:chats", "location": "id=2", "id": "c-2", "status": "skipped", "errors": [SKIPPED]}]
