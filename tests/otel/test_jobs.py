"""The otel jobs (histmig.otel.jobs) through the commands: every record exported or upgraded in
input order, a rejected one named and kept in the rejects file, never in an export on stdout."""

from __future__ import annotations

from pathlib import Path

import orjson
from typer.testing import CliRunner

from histmig.cli import app
from tests.conftest import CORPUS, converted, load
from tests.otel.conftest import framework_otel, tcr, text

ALL = CORPUS / "all.jsonl"
runner = CliRunner()


def test_otel_command_exports_every_record_of_the_corpus(tmp_path: Path) -> None:
    out = tmp_path / "all.otel.jsonl"
    result = runner.invoke(app, ["otel", str(ALL), str(out), "--version", "6", "--no-include-content"])
    assert result.exit_code == 0, result.output
    assert "212 records exported, 0 rejected" in result.stderr
    records = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    sources = [orjson.loads(line) for line in ALL.read_bytes().splitlines()]
    assert len(records) == len(sources) == 212
    for record, source in zip(records, sources):
        assert list(record) == list(source)
        assert {k: v for k, v in record.items() if k != "messages"} == {
            k: v for k, v in source.items() if k != "messages"
        }
        messages, _ = converted(source["messages"])
        assert record["messages"] == framework_otel(messages, 6, False)
    assert not (tmp_path / "all.otel.jsonl.rejects.jsonl").exists()


def test_otel_command_on_one_json_history_to_stdout() -> None:
    path = CORPUS / "v2.59.0" / "h_empty_response.json"
    result = runner.invoke(app, ["otel", str(path), "-", "--version", "5", "-q"])
    assert result.exit_code == 0
    messages, _ = converted(load(path))
    assert orjson.loads(result.stdout_bytes) == framework_otel(messages, 5, True)


def test_otel_command_rejects_a_record_and_exits_1(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    good = ALL.read_bytes().splitlines()[0]
    source.write_bytes(
        good
        + b"\n{not json\n\n"
        + b'{"id": 7, "messages": 3}\n'
        + b'{"id": 8, "messages": [{"kind": "request", "parts": "oops"}]}\n'
    )
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["otel", str(source), str(out), "--version", "6"])
    assert result.exit_code == 1
    assert "in.jsonl:line 2: invalid JSON" in result.stderr
    assert (
        "in.jsonl:line 4 [7]: field 'messages' is not an array (if the messages are in another field, name it with --messages-field)"
        in result.stderr
    )
    assert "in.jsonl:line 5 [8]: messages[0].parts is not a list" in result.stderr  # said as convert says it
    assert len(out.read_bytes().splitlines()) == 2  # the good record and the carried blank line
    assert (
        (tmp_path / "out.jsonl.rejects.jsonl").read_bytes()
        == b'{not json\n{"id": 7, "messages": 3}\n{"id": 8, "messages": [{"kind": "request", "parts": "oops"}]}\n'
    )


def test_otel_commands_exit_2_on_unreadable_input(tmp_path: Path) -> None:
    for command in (["otel", "--version", "6"], ["otel-upgrade"]):
        result = runner.invoke(
            app, [command[0], str(tmp_path / "missing.jsonl"), str(tmp_path / "o.jsonl"), *command[1:]]
        )
        assert result.exit_code == 2
        assert "missing.jsonl" in result.stderr
    assert runner.invoke(app, ["otel", str(ALL), str(tmp_path / "o.jsonl"), "--version", "4"]).exit_code == 2


def test_otel_upgrade_command(tmp_path: Path) -> None:
    v5, v6, upgraded, again = (tmp_path / name for name in ("v5.jsonl", "v6.jsonl", "up.jsonl", "again.jsonl"))
    assert runner.invoke(app, ["otel", str(ALL), str(v5), "--version", "5", "-q"]).exit_code == 0
    assert runner.invoke(app, ["otel", str(ALL), str(v6), "--version", "6", "-q"]).exit_code == 0
    result = runner.invoke(app, ["otel-upgrade", str(v5), str(upgraded)])
    assert result.exit_code == 0
    assert "212 records upgraded (49 already in version 6 roles), 0 rejected" in result.stderr
    same = [a == b for a, b in zip(upgraded.read_bytes().splitlines(), v6.read_bytes().splitlines())]
    assert (len(same), sum(same)) == (212, 190)  # the 22 others hold fixed no-output feedback
    assert runner.invoke(app, ["otel-upgrade", str(upgraded), str(again), "-q"]).exit_code == 0
    assert again.read_bytes() == upgraded.read_bytes()
    assert runner.invoke(app, ["otel-upgrade", str(v6), str(again), "-q"]).exit_code == 0
    assert again.read_bytes() == v6.read_bytes()


def test_otel_upgrade_command_on_a_bare_array_from_stdin() -> None:
    array = [{"role": "user", "parts": [tcr("a"), text("hi")]}]
    result = runner.invoke(app, ["otel-upgrade", "-", "-", "-q"], input=orjson.dumps(array) + b"\n")
    assert result.exit_code == 0
    assert orjson.loads(result.stdout_bytes) == [
        {"role": "tool", "parts": [tcr("a")]},
        {"role": "user", "parts": [text("hi")]},
    ]


def test_an_export_to_stdout_leaves_a_rejected_record_out_and_names_it() -> None:
    good = ALL.read_bytes().splitlines()[0]
    result = runner.invoke(app, ["otel", "-", "-", "--version", "6"], input=good + b"\n{not json\n")
    assert result.exit_code == 1
    assert (
        len(result.stdout_bytes.splitlines()) == 1
        and orjson.loads(result.stdout_bytes)["id"] == orjson.loads(good)["id"]
    )
    assert "histmig: -:line 2: invalid JSON" in result.stderr
    assert "histmig: 1 records exported, 1 rejected" in result.stderr
