"""Temporary files the worker processes read by place (a grouped run's spill of cells, a
copy of stdin), that leave nothing behind however the run ends.

Workers open a file by ``(path, device, inode)`` (:func:`histmig.sources.jsonl._descriptor`),
after they were forked, so a file made later must be reachable by a path. On Linux that path
is the descriptor of the process holding the file (``/proc/PID/fd/N``), and the file itself
has no name: it is gone when that process ends, even killed (SIGKILL), where a named file
would stay in the temporary directory. Where ``/proc`` does not give descriptors, the file
has a name, removed when it is closed."""

from __future__ import annotations

import os
import tempfile
from typing import IO


def worker_readable(suffix: str = "") -> tuple[IO[bytes], tuple[str, int, int]]:
    """A new temporary file, open for reading and writing (``w+b``), and the ``(path,
    device, inode)`` a worker opens it by. Closing the file removes it. Raises ``OSError``
    when it cannot be made."""
    file: IO[bytes] = tempfile.TemporaryFile(prefix="histmig-", suffix=suffix)  # noqa: SIM115 (the caller closes it)
    path = f"/proc/{os.getpid()}/fd/{file.fileno()}"
    if not os.path.exists(path):  # no such links here: a named file, removed on close
        file.close()
        file = tempfile.NamedTemporaryFile(prefix="histmig-", suffix=suffix)  # noqa: SIM115 (the caller closes it)
        path = file.name
    found = os.fstat(file.fileno())
    return file, (path, found.st_dev, found.st_ino)
