"""The Markdown report (histmig.report.markdown): for CI job summaries, a pass/fail line
first, within 1 MiB whatever the archive, saying what it left out."""

from __future__ import annotations

from pathlib import Path

import pytest

from histmig import api
from histmig.options import Options
from histmig.records import Outcome, Record
from histmig.report import SKIPPED, Rendering, Report, markdown
from histmig.rules.base import Change
from tests.report.conftest import ORPHAN, REBOUND_ID, legacy_report, reader_report, rendered, skipped_report


def test_markdown_report_lines(tmp_path: Path, batch_size: int) -> None:
    report, source = legacy_report(tmp_path)
    lines = rendered(report, "markdown").split("\n")
    assert lines[:3] == [
        "# ❌ fail (exit 1): histmig audit",
        "",
        "histmig audit: 139 of 215 records would be migrated, 74 need nothing, 2 would be rejected; nothing was written",
    ]
    assert lines[4:7] == ["| summary | value |", "| --- | --- |", "| records_in | 215 |"]
    assert "| would change | 139 |" in lines and "| would be rejected | 2 |" in lines
    assert "| parts_by_cause | model_retry: 99, no_output: 17, unknown_tool: 21, validation_error: 41 |" in lines
    errors = lines.index("## Errors")
    assert lines[errors : errors + 9] == [
        "## Errors",
        "",
        f"- {source}:line 213 (rejected): invalid JSON: unexpected character, expected a string key at character 2 of the record",
        f"- {source}:line 215 [b] (rejected): no messages field found (name it with --messages-field)",
        "",
        "## Warnings",
        "",
        f"- {source}:line 214 [f\\\\x1b[1m]: messages[0].parts[0]: unknown part_kind 'hologram', carried unchanged",
        "",
    ]
    findings = lines.index("## Findings")
    assert lines[findings + 2] == (
        f"- {source}:line 82 [v1.0.18/m_deferred_tool_model_retry] messages[3].parts[0] HM407 (warning): tool-call 'run_job' "
        "(pyd_ai_f93a0b6a98114066a071244304e8e723) of the last response has no result yet (frontier, exact)"
    )
    assert [line.split(" HM407 ")[1][:10] for line in lines[findings + 2 : findings + 8]] == ["(warning):"] * 6
    table = lines.index("| record | message | part | rule | before -> after | cause | tool_call_id | evidence |")
    assert lines[table + 2].startswith(
        f"| {source}:line 1 [v0.0.20/a_tool_model_retry] | 1 | 0 | HM201 | tool-call |  | pyd_ai_"
    )
    assert (
        f"| {source}:line 6 [v0.0.20/c_unknown_tool] | 2 | 0 | HM103 | retry-prompt -> tool-return | unknown_tool | {REBOUND_ID} | unknown-tool+preceding-call (template) |"
        in lines
    )
    assert lines[table + 2 + 271 :] == [""]


def test_a_clean_check_opens_with_pass(tmp_path: Path) -> None:
    source = tmp_path / "clean.jsonl"
    source.write_bytes(b'[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi"}]}]\n')
    text = rendered(api.check(str(source)).report, "markdown")
    assert text.startswith("# ✅ pass: histmig check\n\nhistmig check: the one record is current and valid\n")
    assert "Summary only" not in text and "not in this report" not in text


