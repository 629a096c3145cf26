"""``--jobs``: several worker processes give the same bytes, in the same order, and the same
report as one (issue: throughput)."""

from __future__ import annotations

import ctypes
import gzip
import io
import os
import signal
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from histmig import parallel, pipeline
from histmig import report as report_module
from histmig.cli import app
from histmig.parallel import WINDOW, Chunk, WorkerDied, Workers, process_chunk
from histmig.pipeline import Options, process
from histmig.records import Record
from histmig.report import Report
from histmig.runner import run
from tests.conftest import CORPUS

runner = CliRunner()


def _convert(tmp_path: Path, source: Path, jobs: int) -> tuple[bytes, str]:
    out, report = tmp_path / f"out{jobs}.jsonl", tmp_path / f"report{jobs}.json"
    result = runner.invoke(app, ["convert", str(source), str(out), "--jobs", str(jobs), "--report", str(report), "--report-format", "json"])
    assert result.exit_code == 0, result.output
    return out.read_bytes(), report.read_text()


def test_two_jobs_give_the_same_output_and_report_as_one(tmp_path: Path) -> None:
    source = CORPUS / "all.jsonl"
    assert _convert(tmp_path, source, 2) == _convert(tmp_path, source, 1)


def test_two_jobs_keep_order_across_many_chunks_and_blank_lines(tmp_path: Path) -> None:
    lines = (CORPUS / "all.jsonl").read_bytes().splitlines()
    source = tmp_path / "big.jsonl"
    source.write_bytes(b"\n".join([*lines, b"", b"not json", *lines] * 3) + b"\n")
    one, two = run(str(source), str(tmp_path / "a.jsonl")), run(str(source), str(tmp_path / "b.jsonl"), jobs=2)
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert (tmp_path / "a.jsonl.rejects.jsonl").read_bytes() == (tmp_path / "b.jsonl.rejects.jsonl").read_bytes()
    assert one.to_json() == two.to_json()


