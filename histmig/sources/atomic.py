"""Files: opening an input stream (stdin, gzip), and writing an output atomically (a temporary
file beside the target, renamed when complete), for every format that reads or writes files.
"""

from __future__ import annotations

import gzip
import io
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from histmig.errors import UnreadableInput, UnwritableOutput


def check_writable(path: str) -> None:
    """Raise :class:`UnwritableOutput` unless a file can be created at ``path`` (``-`` is
    stdout): its directory must exist and be writable, and it must not be a directory."""
    if path == "-":
        return
    target = Path(path)
    folder = target.parent
    if target.is_dir():
        raise UnwritableOutput(f"{path}: is a directory")
    if not folder.is_dir():
        raise UnwritableOutput(f"{path}: no such directory {str(folder)!r}")
    if not os.access(folder, os.W_OK):
        raise UnwritableOutput(f"{path}: cannot write in {str(folder)!r}")


def check_directory(path: str) -> None:
    """Raise :class:`UnwritableOutput` unless files can be written in the directory ``path``:
    it is one and is writable, or it can be created (its parent is a writable directory)."""
    folder = Path(path)
    if folder.is_dir():
        if not os.access(folder, os.W_OK):
            raise UnwritableOutput(f"{path}: cannot write in this directory")
        return
    parent = folder.resolve().parent
    if not parent.is_dir():
        raise UnwritableOutput(f"{path}: no such directory {str(parent)!r} to create it in")
    if not os.access(parent, os.W_OK):
        raise UnwritableOutput(f"{path}: cannot create this directory in {str(parent)!r}")


@contextmanager
def input_stream(path: str) -> Iterator[BinaryIO]:
    """A binary stream over ``path`` (stdin for ``-``), gunzipped when it starts with the
    gzip magic bytes. Raises :class:`UnreadableInput` when the file cannot be opened."""
    if path == "-":
        with _gunzipped(sys.stdin.buffer) as stream:
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


def temp_beside(target: Path) -> tuple[int, str]:
    """A new temporary file in ``target``'s directory, to be renamed over ``target`` when
    complete: ``(descriptor, name)``, with the permission bits :func:`new_file_mode` gives
    (``mkstemp`` makes it ``0o600``; renamed as is, it would change them). Raises
    :class:`UnwritableOutput` naming ``target`` when the directory takes no new file."""
    with unwritable(target):
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    os.fchmod(fd, new_file_mode(target))
    return fd, name


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


class SyncingFile(io.FileIO):
    """A file opened for writing whose data goes to disk while it is written: every
    :data:`SYNC_EVERY` bytes, a background thread (started at the first of them, so a
    process forked before holds no thread) calls ``fdatasync``, so the ``fsync`` of
    :meth:`sync`, which makes the file durable, has little left to wait for (~0.15 s on a
    300 MB output otherwise). An error the thread meets is raised by :meth:`sync`; every
    error is raised as :class:`UnwritableOutput` naming ``target``."""

    def __init__(self, fd: int, target: str | Path = "") -> None:
        super().__init__(fd, "wb")
        self.target = target
        self._unsynced = 0
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._error: OSError | None = None

    def write(self, data: Any) -> int:
        with unwritable(self.target):
            written = super().write(data) or 0
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


@contextmanager
def atomic_output(path: str, *, keep: bool = False) -> Iterator[BinaryIO]:
    """A binary stream that becomes ``path`` only when the block ends without an exception:
    written to a temporary file in the same directory (a :class:`SyncingFile`), flushed,
    fsynced and renamed over the target, so a crash leaves either the previous file or
    none; a write that fails raises :class:`UnwritableOutput` naming ``path``. ``-`` is stdout.
    A target ending in ``.gz`` is gzip-compressed (with a fixed mtime, so output bytes are
    reproducible). With ``keep``, the new file starts with the
    target's current bytes, if it exists, so what is written is added after them (a
    rejects file of an earlier run is never replaced; a gzip target gets one more member)."""
    if path == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    target = Path(path)
    fd, tmp_name = temp_beside(target)
    try:
        raw = SyncingFile(fd, path)
        with io.BufferedWriter(raw) as tmp:
            if keep:
                _copy_existing(target, tmp)
            if target.name.lower().endswith(".gz"):
                with gzip.GzipFile(filename="", mode="wb", fileobj=tmp, mtime=0) as zipped:
                    yield zipped  # type: ignore[misc]  # a GzipFile is a binary stream
            else:
                yield tmp
            tmp.flush()
            raw.sync()
        with unwritable(target):
            os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def _copy_existing(path: Path, out: BinaryIO) -> None:
    """Copy the bytes of the file at ``path``, if there is one, to ``out``."""
    try:
        source = open(path, "rb")  # noqa: SIM115 (apart from the with: only the open may find no file)
    except FileNotFoundError:
        return
    with source:
        shutil.copyfileobj(source, out, 1 << 20)
