"""The Markdown report (histmig.report.markdown)."""

from __future__ import annotations

from pathlib import Path

from histmig import api
from histmig.report import Report
from tests.report.conftest import legacy_report, reader_report, rendered


def test_markdown_report_lines(tmp_path: Path, batch_size: int) -> None:
    report, source = legacy_report(tmp_path)
    lines = rendered(report, "markdown").split("\n")
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


def test_an_empty_and_a_rejects_only_report_render(tmp_path: Path) -> None:
    assert rendered(Report(), "markdown").endswith("| --- | --- | --- | --- | --- | --- | --- |\n")
    source = tmp_path / "bad.jsonl"
    source.write_bytes(b"{not json\n")
    rejected = api.audit(str(source)).report
    assert rendered(rejected, "markdown").endswith(f"\n\n## Errors\n\n- {source}:line 1 (rejected): invalid JSON: unexpected character, expected a string key at character 2 of the record\n")


def test_markdown_report_has_a_table_of_the_releases_that_load_each_record(tmp_path: Path) -> None:
    report, source = reader_report(tmp_path)
    lines = rendered(report, "markdown").split("\n")
    table = lines.index("## Readers")
    assert lines[table + 2 :] == [
        "| record | 2.0.0 loads it | releases that load it |",
        "| --- | --- | --- |",
        f"| {source}:line 1 [new] | no | oldest 2.60.0, loaded from 2.60.0 |",
        f"| {source}:line 2 [plain] | yes | every release loads it |",
        f"| {source}:line 3 | no | no release loads it |",
        f"| {source}:line 4 [old] | no | oldest 0.0.21, loaded 0.0.21 to before 0.0.45 |",
        "",
    ]
