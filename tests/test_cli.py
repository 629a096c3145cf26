"""The command line: exit codes, stdin/stdout, report formats, rules (README "Exit codes")."""

from __future__ import annotations

import gzip
import io
import re
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from histmig import cli
from histmig.cli import app
from histmig.report import Rendering
from histmig.rules import registry
from tests.conftest import CORPUS, FIXTURES
from tests.report.conftest import legacy_report, rendered

runner = CliRunner()
ALL = CORPUS / "all.jsonl"


def invoke(*args: str, stdin: bytes | None = None):
    return runner.invoke(app, list(args), input=stdin, prog_name="histmig")


def test_convert_then_check_the_corpus(tmp_path: Path) -> None:
    out = tmp_path / "all.v2.jsonl"
    assert invoke("convert", str(ALL), str(out), "-q").exit_code == 0
    assert invoke("check", str(ALL), "-q").exit_code == 1
    assert invoke("check", str(out), "-q").exit_code == 0
    assert not (tmp_path / "all.v2.jsonl.rejects.jsonl").exists()
    lines_in, lines_out = ALL.read_bytes().splitlines(), out.read_bytes().splitlines()
    assert len(lines_in) == len(lines_out) == 212
    unchanged = sum(a == b for a, b in zip(lines_in, lines_out))
    assert unchanged == 74


def test_check_exits_2_on_unreadable_input(tmp_path: Path) -> None:
    result = invoke("check", str(tmp_path / "missing.jsonl"))
    assert result.exit_code == 2
    assert "missing.jsonl" in result.output


def test_unknown_rule_code_is_a_usage_error() -> None:
    assert invoke("check", str(ALL), "--select", "HM999").exit_code == 2


