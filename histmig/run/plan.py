"""Planning a run: every input file with its format and its own destination, and every
destination rule, in one place (README "Outputs").

:func:`plan` resolves the INPUT arguments once (:func:`~histmig.sources.input_paths`), checks
that each input takes the options given (each option's :attr:`~histmig.options.Flag.formats`,
declared once on :class:`~histmig.options.Options`), decides where each input is written (the
one rule of :func:`~histmig.run.outputs.output_paths`; its rejects file), and refuses, with a
usage error before anything is read or written: destinations that do not fit the command,
the engine or each other, an output that cannot be created, and any path the run writes that
is a file it reads or writes besides (:mod:`histmig.run.paths`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePath
from typing import Any, Literal

from histmig import redact
from histmig.errors import UnwritableOutput, UsageError
from histmig.options import Command, Options, flags, given
from histmig.run.outputs import output_format, output_paths
from histmig.run.paths import check_apart, file_key
from histmig.sources import (
    REJECTS_SUFFIX,
    expands,
    formats,
    fs,
    input_paths,
    named_format,
    partition_of,
    partitions,
    root,
)
from histmig.sources.atomic import check_writable, is_stream
from histmig.sources.base import Destination, Format
from histmig.sources.fs import check_creatable

Engine = Literal["local", "spark"]
ENGINES: tuple[Engine, ...] = ("local", "spark")


@dataclass(frozen=True)
class Planned:
    """One input file of a run: its ``path``, its ``format`` and its own ``destination``
    (its output file, its rejects file, or the table it writes)."""

    path: str
    format: Format
    destination: Destination


@dataclass(frozen=True)
class Planning:
    """A run as planned: the ``command``, its ``input`` as given (one path or several), the
    ``destination`` as given, every input file (``inputs``, in order), the output directory
    to create (``directory``, if any), the ``engine`` and the Spark master; for the Spark
    engine over a partitioned dataset, the INPUT directory (``base``) and its partition
    columns (``partition_by``, outermost first); ``objects``: the Spark engine over object
    storage, each input object converted by the local engine's per-file code on an executor
    (:func:`histmig.run.spark.migrate_objects`), to its destination by the local engine's rule."""

    command: Command
    input: str | Sequence[str]
    destination: Destination
    inputs: list[Planned]
    directory: str | None = None
    engine: Engine = "local"
    spark_master: str | None = None
    base: str | None = None
    partition_by: tuple[str, ...] = ()
    objects: bool = False

    @property
    def paths(self) -> list[str]:
        """The INPUT arguments."""
        return paths_of(self.input)

    @property
    def columnar(self) -> bool:
        """Whether any input is of a columnar format (Arrow is loaded)."""
        return any(item.format.columnar for item in self.inputs)


def paths_of(input: str | Sequence[str]) -> list[str]:
    """The INPUT arguments: one path, or several."""
    return [input] if isinstance(input, str) else list(input)


def plan(
    command: Command,
    input: str | Sequence[str],
    destination: Destination,
    options: Options,
    *,
    engine: str = "local",
    spark_master: str | None = None,
    report: str | None = None,
) -> Planning:
    """The :class:`Planning` of a run of ``command`` over ``input`` (one path or several) to
    ``destination`` with ``options``, on ``engine``; ``report`` is the file the caller writes
    the report to (``-``: stdout), checked with the rest. Raises
    :class:`~histmig.errors.UsageError`, :class:`~histmig.errors.UnreadableInput` or
    :class:`~histmig.errors.UnwritableOutput` when the inputs, the options and the
    destinations do not fit, before anything is read or written;
    :class:`~histmig.errors.SamePath` (a usage error) for a path written twice, or written
    and read."""
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r} (one of: {', '.join(ENGINES)})")
    _check_written(("OUTPUT", destination.output), ("--rejects", destination.rejects), ("--report", report))
    if command == "convert":
        _check_convert(input, destination, engine, spark_master)
    paths = paths_of(input)
    found = input_paths(paths, options.format)
    base: str | None = None
    partition_by: tuple[str, ...] = ()
    objects = engine == "spark" and any(fs.is_object(path) for path in paths)
    if objects:
        _check_spark_objects(paths, destination)
    elif engine == "spark":
        _check_spark(paths, found, destination)
        base, partition_by = spark_partitions(paths, found)
    if objects and options.grouping is not None and len(found) > 1:  # before check_options: what it says differs
        raise UsageError(
            f"--conversation on --engine spark over object storage ({len(found)} objects): each object is a task of "
            "its own, so a conversation over several objects would be judged in pieces; group them with the local "
            "engine (without --engine spark)"
        )
    check_options(command, found, destination, options)
    inputs, directory = _destinations(paths, found, destination, "local" if objects else engine)
    check_apart(
        [(item.path, item.destination) for item in inputs],
        rejects=destination.rejects,
        report=report,
        beside=[(item.path, item.path + suffix) for item in inputs for suffix in item.format.companions],
    )
    _check_not_read_later(
        paths,
        (("--rejects", destination.rejects), ("--report", report)),
        [item.destination.output for item in inputs if item.destination.output is not None],
    )
    return Planning(
        command,
        input,
        destination,
        inputs,
        directory,
        engine,
        spark_master,
        base,
        partition_by,
        objects,
    )


