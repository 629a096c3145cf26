"""atomic_output: the output goes to disk while it is written, and becomes the target only
when everything, the background syncs included, succeeded."""

from __future__ import annotations

import errno
import gzip
import os
import threading
import time
from pathlib import Path

import pytest

from histmig.errors import UnwritableOutput
from histmig.sources import atomic
from histmig.sources.atomic import atomic_output, check_directory


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


def test_an_error_of_a_background_sync_leaves_the_target_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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


def test_a_file_that_cannot_be_created_or_written_is_unwritable_naming_the_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    target = tmp_path / "out.jsonl"
    with monkeypatch.context() as patch:
        patch.setattr(tempfile, "mkstemp", refused)
        with pytest.raises(UnwritableOutput, match=f"^{target}: Permission denied$"):
            with atomic_output(str(target)):
                pass
    with pytest.raises(UnwritableOutput, match="No space left on device"):
        with atomic_output(str(target)) as out:
            monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(28, "No space left on device")))
            out.write(b"x")
    assert list(tmp_path.iterdir()) == []


def test_an_output_directory_must_be_writable_or_creatable(tmp_path: Path) -> None:
    check_directory(str(tmp_path))
    check_directory(str(tmp_path / "new"))
    with pytest.raises(UnwritableOutput, match="no such directory"):
        check_directory(str(tmp_path / "a" / "b"))
    (tmp_path / "file").touch()
    with pytest.raises(UnwritableOutput, match="no such directory"):
        check_directory(str(tmp_path / "file" / "sub"))


def test_a_gzip_output_is_the_same_bytes_whatever_the_clock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written = []
    for now in (1_000_000_000.0, 2_000_000_000.0):
        monkeypatch.setattr(time, "time", lambda now=now: now)  # what gzip stamps a member with, unless told
        target = tmp_path / f"{int(now)}.jsonl.gz"
        with atomic_output(str(target)) as out:
            out.write(b'{"messages": []}\n')
        written.append(target.read_bytes())
    assert written[0] == written[1] and written[0][4:8] == b"\0\0\0\0"  # the header's MTIME field: none
    assert gzip.decompress(written[0]) == b'{"messages": []}\n'
