"""Storage formats, one module each, found automatically; and the one registry that tells a
path's format and what its output is written as.

Every module of this package that defines ``FORMAT`` (a :class:`~histmig.sources.base.Format`)
is a format: adding one is one module and its test file. Their heavy libraries (pyarrow,
duckdb) are imported when first used (:func:`~histmig.sources.base.lazy`), so finding the
formats costs a JSONL run nothing. Every command asks :func:`input_paths` (the files the
INPUT arguments name, each with its format) and :func:`output_paths` (where each is
written, by the one rule of README "Outputs"); nothing else looks at a path's suffix.
"""

from __future__ import annotations

import glob
import importlib
import os
import pkgutil
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from histmig.errors import UnreadableInput, UsageError
from histmig.redact import location
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
        elif os.path.isdir(path):
            found += _directory(path, explicit)
        else:
            matches = sorted(match for match in glob.glob(path) if os.path.isfile(match))
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
    return os.path.isdir(path) or (not os.path.exists(path) and bool(_GLOB_CHARS & set(path)))


def _directory(path: str, explicit: str | None) -> list[tuple[str, Format]]:
    """The input files of the directory ``path`` (see :func:`input_paths`)."""
    files = sorted(
        entry.path
        for entry in os.scandir(path)
        if entry.is_file() and not entry.name.startswith(".") and not entry.name.endswith(REJECTS_SUFFIX)
    )
    if explicit is not None:
        chosen = [(file, format_of(file, explicit)) for file in files]
    else:
        chosen = [(file, fmt) for file in files if (fmt := named_format(file)) is not None and fmt.in_directories]
    if not chosen:
        kinds = ", ".join(suffix for fmt in formats().values() if fmt.in_directories for suffix in fmt.suffixes)
        raise UnreadableInput(
            f"{path}: no input in this directory (files ending in {kinds}; --format json|jsonl reads every file)"
        )
    return chosen


def output_format(input_format: Format, output: str) -> str:
    """The format an input of ``input_format`` is written as to the file ``output``: the one
    its name tells among those the input can be written as; a name that tells none gets the
    first (a columnar input only when the name has no suffix at all). Raises :class:`UsageError`
    when ``output`` is stdout for a columnar input, or its name asks for a format the input
    cannot be written as."""
    if output == "-":
        if input_format.columnar:
            raise UsageError(
                f"a {input_format.description} input is written to a {_suffixes(input_format.written_as)} file, "
                "not to stdout"
            )
        return input_format.written_as[0]
    named = named_format(output)
    if named is not None and named.name in input_format.written_as:
        return named.name
    if named is None and (not input_format.columnar or not Path(output).suffix):
        return input_format.written_as[0]
    kinds = " or ".join(
        f"{fmt.description} ({fmt.suffixes[0]})" for fmt in map(formats().get, input_format.written_as) if fmt
    )
    what = kinds if input_format.columnar else f"{input_format.description} ({', '.join(input_format.suffixes)})"
    raise UsageError(f"{output}: this input is written as {what}; choose an output name that says so")


def output_paths(
    inputs: Sequence[tuple[str, Format]], output: str, into_directory: bool
) -> tuple[list[str], str | None]:
    """Where each of ``inputs`` is written for the OUTPUT argument ``output`` (README
    "Outputs", the one rule): the files, in input order, and the directory to create, if
    any. OUTPUT is a directory when ``into_directory`` (several inputs, a directory or a
    glob was named), when it is one, or when it ends in ``/``: each input is then written
    into it under its own name (:func:`own_name`); else it is the one input's file, written
    as :func:`output_format` says. ``-`` is stdout, for JSON/JSONL inputs: one, or several
    JSONL ones written one after another. Raises :class:`UsageError` for an OUTPUT that
    cannot take these inputs (a file name for several, a name that asks for another format,
    two inputs of one name)."""
    if output == "-":
        if len(inputs) > 1 and any(fmt.name != "jsonl" for _, fmt in inputs):
            raise UsageError(
                "several inputs go to stdout only when every one is JSONL (a JSON document or a table needs a "
                "file of its own); name a directory"
            )
        for _, fmt in inputs:
            output_format(fmt, output)
        return ["-"] * len(inputs), None
    if into_directory or os.path.isdir(output) or output.endswith(("/", os.sep)):
        return _into_directory(inputs, output)
    ((_, fmt),) = inputs
    output_format(fmt, output)
    return [output], None


def _into_directory(inputs: Sequence[tuple[str, Format]], output: str) -> tuple[list[str], str | None]:
    if os.path.exists(output) and not os.path.isdir(output):
        raise UsageError(
            f"{output}: several inputs are written into a directory, each under its own name, and this is a file"
        )
    named = named_format(output.rstrip("/" + os.sep))
    if not os.path.exists(output) and named is not None:
        raise UsageError(
            f"{output}: several inputs are written into a directory, each under its own name; this name is a "
            f"{named.description} file's (name a directory)"
        )
    names = [own_name(path, fmt) for path, fmt in inputs]
    by_name: dict[str, str] = {}
    for (path, _), name in zip(inputs, names):
        if name in by_name:
            raise UsageError(f"{output}: {by_name[name]} and {path} would both be written as {name}")
        by_name[name] = path
    return [os.path.join(output, name) for name in names], output


def own_name(path: str, fmt: Format) -> str:
    """The name an input is written under in an OUTPUT directory: its own file name, with
    the suffix of the format it is written as when that is not its own (a DuckDB file
    ``chats.duckdb`` as ``chats.parquet``). Stdin is ``stdin.jsonl``."""
    if path == "-":
        return "stdin.jsonl"
    name = os.path.basename(path.rstrip("/" + os.sep))
    if fmt.name in fmt.written_as:
        return name
    suffix = next((s for s in fmt.suffixes if name.lower().endswith(s)), "")
    return name[: len(name) - len(suffix)] + formats()[fmt.written_as[0]].suffixes[0]


def _suffixes(names: tuple[str, ...]) -> str:
    return " or ".join(formats()[name].suffixes[0] for name in names)


def input_size(path: str) -> int | None:
    """The size in bytes of a regular, uncompressed input file (for a progress bar), else ``None``."""
    if path == "-" or path.lower().endswith(".gz"):
        return None
    try:
        return os.stat(path).st_size
    except OSError:
        return None