def _check_written(*paths: tuple[str, str | None]) -> None:
    """Refuse two of the named paths on stdout, and a ``--rejects`` or ``--report`` that cannot
    be created (whether OUTPUT can depends on the inputs: :func:`_destinations` checks it)."""
    on_stdout = [name for name, path in paths if path == "-"]
    if len(on_stdout) > 1:
        raise UsageError(f"{' and '.join(on_stdout)} cannot {'both' if len(on_stdout) == 2 else 'all'} go to stdout")
    for name, path in paths:
        if path is not None and name != "OUTPUT":
            check_writable(path)


def _check_convert(input: str | Sequence[str], destination: Destination, engine: str, spark_master: str | None) -> None:
    """``convert`` writes to exactly one destination: OUTPUT, ``--in-place`` (not of stdin),
    or ``--to-table`` (a table name that is not blank); on the Spark engine, OUTPUT only."""
    if engine == "spark":
        if (
            destination.output is None
            or destination.in_place
            or destination.to_table is not None
            or destination.rejects is not None
            or destination.overwrite
        ):
            raise UsageError(
                "--engine spark writes OUTPUT, a directory of Parquet files (rejected rows stay in their rows): give "
                "OUTPUT, without --in-place, --to-table, --overwrite or --rejects"
            )
        try:
            import pyspark  # noqa: F401 (only asked whether it is there)
        except ImportError as exc:
            raise UsageError(f"--engine spark needs pyspark: pip install 'histmig[spark]' ({exc})") from exc
        return
    if spark_master is not None:
        raise UsageError("--spark-master needs --engine spark")
    output, in_place, to_table = destination.output, destination.in_place, destination.to_table
    if (output is None) == (not in_place and to_table is None) or (in_place and "-" in paths_of(input)):
        raise UsageError(
            "give OUTPUT, or --in-place with a file or database INPUT (not both), or --to-table for a database input"
        )
    if in_place and to_table is not None:
        raise UsageError("give one of OUTPUT, --to-table and --in-place")
    if to_table is not None and not to_table.strip():
        raise UsageError(f"--to-table {to_table!r}: name a table")


def _check_spark(paths: list[str], found: list[tuple[str, Format]], destination: Destination) -> None:
    """The Spark engine reads Parquet files, or JSONL files (not gzipped), and writes a
    directory of files of the same format."""
    kinds = {fmt.name for _, fmt in found}
    if not (kinds == {"parquet"} or kinds == {"jsonl"}) or any(path.lower().endswith(".gz") for path, _ in found):
        raise UsageError(
            f"{', '.join(paths)}: --engine spark reads Parquet, or JSONL not gzipped (files, directories or globs of "
            "them; one format a run)"
        )
    output = destination.output
    written = found[0][1]
    if output == "-" or named_format(output) not in (None, written):  # type: ignore[arg-type]
        raise UsageError(
            f"{output}: --engine spark writes a directory of {written.description} files; name one "
            f"(no {'.jsonl' if written.name == 'parquet' else '.parquet'})"
        )


