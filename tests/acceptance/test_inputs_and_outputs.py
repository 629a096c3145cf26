"""Inputs and outputs as users have them (issue 14 points 4-6): several inputs and
directories of JSON/JSONL files for every command, OUTPUT by one rule (README "Outputs"),
running a command twice, and every error one line with its path, its cause and exit code 2;
what a run writes never destroys what it reads (issue 23 points 2-5, 9): devices, FIFOs,
links, concurrent runs, an input appended to during an in-place run, killed runs' leftovers."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from histmig.cli import app
from tests.conftest import CORPUS, HISTORIES, ROOT, holding, waiting_on, without_run

runner = CliRunner()
ALL = CORPUS / "all.jsonl"
LINES = ALL.read_bytes().splitlines()


def invoke(*args: str):
    return runner.invoke(app, list(args))


@pytest.fixture
def exports(tmp_path: Path) -> Path:
    """A directory of 20 ``.json`` histories (two per release), a ``.jsonl`` file of 40
    records, and a ``notes.txt`` that is not an input."""
    folder = tmp_path / "exports"
    folder.mkdir()
    for path in HISTORIES[::11][:20]:
        shutil.copy(path, folder / f"{path.parent.name}-{path.name}")
    (folder / "more.jsonl").write_bytes(b"\n".join(LINES[:40]) + b"\n")
    (folder / "notes.txt").write_text("not a history")
    return folder


def test_check_takes_several_json_files_and_names_each_in_the_report(exports: Path, tmp_path: Path) -> None:
    files = sorted(str(p) for p in exports.glob("*.json"))[:3]
    report = tmp_path / "r.json"
    result = invoke("check", *files, "--report", str(report), "--report-format", "json")
    assert result.exit_code == 1, result.output
    data = orjson.loads(report.read_bytes())
    assert data["summary"]["records_in"] == 3
    assert {row["source"] for row in data["changes"]} <= set(files) and len(
        {row["source"] for row in data["changes"]}
    ) >= 2


def test_every_command_reads_a_directory_of_json_and_jsonl_files(exports: Path, tmp_path: Path) -> None:
    audit = invoke("audit", str(exports))
    assert audit.exit_code == 0, audit.output
    assert "records would be migrated" in audit.stderr and "of 60 records" in audit.stderr
    out = tmp_path / "out"
    converted = invoke("convert", str(exports), str(out), "-q")
    assert converted.exit_code == 0, converted.output
    assert sorted(p.name for p in out.iterdir()) == sorted(
        p.name for p in exports.iterdir() if p.suffix in (".json", ".jsonl")
    )
    checked = invoke("check", str(out))
    assert (checked.exit_code, checked.stderr.splitlines()[-1]) == (
        0,
        "histmig check: all 60 records are current and valid",
    )
    for command, source in (("otel", out), ("otel-upgrade", tmp_path / "otel")):
        exported = invoke(command, str(source), str(tmp_path / command), "-q")
        assert exported.exit_code == 0, (command, exported.output)
        assert len(list((tmp_path / command).iterdir())) == 21


def test_a_quoted_glob_and_stdin_are_inputs_too(exports: Path, tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["audit", str(exports / "v0.0.*.json"), "-", "-q", "--report", "-", "--report-format", "json"],
        input=LINES[0] + b"\n",
    )
    assert result.exit_code == 0, result.output
    sources = {row["source"] for row in orjson.loads(result.stdout)["changes"]}
    assert "-" in sources and all(source == "-" or "/v0.0." in source for source in sources)


def test_a_parquet_directory_to_a_jsonl_name_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    lake.mkdir()
    (lake / "a.jsonl").write_bytes(LINES[0] + b"\n")
    (lake / "b.jsonl").write_bytes(LINES[1] + b"\n")
    result = invoke("convert", str(lake), str(tmp_path / "lake.jsonl"))
    assert result.exit_code == 2
    assert (
        result.stderr
        == f"histmig: {tmp_path}/lake.jsonl: several inputs are written into a directory, each under its own name; this name is a JSONL file's (name a directory)\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lake"]


def test_an_existing_empty_directory_takes_the_output_and_the_same_command_runs_twice(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    first = invoke("convert", str(ALL), str(out), "-q")
    assert first.exit_code == 0, first.output
    written = (out / "all.jsonl").read_bytes()
    again = invoke("convert", str(ALL), str(out), "-q")
    assert again.exit_code == 0, again.output
    assert (out / "all.jsonl").read_bytes() == written and sorted(p.name for p in out.iterdir()) == ["all.jsonl"]
    assert invoke("check", str(out / "all.jsonl"), "-q").exit_code == 0
    several = tmp_path / "several"
    for _ in range(2):
        assert (
            invoke("convert", str(ALL), str(CORPUS / "v0.0.20" / "c_unknown_tool.json"), str(several), "-q").exit_code
            == 0
        )
    assert sorted(p.name for p in several.iterdir()) == ["all.jsonl", "c_unknown_tool.json"]


def test_several_jsonl_inputs_go_to_stdout_one_after_another(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(LINES[-1] + b"\n")
    b.write_bytes(LINES[-2] + b"\n")
    result = invoke("convert", str(a), str(b), "-", "-q")
    assert (result.exit_code, result.stdout_bytes) == (0, LINES[-1] + b"\n" + LINES[-2] + b"\n")


def test_rejected_records_of_several_inputs_go_to_one_file_beside_the_output_directory(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(b"{bad a\n" + LINES[-1] + b"\n")
    b.write_bytes(b"{bad b\n")
    result = invoke("convert", str(a), str(b), str(tmp_path / "out"))
    assert result.exit_code == 1
    assert (tmp_path / "out.rejects.jsonl").read_bytes() == b"{bad a\n{bad b\n"
    assert result.stderr.rstrip().endswith(f"rejected records to {tmp_path}/out.rejects.jsonl")
    assert "already held" not in result.stderr
    again = invoke("convert", str(a), str(b), str(tmp_path / "out"))
    assert (
        f"histmig: note: {tmp_path}/out.rejects.jsonl already held rejected records of an earlier run; this run's rejected records were added after them"
        in again.stderr
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("check", "chast.jsonl"), "histmig: cannot read chast.jsonl: no such file or directory"),
        (
            ("check", "notes.txt"),
            "histmig: cannot read notes.txt: cannot tell the format from the name (use --format json|jsonl)",
        ),
        (
            ("audit", "in.jsonl", "--table", "t"),
            "histmig: in.jsonl: --table does not apply to a JSONL input (only to a DuckDB, PostgreSQL or SQLite one)",
        ),
        (
            ("audit", "in.jsonl", "--messages-column", "m"),
            "histmig: in.jsonl: --messages-column does not apply to a JSONL input (only to a DuckDB, Parquet, PostgreSQL or SQLite one)",
        ),
        (
            ("convert", "in.jsonl", "--to-table", "t"),
            "histmig: in.jsonl: --to-table does not apply to a JSONL input (only to a DuckDB, PostgreSQL or SQLite one)",
        ),
        (
            ("convert", "in.jsonl"),
            "histmig: give OUTPUT after INPUT, or --in-place, or --to-table for a database input",
        ),
        (
            ("convert", "in.jsonl", "in.jsonl/out.jsonl"),
            "histmig: cannot write in.jsonl/out.jsonl: 'in.jsonl' is a file, not a directory",
        ),
        (("convert", "in.jsonl", "in.jsonl"), "histmig: in.jsonl is the input; use --in-place to replace it"),
    ],
)
def test_every_error_is_one_line_with_the_path_and_the_cause_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], said: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.jsonl").write_bytes(LINES[0] + b"\n")
    (tmp_path / "notes.txt").write_text("x")
    result = invoke(*args, "-q")
    assert (result.exit_code, result.stderr) == (2, said + "\n")


def test_a_parquet_input_named_as_its_output_is_told_to_write_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--in-place`` does not apply to Parquet, so the error of the other formats (use it)
    would send the user to a second error."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.chdir(tmp_path)
    pq.write_table(pa.table({"id": ["a"], "messages": [orjson.loads(LINES[0])["messages"]]}), "in.parquet")
    before = (tmp_path / "in.parquet").read_bytes()
    result = invoke("convert", "in.parquet", "in.parquet", "-q")
    assert (result.exit_code, result.stderr) == (
        2,
        "histmig: in.parquet is the input; a Parquet input is not rewritten in place: write another OUTPUT and "
        "replace the input with it\n",
    )
    assert (tmp_path / "in.parquet").read_bytes() == before


def test_in_place_in_a_directory_the_user_cannot_write_is_one_line_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "readonly"
    folder.mkdir()
    source = folder / "chats.jsonl"
    source.write_bytes(b"\n".join(LINES[:5]) + b"\n")
    folder.chmod(0o555)
    if os.geteuid() == 0:  # root writes anywhere: ask the permission bits, as for any other user
        monkeypatch.setattr(os, "access", lambda path, mode: not mode & os.W_OK or bool(os.stat(path).st_mode & 0o222))
    try:
        result = invoke("convert", str(source), "--in-place", "-q")
    finally:
        folder.chmod(0o755)
    assert (result.exit_code, result.stderr) == (2, f"histmig: cannot write {source}: cannot write in '{folder}'\n")
    assert source.read_bytes() == b"\n".join(LINES[:5]) + b"\n"


def test_a_write_that_fails_is_one_line_exit_2_and_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    out = tmp_path / "out.jsonl"
    result = invoke("convert", str(ALL), str(out), "-q", "--jobs", "1")
    assert (result.exit_code, result.stderr) == (2, f"histmig: cannot write {out}: No space left on device\n")
    assert list(tmp_path.iterdir()) == []


def test_a_stdout_closed_early_ends_the_run_silently_with_exit_1(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    big.write_bytes(ALL.read_bytes() * 40)
    process = subprocess.Popen(
        [sys.executable, "-m", "histmig", "convert", str(big), "-", "-q", "--jobs", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert process.stdout is not None and process.stdout.read(100)
    process.stdout.close()
    assert (process.wait(timeout=60), process.stderr.read()) == (1, b"")


def _histmig(*args: str, **kwargs: Any) -> subprocess.Popen[bytes]:
    """A real run of the command line, in a process of its own."""
    return subprocess.Popen(
        [sys.executable, "-m", "histmig", *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs
    )


def test_a_device_as_output_report_and_rejects_stays_a_device(device: Path, tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join([*LINES[:30], b"not json"]) + b"\n")
    before = os.stat(device)
    out = str(tmp_path / "out.jsonl")
    for args in (
        ("convert", str(source), str(device), "--rejects", str(tmp_path / "r.jsonl")),
        ("convert", str(source), out, "--rejects", str(device)),
        ("convert", str(source), out, "--report", str(device)),
        ("audit", str(source), "--report", str(device), "--report-format", "json"),
    ):
        result = invoke(*args)
        assert result.exit_code == 1, result.output
    after = os.stat(device)
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)
    left = [
        "in.jsonl",
        "out.jsonl",
        "out.jsonl.rejects.jsonl",
        "r.jsonl",
        *(["null"] if device.parent == tmp_path else []),
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(left)


def test_a_fifo_as_output_and_report_gives_its_reader_every_byte_and_the_run_its_exit_code(tmp_path: Path) -> None:
    expected, expected_report = tmp_path / "expected.jsonl", tmp_path / "expected.json"
    plain = ("--report-format", "json", "--no-timestamp", "-q")
    assert invoke("convert", str(ALL), str(expected), "--report", str(expected_report), *plain).exit_code == 0
    out, report = tmp_path / "out.jsonl", tmp_path / "report.json"
    os.mkfifo(out)
    os.mkfifo(report)
    got: dict[Path, bytes] = {}
    readers = [threading.Thread(target=lambda p=p: got.update({p: p.read_bytes()}), daemon=True) for p in (out, report)]
    for reader in readers:
        reader.start()
    run = _histmig("convert", str(ALL), str(out), "--report", str(report), *plain)
    assert run.wait(120) == 0, run.stderr.read()  # type: ignore[union-attr]
    for reader in readers:
        reader.join(60)
    assert got[out] == expected.read_bytes()
    assert without_run(orjson.loads(got[report])) == without_run(orjson.loads(expected_report.read_bytes()))
    assert stat.S_ISFIFO(os.stat(out).st_mode) and stat.S_ISFIFO(os.stat(report).st_mode)


def test_an_output_named_by_the_runs_own_stdout_descriptor_goes_to_its_stdout(tmp_path: Path) -> None:
    expected = tmp_path / "expected.jsonl"
    assert invoke("convert", str(ALL), str(expected), "-q").exit_code == 0
    run = _histmig("convert", str(ALL), "/dev/fd/1", "-q")  # /dev/stdout's own target: /proc/self/fd/1
    out, err = run.communicate(timeout=120)
    assert (run.returncode, out, err) == (0, expected.read_bytes(), b"")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["expected.jsonl"]


def test_an_output_that_is_a_link_writes_the_file_it_points_to_and_stays_a_link(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    real, link, expected = tmp_path / "store" / "out.jsonl", tmp_path / "out.jsonl", tmp_path / "expected.jsonl"
    real.write_bytes(b"the previous output\n")
    link.symlink_to(real)
    report = tmp_path / "report.txt"
    (tmp_path / "store" / "report.txt").write_bytes(b"the previous report\n")
    report.symlink_to("store/report.txt")
    assert invoke("convert", str(ALL), str(expected), "-q").exit_code == 0
    result = invoke("convert", str(ALL), str(link), "--report", str(report))
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and report.is_symlink() and real.read_bytes() == expected.read_bytes()
    assert (tmp_path / "store" / "report.txt").read_text().startswith(f"{ALL}:line 1 [v0.0.20/a_tool_model_retry]")
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == ["out.jsonl", "report.txt"]


def test_in_place_on_a_link_migrates_the_file_it_points_to(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    real, link, expected = tmp_path / "store" / "chats.jsonl", tmp_path / "chats.jsonl", tmp_path / "expected.jsonl"
    real.write_bytes(ALL.read_bytes())
    link.symlink_to("store/chats.jsonl")
    assert invoke("convert", str(ALL), str(expected), "-q").exit_code == 0
    result = invoke("convert", str(link), "--in-place", "-q")
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and os.readlink(link) == "store/chats.jsonl" and real.read_bytes() == expected.read_bytes()
    assert invoke("check", str(link), "-q").exit_code == 0


def test_in_place_keeps_an_input_an_application_appended_to_and_says_where_the_copy_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from histmig.sources import jsonl

    source = tmp_path / "chats.jsonl"
    source.write_bytes(ALL.read_bytes())
    real = jsonl.LinesInput.__exit__

    def exit(self: jsonl.LinesInput, *args: object) -> None:
        with open(source, "ab") as application:  # the application appends, just before the rename
            application.write(LINES[0] + b"\n")
        real(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(jsonl.LinesInput, "__exit__", exit)
    result = invoke("convert", str(source), "--in-place", "-q", "--jobs", "1")
    kept = tmp_path / "chats.migrated.jsonl"
    assert result.exit_code == 1
    size = ALL.stat().st_size
    assert result.stderr == (
        f"histmig: warning: {source}: changed while histmig read it (its size went from {size:,} to "
        f"{size + len(LINES[0]) + 1:,} bytes): it is kept as it is, and the migrated copy of what was read is {kept}\n"
    )
    assert source.read_bytes() == ALL.read_bytes() + LINES[0] + b"\n"
    monkeypatch.undo()
    assert invoke("check", str(kept), "-q").exit_code == 0


def test_runs_sharing_a_rejects_file_add_theirs_one_after_the_other_and_lose_none(tmp_path: Path) -> None:
    rejects, lock = tmp_path / "rejects.jsonl", tmp_path / "rejects.jsonl.lock"
    rejects.write_bytes(b"not json: an earlier run's\n")
    runs, lines = [], {b"not json: an earlier run's"}
    with holding(lock):
        for name in ("a", "b"):
            bad = [f"not json: {name} {n}".encode() for n in range(40)]
            lines |= set(bad)
            source = tmp_path / f"{name}.jsonl"
            source.write_bytes(b"\n".join(LINES[:20] + bad) + b"\n")
            runs.append(
                _histmig("convert", str(source), str(tmp_path / f"{name}.out.jsonl"), "--rejects", str(rejects))
            )
        waiting_on(lock, runs)  # both runs have migrated their records and wait to add their rejects
    for run in runs:
        assert run.wait(120) == 1
        assert b"40 rejected" in run.stderr.read()  # type: ignore[union-attr]
    assert sorted(rejects.read_bytes().splitlines()) == sorted(lines)
    assert not lock.exists()


def test_a_temporary_file_a_killed_run_left_is_named_by_the_next_run_and_removed_with_clean(tmp_path: Path) -> None:
    out, report = tmp_path / "out.jsonl", tmp_path / "report.json"
    run = _histmig("convert", "-", str(out), stdin=subprocess.PIPE)
    run.stdin.write(ALL.read_bytes())  # type: ignore[union-attr]
    run.stdin.flush()  # type: ignore[union-attr]
    while not list(tmp_path.iterdir()):
        assert run.poll() is None, "the run ended before its temporary file was seen"
        time.sleep(0.01)
    run.kill()  # the run waits for more of stdin: the kill lands mid-write
    run.wait()
    (left,) = tmp_path.iterdir()
    assert left.name.startswith(f".out.jsonl.histmig-{run.pid}-") and left.name.endswith(".tmp")
    (tmp_path / f".report.json.histmig-{run.pid}-abcdefgh.tmp").write_bytes(b"{")
    source = tmp_path / "in.jsonl"
    source.write_bytes(LINES[0] + b"\n")
    result = invoke("convert", str(source), str(out), "--report", str(report), "-q")
    assert result.exit_code == 0, result.output
    size = left.stat().st_size
    assert result.stderr == (
        f"histmig: warning: {left}: a temporary file ({size:,} bytes) a run that ended (pid {run.pid}) left beside "
        f"{out}; --clean removes it\n"
        f"histmig: warning: {tmp_path}/.report.json.histmig-{run.pid}-abcdefgh.tmp: a temporary file (1 bytes) a run "
        f"that ended (pid {run.pid}) left beside {report}; --clean removes it\n"
    )
    assert left.exists()
    result = invoke("convert", str(source), str(out), "--report", str(report), "-q", "--clean")
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(f"histmig: note: removed {left}: a temporary file ({size:,} bytes)")
    assert result.stderr.count("histmig: note: removed ") == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl", "report.json"]
    assert invoke("audit", str(source), "--report", str(report), "-q").stderr == ""
