"""Where each input is written: the one rule of README "Outputs" (a file, stdout, or a
directory where each input is written under its own name) and the format each output is
written as. Part of planning a run (:mod:`histmig.run.plan`), which gives each input's
destination its output path and format; a source writes what its destination says."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from histmig.errors import UnwritableOutput, UsageError
from histmig.sources import formats, fs, named_format, relative_path
from histmig.sources.base import Format


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
    inputs: Sequence[tuple[str, Format]], output: str, into_directory: bool, roots: Sequence[str] = ()
) -> tuple[list[str], str | None]:
    """Where each of ``inputs`` is written for the OUTPUT argument ``output`` (README
    "Outputs", the one rule): the files, in input order, and the directory to create, if
    any. OUTPUT is a directory when ``into_directory`` (several inputs, a directory or a
    glob was named), when it is one, or when it ends in ``/``: each input is then written
    into it under its own name (:func:`own_name`), under its own path below the INPUT
    directory of ``roots`` it was found in (a partitioned dataset's tree kept); else it is the one input's file, written
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
    if into_directory or output.endswith(("/", os.sep)) or (not fs.is_url(output) and os.path.isdir(output)):
        return _into_directory(inputs, output, roots)
    ((_, fmt),) = inputs
    output_format(fmt, output)
    return [output], None


def _into_directory(
    inputs: Sequence[tuple[str, Format]], output: str, roots: Sequence[str]
) -> tuple[list[str], str | None]:
    if not fs.is_url(output) and os.path.exists(output) and not os.path.isdir(output):
        raise UsageError(
            f"{output}: several inputs are written into a directory, each under its own name, and this is a file"
        )
    named = named_format(output.rstrip("/" + os.sep))
    if not fs.exists(output, UnwritableOutput) and named is not None:
        raise UsageError(
            f"{output}: several inputs are written into a directory, each under its own name; this name is a "
            f"{named.description} file's (name a directory)"
        )
    names = [os.path.join(*_folders(path, roots), own_name(path, fmt)) for path, fmt in inputs]
    by_name: dict[str, str] = {}
    for (path, _), name in zip(inputs, names):
        if name in by_name and by_name[name] == path:
            raise UsageError(f"{path} is given twice (by two INPUTs, a directory or a glob): give it once")
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
    suffix = fmt.suffix_of(name)
    return name[: len(name) - len(suffix)] + formats()[fmt.written_as[0]].suffixes[0]


def _folders(path: str, roots: Sequence[str]) -> list[str]:
    """The directories between the first of the INPUT directories ``roots`` that holds the file
    ``path`` and the file (none when no root holds it)."""
    for root in roots:
        if fs.is_url(root) != fs.is_url(path):
            continue
        if fs.is_url(root):
            if path.startswith(root.rstrip("/") + "/"):
                return relative_path(path, root).split("/")[:-1]
            continue
        relative = os.path.relpath(path, root)
        if not relative.startswith(os.pardir + os.sep) and not os.path.isabs(relative):
            return relative.split(os.sep)[:-1]
    return []


def _suffixes(names: tuple[str, ...]) -> str:
    return " or ".join(formats()[name].suffixes[0] for name in names)
