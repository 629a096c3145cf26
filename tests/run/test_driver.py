"""The run driver (histmig.run.driver): plan, tune when asked, run on the engine, record."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from histmig.errors import SamePath
from histmig.options import Options
from histmig.run.driver import run
from histmig.sources.base import Destination
from tests.conftest import CORPUS
from tests.sources.conftest import corpus_records, table_of, write_parquet
from tests.test_tuning import BUILT_WITH_JEMALLOC, backend_after

ALL = CORPUS / "all.jsonl"


def test_a_run_is_recorded_with_what_the_command_took() -> None:
    result = run("check", str(ALL), Destination(), Options(), Options().plan(validate_all=True), strict=True)
    assert {
        k: result.report.run.options[k] for k in ("rejects", "in_place", "to_table", "overwrite", "strict", "engine")
    } == {
        "rejects": None,
        "in_place": False,
        "to_table": None,
        "overwrite": False,
        "strict": True,
        "engine": "local",
    }
    assert "spark_master" not in result.report.run.options and result.report.run.inputs == [str(ALL)]


def test_the_report_path_is_checked_before_anything_is_read(tmp_path: Path) -> None:
    copy = tmp_path / "in.jsonl"
    copy.write_bytes(ALL.read_bytes())
    with pytest.raises(SamePath, match="--report"):
        run("audit", str(copy), Destination(), Options(), Options().plan(), report=str(copy))


def test_tune_picks_arrows_jemalloc_pool_for_a_columnar_input_only(tmp_path: Path) -> None:
    source = write_parquet(tmp_path / "a.parquet", table_of(corpus_records()[:3], nested=False))
    call = "from histmig import api; api.audit({!r}, tune={})"
    default = backend_after("pass")
    assert backend_after(call.format(str(source), True)) == ("jemalloc" if BUILT_WITH_JEMALLOC else default)
    assert backend_after(call.format(str(source), False)) == default
    assert backend_after(call.format(str(ALL), True)) == default


def test_the_temporary_files_of_ended_runs_beside_what_a_run_writes_are_named_or_removed(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    source = tmp_path / "in" / "chats.jsonl"
    source.write_bytes(ALL.read_bytes())
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    stale = [
        tmp_path / "in" / f".chats.jsonl.histmig-{ended.pid}-abcdefgh.tmp",  # beside the in-place input
        tmp_path / "in" / f".chats.jsonl.rejects.jsonl.histmig-{ended.pid}-abcdefgh.tmp",  # beside its rejects
        tmp_path / f".report.json.histmig-{ended.pid}-abcdefgh.tmp",  # beside the report
    ]
    for path in stale:
        path.write_bytes(b"x" * 10)
    mine = tmp_path / f".report.json.histmig-{os.getpid()}-abcdefgh.tmp"  # a live run's
    mine.write_bytes(b"y")
    report = str(tmp_path / "report.json")
    result = run("audit", str(source), Destination(), Options(), Options().plan(), report=report)
    assert [line.split(":")[0] for line in result.warnings] == [str(path) for path in stale[2:]]
    convert = Destination(rejects=None, in_place=True)
    planned = run("convert", str(source), convert, Options(jobs=1), Options().plan(), report=report, clean=True)
    assert planned.warnings == [] and [line.split(":")[0] for line in planned.cleaned] == [
        f"removed {path}" for path in stale
    ]
    assert planned.notes[:3] == planned.cleaned and not any(path.exists() for path in stale) and mine.exists()


def test_clean_never_removes_a_file_the_run_reads_or_writes_named_as_a_temporary_file(tmp_path: Path) -> None:
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    source = tmp_path / f".out.jsonl.histmig-{ended.pid}-abcdefgh.tmp"  # the name of a temporary file of out.jsonl
    rejects = tmp_path / f".out.jsonl.histmig-{ended.pid}-rejects.tmp"
    source.write_bytes(ALL.read_bytes())
    rejects.write_bytes(b"{an earlier reject\n")
    given = Destination(output=str(tmp_path / "out.jsonl"), rejects=str(rejects))
    result = run("convert", str(source), given, Options(jobs=1, format="jsonl"), Options().plan(), clean=True)
    assert (result.warnings, result.cleaned) == ([], [])
    assert source.read_bytes() == ALL.read_bytes() and rejects.read_bytes() == b"{an earlier reject\n"


def test_convert_with_unsafe_fixes_leaves_open_the_last_calls_a_later_record_answers(tmp_path: Path) -> None:
    """Bare lines naming no conversation: the first run stops at a call, the next line holds its
    result. A first pass finds the call answered there, so HM407 leaves it open; a history
    whose call nothing answers is closed, as a history given alone is."""
    prompt = {"part_kind": "user-prompt", "content": "go", "timestamp": "2025-05-01T10:00:00Z"}
    call = {"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": "call_a"}
    lone = {**call, "tool_call_id": "call_z"}
    done = {"part_kind": "tool-return", "tool_name": "t", "content": "ok", "tool_call_id": "call_a"}
    lines = [
        [{"kind": "request", "parts": [prompt]}, {"kind": "response", "parts": [call]}],
        [{"kind": "request", "parts": [done]}, {"kind": "response", "parts": [{"part_kind": "text", "content": "k"}]}],
        [{"kind": "request", "parts": [prompt]}, {"kind": "response", "parts": [lone]}],
    ]
    source, out = tmp_path / "runs.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    options = Options(unsafe_fixes=True, jobs=1)
    result = run("convert", str(source), Destination(output=str(out), rejects=None), options, options.plan())
    written = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert written[:2] == lines[:2] and len(written[2]) == 3  # the lone call closed by a new request
    assert [(row["location"], row["rule"]) for row in result.report.changes] == [("line 3", "HM407")]
    assert {(row["location"], row["rule"], row["certainty"]) for row in result.report.findings} == {
        ("line 1", "HM407", "fragment"),
        ("line 2", "HM401", "fragment"),
    }
    assert result.report.fragments == 2
    audited = run("audit", str(source), Destination(), options, options.plan())  # a dry run: what convert does
    assert [(row["location"], row["rule"]) for row in audited.report.changes] == [("line 3", "HM407")]


def test_convert_with_unsafe_fixes_leaves_open_a_last_call_without_an_id_a_later_record_may_answer(
    tmp_path: Path,
) -> None:
    """A run stopped at a call without a ``tool_call_id``; the next line starts with a result
    without one. No id tells which call it answers, so it may answer this one: HM407 leaves the
    call open (a fragment's finding), not closed by an invented return (HM201 names the call; a
    run with ``--conversation`` gives its result the same id)."""
    prompt = {"part_kind": "user-prompt", "content": "go", "timestamp": "2025-05-01T10:00:00Z"}
    call = {"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": None}
    done = {"part_kind": "tool-return", "tool_name": "t", "content": "sunny", "tool_call_id": None}
    lines = [
        [{"kind": "request", "parts": [prompt]}, {"kind": "response", "parts": [call]}],
        [{"kind": "request", "parts": [done]}, {"kind": "response", "parts": [{"part_kind": "text", "content": "k"}]}],
    ]
    source, out = tmp_path / "runs.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    options = Options(unsafe_fixes=True, jobs=1)
    result = run("convert", str(source), Destination(output=str(out), rejects=None), options, options.plan())
    written = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert written[1] == lines[1] and len(written[0]) == 2  # no request of invented returns
    assert [(row["location"], row["rule"]) for row in result.report.changes] == [("line 1", "HM201")]
    assert ("line 1", "HM407", "fragment") in {
        (row["location"], row["rule"], row["certainty"]) for row in result.report.findings
    }


def test_convert_with_unsafe_fixes_leaves_open_the_last_calls_a_rejected_record_answers(tmp_path: Path) -> None:
    """The next run's record holds the results but cannot be migrated (a key given twice,
    a line cut off): it goes to the rejects file, and the calls it answers stay open, not
    closed by invented returns its real results would contradict once it is mended."""
    prompt = {"part_kind": "user-prompt", "content": "go", "timestamp": "2025-05-01T10:00:00Z"}
    calls = [{"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": f"call_{n}"} for n in "ab"]
    first = orjson.dumps([{"kind": "request", "parts": [prompt]}, {"kind": "response", "parts": calls}])
    twice = b'[{"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"t","content":"ok","tool_call_id":"call_a","tool_call_id":"call_a"}]}]'
    cut = b'[{"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"t","content":"ok","tool_call_id":"call_b"}'
    source, out, rejects = tmp_path / "runs.jsonl", tmp_path / "out.jsonl", tmp_path / "rejects.jsonl"
    source.write_bytes(b"\n".join((first, twice, cut)) + b"\n")
    options = Options(unsafe_fixes=True, jobs=1)
    result = run("convert", str(source), Destination(output=str(out), rejects=str(rejects)), options, options.plan())
    assert out.read_bytes() == first + b"\n"
    assert rejects.read_bytes() == twice + b"\n" + cut + b"\n"
    assert result.report.changes == []
    assert [(row["location"], row["rule"], row["certainty"]) for row in result.report.findings] == [
        ("line 1", "HM407", "fragment"),
        ("line 1", "HM407", "fragment"),
    ]


def test_convert_with_unsafe_fixes_keeps_a_result_the_next_run_holds_after_a_prompt(tmp_path: Path) -> None:
    """The next run's record opens with the user's prompt, then the result of the call the
    first run stopped at: a piece of the conversation, not a history whose result answers no
    call. Its result is kept and the call left open, not deleted and closed as invented."""
    prompt = {"part_kind": "user-prompt", "content": "go", "timestamp": "2025-05-01T10:00:00Z"}
    call = {"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": "call_a"}
    done = {"part_kind": "tool-return", "tool_name": "t", "content": "sunny", "tool_call_id": "call_a"}
    lines = [
        [{"kind": "request", "parts": [prompt]}, {"kind": "response", "parts": [call]}],
        [
            {"kind": "request", "parts": [prompt]},
            {"kind": "request", "parts": [done]},
            {"kind": "response", "parts": [{"part_kind": "text", "content": "k"}]},
        ],
    ]
    source, out = tmp_path / "runs.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    options = Options(unsafe_fixes=True, jobs=1)
    result = run("convert", str(source), Destination(output=str(out), rejects=None), options, options.plan())
    assert out.read_bytes() == source.read_bytes() and result.report.changes == []
    assert {(row["location"], row["rule"], row["certainty"]) for row in result.report.findings} == {
        ("line 1", "HM407", "fragment"),
        ("line 2", "HM401", "fragment"),
    }


def test_the_look_ahead_reads_every_rule_and_never_reads_a_pipe_twice(tmp_path: Path) -> None:
    """A selection without HM401 still leaves open the call a later line answers; a pipe, which a
    second read would find empty, is read once: as no first pass tells which last calls a later
    line answers, every one is left open, and the run warns. A JSON document, one history, has
    its calls closed as any history given alone."""
    prompt = {"part_kind": "user-prompt", "content": "go", "timestamp": "2025-05-01T10:00:00Z"}
    call = {"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": "call_a"}
    done = {"part_kind": "tool-return", "tool_name": "t", "content": "ok", "tool_call_id": "call_a"}
    data = b"".join(
        orjson.dumps(line) + b"\n"
        for line in (
            [{"kind": "request", "parts": [prompt]}, {"kind": "response", "parts": [call]}],
            [
                {"kind": "request", "parts": [done]},
                {"kind": "response", "parts": [{"part_kind": "text", "content": "k"}]},
            ],
        )
    )
    source, out = tmp_path / "runs.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(data)
    selected = Options(unsafe_fixes=True, jobs=1, select=("HM407",))
    run("convert", str(source), Destination(output=str(out), rejects=None), selected, selected.plan())
    assert out.read_bytes() == data
    read, write = os.pipe()  # what a shell's <(...) gives: /dev/fd/N, a pipe
    os.write(write, data)
    os.close(write)
    options = Options(unsafe_fixes=True, jobs=1, format="jsonl")
    try:
        result = run("convert", f"/dev/fd/{read}", Destination(output=str(out), rejects=None), options, options.plan())
    finally:
        os.close(read)
    assert result.report.counts["records_in"] == 2 and out.read_bytes() == data and result.report.changes == []
    assert [warning for warning in result.warnings if "cannot be read twice" in warning] == [
        "the input cannot be read twice (standard input or a pipe), so the calls of a record's last response that a "
        "later record may answer could not be told: HM407 left every one open; give a file, or --conversation "
        "COLUMN ('*' for one conversation) to treat each conversation whole"
    ]
    document, closed = tmp_path / "one.json", tmp_path / "closed.json"
    document.write_bytes(data.splitlines()[0])
    alone = Options(unsafe_fixes=True, jobs=1)
    result = run("convert", str(document), Destination(output=str(closed), rejects=None), alone, alone.plan())
    assert [(row["location"], row["rule"]) for row in result.report.changes] == [("file", "HM407")]
    assert result.warnings == []


def test_a_file_rewritten_in_place_that_has_other_hard_links_is_warned_of(tmp_path: Path) -> None:
    """An in-place rewrite replaces the file by a rename: a hard link's other names keep the
    bytes read, and the run says so."""
    path = tmp_path / "chats.jsonl"
    path.write_bytes(ALL.read_bytes().splitlines(keepends=True)[0])
    os.link(path, tmp_path / "linked.jsonl")
    plan = Options().plan()
    result = run("convert", str(path), Destination(in_place=True), Options(), plan)
    assert result.warnings == [
        f"{path} has 1 other hard link(s): written in place by a rename, this name alone gets the migrated file, "
        "and the others keep the bytes as read"
    ]
    os.unlink(tmp_path / "linked.jsonl")
    assert run("convert", str(path), Destination(in_place=True), Options(), plan).warnings == []


def test_a_directory_input_warns_of_the_folders_of_input_files_it_does_not_read(tmp_path: Path) -> None:
    """The tree a glob's convert writes, read back as a directory: its files read, and each
    folder it passes over named, with the glob that reads it (``check`` would pass unsaid)."""
    (tmp_path / "v1").mkdir()
    shutil.copy(CORPUS / "v2.68.0" / "a_tool_model_retry.json", tmp_path / "v1" / "a.json")
    shutil.copy(ALL, tmp_path / "top.jsonl")
    options = Options()
    result = run("check", str(tmp_path), Destination(), options, options.plan())
    assert result.inputs == [str(tmp_path / "top.jsonl")]
    assert result.warnings == [
        f"{tmp_path}: {tmp_path / 'v1'} holds input files that are not read (a directory INPUT reads its own files and "
        f"key=value partition directories): give them as INPUTs, or a quoted glob, '{tmp_path}/*/*.json'"
    ]
    assert run("check", str(tmp_path / "top.jsonl"), Destination(), options, options.plan()).warnings == []