def _check_spark_objects(paths: list[str], destination: Destination) -> None:
    """The Spark engine over object storage: every input an object or prefix, and OUTPUT one
    the executors can write (no local path, which each node would have of its own)."""
    local = [path for path in paths if not fs.is_object(path)]
    output = destination.output
    if local or output is None or not fs.is_object(output) or fs.scheme(output) in fs.READ_ONLY:
        raise UsageError(
            f"{', '.join(local) or output}: --engine spark over object storage reads objects and writes objects "
            "(every INPUT and OUTPUT a URL of a store, such as s3://bucket/prefix/); its executors write each output "
            "object themselves"
        )


def spark_partitions(paths: list[str], found: list[tuple[str, Format]]) -> tuple[str | None, tuple[str, ...]]:
    """The INPUT directory and the partition columns the Spark engine reads and writes a
    partitioned dataset by (``partitionBy``): every file's ``key=value`` directories below
    the one INPUT directory, the same keys in the same order for every file (as Spark's
    partition discovery needs); ``(None, ())`` for files with no partition directory. Raises
    :class:`~histmig.errors.UsageError` for files of other keys, or partitions under several
    INPUT arguments."""
    roots = [path for path in paths if os.path.isdir(path)]
    if not roots:
        return None, ()
    keyed = [(path, tuple(key for key, _ in partitions(path, roots[0]))) for path, _ in found]
    keys = keyed[0][1]
    if not keys and all(not k for _, k in keyed):
        return None, ()
    if len(paths) > 1:
        raise UsageError(
            f"{', '.join(paths)}: --engine spark reads one partitioned dataset at a time (its directory as INPUT)"
        )
    for path, other in keyed:
        if other != keys:
            raise UsageError(
                f"{path}: its partition directories are by {_keys(other)}, {keyed[0][0]}'s by {_keys(keys)}; "
                "--engine spark writes one partitioning (convert each dataset on its own, or without --engine spark)"
            )
    return roots[0], keys


def _keys(keys: tuple[str, ...]) -> str:
    return "/".join(keys) or "none"


def _taken(destination: Destination, options: Options) -> dict[str, Any]:
    """The value of every option that is a field of ``options`` or of ``destination``."""
    return {**{k: getattr(options, k) for k in options.__dataclass_fields__}, **destination.__dict__}


def _check_not_read_later(
    paths: Sequence[str], written: Sequence[tuple[str, str | None]], outputs: Sequence[str] = ()
) -> None:
    """Raise :class:`UsageError` when a file the run writes (``written``: each option and its
    path) lies in a local input directory of ``paths`` under a name a run over that directory
    reads as an input (not hidden, not ``*.rejects.jsonl``), or when it or one of the
    ``outputs`` is a file a later run over an input would read: in the directory or its
    ``key=value`` partition directories (an OUTPUT may go to another subdirectory, which is
    not read), or matched by an input glob. The next run would migrate the rejected records or
    the output again, or read a report as an archive."""
    for path in paths:
        if path == "-" or fs.is_url(path):
            continue
        globbed = not os.path.isdir(path) and expands(path)
        if not globbed and not os.path.isdir(path):
            continue
        top = os.path.realpath(path)
        for option, file in [*written, *(("OUTPUT", output) for output in outputs)]:
            if file is None or file == "-" or fs.is_url(file):
                continue
            where = os.path.realpath(file)
            if globbed:
                if PurePath(where).match(os.path.abspath(path)):
                    raise UsageError(
                        f"{option} {redact.location(file)} matches the input glob {redact.location(path)}: a later "
                        "run over it would read it as an input; write it elsewhere"
                    )
                continue
            name = os.path.basename(where)
            fmt = named_format(name)
            read = fmt is not None and fmt.in_directories and not name.startswith(".")
            inside = os.path.commonpath([top, where]) == top
            if option == "OUTPUT" and inside and read and _read_below(top, where):
                raise UsageError(
                    f"OUTPUT {redact.location(file)} is in the input directory {redact.location(path)} or a partition "
                    "directory of it, where a later run would read it as an input: write it elsewhere"
                )
            if option != "OUTPUT" and read and not name.endswith(REJECTS_SUFFIX) and inside:
                skipped = f"*{REJECTS_SUFFIX}" if option == "--rejects" else "a name starting with '.'"
                raise UsageError(
                    f"{option} {redact.location(file)} is in the input directory {redact.location(path)}, where a "
                    f"later run would read it as an input: write it elsewhere, or give it {skipped}"
                )


