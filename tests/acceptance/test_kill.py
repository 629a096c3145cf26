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
    started = time.monotonic()
    assert _convert(source, complete).wait() == 0
    duration = time.monotonic() - started
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
        time.sleep(rng.uniform(0.0, duration))
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


def _group(pgid: int) -> list[int]:
    """The pids of the live (not zombie) processes in process group ``pgid`` (Linux /proc)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def test_workers_end_when_their_parent_is_killed(tmp_path: Path) -> None:
    source = tmp_path / "big.jsonl"
    source.write_bytes((CORPUS / "all.jsonl").read_bytes() * 200)
    command = [
        sys.executable,
        "-m",
        "histmig",
        "convert",
        str(source),
        str(tmp_path / "out.jsonl"),
        "-q",
        "--jobs",
        "2",
    ]
    process = subprocess.Popen(command, start_new_session=True)
    deadline = time.monotonic() + 20
    while len(_group(process.pid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_group(process.pid)) == 3, "the workers never started"
    process.send_signal(signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + 10
    while _group(process.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _group(process.pid) == []
