"""A run's Result (histmig.run.result): the verdict line and exit code made from its report and
what it wrote, and the run recorded in the report."""

from __future__ import annotations

import re
from pathlib import Path

import orjson

from histmig import api
from histmig.engine import process_full
from histmig.options import Options
from histmig.records import Record
from histmig.report import Report
from histmig.run.result import Result, recorded, started_now
from histmig.sources.base import Written
from tests.conftest import CORPUS

LEGACY = next(line for line in (CORPUS / "all.jsonl").read_bytes().splitlines() if b"retry-prompt" in line)


def report_of(*raws: bytes) -> Report:
    """The in-memory report of ``raws``, one record each, as ``convert`` migrates them."""
    report = Report.in_memory()
    for n, raw in enumerate(raws, 1):
        report.add(process_full(Record(raw, "in.jsonl", f"line {n}"), Options().plan()))
    return report


def test_the_verdict_of_each_command() -> None:
    report = report_of(LEGACY, b"{oops")
    convert = Result(
        "convert", "in.jsonl", report, output="out.jsonl", wrote=[Written(rejected="out.jsonl.rejects.jsonl")]
    )
    assert convert.verdict == (
        "histmig convert: 1 of 2 records migrated, 0 unchanged, 1 rejected; written to out.jsonl, rejected records to out.jsonl.rejects.jsonl"
    )
    assert convert.exit_code == 1
    audit = Result("audit", "in.jsonl", report_of(LEGACY))
    assert (audit.verdict, audit.exit_code) == (
        "histmig audit: 1 of 1 records would be migrated, 0 need nothing, 0 would be rejected; nothing was written",
        0,
    )
    in_place = Result(
        "convert", "db.sqlite", report, in_place=True, wrote=[Written(rejected="rows", named="db.sqlite:t")]
    )
    assert in_place.verdict.endswith("; written to db.sqlite:t (in place), rejected rows unchanged")
    rollback = Result("convert", "in.jsonl", report_of(LEGACY), output="-", target="2.59.0")
    assert (
        rollback.verdict
        == "histmig convert: 1 of 1 records rewritten for 2.59.0, 0 unchanged, 0 rejected; written to stdout"
    )


def test_a_run_is_recorded_with_its_options_and_verdict() -> None:
    result = Result("check", "in.jsonl", report_of(LEGACY), inputs=["in.jsonl"])
    started = started_now()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", started)
    options = Options(select=("HM1",), jobs=3)
    recorded(result, options, options.plan(validate_all=True), started, {"strict": False, "engine": "local"})
    run = result.report.run
    assert (run.command, run.inputs, run.started, run.exit_code, run.verdict) == (
        "check",
        ["in.jsonl"],
        started,
        1,
        result.verdict,
    )
    assert "jobs" not in run.options and run.options["select"] == ["HM1"] and run.options["engine"] == "local"
    assert run.options["rules"] == [rule.code for rule in options.rules]


def test_notes_tell_problems_by_their_type_not_their_words() -> None:
    document = b'{"a": 1}\n{"b": 2}\n'
    report = Report.in_memory()
    report.add(process_full(Record(document, "chats.json", "file"), Options().plan()))
    result = Result("audit", "chats.json", report)
    assert result.notes == [
        "chats.json holds more than one JSON document; if it holds one record a line, add --format jsonl"
    ]
    worded = Report.in_memory()  # the same words in a problem of another type are no sign
    outcome = process_full(Record(document, "chats.json", "file"), Options().plan())
    outcome.errors = [str(error) for error in outcome.errors]
    worded.add(outcome)
    assert Result("audit", "chats.json", worded).notes == []


def _parted(tmp_path: Path, seqs: list[int], name: str = "rep.jsonl") -> Path:
    """A JSONL file of one conversation of the corpus (``v2.0.0/j_rich_content``), one message a
    record (``session_id``, ``seq``), of the messages ``seqs``, in that order."""
    whole = next(
        orjson.loads(line)
        for line in (CORPUS / "all.jsonl").read_bytes().splitlines()
        if orjson.loads(line)["id"] == "v2.0.0/j_rich_content"
    )
    path = tmp_path / name
    path.write_bytes(
        b"".join(
            orjson.dumps({"session_id": "s1", "seq": seq, "messages": [whole["messages"][seq]]}) + b"\n" for seq in seqs
        )
    )
    return path


