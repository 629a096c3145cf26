"""The otel jobs (histmig.otel.jobs) through the commands: every record exported or upgraded in
input order, a rejected one named and kept in the rejects file, never in an export on stdout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
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


# --- a conversation stored as several records (--conversation) --------------------------------


def _records(path: Path, pieces: list[list[Any]], order: list[int]) -> None:
    """``pieces`` of one conversation as JSONL envelopes ``{"session", "seq", "messages"}``,
    written in ``order``."""
    path.write_bytes(b"".join(orjson.dumps({"session": "s1", "seq": i, "messages": pieces[i]}) + b"\n" for i in order))


def _exported(out: Path) -> list[list[Any]]:
    """The OTel arrays of an export's records, by ``seq``."""
    records = sorted((orjson.loads(line) for line in out.read_bytes().splitlines()), key=lambda r: r["seq"])
    return [record["messages"] for record in records]


def _ids(otel: list[Any], kind: str) -> list[str]:
    return [part["id"] for message in otel for part in message["parts"] if part["type"] == kind]


def test_with_conversation_a_call_and_its_result_in_two_records_get_one_derived_id(tmp_path: Path) -> None:
    """A 0.0.20 history (no ``tool_call_id`` anywhere) cut after each response: the ids HM201
    derives are the whole conversation's, so the call in record 1 and the retry answering it in
    record 2 are one tool call, as in the whole history's export."""
    whole = load(CORPUS / "v0.0.20" / "a_tool_model_retry.json")
    pieces = [whole[0:2], whole[2:4], whole[4:]]
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _records(source, pieces, [2, 0, 1])
    command = ["otel", str(source), str(out), "--version", "6", "--conversation", "session", "--order", "seq"]
    result = runner.invoke(app, command)
    assert result.exit_code == 0, result.output
    assert "3 records exported, 0 rejected" in result.stderr
    first, second, third = _exported(out)
    expected = framework_otel(converted(whole)[0], 6, True)
    assert [*first, *second, *third] == expected
    (call,) = _ids(first, "tool_call")
    assert call.startswith("pyd_ai_")
    assert _ids(second, "tool_call_response") == [call]  # the retried return, under "tool"
    assert [m["role"] for m in second] == ["tool", "assistant"]
    assert _ids(third, "tool_call_response") == _ids(second, "tool_call")


def test_without_conversation_a_piece_keeps_its_null_ids_and_is_rejected_not_given_invented_ones(
    tmp_path: Path,
) -> None:
    """The same records without ``--conversation``: the records that answer calls they do not
    hold are likely fragments (issue 25.3), whose null ids are not derived from their own
    opening; they are rejected, kept in the rejects file as read, and the first record gets no
    result for its open call."""
    whole = load(CORPUS / "v0.0.20" / "a_tool_model_retry.json")
    pieces = [whole[0:2], whole[2:4], whole[4:]]
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _records(source, pieces, [0, 1, 2])
    result = runner.invoke(app, ["otel", str(source), str(out), "--version", "6"])
    assert result.exit_code == 1
    assert "1 records exported, 2 rejected" in result.stderr
    (line,) = [line for line in result.stderr.splitlines() if "in.jsonl:line 2: " in line]
    assert "in.jsonl:line 2: messages[0].parts[0].tool_call_id: Input should be a valid string" in line
    assert line.endswith(
        " (a likely piece of a conversation stored over several records: give --conversation, docs/otel.md)"
    )
    (first,) = _exported(out)
    assert [m["role"] for m in first] == ["user", "assistant"]
    assert _ids(first, "tool_call_response") == []
    assert (tmp_path / "out.jsonl.rejects.jsonl").read_bytes().splitlines() == source.read_bytes().splitlines()[1:]


