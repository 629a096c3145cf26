"""The report renderers stream the change rows (README "Report"): the JSON is the same text
as one ``orjson.dumps`` of :meth:`Report.to_json`, the text and Markdown carry one line per
change, error and warning."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from histmig import cli
from histmig import report as report_module
from histmig.report import Report
from histmig.runner import run
from tests.conftest import CORPUS

RETRY = {"part_kind": "retry-prompt", "content": "x", "tool_name": None}
FUTURE = orjson.dumps({"id": "f\x1b[1m", "messages": [{"kind": "request", "parts": [{"part_kind": "hologram", "content": "later"}, RETRY]}]})
BAD_LINES = [b"{not json", FUTURE, b'{"id": "b", "note": 42}']
CHANGE = "[v0.0.20/c_unknown_tool]: messages[2].parts[0] HM103 retry-prompt -> tool-return cause=unknown_tool evidence=unknown-tool+preceding-call (template)"


def legacy_report(tmp_path: Path) -> tuple[Report, str]:
    """The report of the corpus's 212 histories then three bad lines (one rejected as invalid
    JSON, one with an unknown part kind, one without messages), and the input's path."""
    source = tmp_path / "in.jsonl"
    source.write_bytes((CORPUS / "all.jsonl").read_bytes() + b"\n".join(BAD_LINES) + b"\n")
    return run(str(source)), str(source)


def rendered(report: Report, renderer: str) -> str:
    stream = io.StringIO()
    getattr(report, renderer)(stream)
    return stream.getvalue()


@pytest.fixture(params=[report_module._ROWS_PER_BATCH, 7], ids=["default-batches", "batches-of-7"])
def batch_size(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """Spill batches of the default size (one batch here) and of 7 rows (many batches)."""
    monkeypatch.setattr(report_module, "_ROWS_PER_BATCH", request.param)
    return request.param


def test_streamed_json_is_the_one_dump(tmp_path: Path, batch_size: int) -> None:
    report, source = legacy_report(tmp_path)
    summary = report.summary()
    assert (summary["records_in"], summary["changed"], summary["unchanged"], summary["rejected"], summary["warnings"]) == (215, 139, 74, 2, 1)
    assert sum(summary["parts_by_rule"].values()) == len(report.changes) == 271
    assert [row["location"] for row in report.errors] == ["line 213", "line 215"]
    assert report.warnings == [{"source": source, "location": "line 214", "id": "f\x1b[1m", "warnings": ["messages[0].parts[0]: unknown part_kind 'hologram', carried unchanged"]}]
    streamed = rendered(report, "render_json").encode()
    assert streamed == orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2) + b"\n"
    assert orjson.loads(streamed)["changes"][-1] == {
        "source": source, "location": "line 214", "id": "f\x1b[1m", "rule": "HM102", "message": 0, "part": 1,
        "before": "retry-prompt", "after": "retry-feedback", "cause": "model_retry", "evidence": "free-text", "certainty": "default",
    }


def test_text_report_lines(tmp_path: Path, batch_size: int) -> None:
    report, source = legacy_report(tmp_path)
    lines = rendered(report, "render_text").splitlines()
    assert lines[0] == f"{source}:line 1 [v0.0.20/a_tool_model_retry]: messages[1].parts[0] HM201 tool-call -> tool-call evidence=position (derived)"
    assert f"{source}:line 6 {CHANGE}" in lines
    assert lines[270] == f"{source}:line 214 [f\\x1b[1m]: messages[0].parts[1] HM102 retry-prompt -> retry-feedback cause=model_retry evidence=free-text (default)"
    assert lines[271:274] == [
        f"{source}:line 213: rejected: invalid JSON: unexpected character, expected a string key at character 2 of the record",
        f"{source}:line 215 [b]: rejected: no messages field found (name it with --messages-field)",
        f"{source}:line 214 [f\\x1b[1m]: warning: messages[0].parts[0]: unknown part_kind 'hologram', carried unchanged",
    ]
    assert "histmig summary" in lines[274]
    assert any(line.startswith("│ records_in ") and "│ 215 " in line for line in lines[275:])
    assert not any("\x1b" in line for line in lines)