@settings(max_examples=300)
@given(st.lists(st.sampled_from([b"\n", b"x", b"{}", b"\r\n", b"\n\n"]), max_size=3000), st.integers(1, 5))
def test_count_lines_counts_every_line_end(pieces: list[bytes], find_lines: int) -> None:
    data = b"".join(pieces)
    assert parallel.count_lines(data) == data.count(b"\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(parallel, "FIND_LINES", find_lines)
        assert parallel.count_lines(data) == data.count(b"\n")


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
@given(st.lists(st.sampled_from([b"{}\n", b"\n", b"x" * 40 + b"\n", b"y" * 300, b"z"]), max_size=200), st.integers(1, 97), st.integers(8, 200), st.booleans())
def test_a_stream_is_cut_after_line_ends_and_read_to_its_last_byte(pieces: list[bytes], step: int, chunk_bytes: int, fail: bool) -> None:
    data = b"".join(pieces)
    chunks = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(parallel, "CHUNK_BYTES", chunk_bytes)
        reader = parallel.read_chunks(_Pipe(data, step, fail), "s")
        if fail:
            with pytest.raises(EOFError):
                chunks.extend(reader)
        else:
            chunks.extend(reader)
    assert b"".join(c.data for c in chunks) == data
    assert all(c.data.endswith(b"\n") for c in chunks[:-1])
    assert [c.first for c in chunks] == [1 + b"".join(c.data for c in chunks[:i]).count(b"\n") for i in range(len(chunks))]


def test_two_jobs_on_a_truncated_gz_keep_every_record_read(tmp_path: Path) -> None:
    whole = gzip.compress((CORPUS / "all.jsonl").read_bytes() * 4)
    source = tmp_path / "cut.jsonl.gz"
    source.write_bytes(whole[: len(whole) // 2])
    one, two = run(str(source), str(tmp_path / "a.jsonl")), run(str(source), str(tmp_path / "b.jsonl"), jobs=2)
    assert two.counts["read_errors"] == 1
    assert one.to_json() == two.to_json()
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


LEGACY_LINE = next(line for line in (CORPUS / "all.jsonl").read_bytes().splitlines() if b"retry-prompt" in line)
CLEAN_LINE = b'{"id":"c","messages":[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi"}]}]}'


def _migrated(line: bytes) -> bytes:
    return process(Record(line, "x", "line 1")).output or b""


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize(
    ("name", "text", "expected_out", "expected_rejects"),
    [
        ("last line unchanged, no newline", CLEAN_LINE + b"\n\n  \n" + CLEAN_LINE, CLEAN_LINE + b"\n\n  \n" + CLEAN_LINE + b"\n", None),
        ("last line migrated, no newline", CLEAN_LINE + b"\n" + LEGACY_LINE, CLEAN_LINE + b"\n" + _migrated(LEGACY_LINE) + b"\n", None),
        ("last line rejected, no newline", CLEAN_LINE + b"\n{oops", CLEAN_LINE + b"\n", b"{oops\n"),
        ("rejected between", b"{oops\n" + CLEAN_LINE + b"\n[1\n", CLEAN_LINE + b"\n", b"{oops\n[1\n"),
        ("CRLF lines", CLEAN_LINE + b"\r\n" + LEGACY_LINE + b"\r\n", CLEAN_LINE + b"\r\n" + _migrated(LEGACY_LINE) + b"\n", None),
        (
            "migrated lines in a row, a blank line, a rejected one",
            b"\n".join([LEGACY_LINE, LEGACY_LINE, b"", LEGACY_LINE, b"{oops", LEGACY_LINE, LEGACY_LINE]),
            b"\n".join([_migrated(LEGACY_LINE)] * 2 + [b"", _migrated(LEGACY_LINE)] + [_migrated(LEGACY_LINE)] * 2) + b"\n",
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
    run(str(source), str(out), jobs=jobs)
    rejects = tmp_path / "out.jsonl.rejects.jsonl"
    assert out.read_bytes() == expected_out
    assert (rejects.read_bytes() if rejects.exists() else None) == expected_rejects


def test_migrated_records_on_consecutive_lines_make_one_edit() -> None:
    data = b"\n".join([LEGACY_LINE, LEGACY_LINE, CLEAN_LINE, LEGACY_LINE, b"{oops", LEGACY_LINE, LEGACY_LINE, LEGACY_LINE]) + b"\n"
    starts = [0]
    for line in data.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    result = process_chunk(Chunk(data, 1, "x"), Options())
    migrated = _migrated(LEGACY_LINE)
    assert result.edits == [
        (starts[0], starts[2] - 1, migrated + b"\n" + migrated),
        (starts[3], starts[4] - 1, migrated),
        (starts[4], starts[5] - 1, None),
        (starts[5], starts[8] - 1, b"\n".join([migrated] * 3)),
    ]


def test_whether_the_screen_is_skipped_after_changed_records_does_not_change_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = (CORPUS / "all.jsonl").read_bytes().splitlines()
    huge = b'{"id":"h","score":1e400,' + CLEAN_LINE[len(b'{"id":"c",') :]  # the screen passes it, the full way refuses it
    data = b"\n".join([LEGACY_LINE, LEGACY_LINE, huge, CLEAN_LINE, LEGACY_LINE, LEGACY_LINE, b"{oops", huge, *lines]) + b"\n"
    results = []
    for after in (0, 2, len(lines) * 2):
        monkeypatch.setattr(pipeline, "SKIP_SCREEN_AFTER", after)
        result = process_chunk(Chunk(data, 1, "x"), Options())
        results.append((result.edits, result.report.to_json()))
    assert results[0] == results[1] == results[2]
    one_by_one = Report.in_memory()
    for number, line in enumerate(data.splitlines(), start=1):
        one_by_one.add(process(Record(line, "x", f"line {number}")))
    assert results[0][1] == one_by_one.to_json()
    assert results[0][1]["summary"]["changed"] > 100 and results[0][1]["summary"]["rejected"] == 1


def test_migrated_records_go_into_the_chunk_slot_when_they_fit() -> None:
    data = b"\n".join([LEGACY_LINE, LEGACY_LINE, b"{oops", CLEAN_LINE, LEGACY_LINE]) + b"\n"
    migrated = _migrated(LEGACY_LINE)
    slots = parallel.Slots(2)
    result = process_chunk(Chunk(data, 1, "x", slot=1), Options(), slots)
    placed = [new for _, _, new in result.edits]
    assert placed == [parallel.Placed(0, 2 * len(migrated) + 1), None, parallel.Placed(2 * len(migrated) + 1, len(migrated))]
    assert slots.view(1)[: 3 * len(migrated) + 1].tobytes() == migrated + b"\n" + migrated + migrated
    assert slots.view(0).tobytes() == bytes(parallel.SLOT_BYTES)
    assert [edit[:2] for edit in result.edits] == [edit[:2] for edit in process_chunk(Chunk(data, 1, "x"), Options()).edits]


def test_migrated_records_that_do_not_fit_the_slot_cross_the_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "SLOT_BYTES", len(LEGACY_LINE))
    data = LEGACY_LINE + b"\n" + LEGACY_LINE + b"\n"
    result = process_chunk(Chunk(data, 1, "x", slot=0), Options(), parallel.Slots(1))
    assert result.edits == [(0, len(data) - 1, _migrated(LEGACY_LINE) + b"\n" + _migrated(LEGACY_LINE))]


@pytest.mark.parametrize(("jobs", "in_slots"), [(2, True), (5, False)])
def test_jobs_reuse_slots_over_many_chunks_without_mixing_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int, in_slots: bool) -> None:
    monkeypatch.setattr(parallel, "CHUNK_BYTES", 4096)
    lines = (CORPUS / "all.jsonl").read_bytes().splitlines()
    source = tmp_path / "many.jsonl"
    source.write_bytes(b"\n".join(lines * 2) + b"\n")
    with source.open("rb") as stream:
        chunks = list(parallel.read_chunks(stream, str(source)))
        assert len(chunks) > 4 * parallel.WINDOW * jobs
        kinds = {type(new) for _, result in parallel.map_chunks(iter(chunks), Options(), jobs) for *_, new in result.edits if new is not None}
    assert kinds == ({memoryview} if in_slots else {bytes})
    one, many = run(str(source), str(tmp_path / "a.jsonl")), run(str(source), str(tmp_path / "b.jsonl"), jobs=jobs)
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert one.to_json() == many.to_json()


def test_without_a_rejects_file_a_rejected_line_stays_in_place(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"{oops\n" + LEGACY_LINE + b"\n[1")
    result = runner.invoke(app, ["convert", str(source), "-", "-q"])
    assert result.stdout_bytes == b"{oops\n" + _migrated(LEGACY_LINE) + b"\n[1\n"


def test_change_rows_come_back_in_order_whatever_the_batch_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "many.jsonl"
    source.write_bytes((CORPUS / "all.jsonl").read_bytes() * 3)
    whole = run(str(source), jobs=2)
    monkeypatch.setattr(report_module, "_ROWS_PER_BATCH", 3)
    assert run(str(source), jobs=1).to_json() == run(str(source), jobs=2).to_json() == whole.to_json()
    assert len(whole.changes) == sum(whole.by_rule.values()) > 300


def _cells(n: int) -> tuple[int, pa.Array]:
    if n == 4:
        raise ValueError("no 4")
    return os.getpid(), pa.array(["x" * i if i % 3 else None for i in range(n * 1000)])


def test_workers_send_arrow_arrays_back_in_order_from_other_processes() -> None:
    with Workers(_cells, 2) as workers:
        results = list(workers.map([1, 2, 3, 5, 6]))
    assert [task for task, _ in results] == [1, 2, 3, 5, 6]
    for task, (_, array) in results:
        assert array.to_pylist() == ["x" * i if i % 3 else None for i in range(task * 1000)]
    pids = {pid for _, (pid, _) in results}
    assert len(pids) == 2 and os.getpid() not in pids


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_exception_raised_by_work_is_raised_by_map(jobs: int) -> None:
    done = []
    with pytest.raises(ValueError, match="no 4"), Workers(_cells, jobs) as workers:
        for task, _ in workers.map([1, 2, 3, 4, 5]):
            done.append(task)
    assert done == [1, 2, 3]


def _slow_first(task: int) -> int:
    if task == 0:
        time.sleep(0.5)
    return task * 10


def test_a_slow_task_does_not_hold_up_the_other_worker_and_order_is_kept() -> None:
    pulled: list[int] = []

    def tasks():
        for task in range(40):
            pulled.append(task)
            yield task

    with Workers(_slow_first, 2) as workers:
        results = workers.map(tasks())
        first = next(results)
        pulled_when_first_came = len(pulled)
        rest = list(results)
    assert [first, *rest] == [(task, task * 10) for task in range(40)]
    # while task 0 sleeps, the other worker answers every task the window lets through
    assert pulled_when_first_came == WINDOW * 2 + 1


def _die_on_3(task: int) -> int:
    if task == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return task


def test_a_lost_worker_is_raised_in_its_turn() -> None:
    done = []
    with pytest.raises(WorkerDied), Workers(_die_on_3, 2) as workers:
        for task, _ in workers.map(range(8)):
            done.append(task)
    assert done == [0, 1, 2]


def test_keep_heap_slack_asks_glibc_for_its_top_pad(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    class Libc:
        def mallopt(self, param: int, value: int) -> int:
            calls.append((param, value))
            return 1

    monkeypatch.setattr(ctypes, "CDLL", lambda name: Libc())
    parallel.keep_heap_slack()
    assert calls == [(-2, 16 << 20), (-3, 4 << 20)]


def _no_cdll(name: object) -> object:
    raise TypeError("expected str, got NoneType")  # what Windows' CDLL(None) raises


@pytest.mark.parametrize("where", ["no mallopt (macOS, musl)", "no CDLL(None) (Windows)", "no ctypes"])
def test_keep_heap_slack_does_nothing_where_it_cannot(monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    if where == "no ctypes":
        monkeypatch.setitem(sys.modules, "ctypes", None)
    else:
        monkeypatch.setattr(ctypes, "CDLL", (lambda name: object()) if where.startswith("no mallopt") else _no_cdll)
    parallel.keep_heap_slack()  # raises nothing
