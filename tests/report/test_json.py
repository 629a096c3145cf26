"""The JSON report (histmig.report.json) is streamed a batch of rows at a time, and is the same
text as one ``orjson.dumps`` of :meth:`Report.to_json` (README "Report")."""

from __future__ import annotations

from pathlib import Path

import orjson

from histmig import api
from histmig.report import Report
from tests.report.conftest import legacy_report, reader_report, rendered


def test_streamed_json_is_the_one_dump(tmp_path: Path, batch_size: int) -> None:
    report, source = legacy_report(tmp_path)
    summary = report.summary()
    assert (summary["records_in"], summary["changed"], summary["unchanged"], summary["rejected"], summary["warnings"]) == (215, 139, 74, 2, 1)
    assert sum(summary["parts_by_rule"].values()) == len(report.changes) == 271
    assert [row["location"] for row in report.errors] == ["line 213", "line 215"]
    assert report.warnings == [{"source": source, "location": "line 214", "id": "f\x1b[1m", "warnings": ["messages[0].parts[0]: unknown part_kind 'hologram', carried unchanged"]}]
    streamed = rendered(report, "json").encode()
    assert streamed == orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2) + b"\n"
    assert orjson.loads(streamed)["changes"][-1] == {
        "source": source, "location": "line 214", "id": "f\x1b[1m", "rule": "HM102", "message": 0, "part": 1,
        "before": "retry-prompt", "after": "retry-feedback", "cause": "model_retry", "evidence": "free-text", "certainty": "default",
    }


def test_an_empty_and_a_rejects_only_report_render(tmp_path: Path) -> None:
    report = Report()
    assert rendered(report, "json").encode() == orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2) + b"\n"
    assert orjson.loads(rendered(report, "json"))["changes"] == []
    source = tmp_path / "bad.jsonl"
    source.write_bytes(b"{not json\n")
    rejected = api.audit(str(source)).report
    assert rendered(rejected, "json").encode() == orjson.dumps(rejected.to_json(), option=orjson.OPT_INDENT_2) + b"\n"


def test_streamed_json_with_readers_is_the_one_dump(tmp_path: Path, batch_size: int) -> None:
    report, _ = reader_report(tmp_path)
    streamed = rendered(report, "json").encode()
    assert streamed == orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2) + b"\n"
    assert list(orjson.loads(streamed)) == ["summary", "changes", "findings", "readers", "errors", "warnings"]
