"""Files: opening an input stream (stdin, gzip), and writing an output atomically (a temporary
file beside the target, renamed when complete), for every format that reads or writes files.

What is written where:

- ``-`` is stdout. A path that is not a regular file (a character device such as
  ``/dev/null``, a FIFO, ``/dev/stdout`` or another ``/dev/fd`` or ``/proc/PID/fd`` name) is
  written to as a stream, never replaced.
- A regular file, or a missing one, is written to a temporary file beside it and renamed over
  it when complete; a symbolic link is followed, so the file it points to is what is
  replaced (the temporary file is made beside that file) and the link stays a link.
- A file that is added to (a rejects file: ``keep``) is replaced the same way, under a lock
  file beside it (:func:`locked`), held from the copy of its bytes to the rename, so
  concurrent runs add theirs one after the other.
- A file written over the input it was read from (``--in-place``) is renamed over it only
  when the input is still the file read, as it was (:class:`Stamp`); otherwise the input is
  kept and the new file left beside it (:class:`~histmig.errors.InputChanged`).
- A temporary file's name tells the run that made it (:data:`TEMP_MARK` and its pid), so a
  later run finds those a killed run left (:func:`stale_temps`).
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import io
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from histmig.errors import InputChanged, UnreadableInput, UnwritableOutput
from histmig.report.escape import terminal
from histmig.sources import fs


def check_writable(path: str) -> None:
    """Raise :class:`UnwritableOutput` unless ``path`` can be written (``-`` is stdout): an
    object of a store histmig writes to (:func:`histmig.sources.fs.check_scheme`, which
    raises :class:`~histmig.errors.UsageError`), a stream (:func:`is_stream`) that this
    process may write to, or a file that can be created in its directory (that of the file a
    link points to), which must exist and be writable, and that is not a directory."""
    if path == "-":
        return
    if fs.is_object(path):  # an object's store says whether it can be written when it is written
        fs.check_scheme(path, writing=True)
        return
    if "://" in path:  # a database URL names no file: said without its folder, which would be the URL cut up
        raise UnwritableOutput(f"{path}: a URL of a store histmig does not write files to; name a file")
    if is_stream(path):
        if not os.access(path, os.W_OK):
            raise UnwritableOutput(f"{path}: permission denied")
        return
    target = real_file(path) if os.path.islink(path) else Path(path)
    folder = target.parent
    if target.is_dir():
        raise UnwritableOutput(f"{path}: is a directory")
    if not folder.is_dir():
        raise UnwritableOutput(f"{path}: no such directory {str(folder)!r}")
    if not os.access(folder, os.W_OK):
        raise UnwritableOutput(f"{path}: cannot write in {str(folder)!r}")


def real_file(path: str | Path) -> Path:
    """The file a write to ``path`` replaces: ``path``, or the file its symbolic links point
    to (which may not exist yet), as an absolute path."""
    return Path(os.path.realpath(path))


_FD_FOLDERS = ("/proc/", "/dev/fd/")


def is_stream(path: str) -> bool:
    """Whether ``path`` is written to as a stream rather than replaced: it exists and is not a
    regular file (a character device, a FIFO, a socket), or it names an open file of a
    process (``/dev/stdout``, ``/dev/fd/N``, ``/proc/PID/fd/N``: replacing the file behind
    it would cut it from the descriptor, and ``>>`` would lose what it held)."""
    if path == "-":
        return True
    hop = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on links followed
        if hop.startswith(_FD_FOLDERS):
            return True
        try:
            hop = os.path.join(os.path.dirname(hop), os.readlink(hop))
        except OSError:
            break
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


@contextmanager
def input_stream(path: str) -> Iterator[BinaryIO]:
    """A binary stream over ``path`` (stdin for ``-``), gunzipped when it starts with the
    gzip magic bytes. Raises :class:`UnreadableInput` when the file cannot be opened."""
    if path == "-":
        with _gunzipped(sys.stdin.buffer) as stream:
            yield stream
        return
    if fs.is_url(path):
        with (
            fs.open_input(path, sequential=True) as remote,
            fs.store_errors(path, UnreadableInput),
            _gunzipped(remote) as stream,
        ):
            yield stream
        return
    try:
        raw = open(path, "rb")  # noqa: SIM115 (apart from the with: only the open's OSError is the input's)
    except OSError as exc:
        raise UnreadableInput(f"{path}: {exc.strerror or exc}") from exc
    with raw, _gunzipped(raw) as stream:
        yield stream


@contextmanager
def _gunzipped(raw: BinaryIO) -> Iterator[BinaryIO]:
    """``raw``, or a gunzipping stream over it when its first bytes are the gzip magic
    (a stream that cannot be peeked at, as a test's stdin, is taken as it is)."""
    peek = getattr(raw, "peek", None)
    if peek is not None and peek(2)[:2] == b"\x1f\x8b":
        with gzip.GzipFile(fileobj=raw) as unzipped:
            yield unzipped  # type: ignore[misc]  # a GzipFile is a binary stream
    else:
        yield raw


TEMP_MARK = ".histmig-"
"""What the name of every temporary file histmig makes holds, before the pid of the run that
made it: ``.NAME.histmig-PID-XXXXXXXX.tmp`` beside the file ``NAME`` it becomes."""
_TEMP_NAME = re.compile(rf"\.(?P<name>.+){re.escape(TEMP_MARK)}(?P<pid>[0-9]+)-[a-z0-9_]+\.tmp", re.DOTALL)


def temp_beside(target: Path) -> tuple[int, str]:
    """A new temporary file in ``target``'s directory, to be renamed over ``target`` when
    complete: ``(descriptor, name)``, named after ``target`` and this process (:data:`TEMP_MARK`),
    with the permission bits :func:`new_file_mode` gives (``mkstemp`` makes it ``0o600``;
    renamed as is, it would change them) and, when it can be given, ``target``'s owner and group
    (a root run in place would otherwise take the file from the application that writes it).
    Raises :class:`UnwritableOutput` naming ``target`` when the directory takes no new file."""
    with unwritable(target):
        fd, name = tempfile.mkstemp(
            prefix=f".{target.name}{TEMP_MARK}{os.getpid()}-", suffix=".tmp", dir=target.parent or "."
        )
    os.fchmod(fd, new_file_mode(target))
    with contextlib.suppress(OSError):  # the owner of a file replaced as root stays its owner (a user may not give one)
        found = target.stat()
        if (found.st_uid, found.st_gid) != (os.geteuid(), os.getegid()):
            os.fchown(fd, found.st_uid, found.st_gid)
    return fd, name


@dataclass(frozen=True)
class StaleTemp:
    """A temporary file a run that ended before its rename left (a SIGKILL, a power cut):
    its ``path``, its ``size`` in bytes, the ``pid`` of that run, and the file it was for
    (``beside``, as given)."""

    path: Path
    size: int
    pid: int
    beside: str

    def said(self, removed: bool) -> str:
        """One line naming it: removed, or to be removed with ``--clean``."""
        what = (
            f"{self.path}: a temporary file ({self.size:,} bytes) a run that ended (pid {self.pid}) "
            f"left beside {self.beside}"
        )
        return f"removed {what}" if removed else f"{what}; --clean removes it"


def stale_temps(paths: Iterable[str | None]) -> list[StaleTemp]:
    """The temporary files (:func:`temp_beside`) beside the files ``paths`` name (those their
    links point to; ``None``, ``-`` and streams skipped) whose run is no process any more
    (a live one's, this run's included, are its work in progress), in the order of ``paths``,
    each once."""
    found: dict[Path, StaleTemp] = {}
    listed: dict[Path, list[os.DirEntry[str]]] = {}  # a directory of many outputs is read once
    for path in paths:
        if path is None or is_stream(path):
            continue
        target = real_file(path)
        if target.parent not in listed:
            try:
                listed[target.parent] = sorted(os.scandir(target.parent), key=lambda entry: entry.name)
            except OSError:
                listed[target.parent] = []
        for entry in listed[target.parent]:
            match = _TEMP_NAME.fullmatch(entry.name)
            if match is None or match["name"] != target.name or _alive(int(match["pid"])):
                continue
            try:
                size = entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
            found.setdefault(Path(entry.path), StaleTemp(Path(entry.path), size, int(match["pid"]), path))
    return list(found.values())


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user counts: it may be a run)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


