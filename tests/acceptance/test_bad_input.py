"""Bad input never crashes a run and never loses a record (issue: bad input, nothing lost)."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from histmig import api
from histmig.cli import app
from histmig.engine import process
from histmig.records import Record
from tests.conftest import CORPUS

runner = CliRunner()
LEGACY = (CORPUS / "all.jsonl").read_bytes().splitlines()[150]
RETRY = {"part_kind": "retry-prompt", "content": "x", "tool_name": None}

BAD_LINES = {
    "invalid JSON": (b'{"id": "a", "messages": [', "invalid JSON"),
    "not a history": (b'{"id": "b", "note": 42}', "no messages field found"),
    "messages not an array": (
        b'{"id": "m", "messages": "no"}',
        "field 'messages' is not an array (if the messages are in another field, name it with --messages-field)",
    ),
    "a scalar": (b"42", "expected a JSON array or object, got a number"),
    "a string": (b'"hi"', "expected a JSON array or object, got a string"),
    "null": (b"null", "expected a JSON array or object, got null"),
    "false": (b"false", "expected a JSON array or object, got false"),
    "non-UTF-8 bytes": (
        b'[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"\xff\xfe","tool_name":null}]}]',
        "invalid JSON",
    ),
    "unknown kind": (
        orjson.dumps([{"kind": "tool-log", "parts": []}, {"kind": "request", "parts": [RETRY]}]),
        "messages[0]",
    ),
    "wrong field types": (
        orjson.dumps([{"kind": "request", "parts": "oops"}, {"kind": "request", "parts": [RETRY]}]),
        "messages[0].parts",
    ),
    "a retry part of the wrong shape": (
        orjson.dumps(
            [
                {
                    "kind": "request",
                    "parts": [{"part_kind": "retry-prompt", "content": 7, "tool_name": "t", "tool_call_id": "c"}],
                }
            ]
        ),
        "messages[0].parts[0].content",
    ),
    "too deeply nested": (b"[" * 2000 + b"]" * 2000, "invalid JSON"),
    "an integer of 5,000 digits": (
        b'[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"x","tool_name":null}],"n":'
        + b"9" * 5000
        + b"}]",
        "an integer of more than 4,300 digits: histmig keeps integers exactly up to 4,300 digits, Python's limit",
    ),
    "a truncated JSON text in a messages field": (
        b'{"id": "t", "messages": "[{\\"kind\\": \\"request\\", \\"parts\\": [{\\"part_kind"}',
        "field 'messages' is truncated JSON text",
    ),
    "a number beyond double range": (
        b'[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"x","tool_name":null}],"n":1e400}]',
        "invalid JSON: number is infinity",
    ),
}


def _mixed(tmp_path: Path) -> tuple[Path, list[bytes]]:
    lines = [LEGACY]
    for bad, _ in BAD_LINES.values():
        lines += [bad, LEGACY]
    source = tmp_path / "mixed.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    return source, lines


def test_every_kind_of_bad_line_is_named_and_kept(tmp_path: Path) -> None:
    source, lines = _mixed(tmp_path)
    out = tmp_path / "out.jsonl"
    report = api.convert(str(source), str(out)).report
    rejects = (tmp_path / "out.jsonl.rejects.jsonl").read_bytes().splitlines()
    written = out.read_bytes().splitlines()
    assert report.counts["records_in"] == len(lines) == len(written) + len(rejects)
    assert rejects == [bad for bad, _ in BAD_LINES.values()]
    assert len(written) == len(BAD_LINES) + 1 and len(set(written)) == 1
    assert [row["location"] for row in report.errors] == [f"line {2 * i + 2}" for i in range(len(BAD_LINES))]
    for row, (name, (_, expected)) in zip(report.errors, BAD_LINES.items()):
        assert row["source"] == str(source)
        assert any(expected in line for line in row["errors"]), (name, row["errors"])


def test_a_record_with_nothing_to_migrate_is_copied_even_with_a_number_orjson_refuses(tmp_path: Path) -> None:
    clean = b'[{"kind":"request","parts":[],"n":1e400}]'
    source = tmp_path / "clean.jsonl"
    source.write_bytes(clean + b"\n")
    out = tmp_path / "out.jsonl"
    converted = api.convert(str(source), str(out)).report
    assert (out.read_bytes(), converted.counts["unchanged"], converted.errors) == (clean + b"\n", 1, [])
    checked = api.check(str(source)).report
    assert checked.counts["rejected"] == 1
    assert "number is infinity" in checked.errors[0]["errors"][0]


def test_the_cli_exits_1_when_anything_is_rejected(tmp_path: Path) -> None:
    source, _ = _mixed(tmp_path)
    result = runner.invoke(app, ["convert", str(source), str(tmp_path / "o.jsonl")])
    assert result.exit_code == 1
    assert f"{source}:line 2: rejected: invalid JSON" in result.stderr


def test_a_rejects_file_of_an_earlier_run_is_kept_and_named(tmp_path: Path) -> None:
    source, _ = _mixed(tmp_path)
    out, rejects = tmp_path / "o.jsonl", tmp_path / "o.jsonl.rejects.jsonl"
    runner.invoke(app, ["convert", str(source), str(out)])
    before = rejects.read_bytes()
    good = tmp_path / "good.jsonl"
    good.write_bytes((CORPUS / "all.jsonl").read_bytes().splitlines(keepends=True)[0])
    result = runner.invoke(app, ["convert", str(good), str(out), "-q"])
    assert result.exit_code == 0
    assert rejects.read_bytes() == before  # never deleted: it may hold the only copy of a record
    assert (
        f"histmig: note: {rejects} already held rejected records of an earlier run; this run wrote no rejected record to it"
        in result.stderr
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"[1\n")
    result = runner.invoke(app, ["convert", str(bad), str(out), "-q"])
    assert result.exit_code == 1
    assert rejects.read_bytes() == before + b"[1\n"  # added after, never replaced
    assert "this run's rejected records were added after them" in result.stderr
    result = runner.invoke(app, ["convert", str(good), str(tmp_path / "other.jsonl"), "-q"])
    assert "note:" not in result.stderr


def test_in_place_runs_add_to_the_rejects_file(tmp_path: Path) -> None:
    archive = tmp_path / "a.jsonl"
    archive.write_bytes(b"[1\n")
    assert runner.invoke(app, ["convert", str(archive), "--in-place", "-q"]).exit_code == 1
    archive.write_bytes(b"[2\n")
    assert runner.invoke(app, ["convert", str(archive), "--in-place", "-q"]).exit_code == 1
    assert (tmp_path / "a.jsonl.rejects.jsonl").read_bytes() == b"[1\n[2\n"
    assert archive.read_bytes() == b""


def test_an_integer_beyond_64_bits_is_kept_exactly() -> None:
    raw = b'{"n":123456789012345678901234567890,"f":0.1,"messages":[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"x","tool_name":null}]}]}'
    outcome = process(Record(raw, "in.jsonl", "line 1"))
    assert outcome.status == "changed"
    assert outcome.output.startswith(b'{"n":123456789012345678901234567890,"f":0.1,"messages":')


def test_an_unknown_part_kind_is_carried_and_warned_about(tmp_path: Path) -> None:
    future = {"part_kind": "hologram", "content": "from a newer release"}
    record = orjson.dumps({"id": "f1", "messages": [{"kind": "request", "parts": [future, RETRY]}]})
    source = tmp_path / "in.jsonl"
    source.write_bytes(record + b"\n")
    out = tmp_path / "out.jsonl"
    report = api.convert(str(source), str(out)).report
    assert report.counts["changed"] == 1 and report.counts["rejected"] == 0
    assert orjson.loads(out.read_bytes())["messages"][0]["parts"][0] == future
    assert report.warnings == [
        {
            "source": str(source),
            "location": "line 1",
            "id": "f1",
            "warnings": ["messages[0].parts[0]: unknown part_kind 'hologram', carried unchanged"],
        }
    ]


def test_a_truncated_gz_keeps_what_was_read_and_says_where_it_stopped(tmp_path: Path) -> None:
    whole = gzip.compress((CORPUS / "all.jsonl").read_bytes())
    source = tmp_path / "cut.jsonl.gz"
    source.write_bytes(whole[: len(whole) // 2])
    out = tmp_path / "out.jsonl"
    report = api.convert(str(source), str(out)).report
    assert report.counts["read_errors"] == 1 and report.failed
    row = report.errors[-1]
    assert row["status"] == "unreadable"
    assert row["location"] == f"after line {report.counts['records_in']}"
    assert 0 < report.counts["records_in"] < 212
    assert len(out.read_bytes().splitlines()) == report.counts["records_in"] - report.counts["rejected"]
    readable = zlib.decompressobj(31).decompress(source.read_bytes())
    cut_short = readable[readable.rfind(b"\n") + 1 :]
    assert cut_short and (tmp_path / "out.jsonl.rejects.jsonl").read_bytes() == cut_short + b"\n"


def test_an_empty_jsonl_file_gives_an_empty_output(tmp_path: Path) -> None:
    source = tmp_path / "empty.jsonl"
    source.write_bytes(b"")
    out = tmp_path / "out.jsonl"
    report = api.convert(str(source), str(out)).report
    assert report.counts["records_in"] == 0 and not report.failed
    assert out.read_bytes() == b""


def test_blank_lines_are_carried(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n" + LEGACY + b"\n\n")
    out = tmp_path / "out.jsonl"
    report = api.convert(str(source), str(out)).report
    assert report.counts["records_in"] == 1
    assert out.read_bytes().split(b"\n")[0] == b"" and out.read_bytes().split(b"\n")[2] == b""


def test_a_100_mb_line(tmp_path: Path) -> None:
    big = "y" * (100 * 1024 * 1024)
    record = orjson.dumps(
        [
            {
                "kind": "request",
                "parts": [{"part_kind": "retry-prompt", "content": big, "tool_name": "t", "tool_call_id": "c"}],
            }
        ]
    )
    source = tmp_path / "big.jsonl"
    source.write_bytes(record + b"\n")
    out = tmp_path / "out.jsonl"
    report = api.convert(str(source), str(out)).report
    assert report.counts["changed"] == 1
    part = orjson.loads(out.read_bytes())[0]["parts"][0]
    assert part["part_kind"] == "tool-return" and len(part["content"]) == len(big)


def test_in_place_replaces_the_input_only_when_complete(tmp_path: Path) -> None:
    source = tmp_path / "chats.jsonl"
    source.write_bytes(LEGACY + b"\n")
    assert runner.invoke(app, ["convert", str(source), "--in-place", "-q"]).exit_code == 0
    assert b"retry-prompt" not in source.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chats.jsonl"]
    assert runner.invoke(app, ["convert", str(source), str(tmp_path / "x"), "--in-place"]).exit_code == 2


def test_a_part_kind_spelled_with_a_unicode_escape_is_still_migrated() -> None:
    raw = (
        b'{"messages":[{"kind":"request","parts":[{"part_kind":"retry\\u002dprompt","content":"x","tool_name":null}]}]}'
    )
    outcome = process(Record(raw, "in.jsonl", "line 1"))
    assert outcome.status == "changed"
    assert [c.rule for c in outcome.changes] == ["HM102"]


def test_bytes_that_are_not_utf8_are_named_with_their_place_in_the_record() -> None:
    raw = b'[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"caf\xe9","tool_name":null}]}]'
    outcome = process(Record(raw, "x.jsonl", "line 1"))
    assert raw.index(b"\xe9") == 70
    assert outcome.errors == ["invalid JSON: not UTF-8: byte 0xe9 at byte 71 of the record"]


def test_a_lone_surrogate_is_named_as_orjson_names_it() -> None:
    raw = (
        b'{"messages":[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"\\ud800","tool_name":null}]}]}'
    )
    outcome = process(Record(raw, "in.jsonl", "line 1"))
    assert (outcome.status, outcome.errors) == (
        "rejected",
        ["invalid JSON: no low surrogate in string at character 80 of the record"],
    )


@pytest.mark.parametrize(
    "depth", [1010, 1500]
)  # orjson reads up to 1024 levels, msgspec as deep as Python's recursion limit
def test_a_record_nested_deeper_than_msgspec_reads_is_rejected_and_says_so(depth: int) -> None:
    raw = (
        b'{"messages":[{"kind":"request","parts":[{"part_kind":"retry-prompt","tool_name":null,"content":'
        + b"[" * depth
        + b"]" * depth
        + b"}]}]}"
    )
    outcome = process(Record(raw, "in.jsonl", "line 1"))
    assert (outcome.status, outcome.errors) == ("rejected", ["invalid JSON: nested deeper than 1000 levels"])