def test_select_and_ignore(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    assert (
        invoke(
            "audit",
            str(ALL),
            "--select",
            "HM1",
            "--ignore",
            "HM103",
            "--report",
            str(report),
            "--report-format",
            "json",
        ).exit_code
        == 1
    )
    data = orjson.loads(report.read_bytes())
    assert set(data["summary"]["parts_by_rule"]) == {"HM101", "HM102"}
    assert data["summary"]["rejected"] == 11
    for row in data["errors"]:
        assert row["id"].startswith("v0.0.20/")
        assert (
            row["errors"][0]["path"].endswith("tool_call_id")
            and row["errors"][0]["message"] == "Input should be a valid string"
        )


def test_stdin_to_stdout() -> None:
    line = ALL.read_bytes().splitlines()[-1]
    result = runner.invoke(app, ["convert", "-", "-", "-q"], input=line + b"\n")
    assert result.exit_code == 0
    assert result.stdout_bytes == line + b"\n"


def test_gzip_in_and_out(tmp_path: Path) -> None:
    source = tmp_path / "all.jsonl.gz"
    source.write_bytes(gzip.compress(ALL.read_bytes()))
    out = tmp_path / "out.jsonl.gz"
    plain = tmp_path / "out.jsonl"
    assert invoke("convert", str(source), str(out), "-q").exit_code == 0
    assert invoke("convert", str(ALL), str(plain), "-q").exit_code == 0
    assert gzip.decompress(out.read_bytes()) == plain.read_bytes()


def test_single_json_history(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    assert invoke("convert", str(CORPUS / "v2.59.0" / "h_empty_response.json"), str(out), "-q").exit_code == 0
    parts = [p for m in orjson.loads(out.read_bytes()) for p in m["parts"]]
    assert [p["retry"]["cause"] for p in parts if p["part_kind"] == "retry-feedback"] == ["no_output"]


def test_audit_writes_nothing_and_reports_markdown(tmp_path: Path) -> None:
    copy = tmp_path / "sample.jsonl"
    shutil.copy(FIXTURES / "sample.jsonl", copy)
    report = tmp_path / "audit.md"
    assert invoke("audit", str(copy), "--report", str(report), "--report-format", "markdown").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.md", "sample.jsonl"]
    text = report.read_text()
    assert text.startswith("# ✅ pass: histmig audit\n")
    assert "| records_in | 8 |" in text
    assert "| HM103 | retry-prompt -> tool-return | unknown_tool |" in text


def test_the_report_files_name_tells_its_format_unless_report_format_is_given(tmp_path: Path) -> None:
    for name, first in (
        ("r.json", "{"),
        ("r.md", "# ✅ pass: histmig audit"),
        ("r.txt", f"{FIXTURES / 'sample.jsonl'}:line 1"),
    ):
        assert invoke("audit", str(FIXTURES / "sample.jsonl"), "--report", str(tmp_path / name), "-q").exit_code == 0
        assert (tmp_path / name).read_text().startswith(first), name
    given = invoke(
        "audit", str(FIXTURES / "sample.jsonl"), "--report", str(tmp_path / "r.json"), "--report-format", "text"
    )
    assert given.exit_code == 0 and not (tmp_path / "r.json").read_text().startswith("{")


def test_a_rejected_record_goes_to_the_rejects_file(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    good = ALL.read_bytes().splitlines()[-1]
    source.write_bytes(good + b"\n" + b"{not json\n" + good + b"\n")
    out = tmp_path / "out.jsonl"
    result = invoke("convert", str(source), str(out))
    assert result.exit_code == 1
    assert out.read_bytes() == good + b"\n" + good + b"\n"
    assert (tmp_path / "out.jsonl.rejects.jsonl").read_bytes() == b"{not json\n"
    assert "in.jsonl:line 2: rejected: invalid JSON" in result.stderr


def test_text_report_escapes_control_characters(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    record = {
        "id": "evil\x1b[31mred",
        "messages": [{"kind": "request", "parts": [{"part_kind": "retry-prompt", "content": "x", "tool_name": None}]}],
    }
    source.write_bytes(orjson.dumps(record) + b"\n")
    result = invoke("audit", str(source))
    assert "evil\\x1b[31mred" in result.stderr
    assert "\x1b[31m" not in result.stderr


FORGERS = ("\n", "\r", "\u2028", "\u2029", "\u202e", "\x85", "\x1c")
"""What would start a new line, or reverse what follows, on a terminal or in Markdown."""


def test_no_id_key_path_or_message_forges_a_line_or_reorders_one(tmp_path: Path) -> None:
    source = tmp_path / "in\u2028put\u202e.jsonl"
    retry = {"part_kind": "retry-prompt", "content": "x", "tool_name": None}
    evil = "a\nforged.jsonl:line 9: rejected: fake\u2028b\u2029c\u202ed\r\x85e\x1cf|g`h`<b>&#x202E;[l](http://x)"
    records = [
        {"id": evil, "messages": [{"kind": "request", "parts": [retry]}]},
        {"id": evil, "note": 1},
        {"id": "ok", "messages": [{"kind": "request", "parts": [{"part_kind": evil, "content": "x"}, retry]}]},
    ]
    source.write_bytes(b"".join(orjson.dumps(record) + b"\n" for record in records))
    report = tmp_path / "report.md"
    text = invoke("audit", str(source), "--report-detail", "full")
    markdown = invoke("audit", str(source), "--report", str(report), "--report-format", "markdown")
    assert text.exit_code == markdown.exit_code == 1, text.output
    lines = text.stderr.split("\n")
    named = [line for line in lines if line.startswith(str(source).encode("unicode_escape").decode())]
    assert len(named) == 4, text.stderr  # two changes, the rejected record, the unknown part_kind: a line each
    assert not [c for c in FORGERS[1:] if c in text.stderr + markdown.stderr]  # a newline only between lines
    assert not [line for line in lines if "forged" in line and line not in named]
    shown = "[a\\x0aforged.jsonl:line 9: rejected: fake\\u2028b\\u2029c\\u202ed\\x0d\\x85e\\x1cf|g`h`<b>&#x202E;[l](http://x)]"
    assert [line.count(shown) for line in named] == [1, 0, 1, 0] and "part_kind 'a\\nforged" in named[3]
    md = report.read_text()
    assert not [c for c in FORGERS[1:] if c in md] and "\nforged" not in md
    (row,) = [line for line in md.split("\n") if line.startswith("| ") and "forged" in line]
    assert len(re.findall(r"(?<!\\)\|", row)) == 9, row  # the changes table's 8 cells, no more
    assert "f\\|g\\`h\\`\\<b\\>\\&#x202E;[l]\\(http://x)" in row
    missing = invoke("audit", str(tmp_path / "no\u202eth\ning.jsonl"))
    assert missing.stderr.count("\n") == 1 and "no\\u202eth" in missing.stderr, missing.stderr


def test_rules_lists_every_code() -> None:
    result = invoke("rules")
    for code in ("HM101", "HM102", "HM103", "HM201", "HM202", "HM203", "HM204", "HM301", "HM302"):
        assert code in result.stdout
    assert "Source: pydantic-ai 0.0.3-0.0.46 wrote 'Unknown tool name: …' retries" in invoke("rules", "HM103").stdout


def test_help_has_examples_and_names_what_each_option_takes() -> None:
    result = invoke("convert", "--help")
    assert result.exit_code == 0
    assert "histmig convert chats.jsonl chats.v2.jsonl" in result.stdout
    for metavar in ("CODES", "FIELD", "FILE", "COLUMN", "TABLE", "N"):
        assert f" {metavar} " in result.stdout
    assert "pip install 'histmig[spark]'" in " ".join(
        result.stdout.replace("│", " ").split()
    )  # not eaten as rich markup
    top = invoke("--help")
    assert "histmig check chats.v2.jsonl" in top.stdout and "Each command has its own --help (-h)." in top.stdout


@pytest.mark.parametrize("command", ["convert", "audit", "check", "rules", "otel", "otel-upgrade"])
def test_h_is_help_and_usage_and_options_show_plain_metavars(command: str) -> None:
    short, long = invoke(command, "-h"), invoke(command, "--help")
    assert (short.exit_code, short.stdout) == (0, long.stdout)
    for noise in ("{", "<str>", "<bool>", "<int>", "<list[str]>", "[x>=1]"):
        assert noise not in short.stdout, (command, noise)
    usage = {
        "convert": "INPUT... [OUTPUT]",
        "audit": "INPUT...",
        "check": "INPUT...",
        "rules": "[CODE]",
        "otel": "INPUT... OUTPUT",
        "otel-upgrade": "INPUT... OUTPUT",
    }[command]
    assert f"Usage: histmig {command} [OPTIONS] {usage}" in " ".join(short.stdout.split())
    assert invoke("-h").stdout == invoke("--help").stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ("check", "x.jsonl", "--report-format", "xml"),
            "histmig: Invalid value for '--report-format': choose text, json, markdown or github, not 'xml' (see histmig check -h)",
        ),
        (
            ("convert", "x.jsonl", "o.jsonl", "--causes", "guessed"),
            "histmig: Invalid value for '--causes': choose inferred or framework, not 'guessed' (see histmig convert -h)",
        ),
        (
            ("audit", "x.jsonl", "--format", "yaml"),
            "histmig: Invalid value for '--format': choose duckdb, json, jsonl, parquet, postgres or sqlite, not 'yaml' (see histmig audit -h)",
        ),
        (
            ("otel", "x.jsonl", "o.jsonl", "--version", "4"),
            "histmig: Invalid value for '--version': choose 5 or 6, not '4' (see histmig otel -h)",
        ),
        (("check",), "histmig: Missing argument 'INPUT...' (see histmig check -h)"),
        (("check", "x.jsonl", "-j", "0"), "histmig: jobs must be 1 or more, not 0"),
    ],
)
def test_a_bad_option_is_one_line_in_plain_words_and_exit_2(args: tuple[str, ...], said: str) -> None:
    result = invoke(*args)
    assert (result.exit_code, result.stderr) == (2, said + "\n")


def test_rules_never_point_at_documents_the_package_does_not_ship() -> None:
    shown = invoke("rules").stdout + invoke("rules", "HM").stdout
    assert "framework-facts" not in shown and not re.search(r"\bBC\d", shown) and "§" not in shown
    assert shown.count("Source: pydantic-ai") == len(registry())


def test_python_dash_m_runs_the_same_cli() -> None:
    result = subprocess.run([sys.executable, "-m", "histmig", "check", str(ALL)], capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.rstrip().endswith(
        "histmig check: 138 of 212 records to migrate, 0 invalid, 0 rejected, 0 with findings only, 74 current and valid; 6 warnings"
    )
    version = subprocess.run([sys.executable, "-m", "histmig", "--version"], capture_output=True, text=True)
    assert (version.returncode, version.stdout.strip()) == (0, "histmig 0.1.0")


@pytest.mark.parametrize(
    "name", ["v0.0.20/c_unknown_tool", "v1.0.18/h_thinking_only_structured", "v2.59.0/j_rich_content"]
)
def test_json_report_snapshot(name: str, snapshot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(CORPUS)
    result = invoke("audit", f"{name}.json", "--report", "-", "--report-format", "json", "--no-timestamp")
    assert result.exit_code == 0
    assert orjson.loads(result.stdout_bytes) == snapshot


def test_an_output_under_a_file_is_a_usage_error_and_a_report_needs_its_directory(tmp_path: Path) -> None:
    (tmp_path / "file").touch()
    result = invoke("convert", str(ALL), str(tmp_path / "file" / "out.jsonl"))
    assert result.exit_code == 2
    assert "is a file, not a directory" in result.stderr
    assert invoke("audit", str(ALL), "--report", str(tmp_path / "nowhere" / "r.json")).exit_code == 2


@pytest.mark.parametrize("name", ["out.parquet", "out.pq", "out.duckdb", "out.json", "out.json.gz"])
def test_an_output_name_asking_for_another_format_is_a_usage_error(tmp_path: Path, name: str) -> None:
    result = invoke("convert", str(ALL), str(tmp_path / name))
    assert result.exit_code == 2
    assert "choose an output name" in result.stderr
    assert not (tmp_path / name).exists()


def test_outputs_keep_the_permissions_a_new_file_or_the_old_one_has(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    assert invoke("convert", str(ALL), str(out), "-q").exit_code == 0
    assert out.stat().st_mode & 0o777 == 0o666 & ~_umask()
    out.chmod(0o640)
    assert invoke("convert", str(out), "--in-place", "-q").exit_code == 0
    assert out.stat().st_mode & 0o777 == 0o640


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_rules_takes_a_prefix_and_prints_plain_docs() -> None:
    result = invoke("rules", "HM2")
    assert result.exit_code == 0
    assert [code for code in ("HM201", "HM202", "HM203", "HM204") if code in result.stdout] == [
        "HM201",
        "HM202",
        "HM203",
        "HM204",
    ]
    assert "``" not in result.stdout and "HM101" not in result.stdout


def test_rules_say_which_only_report_and_which_find_warnings() -> None:
    pairing = invoke("rules", "HM4")
    assert pairing.exit_code == 0
    assert (
        pairing.stdout.count("Fix: none (reported only)") == 3 and pairing.stdout.count("Example (what it finds)") == 3
    )
    assert pairing.stdout.count("Fix: unsafe") == 3 and pairing.stdout.count("Fix: safe") == 1
    assert pairing.stdout.count("Findings: warnings (check does not fail on them)") == 1
    table = [line.split("│") for line in invoke("rules").stdout.splitlines() if line.startswith("│ HM4")]
    assert [(cells[1].strip(), cells[3].strip()) for cells in table] == [
        ("HM401", "unsafe"),
        ("HM402", "unsafe"),
        ("HM403", "none"),
        ("HM404", "none"),
        ("HM405", "none"),
        ("HM406", "safe"),
        ("HM407", "unsafe"),
    ]


def test_check_ends_with_a_verdict(tmp_path: Path) -> None:
    assert "histmig check: 138 of 212 records to migrate, 0 invalid, 0 rejected" in invoke("check", str(ALL)).stderr
    out = tmp_path / "out.jsonl"
    invoke("convert", str(ALL), str(out), "-q")
    assert "histmig check: all 212 records are current and valid" in invoke("check", str(out)).stderr


def test_an_invalid_record_has_status_invalid(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(b'[{"kind":"teleport","parts":[]}]\n')
    report = tmp_path / "r.json"
    result = invoke("check", str(source), "--report", str(report), "--report-format", "json")
    assert result.exit_code == 1
    assert (
        "histmig check: 0 of 1 records to migrate, 1 invalid, 0 rejected, 0 with findings only, 0 current and valid"
        in result.stderr
    )
    data = orjson.loads(report.read_bytes())
    assert data["summary"]["invalid"] == 1
    assert [row["status"] for row in data["errors"]] == ["invalid"]


def test_writing_over_the_input_needs_in_place(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    shutil.copy(ALL, source)
    result = invoke("convert", str(source), str(source))
    assert result.exit_code == 2
    assert "use --in-place" in result.stderr
    assert source.read_bytes() == ALL.read_bytes()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("-", "--report", "-"), "OUTPUT and --report cannot both go to stdout"),
        (("-", "--rejects", "-"), "OUTPUT and --rejects cannot both go to stdout"),
        (("out.jsonl", "--rejects", "-", "--report", "-"), "--rejects and --report cannot both go to stdout"),
        (("-", "--rejects", "-", "--report", "-"), "OUTPUT and --rejects and --report cannot all go to stdout"),
    ],
)
def test_two_outputs_cannot_both_be_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], said: str
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("convert", str(ALL), *args)
    assert result.exit_code == 2
    assert f"histmig: {said}" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_otel_output_under_a_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "file").touch()
    for command in ("otel", "otel-upgrade"):
        result = invoke(command, str(ALL), str(tmp_path / "file" / "o.jsonl"))
        assert result.exit_code == 2, command
        assert "is a file, not a directory" in result.stderr


def test_version() -> None:
    from histmig import __version__

    result = invoke("--version")
    assert (result.exit_code, result.stdout) == (0, f"histmig {__version__}\n")


def test_one_indented_json_document_on_stdin_gets_a_hint() -> None:
    document = b'[\n  {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]}\n]\n'
    result = runner.invoke(app, ["convert", "-", "-", "-q"], input=document)
    assert result.exit_code == 1
    assert "if it holds one JSON document, add --format json" in result.stderr
    result = runner.invoke(app, ["convert", "-", "-", "-q", "--format", "json"], input=document)
    assert result.exit_code == 0 and "--format json" not in result.stderr


def test_convert_and_audit_end_with_a_verdict_line(tmp_path: Path) -> None:
    out = tmp_path / "all.v2.jsonl"
    result = runner.invoke(app, ["convert", str(ALL), str(out)])
    assert result.stderr.rstrip().endswith(
        f"histmig convert: 138 of 212 records migrated, 74 unchanged, 0 rejected; written to {out}"
    )
    result = runner.invoke(app, ["audit", str(ALL)])
    assert result.stderr.rstrip().endswith(
        "histmig audit: 138 of 212 records would be migrated, 74 need nothing, 0 would be rejected; nothing was written"
    )
    assert "histmig convert:" not in runner.invoke(app, ["convert", str(ALL), str(out), "-q"]).stderr


def test_gzip_bytes_on_stdin_are_gunzipped(tmp_path: Path) -> None:
    expected = tmp_path / "expected.jsonl"
    assert runner.invoke(app, ["convert", str(ALL), str(expected), "-q"]).exit_code == 0
    out = tmp_path / "out.jsonl"
    command = [sys.executable, "-m", "histmig", "convert", "-", str(out), "-q"]
    done = subprocess.run(
        command, input=gzip.compress(ALL.read_bytes()), capture_output=True, cwd=Path(__file__).parent.parent
    )
    assert (done.returncode, done.stderr) == (0, b"")
    assert out.read_bytes() == expected.read_bytes()


def test_a_rejected_json_document_is_said_not_written(tmp_path: Path) -> None:
    source, out = tmp_path / "s.json", tmp_path / "s.out.json"
    source.write_bytes(b'"x"')
    result = runner.invoke(app, ["convert", str(source), str(out)])
    assert result.exit_code == 1
    assert result.stderr.rstrip().endswith(
        f"histmig convert: 0 of 1 records migrated, 0 unchanged, 1 rejected; nothing written to {out}, rejected records to {out}.rejects.jsonl"
    )
    assert not out.exists()
    assert (tmp_path / "s.out.json.rejects.jsonl").read_bytes() == b'"x"\n'


def test_otel_commands_offer_only_json_and_jsonl_inputs(tmp_path: Path) -> None:
    for command in ("otel", "otel-upgrade"):
        help_text = " ".join(runner.invoke(app, [command, "--help"]).stdout.split())
        assert ".jsonl/.ndjson" in help_text and ".parquet" not in help_text and ".duckdb" not in help_text
        (tmp_path / "chats.parquet").touch()
        result = runner.invoke(app, [command, str(tmp_path / "chats.parquet"), str(tmp_path / "out.jsonl")])
        assert result.exit_code == 2
        assert f"histmig: {tmp_path}/chats.parquet: the otel commands read JSON or JSONL, not parquet" in result.stderr
        result = runner.invoke(app, [command, "postgresql://u:secret@localhost/db", str(tmp_path / "out.jsonl")])
        assert result.exit_code == 2
        assert (
            "histmig: postgresql://u@localhost/db: the otel commands read JSON or JSONL, not postgres" in result.stderr
        )


def test_a_json_document_is_not_written_under_a_jsonl_name(tmp_path: Path) -> None:
    document = tmp_path / "history.json"
    document.write_bytes(b'[{"kind": "request", "parts": []}]')
    result = invoke("convert", str(document), str(tmp_path / "out.jsonl"))
    assert result.exit_code == 2 and "choose an output name" in result.stderr
    assert invoke("convert", str(document), str(tmp_path / "out.json"), "-q").exit_code == 0
    assert invoke("convert", str(document), str(tmp_path / "out.txt"), "-q").exit_code == 0


def test_the_verdict_says_where_rejected_records_went(tmp_path: Path) -> None:
    document, lines, out = tmp_path / "s.json", tmp_path / "s.jsonl", tmp_path / "o.jsonl"
    document.write_bytes(b'"x"')
    lines.write_bytes(b'{"messages": []}\n{bad\n')
    to_stdout = runner.invoke(app, ["convert", str(document), "-"])
    assert (to_stdout.exit_code, to_stdout.stdout) == (1, '"x"')
    assert to_stdout.stderr.rstrip().endswith("1 rejected; written to stdout, rejected records among them unchanged")
    rejects_to_stdout = runner.invoke(app, ["convert", str(lines), str(out), "--rejects", "-"])
    assert (rejects_to_stdout.exit_code, rejects_to_stdout.stdout, out.read_bytes()) == (
        1,
        "{bad\n",
        b'{"messages": []}\n',
    )
    assert rejects_to_stdout.stderr.rstrip().endswith(f"1 rejected; written to {out}, rejected records to stdout")


def test_the_verdict_says_when_the_input_was_cut_short(tmp_path: Path) -> None:
    whole = gzip.compress(ALL.read_bytes())
    source = tmp_path / "cut.jsonl.gz"
    source.write_bytes(whole[: len(whole) // 2])
    for args in (("convert", str(source), str(tmp_path / "o.jsonl")), ("audit", str(source)), ("check", str(source))):
        result = invoke(*args)
        assert result.exit_code == 1
        assert result.stderr.rstrip().endswith("; the input could not be read to its end (see the unreadable error)"), (
            args
        )
    assert not invoke("audit", str(ALL)).stderr.rstrip().endswith("(see the unreadable error)")


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_cli_report_file_is_the_rendered_report(tmp_path: Path, fmt: str) -> None:
    report, source = legacy_report(tmp_path)
    path = tmp_path / "report.gz"
    result = runner.invoke(app, ["audit", source, "--report", str(path), "--report-format", fmt, "--no-timestamp"])
    assert result.exit_code == 1
    assert gzip.decompress(path.read_bytes()).decode() == rendered(report, fmt, Rendering(timestamp=False))


def test_a_failed_report_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def half(report: object, stream: io.TextIOBase, how: object) -> None:
        stream.write("{\n")
        raise OSError("disk full")

    monkeypatch.setattr(cli, "_renderer", lambda fmt: half)
    (tmp_path / "report.json").write_text("previous")
    result = runner.invoke(
        app,
        [
            "audit",
            str(CORPUS / "all.jsonl"),
            "--report",
            str(tmp_path / "report.json"),
            "--report-format",
            "json",
            "-q",
        ],
    )
    assert (result.exit_code, result.stderr) == (2, "histmig: disk full\n")
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]
    assert (tmp_path / "report.json").read_text() == "previous"


def test_check_prints_a_warning_line_per_unknown_part_and_strict_exits_1(tmp_path: Path) -> None:
    source = tmp_path / "future.jsonl"
    source.write_bytes(
        b'{"id":"n1","messages":[{"kind":"request","parts":[{"part_kind":"hologram","content":"x"}]}]}\n'
    )
    lenient = invoke("check", str(source))
    assert lenient.exit_code == 0
    assert (
        f"{source}:line 1 [n1]: warning: messages[0].parts[0]: unknown part_kind 'hologram', carried unchanged"
        in lenient.stderr
    )
    assert (
        "the one record is current" not in lenient.stderr and "1 record holds 1 part of a part_kind" in lenient.stderr
    )
    assert invoke("check", str(source), "--strict", "-q").exit_code == 1


def test_report_detail_summary_gives_the_counts_without_a_line_per_change() -> None:
    summary = invoke("audit", str(ALL), "--report-detail", "summary")

    def change_lines(stderr: str) -> int:
        return len(re.findall(r"^.* HM\d{3} (?!found:|warning:)", stderr, re.MULTILINE))

    assert summary.exit_code == 0 and change_lines(summary.stderr) == 0
    assert "histmig summary" in summary.stderr and "would change" in summary.stderr
    assert summary.stderr.rstrip().endswith(
        "histmig audit: 138 of 212 records would be migrated, 74 need nothing, 0 would be rejected; nothing was written"
    )
    full = invoke("audit", str(ALL), "--report-detail", "full")
    assert change_lines(full.stderr) == 270  # a line per change row of the corpus
    assert (
        invoke("audit", str(ALL), "--report-detail", "some").stderr
        == "histmig: Invalid value for '--report-detail': choose auto, full or summary, not 'some' (see histmig audit -h)\n"
    )


def test_target_and_reader_on_the_command_line(tmp_path: Path) -> None:
    newest, back = tmp_path / "newest.jsonl", tmp_path / "back.jsonl"
    invoke("convert", str(ALL), str(newest), "-q")
    checked = invoke("check", str(newest), "--reader", "2.59.0", "--report", "-", "--report-format", "json")
    assert checked.exit_code == 1
    assert orjson.loads(checked.stdout)["summary"]["reader_loads"] == 31
    assert invoke("convert", str(newest), str(back), "--target", "2.59.0", "-q").exit_code == 0
    assert invoke("check", str(back), "--reader", "2.59.0", "-q").exit_code == 0
    assert invoke("audit", str(back), "--target", "2.59.0", "-q").exit_code == 0
    bad = invoke("check", str(back), "--reader", "2.59")
    assert (bad.exit_code, bad.stderr.strip()) == (
        2,
        "histmig: '2.59' is not a release: give major.minor.patch, e.g. 2.59.0",
    )
    assert invoke("convert", str(back), str(tmp_path / "x.jsonl"), "--select", "HM501").exit_code == 2
    assert "--reader" not in invoke("convert", "--help").stdout and "--target" not in invoke("check", "--help").stdout
    assert "RELEASE" in invoke("check", "--help").stdout and "--target 2.59.0" in invoke("convert", "--help").stdout
    assert "Runs for targets: before 2.60.0 (--target; default 2.68.0)" in invoke("rules", "HM501").stdout


def test_attempts_on_convert_and_audit_only_and_their_options_need_it(tmp_path: Path) -> None:
    source, out, report = CORPUS / "v2.59.0" / "d_tool_two_retries.json", tmp_path / "out.json", tmp_path / "r.json"
    assert invoke("convert", str(source), str(out), "--attempts", "--max-retries", "tools=2", "-q").exit_code == 0
    parts = [
        part
        for message in orjson.loads(out.read_bytes())
        for part in message["parts"]
        if part.get("outcome") == "retried"
    ]
    assert [part["retry"] for part in parts] == [
        {"cause": "model_retry", "attempt": n, "max_retries": 2} for n in (1, 2)
    ]
    audited = invoke(
        "audit", str(source), "--attempts", "--counting", "writer", "--report", str(report), "--report-format", "json"
    )
    assert audited.exit_code == 0
    rows = [
        (row["rule"], row["before"], row["after"])
        for row in orjson.loads(report.read_bytes())["changes"]
        if row["rule"] == "HM104"
    ]
    assert rows == [("HM104", "attempt=null", "attempt=1"), ("HM104", "attempt=null", "attempt=2")]
    for args, said in (
        (("audit", str(source), "--max-retries", "tools=2"), "--counting and --max-retries need --attempts"),
        (("audit", str(source), "--attempts", "--counting", "soon"), "--counting must be current, writer or a release"),
        (("audit", str(source), "--select", "HM104"), "rule HM104 runs only with --attempts"),
    ):
        failed = invoke(*args)
        assert (failed.exit_code, said in failed.stderr) == (2, True), args
    assert invoke("check", str(source), "--attempts").exit_code == 2
    assert "--max-retries" in invoke("convert", "--help").stdout and "--counting" in invoke("audit", "--help").stdout


def test_a_driver_error_of_several_lines_is_said_in_one() -> None:
    result = invoke("check", "postgresql://nobody@127.0.0.1:1/x", "--table", "t")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(
        "histmig: cannot read postgresql://nobody@127.0.0.1:1/x: cannot connect: connection failed: "
    )
    assert "Connection refused; Is the server running" in result.stderr


def test_a_name_holding_colons_is_printed_as_it_is_not_as_an_emoji(tmp_path: Path) -> None:
    source = tmp_path / "chats:smile:.jsonl"  # rich would print :smile: as an emoji
    source.write_bytes((CORPUS / "all.jsonl").read_bytes().splitlines()[0] + b"\n")
    result = invoke("audit", str(source))
    assert f"{source}:line 1" in result.stderr and "\U0001f604" not in result.stderr
    missing = invoke("audit", str(tmp_path / "none:v:.jsonl"))
    assert (missing.exit_code, missing.stderr) == (
        2,
        f"histmig: cannot read {tmp_path / 'none:v:.jsonl'}: no such file or directory\n",
    )


SPANS = FIXTURES / "otel-spans"


def test_from_otel_writes_histories_and_ends_with_a_verdict_line(tmp_path: Path) -> None:
    out = tmp_path / "h.jsonl"
    result = invoke(
        "from-otel", str(SPANS / "v6" / "i_multi_run.otlp.jsonl"), str(SPANS / "v6" / "l_no_retry.otlp.jsonl"), str(out)
    )
    assert result.exit_code == 0
    assert result.stderr.rstrip() == f"histmig from-otel: 2 histories written to {out}"
    assert [orjson.loads(line)["conversation_id"] for line in out.read_bytes().splitlines()] == [
        "conv-i_multi_run",
        "conv-l_no_retry",
    ]
    assert (tmp_path / "h.jsonl.report.jsonl").exists()
    assert invoke("from-otel", str(SPANS / "v6" / "i_multi_run.otlp.jsonl"), str(out), "-q").stderr == ""


def test_from_otel_reads_stdin_and_writes_stdout() -> None:
    spans = (SPANS / "v2" / "i_multi_run.otlp.jsonl").read_bytes()
    result = invoke("from-otel", "-", "-", "--runs", "all", stdin=spans)
    assert result.exit_code == 0
    assert [orjson.loads(line)["run_id"] for line in result.stdout.splitlines()] == [
        "run-i_multi_run-0",
        "run-i_multi_run-1",
    ]


def test_from_otel_names_each_rejected_line_and_exits_1(tmp_path: Path) -> None:
    spans = tmp_path / "spans.jsonl"
    good = (SPANS / "v5" / "l_no_retry.otlp.jsonl").read_bytes()
    spans.write_bytes(good + good[:80] + b"\n")
    result = invoke("from-otel", str(spans), str(tmp_path / "h.jsonl"))
    assert result.exit_code == 1
    assert f"histmig: {spans}: line 2: invalid JSON" in result.stderr
    assert result.stderr.rstrip().endswith(
        f"histmig from-otel: 1 history written to {tmp_path}/h.jsonl; 1 rejected to {tmp_path}/h.jsonl.rejects.jsonl"
    )


def test_from_otel_usage_errors_exit_2_before_writing(tmp_path: Path) -> None:
    spans = str(SPANS / "v5" / "l_no_retry.otlp.jsonl")
    assert invoke("from-otel", spans).exit_code == 2
    assert invoke("from-otel", spans, str(tmp_path / "o.jsonl"), "--runs", "first").exit_code == 2
    missing = invoke("from-otel", str(tmp_path / "missing.jsonl"), str(tmp_path / "o.jsonl"))
    assert missing.exit_code == 2 and "cannot read" in missing.stderr
    nowhere = invoke("from-otel", spans, str(tmp_path / "nowhere" / "o.jsonl"))
    assert nowhere.exit_code == 2 and "no such directory" in nowhere.stderr
    budgets = invoke("from-otel", spans, str(tmp_path / "o.jsonl"), "--max-retries", "tools=x")
    assert budgets.exit_code == 2 and "--max-retries: 'tools=x' is not tools=N" in budgets.stderr
    assert list(tmp_path.iterdir()) == []


def test_from_otel_max_retries_needs_no_attempts_and_fills_the_budget(tmp_path: Path) -> None:
    out = tmp_path / "h.jsonl"
    result = invoke(
        "from-otel", str(SPANS / "v6" / "h_empty_response.otlp.jsonl"), str(out), "--max-retries", "output=3"
    )
    assert result.exit_code == 0, result.stderr
    (record,) = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert [p["retry"] for m in record["messages"] for p in m["parts"] if p.get("retry")] == [
        {"cause": "no_output", "attempt": 1, "max_retries": 3}
    ]


def test_from_otel_help_has_examples_and_its_options() -> None:
    help_text = " ".join(invoke("from-otel", "--help").stdout.split())
    for said in (
        "SPANS... OUTPUT",
        "--runs",
        "--max-retries",
        "--rejects",
        "--report",
        "histmig from-otel traces.jsonl histories.jsonl",
    ):
        assert said in help_text


def test_from_otel_output_is_an_archive_check_passes(tmp_path: Path) -> None:
    out = tmp_path / "h.jsonl"
    names = ("a_tool_model_retry", "i_multi_run", "j_rich_content", "l_no_retry")
    assert invoke("from-otel", *(str(SPANS / "v4" / f"{n}.otlp.jsonl") for n in names), str(out), "-q").exit_code == 0
    result = invoke("check", str(out))
    assert result.exit_code == 0, result.stderr
    assert result.stderr.rstrip().endswith("histmig check: all 4 records are current and valid")


def test_from_otel_shows_a_hostile_span_name_inert(tmp_path: Path) -> None:
    span = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "name": "invoke_agent \x1b[2J\u202eevil\nhistmig: forged",
        "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}],
    }
    spans = tmp_path / "spans.jsonl"
    spans.write_bytes(orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}) + b"\n")
    result = invoke("from-otel", str(spans), str(tmp_path / "h.jsonl"))
    assert result.exit_code == 1
    assert "\x1b" not in result.stderr and "\u202e" not in result.stderr
    assert "invoke_agent \\x1b[2J\\u202eevil\\x0ahistmig: forged" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 2  # the reject and the verdict, nothing forged


