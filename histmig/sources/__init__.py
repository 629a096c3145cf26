"""Storage formats, one module each, found automatically; and the one registry that tells a
path's format and what its output is written as.

Every module of this package that defines ``FORMAT`` (a :class:`~histmig.sources.base.Format`)
is a format: adding one is one module and its test file. Their heavy libraries (pyarrow,
duckdb) are imported when first used (:func:`~histmig.sources.base.lazy`), so finding the
formats costs a JSONL run nothing. Every command asks :func:`input_paths` (the files the
INPUT arguments name, each with its format); where each is written is the run plan's
(:mod:`histmig.run.outputs`, the one rule of README "Outputs").
"""

from __future__ import annotations

import glob
import importlib
import itertools
import os
import pkgutil
from collections.abc import Iterator, Sequence
from functools import cache

from histmig.errors import UnreadableInput, UsageError
from histmig.redact import location
from histmig.sources import fs
from histmig.sources.base import Format

_HELPERS = frozenset({"base"})


@cache
def formats() -> dict[str, Format]:
    """Every format of this package by name, in the order their modules sort (``FORMAT`` of
    each module but :mod:`~histmig.sources.base`; a module without one is a helper)."""
    found: dict[str, Format] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
        if info.name in _HELPERS:
            continue
        fmt = getattr(importlib.import_module(f"{__name__}.{info.name}"), "FORMAT", None)
        if isinstance(fmt, Format):
            found[fmt.name] = fmt
    return found


def format_of(path: str, explicit: str | None = None) -> Format:
    """The format of the input file ``path``: ``explicit`` (``--format``) when given;
    ``jsonl`` for ``-`` (stdin); else the format that claims the path (a URL), else the one
    whose suffix its name ends in. Raises :class:`UnreadableInput` when no file is there or
    no format fits, or :class:`UsageError` for an unknown ``explicit`` name."""
    known = formats()
    if explicit is not None:
        if explicit not in known:
            raise UsageError(f"unknown format {explicit!r} (one of: {', '.join(known)})")
        return known[explicit]
    if path == "-":
        return known["jsonl"]
    for fmt in known.values():
        if fmt.claims is not None and fmt.claims(path):
            return fmt
    if fs.is_url(path):
        fs.check_scheme(path)
        found = named_format(path)
        if found is None:
            raise UnreadableInput(f"{location(path)}: cannot tell the format from the name (use --format json|jsonl)")
        if not found.in_directories:
            raise UsageError(
                f"{location(path)}: a {found.description} database is read from a local file, not from a URL"
            )
        return found
    if not os.path.exists(path):
        raise UnreadableInput(f"{location(path)}: no such file or directory")
    for fmt in known.values():
        if fmt.named(path):
            return fmt
    raise UnreadableInput(f"{location(path)}: cannot tell the format from the name (use --format json|jsonl)")


def named_format(path: str) -> Format | None:
    """The format whose suffix ``path``'s name ends in, if any."""
    return next((fmt for fmt in formats().values() if fmt.named(path)), None)


REJECTS_SUFFIX = ".rejects.jsonl"
"""What histmig's own rejects files end in: rejected records, not inputs, so a directory's
listing leaves them out."""

_GLOB_CHARS = frozenset("*?[")


def input_paths(paths: Sequence[str], explicit: str | None = None) -> list[tuple[str, Format]]:
    """Every input file the INPUT arguments name, in order, with its format: ``-`` (stdin),
    a file (:func:`format_of`), a directory (its files whose names tell a format read from
    directories, :attr:`Format.in_directories`, or with ``explicit``, every file; sorted;
    hidden files, subdirectories and histmig's ``*.rejects.jsonl`` files left out), or a
    glob that is not a path (its matches, sorted, each by its name). Raises
    :class:`UnreadableInput` for a path that is not there, a directory or glob that names no
    input, or a file whose format cannot be told."""
    found: list[tuple[str, Format]] = []
    for path in paths:
        if not expands(path):
            found.append((path, format_of(path, explicit)))
        elif fs.is_directory(path):
            found += _directory(path, explicit)
        else:
            matches = sorted(m for m in glob.glob(path) if os.path.exists(m) and not os.path.isdir(m))
            _regular(matches)
            if not matches:
                raise UnreadableInput(f"{location(path)}: no file matches")
            found += [(match, format_of(match, explicit)) for match in matches]
    return found


def expands(path: str) -> bool:
    """Whether the INPUT argument ``path`` names several inputs, or may: a directory, or a
    glob that is not itself a path (quoted, so the shell left it alone); not ``-`` nor a
    path a format claims (a URL)."""
    if path == "-" or any(fmt.claims is not None and fmt.claims(path) for fmt in formats().values()):
        return False
    if fs.is_url(path):
        fs.check_scheme(path)
        return fs.is_directory(path)
    return os.path.isdir(path) or (not os.path.exists(path) and bool(_GLOB_CHARS & set(path)))


def root(path: str) -> str | None:
    """The directory whose tree the INPUT argument ``path`` names files of, when it
    :func:`expands`: a directory itself; of a glob, the directory before its first component
    with a wildcard (``captured/*/*.json``: ``captured``; ``*.jsonl``: ``.``), so that the
    files of its several directories keep their folders under an OUTPUT directory. ``None``
    for any other INPUT."""
    if not expands(path):
        return None
    if fs.is_url(path) or os.path.isdir(path):
        return path
    fixed = itertools.takewhile(lambda part: not _GLOB_CHARS & set(part), path.split(os.sep))
    return os.sep.join(fixed) or (os.sep if path.startswith(os.sep) else os.curdir)