def test_a_fix_not_applied_to_a_conversations_layout_is_a_warning_of_its_rule_not_an_unknown_part(
    tmp_path: Path,
) -> None:
    """Leaving message 2 out, HM406's fix would add a message where a record holds one: a
    warning of HM406, counted with the other warnings the same in the verdict and the summary."""
    path = _parted(tmp_path, [0, 1, 3])
    result = api.check(str(path), Options(conversation=("session_id",), order="seq"))
    assert [row["warnings"] for row in result.report.warnings] == [
        ["HM406 not applied: its fix would add a message where a record holds one (not applicable to this layout)"]
    ]
    assert result.report.summary()["warnings"] == 3  # two HM407 findings of severity warning, the fix not applied
    assert result.verdict == (
        "histmig check: 0 of 3 records to migrate, 0 invalid, 0 rejected, 1 with findings only, 2 current and "
        "valid; 4 findings, 3 warnings"
    )
    strict = api.check(str(path), Options(conversation=("session_id",), order="seq"), strict=True)
    assert (strict.verdict, strict.exit_code) == (result.verdict, result.exit_code)


def test_the_verdict_on_fragments_names_order_when_conversation_was_given(tmp_path: Path) -> None:
    path = _parted(tmp_path, [3, 1, 0])
    said = "2 records look like part of a conversation stored over several records: their tool pairing was not "
    grouped = api.check(str(path), Options(conversation=("session_id",)))
    assert grouped.verdict.endswith(
        f"; {said}repaired and their findings are warnings (their conversations look incomplete or out of order: "
        "give every record of a conversation, and --order COLUMN to sort them)"
    )
    alone = api.check(str(path))
    assert "their findings are warnings (give --conversation COLUMN, or '*' for one conversation an input" in (
        alone.verdict
    )
    assert api.check(str(path), Options(conversation=("session_id",), order="seq")).report.fragments == 0


def test_a_record_without_a_conversation_key_is_told_so_in_a_warning_not_an_unknown_part(tmp_path: Path) -> None:
    path = _parted(tmp_path, [0, 1, 3])
    records = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(records[0].replace(b'"session_id":"s1",', b"") + b"".join(records[1:]))
    result = api.check(str(path), Options(conversation=("session_id",), order="seq"))
    assert result.report.warnings[0]["warnings"] == [
        "no conversation key (session_id missing or null): a conversation of its own"
    ]
    assert result.verdict.startswith("histmig check: all 3 records are current and valid; 7 warnings (see the report)")
    assert result.report.summary()["warnings"] == 7  # six HM407 findings of severity warning, the note


def test_a_note_says_why_unsafe_fixes_left_open_the_last_calls_of_a_record_naming_a_conversation(
    tmp_path: Path,
) -> None:
    """2.60+ writes ``conversation_id`` into every message: HM407 keeps such a record's last
    calls open, and the note says so and how to close them; for a ``.json`` file, which
    ``--conversation`` does not take, how to give it as JSONL. Nothing without the unsafe fix,
    nor for a record another record continues (a fragment: the verdict says so)."""
    document = CORPUS / "captured" / "v2.68.0" / "k_tool_retries_exhausted.json"
    said = (
        "1 record names a conversation (conversation_id, session_id, ... in the record or a column): HM407 left the "
        "calls of the last response open, as another record of it may answer them; give --conversation COLUMN, or "
        "'*' for one conversation an input, to close them where a conversation is whole"
    )
    assert api.audit(str(document), Options(unsafe_fixes=True)).notes == [
        said + " (a .json file is one record, which --conversation does not take: give its history as a line of "
        "JSONL, `jq -c . F.json | histmig convert - OUT.jsonl --conversation '*' --unsafe-fixes`)"
    ]
    assert api.audit(str(document)).notes == []
    line = tmp_path / "one.jsonl"
    line.write_bytes(orjson.dumps(orjson.loads(document.read_bytes())) + b"\n")
    assert api.audit(str(line), Options(unsafe_fixes=True)).notes == [said]
    assert api.audit(str(line), Options(unsafe_fixes=True, conversation=("*",))).notes == []
    prompt = {"part_kind": "user-prompt", "content": "go", "timestamp": "2025-05-01T10:00:00Z"}
    call = {"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": "call_a"}
    done = {"part_kind": "tool-return", "tool_name": "t", "content": "ok", "tool_call_id": "call_a"}
    runs = tmp_path / "runs.jsonl"
    runs.write_bytes(
        orjson.dumps(
            {
                "session_id": "s1",
                "messages": [{"kind": "request", "parts": [prompt]}, {"kind": "response", "parts": [call]}],
            }
        )
        + b"\n"
        + orjson.dumps({"session_id": "s1", "messages": [{"kind": "request", "parts": [done]}]})
        + b"\n"
    )
    continued = api.audit(str(runs), Options(unsafe_fixes=True))
    assert (continued.notes, continued.report.fragments) == ([], 2)