@pytest.mark.parametrize("grouped", [False, True], ids=["alone", "conversation"])
def test_a_deferred_call_and_its_result_in_the_next_run_s_record_are_exported_as_stored(
    tmp_path: Path, grouped: bool
) -> None:
    """A 2.68 run that stopped for a deferred tool and the run that answered it, a record each:
    alone or as a conversation, the first record's call has no invented result (no interrupted
    return) and the second's result keeps its id; together they are the whole export."""
    whole = load(CORPUS / "v2.68.0" / "m_deferred_tool_model_retry.json")
    pieces = [whole[0:2], whole[2:]]
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    _records(source, pieces, [1, 0])
    grouping = ["--conversation", "session", "--order", "seq"] if grouped else []
    result = runner.invoke(app, ["otel", str(source), str(out), "--version", "6", *grouping])
    assert result.exit_code == 0, result.output
    first, second = _exported(out)
    call = whole[1]["parts"][0]["tool_call_id"]
    assert _ids(first, "tool_call") == [call] and _ids(first, "tool_call_response") == []
    assert _ids(second, "tool_call_response")[0] == call
    assert [*first, *second] == framework_otel(converted(whole)[0], 6, True)


def test_one_record_the_export_cannot_render_rejects_its_conversation_whole(tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    call = {"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": "c1"}
    url = [{"kind": "image-url", "url": "https://e.invalid/x.png"}]
    result_part = {"part_kind": "tool-return", "tool_name": "t", "content": url, "tool_call_id": "c1"}
    pieces = [
        [
            {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]},
            {"kind": "response", "parts": [call]},
        ],
        [{"kind": "request", "parts": [result_part]}],
    ]
    _records(source, pieces, [0, 1])
    other = {"session": "s2", "seq": 0, "messages": [pieces[0][0]]}
    source.write_bytes(source.read_bytes() + orjson.dumps(other) + b"\n")
    command = ["otel", str(source), str(out), "--version", "6", "--conversation", "session", "--order", "seq"]
    result = runner.invoke(app, command)
    assert result.exit_code == 1
    assert "1 records exported, 2 rejected" in result.stderr
    assert "in.jsonl:line 2: messages[0].parts[0].content: a image-url item in a tool result" in result.stderr
    said = f"in.jsonl:line 1: rejected with its conversation (session='s1'): {source}:line 2 cannot be exported"
    assert said in result.stderr
    assert (tmp_path / "out.jsonl.rejects.jsonl").read_bytes().splitlines() == source.read_bytes().splitlines()[:2]
    assert [orjson.loads(line)["session"] for line in out.read_bytes().splitlines()] == ["s2"]


def test_a_record_that_is_one_message_becomes_that_message_s_otel_messages(tmp_path: Path) -> None:
    """A store of one message a row, the row being the message itself: each line becomes the
    OTel array of its message (a request may make several: its roles)."""
    whole = load(CORPUS / "v2.68.0" / "a_tool_model_retry.json")
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(b"".join(orjson.dumps(message) + b"\n" for message in whole))
    result = runner.invoke(app, ["otel", str(source), str(out), "--version", "6", "--conversation", "*"])
    assert result.exit_code == 0, result.output
    lines = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert all(isinstance(line, list) for line in lines)
    assert [m for line in lines for m in line] == framework_otel(converted(whole)[0], 6, True)


def test_a_conversation_key_no_record_holds_is_noted(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(ALL.read_bytes().splitlines()[0] + b"\n")
    result = runner.invoke(app, ["otel", str(source), str(tmp_path / "o.jsonl"), "--conversation", "sesion", "-q"])
    assert result.exit_code == 0
    assert result.stderr == (
        f"histmig: note: {source}: no record holds the conversation key (sesion), so each was a conversation of its "
        "own: is --conversation spelt as the records' field?\n"
    )


def test_otel_upgrade_refuses_conversation(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"[]\n")
    result = runner.invoke(app, ["otel-upgrade", str(source), "-", "--conversation", "s"])
    assert result.exit_code == 2