@contextmanager
def unwritable(target: str | Path) -> Iterator[None]:
    """A block whose ``OSError`` (no space left, no permission, an I/O error) is raised as
    :class:`UnwritableOutput` naming ``target`` and the cause, in one line."""
    try:
        yield
    except UnwritableOutput:
        raise
    except OSError as exc:
        raise UnwritableOutput(f"{target}: {exc.strerror or exc}") from exc


def new_file_mode(target: Path) -> int:
    """The permission bits a file written over ``target`` gets: the target's own when it
    exists, else what ``open()`` would give a new file (``0o666`` less the umask)."""
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


SYNC_EVERY = 32 << 20
"""Bytes written to an output between two background ``fdatasync`` calls (:class:`SyncingFile`)."""


class TargetFile(io.FileIO):
    """A file opened on descriptor ``fd`` (``mode``) whose write errors are raised as
    :class:`UnwritableOutput` naming ``target``: the file it is written for."""

    def __init__(self, fd: int, target: str | Path = "", mode: str = "wb") -> None:
        super().__init__(fd, mode)
        self.target = target

    def write(self, data: Any) -> int:
        with unwritable(self.target):
            return super().write(data) or 0


class SyncingFile(TargetFile):
    """A file opened for writing whose data goes to disk while it is written: every
    :data:`SYNC_EVERY` bytes, a background thread (started at the first of them, so a
    process forked before holds no thread) calls ``fdatasync``, so the ``fsync`` of
    :meth:`sync`, which makes the file durable, has little left to wait for (~0.15 s on a
    300 MB output otherwise). An error the thread meets is raised by :meth:`sync`; every
    error is raised as :class:`UnwritableOutput` naming ``target``."""

    def __init__(self, fd: int, target: str | Path = "") -> None:
        super().__init__(fd, target)
        self._unsynced = 0
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._error: OSError | None = None

    def write(self, data: Any) -> int:
        written = super().write(data)
        self._unsynced += written
        if self._unsynced >= SYNC_EVERY:
            self._unsynced = 0
            if self._thread is None:
                self._thread = threading.Thread(target=self._sync_in_background, name="histmig-fdatasync", daemon=True)
                self._thread.start()
            self._wake.set()
        return written

    def _sync_in_background(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stopping:
                return
            try:
                os.fdatasync(self.fileno())
            except OSError as exc:
                self._error = exc
                return

    def _stop(self) -> None:
        if self._thread is not None:
            self._stopping = True
            self._wake.set()
            self._thread.join()
            self._thread = None

    def sync(self) -> None:
        """Stop the background thread, then ``fsync``. Raises the ``OSError`` the thread or
        the ``fsync`` met."""
        self._stop()
        with unwritable(self.target):
            if self._error is not None:
                raise self._error
            os.fsync(self.fileno())

    def close(self) -> None:
        self._stop()
        super().close()


@dataclass(frozen=True)
class Stamp:
    """What tells whether a file is still the one read, as it was: its ``device`` and
    ``inode`` (not another file renamed over it), ``size`` (nothing appended, nothing cut)
    and ``mtime_ns`` (nothing rewritten in place). Taken before the file is opened, so any
    change made while it is read shows."""

    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: str | Path) -> Stamp | None:
        """The stamp of the file at ``path`` (its links followed), or ``None`` when there is none."""
        try:
            found = os.stat(path)
        except OSError:
            return None
        return cls(found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)

    def change(self, now: Stamp | None) -> str | None:
        """How the file whose stamp is now ``now`` changed since, in words, or ``None``."""
        if now is None:
            return "it was removed"
        if (now.device, now.inode) != (self.device, self.inode):
            return "another file was put in its place"
        if now.size != self.size:
            return f"its size went from {self.size:,} to {now.size:,} bytes"
        if now.mtime_ns != self.mtime_ns:
            return "it was modified"
        return None


