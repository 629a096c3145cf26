"""The Markdown report (histmig.report.markdown)."""

from __future__ import annotations

from pathlib import Path

from histmig import api
from histmig.options import Options
from histmig.report import SKIPPED, Report
from tests.report.conftest import ORPHAN, legacy_report, rendered, skipped_report


def test_markdown_report_lines(tmp_path: Path, batch_size: int) -> None:
    report, source = legacy_report(tmp_path)
    lines = rendered(report, "markdown").split("\n")
    assert lines[:5] == ["# histmig report", "", "| summary | value |", "| --- | --- |", "| records_in | 215 |"]
    assert "| parts_by_cause | model_retry: 99, no_output: 17, unknown_tool: 21, validation_error: 41 |" in lines
    table = lines.index("| record | message | part | rule | before -> after | cause | evidence |")
    assert lines[table + 2] == f"| {source}:line 1 [v0.0.20/a_tool_model_retry] | 1 | 0 | HM201 | tool-call -> tool-call |  | position (derived) |"
    assert f"| {source}:line 6 [v0.0.20/c_unknown_tool] | 2 | 0 | HM103 | retry-prompt -> tool-return | unknown_tool | unknown-tool+preceding-call (template) |" in lines
    assert lines[table + 2 + 271 : table + 2 + 275] == [
        "",
        "## Findings",
        "",
        f"- {source}:line 82 [v1.0.18/m_deferred_tool_model_retry] messages[3].parts[0] HM407 (warning): tool-call 'run_job' "
        "(pyd_ai_f93a0b6a98114066a071244304e8e723) of the last response has no result yet (frontier, exact)",
    ]
    assert lines[table + 2 + 280 :] == [
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


def test_a_removed_part_is_written_whole_in_its_change_row(tmp_path: Path) -> None:
    source = tmp_path / "orphan.jsonl"
    source.write_bytes(ORPHAN)
    lines = rendered(api.audit(str(source), Options(unsafe_fixes=True)).report, "markdown").split("\n")
    assert lines[-2] == (
        f"| {source}:line 1 | 1 | 1 | HM401 | tool-return -> absent "
        '(removed: {"part_kind":"tool-return","tool_name":"t","content":"late","tool_call_id":"gone"}) |  | orphaned (exact) |'
    )


def test_an_empty_and_a_rejects_only_report_render(tmp_path: Path) -> None:
    assert rendered(Report(), "markdown").endswith("| --- | --- | --- | --- | --- | --- | --- |\n")
    source = tmp_path / "bad.jsonl"
    source.write_bytes(b"{not json\n")
    rejected = api.audit(str(source)).report
    assert rendered(rejected, "markdown").endswith(f"\n\n## Errors\n\n- {source}:line 1 (rejected): invalid JSON: unexpected character, expected a string key at character 2 of the record\n")


def test_a_skipped_row_is_listed_under_errors() -> None:
    text = rendered(skipped_report(), "markdown")
    assert "| skipped | 1 |" in text and text.endswith(f"\n\n## Errors\n\n- db:chats:id=2 [c-2] (skipped): {SKIPPED}\n")