def _directory(path: str, explicit: str | None) -> list[tuple[str, Format]]:
    """The input files of the directory ``path`` (see :func:`input_paths`): its own files and
    those of its partition directories (:func:`partition_directories`), sorted by their path
    under ``path``."""
    files = sorted(_files(path), key=lambda file: relative_path(file, path).split("/"))
    if explicit is not None:
        chosen = [(file, format_of(file, explicit)) for file in files]
    else:
        chosen = [(file, fmt) for file in files if (fmt := named_format(file)) is not None and fmt.in_directories]
    _regular([file for file, _ in chosen])
    if not chosen:
        kinds = ", ".join(suffix for fmt in formats().values() if fmt.in_directories for suffix in fmt.suffixes)
        glob = unread_folders(path)[1] or "'dir/*/*.json'"
        raise UnreadableInput(
            f"{path}: no input in this directory (files ending in {kinds}, here or in key=value partition "
            f"directories; other subdirectories are not read: give each as an INPUT or a quoted glob, {glob}; "
            "--format json|jsonl reads every file)"
        )
    return chosen


def _regular(files: Sequence[str]) -> None:
    """Raise :class:`UnreadableInput` for the first of the local ``files`` (a directory's, a
    glob's) that is not a regular file: a FIFO (whose reader waits for a writer, and whose
    bytes cannot be read twice), a socket or a device, rather than leave it out unsaid."""
    special = next((file for file in files if not fs.is_url(file) and not os.path.isfile(file)), None)
    if special is not None:
        raise UnreadableInput(
            f"{special}: not a regular file (a FIFO, a socket or a device): give it as an INPUT of its own to read "
            "it as a stream"
        )


def _files(path: str, hidden: tuple[str, ...] = (".",)) -> Iterator[str]:
    """The files of the directory ``path`` and of its partition directories, at any depth;
    names starting with ``hidden`` (``.``; below the top also ``_``, as Spark and Hive write
    ``_SUCCESS``) and histmig's rejects files left out."""
    for entry in fs.entries(path):
        if entry.name.startswith(hidden) or entry.name.endswith(REJECTS_SUFFIX):
            continue
        if not entry.directory:
            yield entry.path
        elif partition_of(entry.name) is not None:
            yield from _files(entry.path, (".", "_"))


def unread_folders(path: str) -> tuple[list[str], str]:
    """Of the INPUT directory ``path`` (and of its partition directories), the subdirectories
    that are no partition directories and hold input files of their own (the tree
    ``convert`` writes of a glob, ``captured/*/*.json``), sorted, which a directory INPUT does
    not read, and the quoted glob of the first one's files below ``path`` that reads them
    (``''`` for none). A subdirectory that cannot be listed is passed over."""
    found = sorted(_unread(path))
    if not found:
        return [], ""
    depth = len(relative_path(found[0][0], path).split("/"))  # its partition directories' too
    return [folder for folder, _ in found], f"'{path.rstrip('/' + os.sep)}/{'*/' * depth}*{found[0][1]}'"


def _unread(path: str) -> Iterator[tuple[str, str]]:
    """:func:`unread_folders`' folders below ``path``, each with its :func:`_suffix`."""
    for entry in fs.entries(path):
        if not entry.directory or entry.name.startswith((".", "_")):
            continue
        if partition_of(entry.name) is not None:
            yield from _unread(entry.path)
        elif suffix := _suffix(entry.path):
            yield entry.path, suffix


def _suffix(folder: str) -> str:
    """The suffix of the first input file among the directory ``folder``'s own (``.json``),
    ``''`` for none or when it cannot be listed."""
    try:
        inner = fs.entries(folder)
    except UnreadableInput:
        return ""
    for entry in inner:
        fmt = None if entry.directory else named_format(entry.path)
        if fmt is not None and fmt.in_directories:
            return fmt.suffix_of(entry.name)
    return ""


def relative_path(path: str, root: str) -> str:
    """The file ``path`` below the directory or prefix ``root``, its parts joined by ``/``."""
    if fs.is_url(root):
        return path[len(root.rstrip("/")) + 1 :]
    return "/".join(os.path.relpath(path, root).split(os.sep))


def partition_of(name: str) -> tuple[str, str] | None:
    """The partition a directory's name spells, as Hive and Spark write it: ``(key, value)``
    of ``key=value`` (the value as spelled: ``01`` stays ``01``), else ``None``."""
    key, equals, value = name.partition("=")
    if not equals or not key or key.startswith((".", "_")):
        return None
    return key, value


def partitions(path: str, root: str) -> list[tuple[str, str]]:
    """The partitions of the file ``path`` under the INPUT directory ``root``: the
    ``(key, value)`` of each directory between them, outermost first (none for a file of
    ``root`` itself)."""
    folders = relative_path(path, root).split("/")[:-1]
    return [found for folder in folders if (found := partition_of(folder)) is not None]


def input_size(path: str) -> int | None:
    """The size in bytes of a regular, uncompressed input file (for a progress bar), else ``None``."""
    if path == "-" or path.lower().endswith(".gz"):
        return None
    try:
        return fs.size(path)
    except (OSError, UnreadableInput):
        return None
