"""JSONL (histmig.sources.jsonl): chunks of whole lines, on several workers, give the same
bytes, in the same order, and the same report as one; every line is written as read but the
migrated and rejected ones; a truncated input keeps what was read."""

from __future__ import annotations

import gc
import gzip
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from histmig import api
from histmig.cli import app
from histmig.engine import Plan, process
from histmig.errors import InputEnded, UnreadableInput, UsageError
from histmig.options import Options
from histmig.parallel import WINDOW, Slots, Workers
from histmig.records import FieldReader, Grouping, Record, field_path
from histmig.report import Report
from histmig.sources import jsonl
from histmig.sources.base import Destination
from histmig.sources.jsonl import Chunk, Placed
from tests.conftest import CORPUS, without_run
from tests.sources.conftest import ANSWER, CALL, PROMPT, RETRY

runner = CliRunner()


def convert(source: Path, out: Path, jobs: int = 1) -> Report:
    return api.convert(str(source), str(out), Options(jobs=jobs)).report


def _convert_cli(tmp_path: Path, source: Path, jobs: int) -> tuple[bytes, str]:
    out, report = tmp_path / f"out{jobs}.jsonl", tmp_path / f"report{jobs}.json"
    result = runner.invoke(
        app, ["convert", str(source), str(out), "--jobs", str(jobs), "--report", str(report), "--report-format", "json"]
    )
    assert result.exit_code == 0, result.output
    return out.read_bytes(), without_run(orjson.loads(report.read_bytes()))


def test_two_jobs_give_the_same_output_and_report_as_one(tmp_path: Path) -> None:
    source = CORPUS / "all.jsonl"
    assert _convert_cli(tmp_path, source, 2) == _convert_cli(tmp_path, source, 1)


def test_two_jobs_keep_order_across_many_chunks_and_blank_lines(tmp_path: Path) -> None:
    lines = (CORPUS / "all.jsonl").read_bytes().splitlines()
    source = tmp_path / "big.jsonl"
    source.write_bytes(b"\n".join([*lines, b"", b"not json", *lines] * 3) + b"\n")
    one, two = convert(source, tmp_path / "a.jsonl"), convert(source, tmp_path / "b.jsonl", jobs=2)
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert (tmp_path / "a.jsonl.rejects.jsonl").read_bytes() == (tmp_path / "b.jsonl.rejects.jsonl").read_bytes()
    assert without_run(one.to_json()) == without_run(two.to_json())


def test_stdin_redirected_from_a_file_is_read_by_two_jobs(tmp_path: Path) -> None:
    source = CORPUS / "all.jsonl"
    expected, out = tmp_path / "expected.jsonl", tmp_path / "out.jsonl"
    convert(source, expected)
    with source.open("rb") as stdin:  # a regular file named <stdin>: no worker can open it by that name
        done = subprocess.run(
            [sys.executable, "-m", "histmig", "convert", "-", str(out), "--jobs", "2", "-q"],
            stdin=stdin,
            capture_output=True,
            cwd=Path(__file__).parent.parent.parent,
        )
    assert (done.returncode, done.stderr) == (0, b"")
    assert out.read_bytes() == expected.read_bytes()


@settings(max_examples=300)
@given(st.lists(st.sampled_from([b"\n", b"x", b"{}", b"\r\n", b"\n\n"]), max_size=3000), st.integers(1, 5))
def test_count_lines_counts_every_line_end(pieces: list[bytes], find_lines: int) -> None:
    data = b"".join(pieces)
    assert jsonl.count_lines(data) == data.count(b"\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jsonl, "FIND_LINES", find_lines)
        assert jsonl.count_lines(data) == data.count(b"\n")


class _Pipe(io.RawIOBase):
    """A stream that is not a regular file, giving its bytes a few at a time, then maybe an
    error (a truncated ``.gz``)."""

    def __init__(self, data: bytes, step: int, fail: bool) -> None:
        self.data, self.step, self.fail, self.at = data, step, fail, 0

    def readable(self) -> bool:
        return True

    def read1(self, size: int = -1) -> bytes:
        if self.at >= len(self.data) and self.fail:
            raise EOFError("cut short")
        block = self.data[self.at : self.at + min(self.step, size)]
        self.at += len(block)
        return block


@settings(max_examples=200)
@given(
    st.lists(st.sampled_from([b"{}\n", b"\n", b"x" * 40 + b"\n", b"y" * 300, b"z"]), max_size=200),
    st.integers(1, 97),
    st.integers(8, 200),
    st.booleans(),
)
def test_a_stream_is_cut_after_line_ends_and_read_to_its_last_byte(
    pieces: list[bytes], step: int, chunk_bytes: int, fail: bool
) -> None:
    data = b"".join(pieces)
    chunks = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jsonl, "CHUNK_BYTES", chunk_bytes)
        reader = jsonl.read_chunks(_Pipe(data, step, fail), "s")
        if fail:
            with pytest.raises(EOFError):
                chunks.extend(reader)
        else:
            chunks.extend(reader)
    assert b"".join(c.data for c in chunks) == data
    assert all(c.data.endswith(b"\n") for c in chunks[:-1])
    assert [c.first for c in chunks] == [
        1 + b"".join(c.data for c in chunks[:i]).count(b"\n") for i in range(len(chunks))
    ]


