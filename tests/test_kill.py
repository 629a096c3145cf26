"""A run killed at any moment (SIGKILL) leaves the previous output or none, never a partial
one; the input is never modified (issue: bad input, interrupted runs, items 2 and 4)."""

from __future__ import annotations

import hashlib
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import CORPUS

PREVIOUS = b"previous output\n"


def _convert(source: Path, target: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "histmig", "convert", str(source), str(target), "-q"])


def test_sigkill_at_random_moments_never_leaves_a_partial_file(tmp_path: Path) -> None:
    source = tmp_path / "big.jsonl"
    source.write_bytes((CORPUS / "all.jsonl").read_bytes() * 40)
    source_digest = hashlib.sha256(source.read_bytes()).hexdigest()
    complete = tmp_path / "complete.jsonl"
    assert _convert(source, complete).wait() == 0
    expected = complete.read_bytes()

    rng = random.Random(20261129)
    target = tmp_path / "out.jsonl"
    outcomes = []
    for fresh in [True, False] * 4:
        if fresh:
            target.unlink(missing_ok=True)
        else:
            target.write_bytes(PREVIOUS)
        process = _convert(source, target)
        time.sleep(rng.uniform(0.0, 2.5))
        process.send_signal(signal.SIGKILL)
        process.wait()
        if not target.exists():
            outcomes.append("none")
            assert fresh
        elif target.read_bytes() == expected:
            outcomes.append("complete")
        else:
            assert target.read_bytes() == PREVIOUS
            assert not fresh
            outcomes.append("previous")
        assert hashlib.sha256(source.read_bytes()).hexdigest() == source_digest
    assert {"none", "previous"} <= set(outcomes), "no kill landed mid-run: make the archive larger"


WORKERS = """
import time
from histmig.parallel import Workers

with Workers(abs, 2) as workers:
    for _ in workers.map([1, 2, 3, 4]):
        print("answered", flush=True)
        time.sleep(60)
"""


def test_workers_end_when_the_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", WORKERS], stdout=subprocess.PIPE)
    assert parent.stdout is not None
    assert parent.stdout.readline() == b"answered\n"
    with open(f"/proc/{parent.pid}/task/{parent.pid}/children") as children:
        pids = [int(pid) for pid in children.read().split()]
    assert len(pids) == 2
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    alive = set(pids)
    for _ in range(200):
        alive = {pid for pid in alive if _running(pid)}
        if not alive:
            break
        time.sleep(0.05)
    assert not alive


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (an orphan is reaped by init once it ends)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False