@contextmanager
def atomic_output(path: str, *, keep: bool = False, read_as: Stamp | None = None) -> Iterator[BinaryIO]:
    """A binary stream that becomes ``path`` only when the block ends without an exception
    (see the module docstring): ``-`` is stdout and a stream (:func:`is_stream`) is written to
    as it is; a file (a link's file) is written to a temporary file in its directory (a
    :class:`SyncingFile`), flushed, fsynced and renamed over it, so a crash leaves either the
    previous file or none. A write that fails raises :class:`UnwritableOutput` naming ``path``.
    A target ending in ``.gz`` is gzip-compressed (with a fixed mtime, so output bytes are
    reproducible). With ``keep``, what is written is added after the target's current bytes,
    if it exists (a rejects file of an earlier run is never replaced; a gzip target gets one
    more member), under :func:`locked`. With ``read_as``, the stamp of the input the output
    replaces (``--in-place``), the rename happens only if the file is still as stamped; else
    :class:`~histmig.errors.InputChanged` is raised, the file kept and the new one left
    beside it (:func:`_set_aside`)."""
    if path == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    zipped = path.lower().endswith(".gz")
    with _written(path, keep, read_as) as out:
        if zipped:
            with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0) as compressed:
                yield compressed  # type: ignore[misc]  # a GzipFile is a binary stream
        else:
            yield out