def test_two_jobs_on_a_truncated_gz_keep_every_record_read(tmp_path: Path) -> None:
    whole = gzip.compress((CORPUS / "all.jsonl").read_bytes() * 4)
    source = tmp_path / "cut.jsonl.gz"
    source.write_bytes(whole[: len(whole) // 2])
    one, two = convert(source, tmp_path / "a.jsonl"), convert(source, tmp_path / "b.jsonl", jobs=2)
    assert two.counts["read_errors"] == 1
    assert two.errors[-1]["status"] == "unreadable" and two.errors[-1]["location"].startswith("after line ")
    assert without_run(one.to_json()) == without_run(two.to_json())
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


LEGACY_LINE = next(line for line in (CORPUS / "all.jsonl").read_bytes().splitlines() if b"retry-prompt" in line)
CLEAN_LINE = b'{"id":"c","messages":[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi"}]}]}'


def _migrated(line: bytes) -> bytes:
    return process(Record(line, "x", "line 1")).output or b""


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize(
    ("name", "text", "expected_out", "expected_rejects"),
    [
        (
            "last line unchanged, no newline",
            CLEAN_LINE + b"\n\n  \n" + CLEAN_LINE,
            CLEAN_LINE + b"\n\n  \n" + CLEAN_LINE + b"\n",
            None,
        ),
        (
            "last line migrated, no newline",
            CLEAN_LINE + b"\n" + LEGACY_LINE,
            CLEAN_LINE + b"\n" + _migrated(LEGACY_LINE) + b"\n",
            None,
        ),
        ("last line rejected, no newline", CLEAN_LINE + b"\n{oops", CLEAN_LINE + b"\n", b"{oops\n"),
        ("rejected between", b"{oops\n" + CLEAN_LINE + b"\n[1\n", CLEAN_LINE + b"\n", b"{oops\n[1\n"),
        (
            "CRLF lines",
            CLEAN_LINE + b"\r\n" + LEGACY_LINE + b"\r\n",
            CLEAN_LINE + b"\r\n" + _migrated(LEGACY_LINE) + b"\r\n",
            None,
        ),
        (
            "migrated lines in a row, a blank line, a rejected one",
            b"\n".join([LEGACY_LINE, LEGACY_LINE, b"", LEGACY_LINE, b"{oops", LEGACY_LINE, LEGACY_LINE]),
            b"\n".join([_migrated(LEGACY_LINE)] * 2 + [b"", _migrated(LEGACY_LINE)] + [_migrated(LEGACY_LINE)] * 2)
            + b"\n",
            b"{oops\n",
        ),
    ],
)
def test_lines_are_written_as_read_with_migrated_and_rejected_ones_replaced(
    tmp_path: Path, jobs: int, name: str, text: bytes, expected_out: bytes, expected_rejects: bytes | None
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(text)
    out = tmp_path / "out.jsonl"
    convert(source, out, jobs=jobs)
    rejects = tmp_path / "out.jsonl.rejects.jsonl"
    assert out.read_bytes() == expected_out
    assert (rejects.read_bytes() if rejects.exists() else None) == expected_rejects


def test_migrated_records_on_consecutive_lines_make_one_edit() -> None:
    data = (
        b"\n".join([LEGACY_LINE, LEGACY_LINE, CLEAN_LINE, LEGACY_LINE, b"{oops", LEGACY_LINE, LEGACY_LINE, LEGACY_LINE])
        + b"\n"
    )
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    result = Chunk(data, 1, "x").run(Plan(), None)
    migrated = _migrated(LEGACY_LINE)
    assert result.edits == [
        (starts[0], starts[2] - 1, migrated + b"\n" + migrated),
        (starts[3], starts[4] - 1, migrated),
        (starts[4], starts[5] - 1, None),
        (starts[5], starts[8] - 1, b"\n".join([migrated] * 3)),
    ]
    assert result.last == "line 8"


def test_migrated_records_go_into_the_chunk_slot_when_they_fit() -> None:
    data = b"\n".join([LEGACY_LINE, LEGACY_LINE, b"{oops", CLEAN_LINE, LEGACY_LINE]) + b"\n"
    migrated = _migrated(LEGACY_LINE)
    slots = Slots(2, jsonl.SLOT_BYTES)
    result = Chunk(data, 1, "x").run(Plan(), slots.view(1))
    placed = [new for _, _, new in result.edits]
    assert placed == [Placed(0, 2 * len(migrated) + 1), None, Placed(2 * len(migrated) + 1, len(migrated))]
    assert slots.view(1)[: 3 * len(migrated) + 1].tobytes() == migrated + b"\n" + migrated + migrated
    assert slots.view(0).tobytes() == bytes(jsonl.SLOT_BYTES)
    assert [edit[:2] for edit in result.edits] == [edit[:2] for edit in Chunk(data, 1, "x").run(Plan(), None).edits]
    assert [edit[2] for edit in jsonl.placed(result.edits, slots.view(1))] == [
        migrated + b"\n" + migrated,
        None,
        migrated,
    ]


def test_migrated_records_that_do_not_fit_the_slot_cross_the_pipe() -> None:
    data = LEGACY_LINE + b"\n" + LEGACY_LINE + b"\n"
    result = Chunk(data, 1, "x").run(Plan(), Slots(1, len(LEGACY_LINE)).view(0))
    assert result.edits == [(0, len(data) - 1, _migrated(LEGACY_LINE) + b"\n" + _migrated(LEGACY_LINE))]


@pytest.mark.parametrize(("jobs", "in_slots"), [(2, True), (5, False)])
def test_jobs_reuse_slots_over_many_chunks_without_mixing_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int, in_slots: bool
) -> None:
    monkeypatch.setattr(jsonl, "CHUNK_BYTES", 4096)
    lines = (CORPUS / "all.jsonl").read_bytes().splitlines()
    source = tmp_path / "many.jsonl"
    source.write_bytes(b"\n".join(lines * 2) + b"\n")
    with source.open("rb") as stream:
        chunks = list(jsonl.read_chunks(stream, str(source)))
    assert len(chunks) > 4 * WINDOW * jobs
    plan = Plan()
    with Workers(lambda task, slot: task.run(plan, slot), jobs, slot_bytes=jsonl.SLOT_BYTES) as workers:
        kinds = {
            type(new)
            for _, result, _ in workers.map(iter(chunks), message=lambda chunk: chunk.sent())
            for *_, new in result.edits
            if new is not None
        }
    assert kinds == ({Placed} if in_slots else {bytes})
    one, many = convert(source, tmp_path / "a.jsonl"), convert(source, tmp_path / "b.jsonl", jobs=jobs)
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert without_run(one.to_json()) == without_run(many.to_json())


def test_without_a_rejects_file_a_rejected_line_stays_in_place(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"{oops\n" + LEGACY_LINE + b"\n[1")
    result = runner.invoke(app, ["convert", str(source), "-", "-q"])
    assert result.stdout_bytes == b"{oops\n" + _migrated(LEGACY_LINE) + b"\n[1\n"


def test_a_file_replaced_while_it_is_read_is_not_read_by_path(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(CLEAN_LINE + b"\n")
    with source.open("rb") as stream:
        (chunk,) = jsonl.read_chunks(stream, str(source))
    source.rename(tmp_path / "in.jsonl.1")  # rotated away, as a log is
    source.write_bytes(LEGACY_LINE + b"\n")
    with pytest.raises(OSError, match="the file was replaced while it was read"):
        chunk.sent().load()


ALL_LINES = (CORPUS / "all.jsonl").read_bytes().splitlines()


def _envelopes(tmp_path: Path, make) -> Path:
    import orjson

    source = tmp_path / "odd.jsonl"
    source.write_bytes(b"".join(orjson.dumps(make(orjson.loads(line))) + b"\n" for line in ALL_LINES))
    return source


@pytest.mark.parametrize("key", ["chat-history", "chat history", "payload.msgs"])
@pytest.mark.parametrize("named", [False, True])
def test_envelope_field_names_that_are_not_identifiers_convert(tmp_path: Path, key: str, named: bool) -> None:
    source = _envelopes(tmp_path, lambda record: {"id": record["id"], key: record["messages"]})
    args = ["--messages-field", key.replace(".", "\\.")] if named else []
    result = runner.invoke(app, ["convert", str(source), str(tmp_path / "out.jsonl"), "-q", *args])
    assert result.exit_code == 0, result.output
    checked = runner.invoke(app, ["check", str(tmp_path / "out.jsonl"), *args])
    assert checked.exit_code == 0 and "all 212 records are current and valid" in checked.stderr


def test_messages_held_as_json_text_convert_and_stay_text(tmp_path: Path) -> None:
    import orjson

    source = _envelopes(
        tmp_path, lambda record: {"id": record["id"], "messages": orjson.dumps(record["messages"]).decode()}
    )
    out = tmp_path / "out.jsonl"
    report = api.convert(str(source), str(out)).report
    assert report.counts["changed"] == 138 and report.counts["unchanged"] == 74 and report.counts["rejected"] == 0
    lines_in, lines_out = source.read_bytes().splitlines(), out.read_bytes().splitlines()
    assert sum(a == b for a, b in zip(lines_in, lines_out)) == 74
    assert all(isinstance(orjson.loads(line)["messages"], str) for line in lines_out)
    plain = tmp_path / "plain.jsonl"
    api.convert(str(CORPUS / "all.jsonl"), str(plain))
    assert [orjson.loads(orjson.loads(line)["messages"]) for line in lines_out] == [
        orjson.loads(line)["messages"] for line in plain.read_bytes().splitlines()
    ]
    assert (
        api.check(str(out)).verdict
        == "histmig check: all 212 records are current and valid; 6 warnings (see the report)"
    )


def test_a_nested_messages_field_converts(tmp_path: Path) -> None:
    source = _envelopes(tmp_path, lambda record: {"id": record["id"], "payload": {"messages": record["messages"]}})
    out = tmp_path / "out.jsonl"
    assert (
        api.convert(str(source), str(out), Options(messages_field="payload.messages")).report.counts["changed"] == 138
    )
    assert api.check(str(out), Options(messages_field="payload.messages")).exit_code == 0


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_byte_order_mark_and_crlf_line_ends_are_kept(tmp_path: Path, jobs: int) -> None:
    source, out, plain = tmp_path / "win.jsonl", tmp_path / "out.jsonl", tmp_path / "plain.jsonl"
    source.write_bytes(jsonl.BOM + b"\r\n".join(ALL_LINES) + b"\r\n")
    report = api.convert(str(source), str(out), Options(jobs=jobs)).report
    assert (report.counts["changed"], report.counts["unchanged"], report.counts["rejected"]) == (138, 74, 0)
    api.convert(str(CORPUS / "all.jsonl"), str(plain))
    written = out.read_bytes()
    assert written.startswith(jsonl.BOM) and written.count(b"\r\n") == written.count(b"\n") == 212
    assert written[len(jsonl.BOM) :].replace(b"\r\n", b"\n") == plain.read_bytes()


def test_a_rejected_crlf_line_moves_with_its_line_end_and_a_last_line_gets_the_files_convention(tmp_path: Path) -> None:
    source, out = tmp_path / "win.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(ALL_LINES[-1] + b"\r\n{bad\r\n" + ALL_LINES[-2])
    assert api.convert(str(source), str(out)).exit_code == 1
    assert out.read_bytes() == ALL_LINES[-1] + b"\r\n" + ALL_LINES[-2] + b"\r\n"
    assert (tmp_path / "out.jsonl.rejects.jsonl").read_bytes() == b"{bad\r\n"


APPENDED = (CORPUS / "all.jsonl").read_bytes().splitlines(keepends=True)[0]
"""A record an application appends while a run rewrites the file in place."""


def _appending_before_the_rename(monkeypatch: pytest.MonkeyPatch, source: Path) -> None:
    """An application appends a record to ``source`` once the run has read it to its end
    and written every chunk, just before the rename."""
    real = jsonl.LinesInput.__exit__

    def exit(self: jsonl.LinesInput, *args: object) -> None:
        with open(source, "ab") as application:
            application.write(APPENDED)
        real(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(jsonl.LinesInput, "__exit__", exit)


@pytest.mark.parametrize("jobs", [1, 2])
def test_in_place_keeps_an_input_appended_to_during_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    source, expected = tmp_path / "chats.jsonl", tmp_path / "expected.jsonl"
    source.write_bytes((CORPUS / "all.jsonl").read_bytes())
    api.convert(str(source), str(expected), Options(jobs=1))
    _appending_before_the_rename(monkeypatch, source)
    result = api.convert(str(source), in_place=True, options=Options(jobs=jobs))
    kept = tmp_path / "chats.migrated.jsonl"
    assert source.read_bytes() == (CORPUS / "all.jsonl").read_bytes() + APPENDED
    assert kept.read_bytes() == expected.read_bytes()
    assert result.exit_code == 1 and result.wrote[0].kept == str(kept)
    size = (CORPUS / "all.jsonl").stat().st_size
    assert result.warnings == [
        f"{source}: changed while histmig read it (its size went from {size:,} to {size + len(APPENDED):,} bytes): "
        f"it is kept as it is, and the migrated copy of what was read is {kept}"
    ]
    assert result.verdict.endswith(
        f"written to {source} (in place) but {source} changed while histmig read it: kept as it was, "
        "the migrated copy beside it (see the warning)"
    )
    assert result.report.counts["records_in"] == 212
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chats.jsonl", "chats.migrated.jsonl", "expected.jsonl"]


def test_in_place_on_a_link_migrates_the_file_it_points_to_and_keeps_the_link(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    real, link, expected = tmp_path / "data" / "chats.jsonl", tmp_path / "chats.jsonl", tmp_path / "expected.jsonl"
    real.write_bytes((CORPUS / "all.jsonl").read_bytes())
    link.symlink_to("data/chats.jsonl")
    api.convert(str(real), str(expected), Options(jobs=1))
    result = api.convert(str(link), in_place=True, options=Options(jobs=1))
    assert result.exit_code == 0 and result.report.counts["changed"] == 138
    assert link.is_symlink() and os.readlink(link) == "data/chats.jsonl"
    assert real.read_bytes() == expected.read_bytes()
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["chats.jsonl"]


# ------------------------------------------------------------ records grouped into conversations (issue 25)


def _lines_of(*records: dict) -> bytes:
    return b"".join(orjson.dumps(record) + b"\n" for record in records)


GROUPED = Options(conversation=("chat.id",), order="n", jobs=1)


def test_a_conversation_far_apart_in_a_file_is_judged_whole_from_stdin_or_gz(tmp_path: Path) -> None:
    data = _lines_of(
        {"chat": {"id": "b"}, "n": 1, "messages": [RETRY, ANSWER]},
        {"chat": {"id": "a"}, "n": 0, "messages": [PROMPT, ANSWER]},
        {"chat": {"id": "b"}, "n": 0, "messages": [PROMPT, CALL]},
    )
    expected = process(Record(orjson.dumps([PROMPT, CALL, RETRY, ANSWER]), "x", "line 1"), Plan())
    for name, stored in (("chats.jsonl", data), ("chats.jsonl.gz", gzip.compress(data))):
        path = tmp_path / name
        path.write_bytes(stored)
        result = api.convert(str(path), str(tmp_path / f"out-{name}"), GROUPED)
        written = (tmp_path / f"out-{name}").read_bytes()
        out = [
            orjson.loads(line) for line in (gzip.decompress(written) if name.endswith(".gz") else written).splitlines()
        ]
        assert [(r["chat"]["id"], r["n"]) for r in out] == [("b", 1), ("a", 0), ("b", 0)]  # the input's line order
        assert out[2]["messages"] + out[0]["messages"] == orjson.loads(expected.output)
        assert out[1]["messages"] == [PROMPT, ANSWER]
        assert [(row["location"], row["rule"]) for row in result.report.changes] == [("line 1", "HM101")]
    result = runner.invoke(app, ["convert", "-", "-", "--conversation", "chat.id", "--order", "n", "-q"], input=data)
    assert result.exit_code == 0 and result.stdout_bytes.splitlines()[1] == data.splitlines()[1]
    assert orjson.loads(result.stdout_bytes.splitlines()[0])["messages"][0]["parts"][0]["part_kind"] == "tool-return"


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_gz_input_that_cannot_be_copied_aside_keeps_the_input_and_the_output_there_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: BaseException
) -> None:
    """A ``.gz`` input is copied to a temporary file before it is indexed; when that copy
    fails (a full TMPDIR, Ctrl-C), the output opened before it is discarded: in place, the
    archive is kept as it was, and an OUTPUT there before keeps its bytes."""
    data = gzip.compress(_lines_of({"chat": {"id": "b"}, "n": 0, "messages": [PROMPT, CALL, RETRY, ANSWER]}))
    archive, output = tmp_path / "chats.jsonl.gz", tmp_path / "out.jsonl"
    archive.write_bytes(data)
    output.write_bytes(b"there before\n")

    def full(*args: object, **kwargs: object) -> None:
        raise failure

    monkeypatch.setattr(jsonl, "worker_readable", full)
    for destination in ({"in_place": True}, {"output": str(output)}):
        with pytest.raises(type(failure)):
            if "output" in destination:
                api.convert(str(archive), str(output), GROUPED)
            else:
                api.convert(str(archive), None, GROUPED, in_place=True)
        assert archive.read_bytes() == data and output.read_bytes() == b"there before\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chats.jsonl.gz", "out.jsonl"]


def test_a_conversation_past_the_limit_is_rejected_whole_and_a_record_without_a_key_is_its_own(tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    data = _lines_of(
        {"chat": {"id": "b"}, "n": 1, "messages": [RETRY, ANSWER]},
        {"chat": {}, "n": 0, "messages": [PROMPT, ANSWER]},
        {"chat": {"id": "b"}, "n": 0, "messages": [PROMPT, CALL]},
    )
    path.write_bytes(data)
    result = api.convert(
        str(path),
        str(tmp_path / "out.jsonl"),
        Options(conversation=("chat.id",), order="n", max_conversation_bytes=300),
    )
    assert (tmp_path / "out.jsonl").read_bytes() == data.splitlines(keepends=True)[1]
    assert (tmp_path / "out.jsonl.rejects.jsonl").read_bytes() == b"".join(data.splitlines(keepends=True)[::2])
    assert [(row["location"], row["status"]) for row in result.report.errors] == [
        ("line 3", "rejected"),  # a conversation's records in its order
        ("line 1", "rejected"),
    ]
    assert result.report.errors[0]["errors"][0].startswith("conversation chat.id='b' holds ")
    assert result.report.errors[0]["errors"][0].endswith(
        "past --max-conversation-bytes 300: rejected whole, nothing written for it"
    )
    assert [(row["location"], row["warnings"]) for row in result.report.warnings] == [
        ("line 2", ["no conversation key (chat.id missing or null): a conversation of its own"])
    ]


def test_a_conversation_key_no_record_holds_is_noted_as_maybe_misspelt(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_bytes(_lines_of({"session_id": "s", "messages": [PROMPT, CALL]}, [RETRY, ANSWER]))
    result = api.audit(str(path), Options(conversation=("sesion_id",)))
    assert result.notes == [
        f"{path}: no record holds the conversation key (sesion_id), so each was a conversation of its own: "
        "is --conversation spelt as the records' field?"
    ]
    assert [(row["location"], row["warnings"]) for row in result.report.warnings] == [
        (f"line {n}", ["no conversation key (sesion_id missing or null): a conversation of its own"]) for n in (1, 2)
    ]  # the bare history of line 2 holds no key either
    path.write_bytes(_lines_of({"session_id": "s", "messages": [PROMPT, CALL]}, {"messages": [RETRY, ANSWER]}))
    assert api.audit(str(path), Options(conversation=("session_id",))).notes == []  # one record holds it
    path.write_bytes(b"".join(orjson.dumps(history) + b"\n" for history in ([PROMPT, CALL], [RETRY, ANSWER])))
    bare = api.audit(str(path), Options(conversation=("session_id",)))  # bare histories hold no key at all
    assert [note.split(":")[1] for note in bare.notes] == [
        " no record holds the conversation key (session_id), so each was a conversation of its own"
    ]


def test_an_order_field_no_record_holds_is_noted_as_maybe_misspelt(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_bytes(
        _lines_of({"sid": "s", "seq": 1, "messages": [RETRY, ANSWER]}, {"sid": "s", "seq": 0, "messages": [PROMPT]})
    )
    result = api.audit(str(path), Options(conversation=("sid",), order="sq"))
    assert result.notes == [
        f"{path}: no record holds the order field (sq), so each conversation's records were taken in line order: "
        "is --order spelt as the records' field?"
    ]
    assert api.audit(str(path), Options(conversation=("sid",), order="seq")).notes == []


def test_records_without_an_order_value_go_last_and_are_counted_in_a_note(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_bytes(
        _lines_of(
            {"sid": "s", "messages": [ANSWER]},
            {"sid": "s", "seq": 1, "messages": [CALL, RETRY]},
            {"sid": "s", "seq": None, "messages": [ANSWER]},
            {"sid": "s", "seq": 0, "messages": [PROMPT]},
        )
    )
    result = api.convert(str(path), str(tmp_path / "out.jsonl"), Options(conversation=("sid",), order="seq"))
    assert result.notes == [
        f"{path}: 2 record(s) hold no order value (seq missing or null): each was taken after the records of its "
        "conversation that hold one"
    ]
    assert [(row["location"], row["rule"]) for row in result.report.changes] == [("line 2", "HM101")]


def test_a_record_a_message_may_hold_it_in_a_field_of_its_own(tmp_path: Path) -> None:
    """``{"sid": .., "seq": .., "message": {...}}``: each line's message is found in its field
    (or the field ``--messages-field`` names) and written back there, as the same messages in a
    one-item ``messages`` list are."""
    history = [PROMPT, CALL, RETRY, ANSWER]
    order = [2, 0, 3, 1]
    held, listed = tmp_path / "held.jsonl", tmp_path / "listed.jsonl"
    held.write_bytes(_lines_of(*({"sid": "s", "seq": n, "message": history[n]} for n in order)))
    listed.write_bytes(_lines_of(*({"sid": "s", "seq": n, "messages": [history[n]]} for n in order)))
    grouped = Options(conversation=("sid",), order="seq")
    api.convert(str(listed), str(tmp_path / "listed.out"), grouped)
    expected = [orjson.loads(line)["messages"] for line in (tmp_path / "listed.out").read_bytes().splitlines()]
    for options in (grouped, Options(conversation=("sid",), order="seq", messages_field="message")):
        result = api.convert(str(held), str(tmp_path / "held.out"), options)
        out = [orjson.loads(line) for line in (tmp_path / "held.out").read_bytes().splitlines()]
        assert [[record["message"]] for record in out] == expected and result.exit_code == 0
        assert [row["rule"] for row in result.report.changes] == ["HM101"]


def test_a_format_that_does_not_group_refuses_conversation(tmp_path: Path) -> None:
    path = tmp_path / "chats.json"
    path.write_bytes(b"[]")
    with pytest.raises(
        UsageError,
        match="--conversation does not apply to a JSON input \\(only to a DuckDB, JSONL, Parquet, PostgreSQL or SQLite one\\)",
    ):
        api.audit(str(path), Options(conversation=("session_id",)))


def test_conversation_takes_one_input_whose_records_it_groups(tmp_path: Path) -> None:
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / name).write_bytes(_lines_of({"chat": {"id": "a"}, "n": 0, "messages": [PROMPT, ANSWER]}))
    with pytest.raises(UsageError, match="--conversation groups the records of one input"):
        api.audit(str(tmp_path), GROUPED)


def test_the_whole_file_is_one_conversation_with_a_star(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_bytes(_lines_of([PROMPT, CALL], [RETRY, ANSWER]))
    apart = api.convert(str(path), str(tmp_path / "apart.jsonl"), Options())  # each line alone: pieces
    assert apart.report.fragments == 2  # the second starts with a result, of the call the first leaves open
    result = api.convert(str(path), str(tmp_path / "out.jsonl"), Options(conversation=("*",)))
    out = [orjson.loads(line) for line in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    whole = process(Record(orjson.dumps([PROMPT, CALL, RETRY, ANSWER]), "x", "line 1"), Plan())
    assert out[0] + out[1] == orjson.loads(whole.output) and out[0] == [PROMPT, CALL]
    assert [(row["location"], row["rule"]) for row in result.report.changes] == [("line 2", "HM101")]


def test_in_place_a_grouped_file_is_rewritten_as_its_output_would_be(tmp_path: Path) -> None:
    data = _lines_of(
        {"chat": {"id": "b"}, "n": 1, "messages": [RETRY, ANSWER]},
        {"chat": {"id": "b"}, "n": 0, "messages": [PROMPT, CALL]},
    )
    source = tmp_path / "chats.jsonl"
    source.write_bytes(data)
    api.convert(str(source), str(tmp_path / "out.jsonl"), GROUPED)
    result = api.convert(str(source), in_place=True, options=GROUPED)
    assert result.exit_code == 0 and source.read_bytes() == (tmp_path / "out.jsonl").read_bytes() != data


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 6), st.sampled_from(["prompt", "call", "retry", "answer", "bad"])),
        min_size=1,
        max_size=40,
    ),
    st.randoms(use_true_random=False),
    st.booleans(),
)
def test_a_grouped_output_written_as_tasks_come_is_the_one_written_at_the_end(
    records: list[tuple[int, str]], shuffle: Any, last_line_end: bool
) -> None:
    """The output of a grouped file of many tasks (written as far as the migrated conversations
    reach, as each task's result comes) equals that of one task (written at the end): the same
    lines, in the input's order, the rejected ones moved to the rejects alike."""
    messages = {"prompt": [PROMPT], "call": [CALL], "retry": [RETRY], "answer": [ANSWER]}
    lines = [
        b"{oops" if kind == "bad" else orjson.dumps({"chat": {"id": f"c{chat}"}, "n": n, "messages": messages[kind]})
        for n, (chat, kind) in enumerate(records)
    ]
    shuffle.shuffle(lines)
    data = b"\n".join(lines) + (b"\n" if last_line_end else b"")
    written = []
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "chats.jsonl"
        source.write_bytes(data)
        for chunk_bytes in (1 << 20, 64):
            out = Path(tmp) / f"out{chunk_bytes}.jsonl"
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(jsonl, "CHUNK_BYTES", chunk_bytes)
                api.convert(str(source), str(out), GROUPED)
            rejects = Path(f"{out}.rejects.jsonl")
            written.append((out.read_bytes(), rejects.read_bytes() if rejects.exists() else None))
    assert written[1] == written[0]
    bad = lines.count(b"{oops")
    assert len(written[0][0].splitlines()) == len(lines) - bad
    assert written[0][1] == (b"{oops\n" * bad or None)


_INDEXED = [
    {"chat": {"id": "b"}, "n": 1, "messages": [RETRY]},
    {"chat": {"id": "a"}, "n": "x", "messages": []},
    {"chat": {"id": 7}, "n": 2.5},
    {"chat": {}, "n": None},
    {"n": [1]},
    {"chat": {"id": "b"}, "n": 0, "messages": [PROMPT, CALL]},
]


@pytest.mark.parametrize(
    ("data", "first", "in_one_go"),
    [
        (_lines_of(*_INDEXED), 1, True),
        (_lines_of(*_INDEXED)[:-1], 5, True),  # a last line without its end
        (_lines_of(*_INDEXED[:2]) + b"\n  \n" + _lines_of(*_INDEXED[2:]), 1, False),  # blank lines
        (_lines_of(*_INDEXED).replace(b"\n", b"\r\n"), 1, False),
        (jsonl.BOM + _lines_of(*_INDEXED), 1, False),
        (jsonl.BOM + _lines_of(*_INDEXED), 2, False),  # not the file's start: a line that is no JSON
        (b'{"chat":{"id":"a"},"n":0} {"chat":{"id":"b"},"n":1}\n\n' + _lines_of(*_INDEXED), 1, False),  # two a line
        (_lines_of(*_INDEXED[:3]) + b"{oops\n[1, 2]\n" + b'{"chat": 5}\n', 1, False),
    ],
)
def test_the_index_reads_a_chunk_in_one_go_as_it_reads_it_a_line_at_a_time(
    data: bytes, first: int, in_one_go: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the index of a file grouped into conversations takes of each record (its
    conversation key and order value, place, line number and bytes) is the same whether the
    chunk's lines are decoded in one go or each alone; a chunk with a blank line, ``\\r``, a
    byte-order mark or a line that does not decode alone is read a line at a time."""
    read = FieldReader((("chat", "id"), ("n",)))
    chunk = Chunk(data, first, "x.jsonl", ("x.jsonl", 0, 0), 1000)
    went = []
    lines = FieldReader.lines
    monkeypatch.setattr(FieldReader, "lines", lambda self, raws: went.append(lines(self, raws)) or went[-1])
    indexed = list(zip(*jsonl._indexed(chunk, read)))
    assert (bool(went) and went[-1] is not None) == in_one_go
    monkeypatch.setattr(FieldReader, "lines", lambda self, raws: None)
    assert indexed == list(zip(*jsonl._indexed(chunk, read)))
    for found, start, length, number, raw in indexed:
        assert data[start - 1000 : start - 1000 + length] == raw and found == read(raw)
        assert number == first + data[: start - 1000].count(b"\n")
    assert len(indexed) == len([line for line in data.splitlines() if line.strip()])


@pytest.mark.parametrize("enabled", [True, False])
def test_the_index_pauses_the_cycle_collector_and_leaves_it_as_it_was(enabled: bool) -> None:
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        with pytest.raises(InputEnded), jsonl._cycles_not_collected(freeze=True):
            assert not gc.isenabled()
            raise InputEnded("a read failed within")
        assert gc.isenabled() == enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_the_index_is_set_aside_from_the_collector_while_its_tasks_go(tmp_path: Path) -> None:
    """Once a grouped file is indexed, the collections that its tasks' results set off do
    not walk the index: every object then tracked is frozen (the index's keys among them)
    until the last task is handed out, and given back then, as after an index that fails."""
    path = tmp_path / "chats.jsonl"
    path.write_bytes(
        b"".join(orjson.dumps({"s": f"c{i % 7}", "n": i, "messages": [PROMPT]}) + b"\n" for i in range(500))
    )
    before = gc.get_freeze_count()
    grouped = jsonl.GroupedLines(str(path), Destination(), path.stat().st_size, Grouping(("s",), "n"))
    with grouped:
        tasks = grouped.tasks()
        first = next(tasks)
        assert gc.get_freeze_count() >= before + 500
        rest = list(tasks)
    assert gc.get_freeze_count() == before
    assert sorted(name for task in (first, *rest) for name in task.names) == sorted(f"s='c{i}'" for i in range(7))
    assert [number for task in (first, *rest) for number in task.lines.numbers][:3] == [1, 8, 15]
    path.write_bytes(b"")
    with jsonl.GroupedLines(str(path), Destination(), 0, Grouping(("s",), "n")) as empty:
        assert list(empty.tasks()) == []
    assert gc.get_freeze_count() == before


def test_objects_the_program_froze_itself_stay_frozen(tmp_path: Path) -> None:
    """A program running histmig that froze objects of its own (``gc.freeze()``, as a server
    does before it forks) finds them frozen after a grouped file: histmig then freezes nothing."""
    path = tmp_path / "chats.jsonl"
    path.write_bytes(b"".join(orjson.dumps({"s": "c", "n": i, "messages": [PROMPT]}) + b"\n" for i in range(50)))
    gc.freeze()
    try:
        held = gc.get_freeze_count()
        with jsonl.GroupedLines(str(path), Destination(), path.stat().st_size, Grouping(("s",), "n")) as grouped:
            assert len(list(grouped.tasks())) == 1
        # neither unfrozen (0) nor frozen more (the index's objects); a frozen object freed meanwhile counts one less
        assert held // 2 < gc.get_freeze_count() <= held
    finally:
        gc.unfreeze()


def _index_of(grouping: Grouping, *chunks: list[bytes]) -> tuple[jsonl.GroupIndex, list[tuple[str, str | None, list]]]:
    """``chunks`` of a file's lines (numbered from 1, the line ``n`` at byte ``1000 * n``)
    indexed, and each conversation as the index gives it back: its name, note and lines'
    numbers (each line checked to be its own place)."""
    index = jsonl.GroupIndex(grouping)
    read = FieldReader(grouping.paths + ((field_path(grouping.order),) if grouping.order is not None else ()))
    number, lengths = 1, {}
    for chunk in chunks:
        rows = []
        for raw in chunk:
            rows.append((read(raw), 1000 * number, len(raw), number, raw))
            lengths[number] = len(raw)
            number += 1
        index.add(*zip(*rows))
    conversations = []
    begin = 0
    for name, note, end, held in index.conversations():
        lines = list(zip(*index.lines.cut(begin, end)))
        assert all(line == (1000 * line[2], lengths[line[2]], line[2]) for line in lines)
        assert held == sum(line[1] for line in lines)
        conversations.append((name, note, [line[2] for line in lines]))
        begin = end
    assert begin == len(index.lines.numbers)
    return index, conversations


@pytest.mark.parametrize("ints_first", [True, False])
def test_the_index_sorts_every_kind_of_order_value_as_sort_key_does_ties_by_line(ints_first: bool) -> None:
    """Numbers (ints, floats, ints past 64 bits, 1 and 1.0 equal), then texts, then other
    JSON by its text, then none; a tie by line; ints in an array until a chunk holds other
    values (or one past 64 bits), then every value ranked."""
    values = [b"3", b"1", b"1.0", b"1.5", b'"b"', str(2**70).encode(), b'{"x":1}', None, b'"a"', b"[0]", b"true"]
    values.append(str(-(2**70)).encode())
    lines = [b'{"s":"c"' + (b"" if value is None else b',"n":' + value) + b"}" for value in values]
    chunks = [lines[:2], lines[2:]] if ints_first else [lines[5:6] + lines[:1], lines[6:]]
    index, conversations = _index_of(Grouping(("s",), "n"), *chunks)
    if ints_first:
        assert conversations == [("s='c'", None, [12, 2, 3, 4, 1, 6, 9, 5, 10, 11, 7, 8])]
    else:  # a first chunk of ints, 2**70 and 3, past 64 bits
        assert conversations == [("s='c'", None, [8, 2, 1, 5, 6, 7, 3, 4])]
    assert index.ordered and not index.keyless


def test_the_index_of_int_order_values_is_an_array_and_ties_go_by_line() -> None:
    lines = [b'{"s":"a","n":%d}' % n for n in (2, 0, 2, 1, 0)]
    lines[2] = b'{"s":"b","n":-5}'
    index, conversations = _index_of(Grouping(("s",), "n"), lines[:3], lines[3:])
    assert conversations == [("s='a'", None, [2, 5, 4, 1]), ("s='b'", None, [3])]
    assert index.ordered


def test_the_index_without_an_order_keeps_line_order_and_notes_an_order_no_record_holds() -> None:
    lines = [b'{"s":"a","n":1}', b'{"s":"b"}', b'{"s":"a","n":0}']
    assert _index_of(Grouping(("s",)), lines)[1] == [("s='a'", None, [1, 3]), ("s='b'", None, [2])]
    index, conversations = _index_of(Grouping(("s",), "m"), lines)
    assert conversations == [("s='a'", None, [1, 3]), ("s='b'", None, [2])] and not index.ordered


def test_the_index_keys_texts_other_values_and_records_without_a_key_apart() -> None:
    """A text key is its own (``"[1]"`` is not the number 1's JSON text); a record without a
    key (missing, null, no object, no JSON) is a conversation of its own, named by its line,
    noted when it is a JSON object or array; conversations go in their order of first appearance, a
    conversation's lines far apart (other chunks) included."""
    missing = "no conversation key (s missing or null): a conversation of its own"
    chunks = (
        [b'{"s":"x","n":1}', b'{"n":0}', b'{"s":1,"n":0}', b"[1, 2]"],
        [b'{"s":"[1]","n":0}', b'{"s":[1],"n":0}', b"nope", b'{"s":null}'],
        [b'{"s":1.0,"n":-1}', b'{"s":"x","n":0}', b'{"s":1,"n":1}'],
    )
    index, conversations = _index_of(Grouping(("s",), "n"), *chunks)
    assert conversations == [
        ("s='x'", None, [10, 1]),
        ("line 2", missing, [2]),
        ("s=1", None, [3, 11]),
        ("line 4", missing, [4]),  # an array, a bare history: it holds no key
        ("s='[1]'", None, [5]),
        ("s=[1]", None, [6]),
        ("line 7", None, [7]),
        ("line 8", missing, [8]),
        ("s=1.0", None, [9]),
    ]
    assert not index.keyless


def test_the_index_of_a_composite_key_and_of_a_key_no_record_holds() -> None:
    lines = [b'{"a":"x","b":"y","n":1}', b'{"a":"x","b":1}', b'{"a":"x"}', b'{"a":"x","b":"y","n":0}']
    index, conversations = _index_of(Grouping(("a", "b"), "n"), lines[:2], lines[2:])
    missing = "no conversation key (a, b missing or null): a conversation of its own"
    assert conversations == [("a='x',b='y'", None, [4, 1]), ("a='x',b=1", None, [2]), ("line 3", missing, [3])]
    assert not index.keyless
    index, conversations = _index_of(Grouping(("c",), "n"), lines)
    assert [name for name, _, _ in conversations] == ["line 1", "line 2", "line 3", "line 4"] and index.keyless
    whole = _index_of(Grouping(("*",)), lines[:1], lines[1:])[1]
    assert whole == [("the whole input", None, [1, 2, 3, 4])]


def test_a_task_refuses_a_conversation_past_the_limit_by_its_bytes_and_records(tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    lines = [b'{"s":"a","n":1,"pad":"xxxxxxxx"}', b'{"s":"b","n":0}', b'{"s":"a","n":0}']
    path.write_bytes(b"\n".join(lines) + b"\n")
    held = len(lines[0]) + len(lines[2])
    for limit, refused in ((held, None), (held - 1, f"conversation s='a' holds {held} bytes in 2 records, past")):
        with jsonl.GroupedLines(str(path), Destination(), 0, Grouping(("s",), "n", limit)) as grouped:
            (task,) = grouped.tasks()
        assert task.names == ("s='a'", "s='b'") and task.notes == (None, None)
        start = len(lines[0]) + len(lines[1]) + 2
        assert list(zip(*task.lines)) == [(start, len(lines[2]), 3), (0, len(lines[0]), 1), (len(lines[0]) + 1, 15, 2)]
        assert list(task.ends) == [2, 3]
        assert task.refused[1] is None and (task.refused[0] or "").startswith(refused or "\0") == (refused is not None)
        assert task.size == held + len(lines[1])


def test_a_conversation_or_order_value_given_twice_rejects_its_conversation_when_it_is_migrated(
    tmp_path: Path,
) -> None:
    """The record naming its conversation (``chat.id``) or order (``n``) twice is itself left as
    it is, but which value counts decides where it goes: its conversation is rejected whole."""
    path = tmp_path / "chats.jsonl"
    retry = _lines_of({"chat": {"id": "b"}, "n": 1, "messages": [RETRY, ANSWER]})
    calls = orjson.dumps([PROMPT, CALL])
    for twice, said in (
        (b'{"chat": {"id": "c", "id": "b"}, "n": 0, "messages": ' + calls + b"}\n", "chat: duplicated key 'id'"),
        (b'{"chat": {"id": "b"}, "n": 2, "n": 0, "messages": ' + calls + b"}\n", "duplicated key 'n'"),
    ):
        path.write_bytes(twice + retry)
        result = api.audit(str(path), GROUPED)
        assert [(row["location"], row["status"]) for row in result.report.errors] == [
            ("line 1", "rejected"),
            ("line 2", "rejected"),
        ]
        assert result.report.errors[0]["errors"] == [f"{said}: readers differ on which of its values counts"]


@pytest.mark.parametrize("change", ["append", "rewrite"])
def test_a_grouped_file_changed_while_it_is_read_writes_no_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    """Its lines are read three times: a line added or rewritten after the index would be
    copied unmigrated and uncounted, so the run ends, nothing written, the OUTPUT there before kept."""
    path, output = tmp_path / "chats.jsonl", tmp_path / "out.jsonl"
    path.write_bytes(_lines_of({"chat": {"id": "b"}, "n": 0, "messages": [PROMPT, CALL, RETRY, ANSWER]}))
    output.write_bytes(b"there before\n")
    real = jsonl.GroupedLines.write

    def application_writes(self: jsonl.GroupedLines, *args: Any) -> None:
        real(self, *args)
        if change == "append":
            with open(path, "ab") as added:
                added.write(_lines_of({"chat": {"id": "c"}, "n": 0, "messages": [RETRY]}))
        else:
            os.utime(path, ns=(0, 0))

    monkeypatch.setattr(jsonl.GroupedLines, "write", application_writes)
    said = "its size went from" if change == "append" else "it was modified"
    with pytest.raises(UnreadableInput, match=f"{path}: changed while it was read \\({said}.*\\): nothing written"):
        api.convert(str(path), str(output), GROUPED)
    assert output.read_bytes() == b"there before\n"


def test_a_grouped_line_that_cannot_be_read_is_told_its_conversation_cannot_be_told(tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    whole = _lines_of({"chat": {"id": "b"}, "n": 0, "messages": [PROMPT, ANSWER]})
    path.write_bytes(whole + b'{"chat": {"id": "b"}, "n": 1, "messages": [{"kind": "resp\n' + b'{"chat": {}, "n": 2}\n')
    result = api.audit(str(path), GROUPED)
    assert [(row["location"], row["warnings"]) for row in result.report.warnings] == [
        (
            "line 2",
            [
                "cannot be read, so its conversation cannot be told: a conversation of its own (the conversation it "
                "may belong to is judged without it)"
            ],
        ),
        ("line 3", ["no conversation key (chat.id missing or null): a conversation of its own"]),
    ]
    assert [row["location"] for row in result.report.errors] == ["line 2", "line 3"]


@pytest.mark.parametrize("key", ['s"id', "s\\id", "s\x01id"], ids=["quote", "backslash", "control"])
def test_a_conversation_and_order_key_msgspec_cannot_name_a_struct_field_by_groups_as_any(
    key: str, tmp_path: Path
) -> None:
    """A key holding a ``"``, a ``\\`` or a control character is read from the record decoded
    whole (no struct can be named by it): the records group and order as under any key."""
    path = tmp_path / "runs.jsonl"
    path.write_bytes(
        _lines_of(
            {key: "s", key + "n": 1, "messages": [RETRY, ANSWER]},
            {key: "s", key + "n": 0, "messages": [PROMPT, CALL]},
        )
    )
    spec = key.replace("\\", "\\\\")
    result = api.audit(str(path), Options(conversation=(spec,), order=spec + "n"))
    assert (result.notes, result.report.findings, result.report.fragments) == ([], [], 0)
    assert api.audit(str(path)).report.fragments == 2  # apart, pieces: line 1 answers the call line 2 leaves open
