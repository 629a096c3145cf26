"""The text report (histmig.report.text): one line per change, error and warning, control
characters shown escaped, styled only on a terminal; then the summary table."""

from __future__ import annotations

import io
import re
from pathlib import Path

import orjson
import pytest

from histmig import api
from histmig.options import Options
from histmig.report import SKIPPED, Rendering, Report
from histmig.report import text as text_report
from histmig.report.text import render
from tests.conftest import CORPUS
from tests.report.conftest import CHANGE, ORPHAN, legacy_report, reader_report, rendered, skipped_report


def test_text_report_lines(tmp_path: Path, batch_size: int) -> None:
    report, source = legacy_report(tmp_path)
    lines = rendered(report, "text").splitlines()
    first = orjson.loads((CORPUS / "all.jsonl").read_bytes().splitlines()[0])["messages"]
    api.migrate(first)
    assert (
        lines[0]
        == f"{source}:line 1 [v0.0.20/a_tool_model_retry]: messages[1].parts[0] HM201 tool-call tool_call_id={first[1]['parts'][0]['tool_call_id']} evidence=position (derived)"
    )
    assert f"{source}:line 6 {CHANGE}" in lines
    assert (
        lines[270]
        == f"{source}:line 214 [f\\x1b[1m]: messages[0].parts[1] HM102 retry-prompt -> retry-feedback cause=model_retry evidence=free-text (default)"
    )
    assert lines[271] == (
        f"{source}:line 82 [v1.0.18/m_deferred_tool_model_retry]: messages[3].parts[0] HM407 warning: tool-call 'run_job' "
        "(pyd_ai_f93a0b6a98114066a071244304e8e723) of the last response has no result yet evidence=frontier (exact)"
    )
    assert [line.split(" HM407 ")[1][:8] for line in lines[271:277]] == ["warning:"] * 6
    assert lines[277:280] == [
        f"{source}:line 213: rejected: invalid JSON: unexpected character, expected a string key at character 2 of the record",
        f"{source}:line 215 [b]: rejected: no messages field found (name it with --messages-field)",
        f"{source}:line 214 [f\\x1b[1m]: warning: messages[0].parts[0]: unknown part_kind 'hologram', carried unchanged",
    ]
    assert "histmig summary" in lines[280]
    assert any(line.startswith("│ records_in ") and "│ 215 " in line for line in lines[281:])
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
    render(report, terminal)
    text = terminal.getvalue()
    assert (
        f"{source}:line 6 [v0.0.20/c_unknown_tool]: messages[2].parts[0] \x1b[1mHM103\x1b[0m retry-prompt -> tool-return"
        in text
    )
    assert f"{source}:line 213: \x1b[31mrejected\x1b[0m: invalid JSON" in text
    assert "[f\\x1b[1m]: \x1b[33mwarning\x1b[0m: messages[0].parts[0]" in text
    monkeypatch.setenv("NO_COLOR", "1")
    terminal = Terminal()
    render(report, terminal)
    assert f"{source}:line 213: rejected: invalid JSON" in terminal.getvalue()
    assert "\x1b[1mHM103\x1b[0m" in terminal.getvalue()


def test_a_removed_part_is_written_whole_on_its_change_line(tmp_path: Path) -> None:
    source = tmp_path / "orphan.jsonl"
    source.write_bytes(ORPHAN)
    lines = rendered(api.audit(str(source), Options(unsafe_fixes=True)).report, "text").splitlines()
    assert lines[0] == (
        f"{source}:line 1: messages[2].parts[1] HM401 tool-return -> absent evidence=orphaned (exact) "
        'removed={"part_kind":"tool-return","tool_name":"t","content":"late","tool_call_id":"gone"}'
    )


def test_an_empty_and_a_rejects_only_report_render(tmp_path: Path) -> None:
    text = rendered(Report(), "text").splitlines()
    assert "histmig summary" in text[0]
    assert any(line.startswith("│ parts_by_rule ") and "│ - " in line for line in text)
    source = tmp_path / "bad.jsonl"
    source.write_bytes(b"{not json\n")
    assert rendered(api.audit(str(source)).report, "text").startswith(f"{source}:line 1: rejected: invalid JSON")


def test_a_skipped_row_is_a_line_naming_its_key() -> None:
    lines = rendered(skipped_report(), "text").splitlines()
    assert lines[0] == f"db:chats:id=2 [c-2]: skipped: {SKIPPED}"
    assert any(line.startswith("│ skipped ") and "│ 1 " in line for line in lines)


def test_past_a_thousand_rows_the_text_report_is_its_summary_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report, source = legacy_report(tmp_path)

    def change_lines(lines: list[str]) -> int:
        return sum(
            line.startswith(source) and re.search(r" HM\d{3} (?!found:|warning:)", line) is not None for line in lines
        )

    assert change_lines(rendered(report, "text").splitlines()) == 271  # 271 <= 1,000: every line
    monkeypatch.setattr(text_report, "DETAIL_ROWS", 100)
    lines = rendered(report, "text").splitlines()
    assert (
        lines[0]
        == "(277 change and finding lines not shown, more than 100: --report-detail full shows them, --report-format json lists them)"
    )
    assert lines[1].startswith(f"{source}:line 213: rejected: invalid JSON")
    assert any(line.startswith("│ would change ") and "│ 139 " in line for line in lines)
    assert any(line.startswith("│ would be rejected ") and "│ 2 " in line for line in lines)
    full = rendered(report, "text", Rendering(detail="full")).splitlines()
    assert (
        change_lines(full) == 271
        and " HM407 warning: " in full[271]
        and full[277].startswith(f"{source}:line 213: rejected")
    )
    summary = rendered(report, "text", Rendering(detail="summary")).splitlines()
    assert summary[0].startswith(f"{source}:line 213: rejected") and change_lines(summary) == 0


def test_convert_says_changed(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes((CORPUS / "all.jsonl").read_bytes())
    report = api.convert(str(source), str(tmp_path / "out.jsonl")).report
    lines = rendered(report, "text").splitlines()
    assert any(line.startswith("│ changed ") and "│ 138 " in line for line in lines) and not any(
        "would" in line for line in lines
    )


def test_text_report_names_each_record_the_reader_cannot_load(tmp_path: Path) -> None:
    report, source = reader_report(tmp_path)
    lines = rendered(report, "text").splitlines()
    assert [line for line in lines if ": not loaded: " in line] == [
        f"{source}:line 1 [new]: not loaded: 2.0.0 cannot load it; oldest 2.60.0, loaded from 2.60.0",
        f"{source}:line 3: not loaded: 2.0.0 cannot load it; no release loads it",
        f"{source}:line 4 [old]: not loaded: 2.0.0 cannot load it; oldest 0.0.21, loaded 0.0.21 to before 0.0.45",
    ]
    assert any(
        line.startswith("│ oldest_releases ") and "0.0.13: 1, 0.0.21: 1, 2.60.0: 1, none: 1" in line for line in lines
    )
