"""atomic_output: the output goes to disk while it is written, and becomes the target only
when everything, the background syncs included, succeeded."""

from __future__ import annotations

import errno
import gzip
import os
import threading
from pathlib import Path

import pytest

from histmig.sources import atomic
from histmig.sources.atomic import atomic_output


def test_the_data_is_synced_in_the_background_and_kept_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    one = threading.Event()
    real = os.fdatasync
    monkeypatch.setattr(atomic, "SYNC_EVERY", 1000)
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(fd), one.set(), real(fd))[2])
    threads = threading.active_count()
    target = tmp_path / "out.jsonl"
    with atomic_output(str(target)) as out:
        out.write(b"x" * 999)
        out.flush()
        assert threading.active_count() == threads  # no thread before the first SYNC_EVERY bytes
        for _ in range(20):
            out.write(b"y" * 500)
            out.flush()
        assert one.wait(10)
    assert target.read_bytes() == b"x" * 999 + b"y" * 10_000
    assert 1 <= len(synced) <= 10
    assert threading.active_count() == threads


def test_an_error_of_a_background_sync_leaves_the_target_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    called = threading.Event()

    def failing(fd: int) -> None:
        called.set()
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(atomic, "SYNC_EVERY", 100)
    monkeypatch.setattr(os, "fdatasync", failing)
    target = tmp_path / "out.jsonl"
    target.write_bytes(b"previous\n")
    with pytest.raises(OSError, match="Input/output error"):
        with atomic_output(str(target)) as out:
            out.write(b"z" * 1000)
            out.flush()
            assert called.wait(10)
    assert target.read_bytes() == b"previous\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


@pytest.mark.parametrize("name", ["rejects.jsonl", "rejects.jsonl.gz"])
def test_keep_adds_to_the_file_already_there(tmp_path: Path, name: str) -> None:
    target = tmp_path / name
    with atomic_output(str(target), keep=True) as out:
        out.write(b"first\n")
    with atomic_output(str(target), keep=True) as out:
        out.write(b"second\n")
    data = target.read_bytes()
    assert (gzip.decompress(data) if name.endswith(".gz") else data) == b"first\nsecond\n"
