"""histmig.interrupt: Ctrl-C, sent as a real SIGINT to a real ``python -m histmig`` process
(to its whole process group, as a terminal does), at points a hook of this file makes
certain: one line, exit 130, no traceback from the parent or a worker; a DuckDB table
interrupted before its commit is as it was, one interrupted after it ends as a finished run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CORPUS, ROOT
from tests.sources.conftest import corpus_records
from tests.sources.test_duckdb import make_db, read_table

TABLE = 'conversations "2025"'

RUN = """
import os, runpy, signal, sys
{hook}
sys.argv = ["histmig", *sys.argv[1:]]
runpy.run_module("histmig", run_name="__main__")
"""
"""A ``python -m histmig`` run with ``hook`` (Python) run first, in the process itself."""

SELF_INTERRUPT = "os.kill(os.getpid(), signal.SIGINT)"


def histmig(hook: str, *args: str, marks: int = 0) -> subprocess.CompletedProcess[str]:
    """Run histmig with ``hook`` in a process group of its own; with ``marks``, wait until
    the hook has written that many bytes to stdout (each worker at its first task), then
    send SIGINT to the group. Returns the finished process (stdout without the marks)."""
    process = subprocess.Popen(
        [sys.executable, "-c", RUN.format(hook=hook), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
    )
    try:
        if marks:
            assert process.stdout is not None and process.stdout.read(marks) == "w" * marks
            os.killpg(process.pid, signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def test_an_interrupt_of_a_run_on_workers_is_one_line_and_exit_130(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes((CORPUS / "all.jsonl").read_bytes() * 20)
    hook = (
        "import time, histmig.run.local as api\n"
        "work = api._work\n"
        "def _work(job, task, slot):\n"
        "    os.write(1, b'w')\n"  # this worker is at work: the test sends SIGINT now
        "    time.sleep(60)\n"
        "    return work(job, task, slot)\n"
        "api._work = _work\n"
    )
    done = histmig(hook, "convert", str(source), str(tmp_path / "out.jsonl"), "--jobs", "2", marks=2)
    assert (done.returncode, done.stderr) == (130, "histmig: interrupted\n")
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl"]  # no output, no temporary file left


def test_an_interrupt_while_the_command_line_is_imported_is_one_line_and_exit_130(tmp_path: Path) -> None:
    hook = (
        "import importlib.abc\n"
        "class Finder(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'histmig.engine':\n"
        f"            {SELF_INTERRUPT}\n"
        "sys.meta_path.insert(0, Finder())\n"
    )
    done = histmig(hook, "audit", str(CORPUS / "all.jsonl"))
    assert (done.returncode, done.stderr, done.stdout) == (130, "histmig: interrupted\n", "")


def _duckdb(tmp_path: Path) -> tuple[Path, bytes]:
    db = make_db(tmp_path / "chats.duckdb", corpus_records(), "JSON")
    return db, read_table(db).to_pylist()


IN_THE_SCAN = (
    "import pyarrow as pa, histmig.sources.duckdb as d\n"
    "insert = d._insert\n"
    "def _insert(con, target, data, via):\n"
    "    def batches():\n"
    "        yield from data.to_batches()\n"
    f"        {SELF_INTERRUPT}\n"
    "    insert(con, target, pa.RecordBatchReader.from_batches(data.schema, batches()), via)\n"
    "d._insert = _insert\n"
)
"""A hook: SIGINT inside DuckDB's scan of a batch being written (DuckDB raises the KeyboardInterrupt again)."""

AS_A_DRIVER_ERROR = (
    "import duckdb, histmig.sources.duckdb as d\n"
    "def _insert(con, target, data, via):\n"
    "    try:\n"
    f"        {SELF_INTERRUPT}\n"
    "    except KeyboardInterrupt:\n"
    "        raise duckdb.InterruptException('INTERRUPT Error: Interrupted!')\n"
    "d._insert = _insert\n"
)
"""A hook: SIGINT while DuckDB runs a statement of the batch write, which it says as an error of its own."""

BEFORE_THE_COMMIT = (
    "import histmig.sources.duckdb as d\n"
    "updates = d.DuckdbTable._updates\n"
    "def _updates(self):\n"
    "    write, finish = updates(self)\n"
    "    def finished():\n"
    "        finish()\n"
    f"        {SELF_INTERRUPT}\n"
    "    return write, finished\n"
    "d.DuckdbTable._updates = _updates\n"
)
"""A hook: SIGINT once every row is updated, before the COMMIT."""


@pytest.mark.parametrize(
    "hook",
    [IN_THE_SCAN, AS_A_DRIVER_ERROR, BEFORE_THE_COMMIT],
    ids=["in-the-batch-write", "as-a-driver-error", "before-the-commit"],
)
def test_a_duckdb_table_interrupted_before_its_commit_is_as_it_was(tmp_path: Path, hook: str) -> None:
    db, before = _duckdb(tmp_path)
    done = histmig(hook, "convert", str(db), "--table", TABLE, "--messages-column", "messages", "--in-place")
    assert (done.returncode, done.stderr) == (130, f"histmig: interrupted; {db}:{TABLE} is as it was\n")
    assert read_table(db).to_pylist() == before


def test_a_duckdb_table_interrupted_after_its_commit_ends_as_a_finished_run(tmp_path: Path) -> None:
    db, before = _duckdb(tmp_path)
    hook = (
        "import histmig.sources.duckdb as d\n"
        "written = d.DuckdbTable.written\n"
        "def _written(self):\n"
        f"    {SELF_INTERRUPT}\n"  # the COMMIT is run: the table is migrated
        "    return written(self)\n"
        "d.DuckdbTable.written = _written\n"
    )
    args = ("convert", str(db), "--table", TABLE, "--messages-column", "messages", "--in-place", "-q")
    done = histmig(hook, *args)
    assert (done.returncode, done.stderr) == (0, "")
    after = read_table(db).to_pylist()
    assert after != before
    again = histmig("", "check", str(db), "--table", TABLE, "--messages-column", "messages", "-q")
    assert again.returncode == 0, again.stderr  # every row current: the run was whole