def _big(changes: int) -> Report:
    """A report of ``changes`` HM201 changes, 25 to a record, and one rejected record."""
    report = Report()
    for n in range(changes // 25):
        record = Record(b"[]", "big.jsonl", f"line {n + 1}", f"conversation-{n}")
        report.add(
            Outcome(
                record,
                "changed",
                b"[]",
                [
                    Change(
                        "HM201",
                        m,
                        0,
                        "tool-call",
                        "tool-call",
                        "position",
                        "derived",
                        tool_call_id=f"pyd_ai_{n:016x}{m:016x}",
                    )
                    for m in range(25)
                ],
            )
        )
    report.add(
        Outcome(
            Record(b"{", "big.jsonl", f"line {changes // 25 + 1}"),
            "rejected",
            None,
            errors=["invalid JSON: unexpected end of data"],
        )
    )
    return report


def test_a_report_of_any_size_stays_within_what_a_ci_job_summary_takes(batch_size: int) -> None:
    report = _big(20_000)
    text = rendered(report, "markdown")
    assert len(text.encode()) <= markdown.MAX_BYTES == 1 << 20
    lines = text.split("\n")
    assert "| records_in | 801 |" in lines and "| parts_by_rule | HM201: 20000 |" in lines
    assert "- big.jsonl:line 801 (rejected): invalid JSON: unexpected end of data" in lines
    shown = sum(1 for line in lines if line.startswith("| big.jsonl:"))
    assert 4000 < shown < 20_000 and lines[-6].startswith("| big.jsonl:line ")
    assert f"_{20_000 - shown:,} more not shown here._" in lines
    assert lines[-2].startswith(
        f"_{20_000 - shown:,} lines are not in this report: it is kept within 1,024 KiB, what a CI job summary takes"
    )


def test_summary_detail_leaves_every_row_out() -> None:
    text = rendered(_big(100), "markdown", Rendering(detail="summary"))
    assert "| parts_by_rule | HM201: 100 |" in text and "| big.jsonl:" not in text and "## Errors" not in text
    assert text.endswith("\n_Summary only: the text and JSON reports list every change._\n")


def test_a_removed_part_is_written_whole_in_its_change_row(tmp_path: Path) -> None:
    source = tmp_path / "orphan.jsonl"
    source.write_bytes(ORPHAN)
    lines = rendered(api.audit(str(source), Options(unsafe_fixes=True)).report, "markdown").split("\n")
    assert lines[-2] == (
        f"| {source}:line 1 | 2 | 1 | HM401 | tool-return -> absent "
        '(removed: {"part_kind":"tool-return","tool_name":"t","content":"late","tool_call_id":"gone"}) |  |  | orphaned (exact) |'
    )


def test_an_empty_and_a_rejects_only_report_render(tmp_path: Path) -> None:
    assert (
        rendered(Report(), "markdown")
        == "# histmig report\n\n"
        + "\n".join(
            [
                "| summary | value |",
                "| --- | --- |",
                *(
                    f"| {key} | {value} |"
                    for key, value in [
                        ("records_in", 0),
                        ("changed", 0),
                        ("unchanged", 0),
                        ("rejected", 0),
                        ("skipped", 0),
                        ("invalid", 0),
                        ("warnings", 0),
                        ("findings", 0),
                        ("read_errors", 0),
                        ("parts_by_rule", "-"),
                        ("parts_by_cause", "-"),
                        ("parts_by_evidence", "-"),
                        ("findings_by_rule", "-"),
                    ]
                ),
            ]
        )
        + "\n"
    )
    source = tmp_path / "bad.jsonl"
    source.write_bytes(b"{not json\n")
    rejected = api.audit(str(source)).report
    assert rendered(rejected, "markdown").endswith(
        f"\n\n## Errors\n\n- {source}:line 1 (rejected): invalid JSON: unexpected character, expected a string key at character 2 of the record\n"
    )


def test_a_skipped_row_is_listed_under_errors() -> None:
    text = rendered(skipped_report(), "markdown")
    assert "| skipped | 1 |" in text and text.endswith(f"\n\n## Errors\n\n- db:chats:id=2 [c-2] (skipped): {SKIPPED}\n")


@pytest.mark.parametrize("command", ["audit", "check"])
def test_audit_and_check_say_would_change(tmp_path: Path, command: str) -> None:
    report, _ = legacy_report(tmp_path)
    report.run = report.run.__class__(**{**report.run.__dict__, "command": command})
    assert "| would change | 139 |" in rendered(report, "markdown")
    report.run = report.run.__class__(**{**report.run.__dict__, "command": "convert"})
    assert "| changed | 139 |" in rendered(report, "markdown")


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
