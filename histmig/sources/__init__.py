"""Storage formats, one module each, found automatically; and the one registry that tells a
path's format and what its output is written as.

Every module of this package that defines ``FORMAT`` (a :class:`~histmig.sources.base.Format`)
is a format: adding one is one module and its test file. Their heavy libraries (pyarrow,
duckdb) are imported when first used (:func:`~histmig.sources.base.lazy`), so finding the
formats costs a JSONL run nothing. Every command asks :func:`format_of` and
:func:`output_format`; nothing else looks at a path's suffix.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from functools import cache
from pathlib import Path

from histmig.sources.base import Format, UnreadableInput, UsageError

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
    """The format of the input ``path``: ``explicit`` (``--format``) when given; ``jsonl``
    for ``-`` (stdin); else the format that claims the path (a directory, a glob, a URL), else
    the one whose suffix its name ends in. Raises :class:`UnreadableInput` when none does, or
    :class:`UsageError` for an unknown ``explicit`` name."""
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
    for fmt in known.values():
        if fmt.named(path):
            return fmt
    raise UnreadableInput(f"{path}: cannot tell the format from the name (use --format json|jsonl)")


def named_format(path: str) -> Format | None:
    """The format whose suffix ``path``'s name ends in, if any."""
    return next((fmt for fmt in formats().values() if fmt.named(path)), None)


def output_format(input_format: Format, output: str) -> str:
    """The format an input of ``input_format`` is written as to ``output``: the one its name
    tells among those the input can be written as; a name that tells none gets the first (a
    columnar input only when the name has no suffix: it is the name of a directory or a
    Parquet file). Raises :class:`UsageError` when ``output`` is stdout for a columnar input,
    or its name asks for a format the input cannot be written as."""
    if output == "-":
        if input_format.columnar:
            raise UsageError(f"a {input_format.description} input is written to a {_suffixes(input_format.written_as)} file, not to stdout")
        return input_format.written_as[0]
    named = named_format(output)
    if named is not None and named.name in input_format.written_as:
        return named.name
    if named is None and (not input_format.columnar or not Path(output).suffix):
        return input_format.written_as[0]
    kinds = " or ".join(f"{fmt.description} ({fmt.suffixes[0]})" for fmt in map(formats().get, input_format.written_as) if fmt)
    what = kinds if input_format.columnar else f"the input's own format ({_names(f for f in formats().values() if not f.columnar)})"
    raise UsageError(f"{output}: this input is written as {what}; choose an output name that says so")


def _names(fmts) -> str:
    return " or ".join(fmt.description for fmt in fmts)


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
