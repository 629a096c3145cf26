"""The GitHub Actions report (histmig.report.github): one workflow command a finding, escaped
as workflow commands require, a JSONL record on its line, a database row by table and key."""

from __future__ import annotations

import io
from pathlib import Path

import orjson

from histmig import api
from histmig.problems import Problem, Warned
from histmig.records import Outcome, Record
from histmig.report import Rendering, Report
from histmig.report.baseline import read
from histmig.report.github import command, render
from histmig.rules.base import Finding

CALL = {"part_kind": "tool-call", "tool_name": "w,x:y", "args": "{}", "tool_call_id": "c%1"}
DANGLING = [
    {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "go"}]},
    {"kind": "response", "parts": [CALL]},
    {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "and?"}]},
    {"kind": "response", "parts": [CALL | {"tool_call_id": "d\r\n2"}]},
]


def test_a_value_is_escaped_as_workflow_commands_require() -> None:
    assert command("error", "a,b:c%.jsonl", "line 3", "i\n1", "histmig HM4:06", "50% of\r\nit") == (
        "::error file=a%2Cb%3Ac%25.jsonl,line=3,title=histmig HM4%3A06::line 3 [i%0A1]: 50%25 of%0D%0Ait\n"
    )
    forged = command("notice", "e\x1b]0;pwned\x07\x1b[2J.jsonl", "line 1", "\u202eid", "histmig HM101", "x\x1by")
    assert "\x1b" not in forged and "\x07" not in forged and "\u202e" not in forged
    assert forged == (
        "::notice file=e\\x1b]0;pwned\\x07\\x1b[2J.jsonl,line=1,title=histmig HM101::line 1 [\\u202eid]: x\\x1by\n"
    )


def test_a_database_row_is_named_by_its_table_and_key_and_no_file() -> None:
    assert command("warning", "postgresql://app@db/app:conversations", "tenant=7,id=42", None, "t", "m") == (
        "::warning title=t::postgresql://app@db/app:conversations tenant=7,id=42: m\n"
    )
    assert (
        command("error", "lake/a.parquet", "row 5", "k", "t", "m")
        == "::error file=lake/a.parquet,title=t::row 5 [k]: m\n"
    )


def _rendered(report: Report, how: Rendering = Rendering()) -> list[str]:
    out = io.StringIO()
    render(report, out, how)
    return out.getvalue().splitlines()


def test_each_finding_change_and_error_is_one_command(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(orjson.dumps(DANGLING) + b"\n{oops\n")
    lines = _rendered(api.check(str(source)).report)
    assert lines == [
        "::error file=" + str(source) + ",line=1,title=histmig HM406::line 1: messages[2].parts[0]: "
        "convert adds a tool-return part (evidence dangling)",
        "::warning file=" + str(source) + ",line=1,title=histmig HM407::line 1: messages[3].parts[0]: "
        "tool-call 'w,x:y' (d%0D%0A2) of the last response has no result yet",
        "::error file=" + str(source) + ",line=2,title=histmig rejected::line 2: invalid JSON: "
        "unexpected character, expected a string key at character 2 of the record",
    ]
    baseline = tmp_path / "b.json"
    api.check(str(source), write_baseline=str(baseline))
    known = Rendering(baseline=tuple(read(str(baseline))))
    judged = api.check(str(source), baseline=str(baseline))
    assert _rendered(judged.report, known) == [lines[1]]  # a warning is shown, a known error is not


def test_a_finding_is_an_error_or_a_warning_by_its_severity() -> None:
    report = Report()
    record = Record(b"[]", "s.json", "file", "r1")
    report.add(
        Outcome(
            record,
            "unchanged",
            b"[]",
            findings=[
                Finding("HM403", 0, 1, "dup", "duplicate", "exact"),
                Finding("HM407", 1, 0, "open", "frontier", "exact", "warning"),
            ],
        )
    )
    assert _rendered(report) == [
        "::error file=s.json,title=histmig HM403::file [r1]: messages[0].parts[1]: dup",
        "::warning file=s.json,title=histmig HM407::file [r1]: messages[1].parts[0]: open",
    ]


def test_a_fix_not_applied_is_a_warning_titled_by_its_rule_and_an_unknown_part_by_what_it_is() -> None:
    report = Report()
    said = "HM406 not applied: its fix would add a message where a record holds one (not applicable to this layout)"
    warnings = [Warned("HM406", said), Problem("messages[0].parts[0]", "unknown part_kind 'x', carried unchanged")]
    report.add(Outcome(Record(b"[]", "s.jsonl", "line 2"), "unchanged", b"[]", warnings=warnings))
    assert _rendered(report) == [
        f"::warning file=s.jsonl,line=2,title=histmig HM406::line 2: {said}",
        "::warning file=s.jsonl,line=2,title=histmig unknown part::line 2: messages[0].parts[0]: unknown part_kind "
        "'x', carried unchanged",
    ]