def _read_below(top: str, file: str) -> bool:
    """Whether a run over the directory ``top`` reads ``file`` below it: each directory
    between them is a ``key=value`` partition directory (:func:`~histmig.sources.partition_of`)."""
    folders = os.path.relpath(file, top).split(os.sep)[:-1]
    return all(partition_of(folder) is not None for folder in folders)


def check_options(
    command: Command, found: list[tuple[str, Format]], destination: Destination, options: Options
) -> None:
    """Raise :class:`~histmig.errors.UsageError` for an option that no input's format takes
    (its :attr:`~histmig.options.Flag.formats`; with inputs of several formats, each takes
    what applies to it: ``--messages-column`` for the Parquet files of a directory), naming
    that option, the input and the formats it applies to; for ``--overwrite`` without
    ``--to-table``, ``--to-table`` with several inputs or naming the table read (as its
    format compares names), ``--single-transaction`` without ``--in-place``, a columnar
    input to an export, and ``--conversation`` for ``otel-upgrade`` or several inputs (but
    Parquet files, grouped together: :attr:`~histmig.sources.base.Format.open_together`)."""
    if destination.overwrite and destination.to_table is None:
        raise UsageError(
            "--overwrite replaces the table --to-table names (an output "
            "file is always replaced, once the new one is complete)"
        )
    if destination.to_table is not None and len(found) > 1:
        raise UsageError("--to-table writes one table: give one database input")
    for path, fmt in found:
        if command.startswith("otel") and fmt.columnar:
            raise UsageError(f"{redact.location(path)}: the otel commands read JSON or JSONL, not {fmt.name}")
    if options.grouping is not None and command == "otel-upgrade":
        raise UsageError("--conversation: otel-upgrade moves each message on its own; a conversation changes nothing")
    values = _taken(destination, options)
    _check_limited(found, values)  # first: an option a format does not take is said for that format
    kinds = {fmt.name: fmt for _, fmt in found}
    together = len(kinds) == 1 and next(iter(kinds.values())).open_together is not None
    if options.grouping is not None and len(found) > 1 and not together:
        raise UsageError(
            "--conversation groups the records of one input: give one file or table, or Parquet files (a "
            "conversation's records in several JSONL files are not put together)"
        )
    if options.single_transaction and not destination.in_place:
        raise UsageError("--single-transaction goes with --in-place")
    for path, fmt in found:
        to_table, table = destination.to_table, options.table
        if (
            to_table is not None
            and table is not None
            and fmt.same_table is not None
            and fmt.same_table(to_table, table)
        ):
            where = fmt.display(path) if fmt.display is not None else path
            raise UsageError(f"{where}: --to-table names the table read; use --in-place to rewrite it")


def _check_limited(found: list[tuple[str, Format]], values: dict[str, Any]) -> None:
    """Refuse an option given (``values`` by name) that applies to formats none of ``found``
    is."""
    extra = [
        flag
        for flag in flags()
        if flag.formats is not None
        and given(flag, values.get(flag.name, flag.default))
        and not any(fmt.name in flag.formats for _, fmt in found)
    ]
    if extra:
        words = " and ".join(flag.flag for flag in extra)
        takers = _alternatives(
            [f.description for f in formats().values() if all(f.name in (flag.formats or ()) for flag in extra)]
        )
        inputs = f"{redact.location(found[0][0])}: " if len(found) == 1 else ""
        kinds = _alternatives(list(dict.fromkeys(fmt.description for _, fmt in found)))
        apply = "does" if len(extra) == 1 else "do"
        raise UsageError(
            f"{inputs}{words} {apply} not apply to a {kinds} input" + (f" (only to a {takers} one)" if takers else "")
        )


