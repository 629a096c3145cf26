"""Nothing a run writes may be something it reads, or something else it writes (issue 23):
every path a run writes (OUTPUT, ``--report``, ``--rejects``, the rejects file beside an
output, an in-place input, a ``--to-table``'s database) is held against every file it reads
and every other path it writes, as files, not names.

Two paths are the same file when they are one inode (``os.stat``: ``st_dev`` and ``st_ino``,
through any symlink or hard link) or, for one that does not exist yet, when they resolve to
one real path (``..`` and symlinks in the directories, a dangling link's target); two URLs
when they are the same URL (an object store's key). ``-``
(stdin, stdout) is no file; a database URL is no file either.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Sequence
from typing import NamedTuple

from histmig.errors import SamePath
from histmig.sources import fs
from histmig.sources.atomic import is_stream, lock_file
from histmig.sources.base import Destination

Planned = tuple[str, Destination]
"""An input file and its own destination."""


class Named(NamedTuple):
    """A file a run touches, as the error names it: ``what`` it is (``--report``, ``the
    input``) and its ``path`` as given."""

    what: str
    path: str


def file_key(path: str) -> tuple[object, ...] | None:
    """What tells the file ``path`` names from every other: its device and inode when it
    exists, else its real path (``None`` for ``-``)."""
    if path == "-":
        return None
    if fs.is_url(path):
        return ("url", path.rstrip("/"))
    try:
        found = os.stat(path)
    except OSError:
        return ("missing", os.path.realpath(path))
    return ("inode", found.st_dev, found.st_ino)


def _reads(inputs: Sequence[Planned]) -> list[Named]:
    """The files the run reads (an object's URL is one, a database URL none; stdin is one
    when it is redirected from a regular file, ``< in.jsonl``, as ``/dev/stdin``)."""
    found = [
        Named("the input", path) for path, _ in inputs if path != "-" and (fs.is_object(path) or os.path.exists(path))
    ]
    if any(path == "-" for path, _ in inputs) and _is_a_file(sys.stdin):
        found.append(Named("stdin", "/dev/stdin"))
    return found


def _is_a_file(stream: object) -> bool:
    """Whether the standard stream ``stream`` is a regular file (``< in.jsonl``, ``>> out.jsonl``)."""
    try:
        return stat.S_ISREG(os.fstat(stream.fileno()).st_mode)  # type: ignore[attr-defined]
    except (OSError, ValueError, AttributeError):  # no descriptor (a test's stream), or closed
        return False


def _writes(inputs: Sequence[Planned], rejects: str | None, report: str | None) -> list[Named]:
    """The paths the run writes besides its in-place inputs, each once: every OUTPUT file,
    every rejects file (``rejects``, given as ``--rejects``, or the one derived beside an
    output or an in-place input) and its lock file, and the ``report`` file."""
    found: dict[tuple[str, str], Named] = {}
    for _, destination in inputs:
        output, rejected = destination.output, destination.rejects
        if output is not None and output != "-":
            found.setdefault(("output", output), Named("OUTPUT", output))
        if rejected is not None and rejected != "-":
            found.setdefault(
                ("rejects", rejected), Named("--rejects" if rejected == rejects else "the rejects file", rejected)
            )
    if report is not None and report != "-":
        found.setdefault(("report", report), Named("--report", report))
    if "-" in (report, rejects, *(destination.output for _, destination in inputs)) and _is_a_file(sys.stdout):
        found[("stdout", "-")] = Named("stdout", "/dev/stdout")  # `- >> in.jsonl` would read what it adds
    # a rejects file is added to under a lock file beside it, which the run creates and removes
    locks = [
        Named(f"the lock file of {named.what} {named.path},", str(lock_file(named.path)))
        for (kind, _), named in found.items()
        if kind == "rejects" and not is_stream(named.path)
    ]
    return [*found.values(), *locks]


def check_apart(
    inputs: Sequence[Planned],
    *,
    rejects: str | None = None,
    report: str | None = None,
    beside: Sequence[tuple[str, str]] = (),
) -> None:
    """Raise :class:`~histmig.errors.SamePath` (exit code 2) naming both paths when a path
    the run writes (:func:`_writes`; ``rejects`` and ``report`` as given) is a file it reads
    (an input, among them a database it writes in place or adds a ``--to-table`` to, or a
    file ``beside`` one, ``(input, file)``, that holds its data too, there yet or not: SQLite's ``-wal``,
    :attr:`~histmig.sources.base.Format.companions`) or another path it writes, or, in place,
    when one file is two of its inputs (a link, ``./``, a hard link: it would be migrated, and
    written over, twice)."""
    writes = _writes(inputs, rejects, report)
    reads = _reads(inputs) + [Named(f"a file of the input {path},", file) for path, file in beside]
    rewritten = reads if any(destination.in_place for _, destination in inputs) else []
    for at, read in enumerate(rewritten):
        key = file_key(read.path)
        for other in rewritten[:at]:
            if file_key(other.path) == key:
                raise SamePath(read.what, read.path, other.what, other.path)
    for at, written in enumerate(writes):
        key = file_key(written.path)
        # two outputs sent to one character device (``/dev/null``) destroy nothing: it keeps no bytes
        others = reads if _is_device(written.path) else reads + writes[:at]
        for other in others:
            if file_key(other.path) == key:
                raise SamePath(written.what, written.path, other.what, other.path)


def _is_device(path: str) -> bool:
    """Whether ``path`` is a character device (``/dev/null``, a terminal)."""
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except OSError:
        return False