@contextmanager
def replaced(path: str, *, read_as: Stamp | None = None) -> Iterator[BinaryIO]:
    """:func:`atomic_output` without compression: the bytes written are the file's (a Parquet
    writer's sink)."""
    with _written(path, False, read_as) as out:
        yield out


@contextmanager
def added_to(path: str) -> Iterator[BinaryIO]:
    """:func:`atomic_output` with ``keep``, without compression: the bytes written are added as
    they are after the file's or object's (pieces of a rejects file, gzip members already,
    put together)."""
    with _written(path, True, None) as out:
        yield out


@contextmanager
def _written(path: str, keep: bool, read_as: Stamp | None) -> Iterator[BinaryIO]:
    if fs.is_url(path):  # an object, written whole or not at all (no stamp: --in-place is refused there)
        with fs.remote_output(path) as remote:
            if keep and fs.exists(path, UnwritableOutput):
                with fs.open_input(path) as earlier:
                    shutil.copyfileobj(earlier, remote, 1 << 20)
            yield remote
        return
    if is_stream(path):
        with _stream(path) as out:
            yield out
        return
    target = real_file(path)
    if not keep:
        with _renamed_over(target, path, read_as) as out:
            yield out
        return
    with io.BufferedRandom(TargetFile(_nameless(target, path), path, "rb+")) as spool:
        yield spool
        spool.flush()
        spool.seek(0)
        with locked(target), _renamed_over(target, path, None) as out:
            _copy_existing(target, out)
            shutil.copyfileobj(spool, out, 1 << 20)


def _nameless(target: Path, name: str) -> int:
    """A descriptor of a new file without a name in ``target``'s directory (``O_TMPFILE``,
    or a temporary file removed at once where the file system has none): what a run adds to
    a file waits there, and a kill leaves nothing."""
    with unwritable(name):
        nameless = getattr(os, "O_TMPFILE", 0)  # Linux only
        if nameless:
            try:
                return os.open(target.parent, nameless | os.O_RDWR | os.O_CLOEXEC, 0o600)
            except OSError:
                pass  # a file system without it
        fd, tmp_name = tempfile.mkstemp(dir=target.parent)
        os.unlink(tmp_name)
        return fd