def _rewrite(fmt: Format) -> str:
    """How an input of ``fmt`` named as its own output is rewritten: ``--in-place`` where it
    applies (a Parquet file is written whole, to another name: docs/storage/parquet-duckdb.md)."""
    takers = next(flag.formats for flag in flags() if flag.name == "in_place")
    if takers is None or fmt.name in takers:
        return "use --in-place to replace it"
    return f"a {fmt.description} input is not rewritten in place: write another OUTPUT and replace the input with it"


def _alternatives(words: list[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return " or ".join(words) if len(words) < 3 else f"{', '.join(words[:-1])} or {words[-1]}"


def _destinations(
    paths: list[str], found: list[tuple[str, Format]], destination: Destination, engine: str
) -> tuple[list[Planned], str | None]:
    """Each input file with its own destination (its output by the one rule of
    :func:`~histmig.run.outputs.output_paths`, its rejects file), and the output directory to
    create, if any; the Spark engine writes one directory of every input."""
    if engine == "spark":
        files = [path for path, _ in found]
        _check_spark_output(destination.output, files)  # type: ignore[arg-type]  # a Spark run has an OUTPUT
        return [Planned(path, fmt, destination) for path, fmt in found], None
    outputs: list[str | None] = [None] * len(found)
    directory = None
    if destination.output is not None:
        several = len(paths) > 1 or any(expands(path) for path in paths)
        roots = list(filter(None, map(root, paths)))  # not stdin nor a database
        outputs, directory = output_paths(found, destination.output, several, roots)  # type: ignore[assignment]
        if directory is not None:
            check_creatable(directory, directory=True)
        elif destination.output != "-":
            check_creatable(destination.output)
    planned = []
    for (path, fmt), output in zip(found, outputs):
        if output not in (None, "-") and path != "-" and file_key(output) == file_key(path):
            raise UsageError(f"{output} is the input; {_rewrite(fmt)}")
        if directory is not None and output is not None and os.path.isdir(output):  # before any output is written
            raise UnwritableOutput(f"{output}: is a directory")
        if destination.in_place and fs.is_object(path):
            raise UsageError(
                f"{path}: --in-place is refused on object storage (a replaced object is gone unless the bucket keeps "
                "versions); write to another key or prefix as OUTPUT"
            )
        if destination.in_place and not fmt.columnar:
            if is_stream(path):  # a FIFO written back to while it is read never ends, a device keeps nothing
                raise UsageError(f"{path}: --in-place replaces a regular file, and this is none; name an OUTPUT")
            check_writable(path)
        rejects = rejects_of(destination, path, output, directory)
        written_as = output_format(fmt, output) if output is not None else None
        planned.append(Planned(path, fmt, replace(destination, output=output, rejects=rejects, written_as=written_as)))
    return planned, directory


def rejects_of(destination: Destination, path: str, output: str | None, directory: str | None) -> str | None:
    """Where an input's rejected records go: ``--rejects``; else in place ``IN.rejects.jsonl``;
    else ``OUTPUT.rejects.jsonl`` beside the OUTPUT file or directory; none for stdout (they
    stay in the output, unchanged) or when nothing is written."""
    if destination.rejects is not None:
        return destination.rejects
    if destination.in_place:
        return f"{path}.rejects.jsonl"
    if output is None or output == "-":
        return None
    return f"{(directory or output).rstrip('/' + os.sep)}.rejects.jsonl"


def _check_spark_output(output: str, inputs: list[str]) -> None:
    """Raise unless ``output`` can become the Spark engine's output directory: it can be
    created (:func:`~histmig.sources.fs.check_creatable`); if it exists, it must be an earlier
    Spark output (a directory with ``_SUCCESS``) holding none of the inputs, at any depth."""
    check_creatable(output, directory=True)
    target = Path(output)
    if not target.exists():
        return
    if not (target / "_SUCCESS").is_file():
        raise UsageError(
            f"{output}: exists and is not the output of an earlier --engine spark run (a directory with "
            "_SUCCESS); remove it or name another"
        )
    if any(
        os.path.samefile(target, folder) for f in inputs for folder in (Path(f), *Path(f).parents) if folder.exists()
    ):
        raise UsageError(f"{output}: holds the input; name another OUTPUT")