def test_check_in_ci_annotates_new_findings_only_and_fills_the_step_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, baseline, summary = tmp_path / "chats.jsonl", tmp_path / "baseline.json", tmp_path / "summary.md"
    legacy = (CORPUS / "all.jsonl").read_bytes()
    source.write_bytes(legacy)
    monkeypatch.chdir(tmp_path)
    written = invoke("check", "chats.jsonl", "--write-baseline", "baseline.json", "-q")
    assert written.exit_code == 0 and orjson.loads(baseline.read_bytes())["histmig_baseline"] == 1
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    passed = invoke("check", "chats.jsonl", "--baseline", "baseline.json", "--report", "-", "--report-format", "github")
    assert passed.exit_code == 0 and not [line for line in passed.stdout.splitlines() if line.startswith("::error")]
    assert "histmig check: nothing beyond the baseline; 270 known ones passed over" in passed.stderr
    assert summary.read_text().startswith("# ✅ pass: histmig check\n\nhistmig check: nothing beyond the baseline")
    dangling = (
        b'[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"w?"}]},'
        b'{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"w","args":"{}","tool_call_id":"c"}]},'
        b'{"kind":"request","parts":[]},{"kind":"response","parts":[]}]'
    )
    source.write_bytes(legacy + dangling + b"\n")
    failed = invoke("check", "chats.jsonl", "--baseline", "baseline.json", "--report", "-", "--report-format", "github")
    assert failed.exit_code == 1
    assert [line for line in failed.stdout.splitlines() if line.startswith("::error")] == [
        "::error file=chats.jsonl,line=213,title=histmig HM406::line 213: messages[2].parts[0]: convert adds a tool-return "
        "part (evidence dangling)"
    ]
    assert "histmig check: 1 finding not in the baseline (HM406: 1); 270 known ones passed over" in failed.stderr
    assert "# ❌ fail (exit 1): histmig check" in summary.read_text()  # added after the first run's


def test_quiet_leaves_out_report_and_verdict_and_still_prints_the_notes(tmp_path: Path) -> None:
    """As ``--quiet``'s help says: the notes (here the chat-app table's null primary key) stay."""
    db = tmp_path / "chat.sqlite"
    shutil.copy(FIXTURES / "chat_app" / "weather.sqlite", db)
    quiet = invoke("audit", str(db), "--table", "messages", "-q")
    assert quiet.exit_code == 0
    assert quiet.stderr.splitlines() == [
        f"histmig: note: {db}:messages: the primary key (id) is null on every row; rows are read in rowid order "
        "and named by it"
    ]
    assert "histmig audit: 0 of 2 records" in invoke("audit", str(db), "--table", "messages").stderr