@contextmanager
def _stream(path: str) -> Iterator[BinaryIO]:
    """``path``, a stream (:func:`is_stream`), opened for writing without truncating it (a
    ``/dev/stdout`` that is a file opened with ``>>`` keeps what it held)."""
    with unwritable(path):
        raw = io.FileIO(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC), "wb")
    with raw, unwritable(path), io.BufferedWriter(raw) as out:
        yield out
        out.flush()


@contextmanager
def _renamed_over(target: Path, name: str, read_as: Stamp | None) -> Iterator[BinaryIO]:
    """A :class:`SyncingFile` beside the file ``target`` (``name`` as given, for errors),
    renamed over it when the block ends without an exception (and, with ``read_as``, while
    ``target`` is still as stamped), removed otherwise."""
    fd, tmp_name = temp_beside(target)
    try:
        raw = SyncingFile(fd, name)
        with io.BufferedWriter(raw) as tmp:
            yield tmp
            tmp.flush()
            raw.sync()
        change = read_as.change(Stamp.of(target)) if read_as is not None else None
        if change is not None:
            kept = _set_aside(tmp_name, target)
            raise InputChanged(
                f"{name}: changed while histmig read it ({change}): it is kept as it is, and the migrated copy "
                f"of what was read is {kept}",
                kept,
            )
        with unwritable(name):
            os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def _set_aside(tmp_name: str, target: Path) -> str:
    """Give the complete temporary file ``tmp_name`` the first free name of
    ``NAME.migrated.EXT``, ``NAME.migrated-2.EXT``, ... beside ``target`` (``EXT`` its format
    suffix, ``.jsonl.gz`` whole, so a later run tells the format), never replacing a file;
    the name given."""
    stem, dot, ext = target.name.removesuffix(".gz").rpartition(".")
    if not dot or not stem:
        stem, ext = target.name.removesuffix(".gz"), ""
    ext = (f".{ext}" if ext else "") + (".gz" if target.name.endswith(".gz") else "")
    for n in range(1, 10_000):
        candidate = target.with_name(f"{stem}.migrated{'' if n == 1 else f'-{n}'}{ext}")
        try:
            os.link(tmp_name, candidate)
        except FileExistsError:
            continue
        with unwritable(candidate):
            os.unlink(tmp_name)
        return str(candidate)
    raise UnwritableOutput(f"{target}: no free name beside it for the migrated copy")


def lock_file(target: str | Path) -> Path:
    """The lock file :func:`locked` holds for a file added to at ``target``: ``NAME.lock``
    beside the file its links point to (a run reads or writes no such file: see
    :func:`histmig.run.paths.check_apart`)."""
    real = real_file(target)
    return real.with_name(f"{real.name}.lock")


@contextmanager
def locked(target: Path) -> Iterator[None]:
    """Hold the lock file ``TARGET.lock`` beside ``target`` (an exclusive ``flock``), waiting
    for a run that holds it: concurrent runs adding to one rejects file add theirs one after
    the other. The lock file is removed while still held, so a run that waited on it takes
    it again by name (a lock on a removed file locks nothing); one a killed run left is just
    taken (the kernel dropped its lock). A run that has to wait says so on stderr, once, so
    that it is not taken for hung. Raises :class:`UnwritableOutput` naming ``target``."""
    lock = lock_file(target)
    told = False
    while True:
        with unwritable(target):
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not told:
                    told = True
                    print(
                        terminal(f"histmig: waiting for another run adding to {target} (it holds {lock})"),
                        file=sys.stderr,
                        flush=True,
                    )
                fcntl.flock(fd, fcntl.LOCK_EX)
            held = os.fstat(fd)
            now = os.stat(lock)
            if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                break
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    try:
        yield
    finally:
        Path(lock).unlink(missing_ok=True)
        os.close(fd)


def _copy_existing(path: Path, out: BinaryIO) -> None:
    """Copy the bytes of the file at ``path``, if there is one, to ``out``."""
    try:
        source = open(path, "rb")  # noqa: SIM115 (apart from the with: only the open may find no file)
    except FileNotFoundError:
        return
    with source, unwritable(path):
        shutil.copyfileobj(source, out, 1 << 20)
