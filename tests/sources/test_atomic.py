"""atomic_output: the output goes to disk while it is written, and becomes the target only
when everything, the background syncs included, succeeded; what is not a regular file is
written to as a stream, a link's file is replaced and the link kept, a file added to is added
to under a lock (concurrent processes lose nothing), a file read in place is replaced only
while it is as it was read, and temporary files name their run (issue 23 points 2-5, 9)."""

from __future__ import annotations

import errno
import fcntl
import gzip
import os
import pwd
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from histmig.errors import InputChanged, UnwritableOutput
from histmig.sources import atomic
from histmig.sources.atomic import Stamp, atomic_output, check_writable, is_stream, stale_temps
from tests.conftest import ROOT, holding, waiting_on


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
    with pytest.raises(OSError, match="Input/output error"), atomic_output(str(target)) as out:
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
    with pytest.raises(UnwritableOutput, match="No space left on device"), atomic_output(str(target)) as out:
        monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(28, "No space left on device")))
        out.write(b"x")
    assert list(tmp_path.iterdir()) == []


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


def test_a_character_device_is_written_to_never_replaced(device: Path, tmp_path: Path) -> None:
    before = os.stat(device)
    check_writable(str(device))
    for keep in (False, True):
        with atomic_output(str(device), keep=keep) as out:
            out.write(b"x" * 100_000)
    after = os.stat(device)
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)
    assert sorted(p.name for p in tmp_path.iterdir()) == (["null"] if device.parent == tmp_path else [])


def test_a_fifo_is_written_to_as_a_stream_its_reader_gets_every_byte(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl.gz"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    with atomic_output(str(fifo)) as out:
        out.write(b"line\n" * 50_000)
    reader.join(10)
    assert gzip.decompress(got[0]) == b"line\n" * 50_000
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and [p.name for p in tmp_path.iterdir()] == ["pipe.jsonl.gz"]


def test_an_open_file_of_the_process_is_written_to_not_replaced(tmp_path: Path) -> None:
    assert is_stream("/dev/stdout") and is_stream("/dev/stderr") and is_stream("/dev/fd/1")
    read, write = os.pipe()
    with atomic_output(f"/dev/fd/{write}") as out:
        out.write(b"through the pipe\n")
    os.close(write)
    assert os.read(read, 100) == b"through the pipe\n"
    os.close(read)
    log = tmp_path / "log.jsonl"
    log.write_bytes(b"held before\n")
    with open(log, "ab") as appended:  # a shell's >> log
        with atomic_output(f"/proc/self/fd/{appended.fileno()}") as out:
            out.write(b"added\n")
    assert log.read_bytes() == b"held before\nadded\n"
    assert [p.name for p in tmp_path.iterdir()] == ["log.jsonl"]


def test_a_link_is_kept_and_the_file_it_points_to_replaced(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "links").mkdir()
    real = tmp_path / "real" / "out.jsonl"
    real.write_bytes(b"old\n")
    real.chmod(0o640)
    link = tmp_path / "links" / "out.jsonl"
    link.symlink_to("../real/out.jsonl")
    check_writable(str(link))
    with atomic_output(str(link)) as out:
        out.write(b"new\n")
    with atomic_output(str(link), keep=True) as out:
        out.write(b"added\n")
    assert link.is_symlink() and os.readlink(link) == "../real/out.jsonl"
    assert real.read_bytes() == b"new\nadded\n" and stat.S_IMODE(real.stat().st_mode) == 0o640
    assert [p.name for p in (tmp_path / "links").iterdir()] == ["out.jsonl"]
    assert [p.name for p in (tmp_path / "real").iterdir()] == ["out.jsonl"]


def test_a_file_read_in_place_is_replaced_only_while_it_is_as_it_was_read(tmp_path: Path) -> None:
    source = tmp_path / "chats.jsonl.gz"
    source.write_bytes(b"read\n")
    stamp = Stamp.of(source)
    assert stamp is not None
    with pytest.raises(InputChanged) as raised, atomic_output(str(source), read_as=stamp) as out:
        out.write(b"migrated\n")
        with open(source, "ab") as application:
            application.write(b"appended\n")
    kept = tmp_path / "chats.migrated.jsonl.gz"
    assert raised.value.kept == str(kept)
    assert str(raised.value) == (
        f"{source}: changed while histmig read it (its size went from 5 to 14 bytes): it is kept as it is, "
        f"and the migrated copy of what was read is {kept}"
    )
    assert source.read_bytes() == b"read\nappended\n" and gzip.decompress(kept.read_bytes()) == b"migrated\n"
    again = Stamp.of(source)
    with pytest.raises(InputChanged, match="another file was put in its place"):
        with atomic_output(str(source), read_as=again):
            (tmp_path / "new").write_bytes(b"read\nappended\n")
            os.replace(tmp_path / "new", source)
    assert (tmp_path / "chats.migrated-2.jsonl.gz").exists() and kept.exists()
    with atomic_output(str(source), read_as=Stamp.of(source)) as out:
        out.write(b"unchanged meanwhile\n")
    assert gzip.decompress(source.read_bytes()) == b"unchanged meanwhile\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "chats.jsonl.gz",
        "chats.migrated-2.jsonl.gz",
        "chats.migrated.jsonl.gz",
    ]


