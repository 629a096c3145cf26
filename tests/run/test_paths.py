"""Nothing a run writes may be something it reads or writes besides (histmig.run.paths, issue
23): every written path is held against every read and written one as a file (an inode, or
the real path of one not there yet), and refused with exit code 2 before anything is read."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from typer.testing import CliRunner

from histmig.cli import app
from histmig.errors import SamePath
from histmig.run.paths import check_apart, file_key
from histmig.sources.base import Destination
from tests.conftest import CORPUS

LEGACY = next(line for line in (CORPUS / "all.jsonl").read_bytes().splitlines() if b"retry-prompt" in line)


@pytest.fixture
def archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``in.jsonl`` in the working directory (a legacy record and a bad line), which every
    case must leave as it is."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "in.jsonl"
    path.write_bytes(LEGACY + b"\n{not json\n")
    return path


def refused(*args: str) -> str:
    """The one stderr line of a run of ``args`` that must exit 2."""
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1
    return result.stderr


def test_an_audit_never_writes_its_report_over_its_input(archive: Path) -> None:
    before = archive.read_bytes()
    assert refused("audit", "in.jsonl", "--report", "in.jsonl") == (
        "histmig: --report in.jsonl is the input in.jsonl; name another file\n"
    )
    assert archive.read_bytes() == before


def test_a_report_is_never_written_over_the_database_a_run_rewrites(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    with closing(sqlite3.connect(db)) as con, con:
        con.execute("CREATE TABLE conv (id INTEGER PRIMARY KEY, messages TEXT)")
        con.execute("INSERT INTO conv (messages) VALUES (?)", [LEGACY.decode()])
    before = db.read_bytes()
    for destination in (("--in-place",), ("--to-table", "conv2")):
        assert refused("convert", str(db), "--table", "conv", *destination, "--report", str(db)) == (
            f"histmig: --report {db} is the input {db}; name another file\n"
        )
    assert db.read_bytes() == before


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_no_file_a_sqlite_database_keeps_beside_it_is_written(tmp_path: Path, suffix: str) -> None:
    """An application's commits may sit in the write-ahead log beside the database, there or not
    yet: a report or rejects file named as it is refused, as the database itself is."""
    db = tmp_path / "db.sqlite"
    with closing(sqlite3.connect(db)) as con, con:
        con.execute("CREATE TABLE conv (id INTEGER PRIMARY KEY, messages TEXT)")
        con.execute("INSERT INTO conv (messages) VALUES (?)", [LEGACY.decode()])
    for flag in ("--report", "--rejects"):
        assert refused("convert", str(db), "--table", "conv", "--in-place", flag, f"{db}{suffix}") == (
            f"histmig: {flag} {db}{suffix} is a file of the input {db}, {db}{suffix}; name another file\n"
        )
    assert not Path(f"{db}{suffix}").exists()


def test_rejects_are_never_written_over_the_output_or_the_input(archive: Path) -> None:
    assert refused("convert", "in.jsonl", "out.jsonl", "--rejects", "out.jsonl") == (
        "histmig: --rejects out.jsonl is OUTPUT out.jsonl; name another file\n"
    )
    assert refused("convert", "in.jsonl", "--in-place", "--rejects", "in.jsonl") == (
        "histmig: --rejects in.jsonl is the input in.jsonl; name another file\n"
    )
    assert not Path("out.jsonl").exists() and archive.read_bytes() == LEGACY + b"\n{not json\n"


def test_the_report_is_neither_the_output_nor_the_rejects_file_given_or_derived(archive: Path) -> None:
    assert refused("convert", "in.jsonl", "out.jsonl", "--report", "out.jsonl") == (
        "histmig: --report out.jsonl is OUTPUT out.jsonl; name another file\n"
    )
    assert refused("convert", "in.jsonl", "out.jsonl", "--rejects", "r.jsonl", "--report", "r.jsonl") == (
        "histmig: --report r.jsonl is --rejects r.jsonl; name another file\n"
    )
    assert refused("convert", "in.jsonl", "out.jsonl", "--report", "out.jsonl.rejects.jsonl") == (
        "histmig: --report out.jsonl.rejects.jsonl is the rejects file out.jsonl.rejects.jsonl; name another file\n"
    )
    assert sorted(os.listdir()) == ["in.jsonl"]


def test_links_hard_links_and_dot_dot_name_the_same_file(archive: Path) -> None:
    os.symlink("in.jsonl", "link.jsonl")
    os.link("in.jsonl", "hard.jsonl")
    os.mkdir("sub")
    for name in ("link.jsonl", "hard.jsonl", "sub/../in.jsonl", str(archive)):
        assert refused("audit", "in.jsonl", "--report", name) == (
            f"histmig: --report {name} is the input in.jsonl (the same file); name another file\n"
        )
    os.symlink("out.jsonl", "later.jsonl")  # a link to a file the run is about to write
    assert refused("convert", "in.jsonl", "out.jsonl", "--rejects", "later.jsonl") == (
        "histmig: --rejects later.jsonl is OUTPUT out.jsonl (the same file); name another file\n"
    )
    assert refused("convert", "in.jsonl", "sub/../out.jsonl", "--report", "out.jsonl") == (
        "histmig: --report out.jsonl is OUTPUT sub/../out.jsonl (the same file); name another file\n"
    )
    assert archive.read_bytes() == LEGACY + b"\n{not json\n" and not Path("out.jsonl").exists()


def test_one_of_several_inputs_is_refused_as_the_report(archive: Path) -> None:
    Path("b.jsonl").write_bytes(LEGACY + b"\n")
    assert refused("check", "in.jsonl", "b.jsonl", "--report", "b.jsonl") == (
        "histmig: --report b.jsonl is the input b.jsonl; name another file\n"
    )
    assert Path("b.jsonl").read_bytes() == LEGACY + b"\n"


def test_stdin_redirected_from_a_file_is_an_input_no_output_may_be(archive: Path) -> None:
    before = archive.read_bytes()
    for written in (
        ["audit", "-", "--report", "in.jsonl"],
        ["convert", "-", "in.jsonl"],
        ["audit", "-", "--report", "/dev/stdin"],
    ):
        with archive.open("rb") as stdin:  # what `histmig audit - --report in.jsonl < in.jsonl` reads
            done = subprocess.run(
                [sys.executable, "-m", "histmig", *written], stdin=stdin, capture_output=True, env=_here(), text=True
            )
        assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
        assert f"{written[-1]} is stdin /dev/stdin" in done.stderr
    assert archive.read_bytes() == before


def test_stdout_appended_to_an_input_is_refused(archive: Path) -> None:
    before = archive.read_bytes()
    for command, stdin in ((["convert", "-", "-"], archive), (["convert", "in.jsonl", "-"], None)):
        with archive.open("ab") as stdout, (stdin or archive).open("rb") as given:  # `- >> in.jsonl` reads what it adds
            done = subprocess.run(
                [sys.executable, "-m", "histmig", *command, "-q"],
                stdin=given,
                stdout=stdout,
                stderr=subprocess.PIPE,
                env=_here(),
            )
        assert (done.returncode, done.stderr.count(b"\n")) == (2, 1), done.stderr
        assert done.stderr.startswith(b"histmig: stdout /dev/stdout is ")
    assert archive.read_bytes() == before


def _here() -> dict[str, str]:
    """The environment of a ``python -m histmig`` run from another directory."""
    return {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent.parent)}


def test_the_lock_file_of_a_rejects_file_is_never_a_file_the_run_reads_or_writes(archive: Path) -> None:
    Path("data.lock").write_bytes(archive.read_bytes())  # locked, then removed, it would be lost
    assert refused("convert", "--format", "jsonl", "data.lock", "out.jsonl", "--rejects", "data") == (
        f"histmig: the lock file of --rejects data, {archive.parent / 'data.lock'} is the input data.lock "
        "(the same file); name another file\n"
    )
    assert refused("convert", "in.jsonl", "out.jsonl", "--rejects", "r", "--report", "r.lock").startswith(
        "histmig: the lock file of --rejects r, "
    )
    assert Path("data.lock").read_bytes() == archive.read_bytes() and not Path("r.lock").exists()


def test_stdout_is_no_file_and_distinct_files_run(archive: Path) -> None:
    result = CliRunner().invoke(app, ["convert", "in.jsonl", "-", "--rejects", "r.jsonl", "--report", "rep.txt", "-q"])
    assert result.exit_code == 1 and result.stdout.encode().count(b"\n") == 1
    assert Path("r.jsonl").read_bytes() == b"{not json\n" and Path("rep.txt").exists()
    shared = CliRunner().invoke(app, ["convert", "in.jsonl", "a.jsonl", "--rejects", "r.jsonl", "-q"])
    assert shared.exit_code == 1  # an earlier run's rejects file is added to, not refused


def test_file_key_compares_inodes_and_real_paths(tmp_path: Path) -> None:
    one = tmp_path / "one"
    one.write_bytes(b"x")
    os.link(one, tmp_path / "two")
    os.symlink(tmp_path / "none", tmp_path / "dangling")
    assert file_key(str(one)) == file_key(str(tmp_path / "two")) != file_key(str(tmp_path / "none"))
    assert (
        file_key(str(tmp_path / "dangling")) == file_key(str(tmp_path / "none")) == ("missing", str(tmp_path / "none"))
    )
    assert file_key("-") is None


def test_check_apart_names_what_each_path_is(tmp_path: Path) -> None:
    source = tmp_path / "a.jsonl"
    source.write_bytes(b"")
    one, other = str(tmp_path / "o1.jsonl"), str(tmp_path / "o2.jsonl")
    check_apart([(str(source), Destination(one, f"{one}.rejects.jsonl"))], report=other)
    with pytest.raises(SamePath) as raised:
        check_apart([(str(source), Destination(one, other, in_place=False))], rejects=other, report=other)
    assert (raised.value.what, raised.value.written, raised.value.whose, raised.value.other) == (
        "--report",
        other,
        "--rejects",
        other,
    )
    check_apart([(str(source), Destination(None, "-")), (str(source), Destination(None, "-"))], report="-")


def test_one_character_device_takes_the_output_and_the_report_but_never_stands_for_an_input(
    archive: Path, device: Path
) -> None:
    result = CliRunner().invoke(app, ["convert", "in.jsonl", str(device), "--report", str(device), "-q"])
    assert result.exit_code == 1, result.output  # the bad line is rejected, the rest written to the device
    assert device.is_char_device()
    with pytest.raises(SamePath):
        check_apart([(str(device), Destination(output=str(device)))])


def test_an_export_never_writes_its_rejects_over_its_input(archive: Path) -> None:
    assert refused("otel", "in.jsonl", "out.jsonl", "--rejects", "in.jsonl") == (
        "histmig: --rejects in.jsonl is the input in.jsonl; name another file\n"
    )
    assert refused("otel-upgrade", "in.jsonl", "out.jsonl", "--rejects", "out.jsonl") == (
        "histmig: --rejects out.jsonl is OUTPUT out.jsonl; name another file\n"
    )
    assert archive.read_bytes() == LEGACY + b"\n{not json\n" and not Path("out.jsonl").exists()


def test_one_file_given_as_two_inputs_in_place_is_refused(archive: Path) -> None:
    """Through a link, ``./`` or a hard link, it would be migrated, and written over, twice."""
    before = archive.read_bytes()
    os.symlink("in.jsonl", "link.jsonl")
    os.link("in.jsonl", "hard.jsonl")
    for other in ("link.jsonl", "./in.jsonl", "hard.jsonl"):
        said = refused("convert", "--in-place", "in.jsonl", other, "--rejects", "r.jsonl")
        assert said == f"histmig: the input {other} is the input in.jsonl (the same file); name another file\n"
    assert archive.read_bytes() == before and not os.path.exists("r.jsonl")


def test_a_database_url_as_rejects_or_report_is_refused_without_its_password(archive: Path) -> None:
    for flag in ("--rejects", "--report"):
        said = refused("convert", "in.jsonl", "out.jsonl", flag, "postgresql://u:s%65cret@127.0.0.1:1/db")
        assert said == (
            "histmig: cannot write postgresql://u@127.0.0.1:1/db: a URL of a store histmig does not write files to; "
            "name a file\n"
        )