def test_text_report_is_styled_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    report, source = legacy_report(tmp_path)
    terminal = Terminal()
    report.render_text(terminal)
    text = terminal.getvalue()
    assert f"{source}:line 6 [v0.0.20/c_unknown_tool]: messages[2].parts[0] \x1b[1mHM103\x1b[0m retry-prompt -> tool-return" in text
    assert f"{source}:line 213: \x1b[31mrejected\x1b[0m: invalid JSON" in text
    assert "[f\\x1b[1m]: \x1b[33mwarning\x1b[0m: messages[0].parts[0]" in text
    monkeypatch.setenv("NO_COLOR", "1")
    terminal = Terminal()
    report.render_text(terminal)
    assert f"{source}:line 213: rejected: invalid JSON" in terminal.getvalue()
    assert "\x1b[1mHM103\x1b[0m" in terminal.getvalue()


def test_markdown_report_lines(tmp_path: Path, batch_size: int) -> None:
    report, source = legacy_report(tmp_path)
    lines = rendered(report, "render_markdown").split("\n")
    assert lines[:5] == ["# histmig report", "", "| summary | value |", "| --- | --- |", "| records_in | 215 |"]
    assert "| parts_by_cause | model_retry: 99, no_output: 17, unknown_tool: 21, validation_error: 41 |" in lines
    table = lines.index("| record | message | part | rule | before -> after | cause | evidence |")
    assert lines[table + 2] == f"| {source}:line 1 [v0.0.20/a_tool_model_retry] | 1 | 0 | HM201 | tool-call -> tool-call |  | position (derived) |"
    assert f"| {source}:line 6 [v0.0.20/c_unknown_tool] | 2 | 0 | HM103 | retry-prompt -> tool-return | unknown_tool | unknown-tool+preceding-call (template) |" in lines
    assert lines[table + 2 + 271 :] == [
        "",
        "## Errors",
        "",
        f"- {source}:line 213 (rejected): invalid JSON: unexpected character, expected a string key at character 2 of the record",
        f"- {source}:line 215 [b] (rejected): no messages field found (name it with --messages-field)",
        "",
        "## Warnings",
        "",
        f"- {source}:line 214 [f [1m]: messages[0].parts[0]: unknown part_kind 'hologram', carried unchanged",
        "",
    ]


def test_a_report_without_changes_renders(tmp_path: Path) -> None:
    report = Report()
    assert rendered(report, "render_json").encode() == orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2) + b"\n"
    assert orjson.loads(rendered(report, "render_json"))["changes"] == []
    text = rendered(report, "render_text").splitlines()
    assert "histmig summary" in text[0]
    assert any(line.startswith("│ parts_by_rule ") and "│ - " in line for line in text)
    assert rendered(report, "render_markdown").endswith("| --- | --- | --- | --- | --- | --- | --- |\n")
    source = tmp_path / "bad.jsonl"
    source.write_bytes(b"{not json\n")
    rejected = run(str(source))
    assert rendered(rejected, "render_json").encode() == orjson.dumps(rejected.to_json(), option=orjson.OPT_INDENT_2) + b"\n"
    assert rendered(rejected, "render_text").startswith(f"{source}:line 1: rejected: invalid JSON")
    assert rendered(rejected, "render_markdown").endswith(f"\n\n## Errors\n\n- {source}:line 1 (rejected): invalid JSON: unexpected character, expected a string key at character 2 of the record\n")


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_cli_report_file_is_the_rendered_report(tmp_path: Path, fmt: str) -> None:
    report, source = legacy_report(tmp_path)
    path = tmp_path / "report.gz"
    result = CliRunner().invoke(cli.app, ["audit", source, "--report", str(path), "--report-format", fmt])
    assert result.exit_code == 1
    assert gzip.decompress(path.read_bytes()).decode() == rendered(report, f"render_{fmt}")


def test_a_failed_report_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def half(report: Report, stream: io.TextIOBase) -> None:
        stream.write("{\n")
        raise OSError("disk full")

    monkeypatch.setitem(cli._RENDERERS, cli.ReportFormat.json, half)
    (tmp_path / "report.json").write_text("previous")
    result = CliRunner().invoke(cli.app, ["audit", str(CORPUS / "all.jsonl"), "--report", str(tmp_path / "report.json"), "--report-format", "json"])
    assert isinstance(result.exception, OSError)
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]
    assert (tmp_path / "report.json").read_text() == "previous"