def test_the_change_of_a_file_in_words() -> None:
    stamp = Stamp(1, 2, 10, 100)
    assert stamp.change(stamp) is None
    assert stamp.change(None) == "it was removed"
    assert stamp.change(Stamp(1, 3, 10, 100)) == "another file was put in its place"
    assert stamp.change(Stamp(1, 2, 12, 100)) == "its size went from 10 to 12 bytes"
    assert stamp.change(Stamp(1, 2, 10, 101)) == "it was modified"


ADD = """
import sys
from histmig.sources.atomic import atomic_output
with atomic_output(sys.argv[1], keep=True) as out:
    out.write(sys.argv[2].encode())
"""


def _adding(target: Path, text: str) -> subprocess.Popen[bytes]:
    """Another process adding ``text`` to ``target`` (atomic_output with keep)."""
    return subprocess.Popen([sys.executable, "-c", ADD, str(target), text], cwd=ROOT, stderr=subprocess.PIPE)


def test_processes_adding_to_one_file_wait_for_the_lock_and_lose_nothing(tmp_path: Path) -> None:
    target = tmp_path / "rejects.jsonl"
    target.write_bytes(b"earlier\n")
    lock = tmp_path / "rejects.jsonl.lock"
    with holding(lock):
        first = _adding(target, "first\n")
        waiting_on(lock, [first])
        target.write_bytes(b"earlier\nheld\n")  # what the run holding the lock adds meanwhile
        second = _adding(target, "second\n")
        waiting_on(lock, [first, second])
    assert first.wait(60) == 0 and second.wait(60) == 0
    for waited in (first, second):  # each said once why it did not go on
        assert waited.stderr.read().decode() == (  # type: ignore[union-attr]  # piped
            f"histmig: waiting for another run adding to {target} (it holds {lock})\n"
        )
    lines = target.read_bytes().splitlines()
    assert lines[:2] == [b"earlier", b"held"] and sorted(lines[2:]) == [b"first", b"second"]
    assert [p.name for p in tmp_path.iterdir()] == ["rejects.jsonl"]


def test_a_lock_file_removed_by_the_run_that_held_it_is_taken_again_by_name(tmp_path: Path) -> None:
    target = tmp_path / "r.jsonl"
    lock = tmp_path / "r.jsonl.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    waiter = _adding(target, "after\n")
    waiting_on(lock, [waiter])
    lock.unlink()  # as a run does before it lets go: the waiter's lock is on a removed file
    with holding(lock):
        os.close(fd)
        waiting_on(lock, [waiter])  # it waits again, on the lock file of that name
        target.write_bytes(b"before\n")
    assert waiter.wait(60) == 0
    assert target.read_bytes() == b"before\nafter\n"


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_temporary_files_name_their_run_and_those_of_ended_runs_are_stale(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    with atomic_output(str(target)) as out:
        out.write(b"x")
        (temp,) = [p for p in tmp_path.iterdir() if p.name != "out.jsonl"]
        assert temp.name.startswith(f".out.jsonl.histmig-{os.getpid()}-") and temp.name.endswith(".tmp")
        assert stale_temps([str(target)]) == []  # this run's own
    dead = _dead_pid()
    left = tmp_path / f".out.jsonl.histmig-{dead}-k2j4a_9x.tmp"
    left.write_bytes(b"y" * 1234)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / f".out.jsonl.histmig-{live.pid}-abcdefgh.tmp").write_bytes(b"z")
        (tmp_path / f".other.jsonl.histmig-{dead}-abcdefgh.tmp").write_bytes(b"z")
        (tmp_path / f".out.jsonl.{dead}.tmp").write_bytes(b"z")
        link = tmp_path / "link.jsonl"
        link.symlink_to("out.jsonl")
        found = stale_temps([str(link), None, "-", str(target)])
    finally:
        live.kill()
        live.wait()
    assert [(s.path, s.size, s.pid, s.beside) for s in found] == [(left, 1234, dead, str(link))]
    assert found[0].said(False) == (
        f"{left}: a temporary file (1,234 bytes) a run that ended (pid {dead}) left beside {link}; --clean removes it"
    )


def test_what_is_added_waits_in_a_file_without_a_name_where_there_is_no_o_tmpfile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "rejects.jsonl"
    target.write_bytes(b"earlier\n")
    monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    with atomic_output(str(target), keep=True) as out:
        out.write(b"added\n")
        assert [p.name for p in tmp_path.iterdir()] == ["rejects.jsonl"]
    assert target.read_bytes() == b"earlier\nadded\n"
    assert [p.name for p in tmp_path.iterdir()] == ["rejects.jsonl"]


def test_a_replaced_file_keeps_its_owner_and_group(tmp_path: Path) -> None:
    target = tmp_path / "chats.jsonl"
    target.write_bytes(b"old\n")
    if os.geteuid() == 0:  # root gives the file to the user the PostgreSQL tests run their server as
        app = pwd.getpwnam("postgres")
        owner = (app.pw_uid, app.pw_gid)
        os.chown(target, *owner)
    else:  # another user cannot give a file away: the replaced file stays the caller's own
        owner = (os.geteuid(), os.getegid())
    target.chmod(0o640)
    for keep in (False, True):
        with atomic_output(str(target), keep=keep) as out:
            out.write(b"new\n")
        found = target.stat()
        assert (found.st_uid, found.st_gid, stat.S_IMODE(found.st_mode)) == (*owner, 0o640)
    assert target.read_bytes() == b"new\nnew\n"
