"""Dispatch for columnar inputs: Parquet files and DuckDB tables (histmig.sources.parquet,
histmig.sources.duckdb). :func:`histmig.runner.run` hands such an input here; the report
and exit codes are those of the JSONL path, fed the same outcomes.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from dataclasses import dataclass

from histmig.pipeline import Options
from histmig.report import Report
from histmig.sources import UnreadableInput

DUCKDB_SUFFIXES = (".duckdb", ".db", ".ddb")
PARQUET_SUFFIXES = (".parquet", ".pq")


class ColumnError(UnreadableInput):
    """The messages column (or ``--id-column``) is missing or of a type histmig cannot
    migrate; also a table or option that does not fit the input (exit code 2)."""


def is_duckdb_input(path: str) -> bool:
    """True for a ``.duckdb``, ``.db`` or ``.ddb`` path."""
    return path.lower().endswith(DUCKDB_SUFFIXES)


def is_parquet_input(path: str) -> bool:
    """True for a ``.parquet``/``.pq`` path or glob (``data/*.parquet``), or a directory."""
    return path.lower().endswith(PARQUET_SUFFIXES) or os.path.isdir(path)


@dataclass(frozen=True)
class TableOptions:
    """Options of a columnar input: the ``messages_column`` (``None``: auto-detect), the
    ``id_column`` naming records in the report, and for DuckDB the ``table`` to read and
    where ``convert`` writes: ``to_table`` (a new table) or ``in_place``."""

    messages_column: str | None = None
    id_column: str | None = None
    table: str | None = None
    to_table: str | None = None
    in_place: bool = False

    @property
    def given(self) -> bool:
        """True when any option is set (they then require a columnar input)."""
        return self != TableOptions()


def is_tabular(input_path: str, table: TableOptions | None = None) -> bool:
    """True when ``input_path`` is a Parquet or DuckDB input. Raises
    :class:`ColumnError` when table options are given for any other
    input (a usage error)."""
    if input_path != "-" and (is_duckdb_input(input_path) or is_parquet_input(input_path)):
        return True
    if table is not None and table.given:
        raise ColumnError(f"{input_path}: --messages-column, --id-column, --table, --to-table and --in-place need a Parquet or DuckDB input")
    return False


def use_jemalloc() -> None:
    """Have Arrow's jemalloc pool be the default memory pool of this process and of the
    workers it forks, for a command-line run on a columnar input: sets
    ``ARROW_DEFAULT_MEMORY_POOL=jemalloc``, which Arrow reads once, when pyarrow is imported;
    so it does nothing once pyarrow is imported, when the variable is set already, or when
    pyarrow's build has no jemalloc (its ``arrow/util/config.h`` says; Arrow would warn).
    pyarrow 26's default, mimalloc, gives freed pages back to the kernel and faults them in
    again: in a fresh install, the bench's Parquet 10 % archive took 1.20 s (0.5 s of it in
    the kernel), 1.00 s with jemalloc, and the 1.1 GB file 7.7 s against 7.2 s, at 139-142 MB
    peak RSS either way (set after the import, 150-154 MB: mimalloc has started by then).
    Not done by the library (:func:`histmig.runner.run`): the pool of a program that
    imports histmig is its own."""
    if "ARROW_DEFAULT_MEMORY_POOL" in os.environ or "pyarrow" in sys.modules:
        return
    spec = importlib.util.find_spec("pyarrow")
    if spec is None or not spec.submodule_search_locations:
        return
    config = Path(spec.submodule_search_locations[0], "include", "arrow", "util", "config.h")
    try:
        if "#define ARROW_JEMALLOC\n" in config.read_text(errors="replace"):
            os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "jemalloc"
    except OSError:
        return


def run_tabular(
    input_path: str,
    output_path: str | None,
    options: Options,
    table: TableOptions,
    *,
    progress: Callable[[int], None] | None = None,
    jobs: int = 1,
) -> Report:
    """Run the pipeline over a Parquet or DuckDB input (see :func:`is_tabular`) and return
    the report. ``jobs`` worker processes share the row groups of a Parquet input
    (:func:`histmig.sources.parquet.run_parquet`); a DuckDB input runs in this process.
    Raises :class:`ColumnError` (exit 2) for options that do not fit the input and for a
    missing file, table or column. pyarrow and duckdb are imported here, not at start-up (a
    JSONL run never needs them), and duckdb only for a DuckDB input."""
    if is_duckdb_input(input_path):
        from histmig.sources.duckdb import run_duckdb

        return run_duckdb(
            input_path,
            output_path,
            options,
            table=table.table,
            messages_column=table.messages_column,
            id_column=table.id_column,
            to_table=table.to_table,
            in_place=table.in_place,
        )
    if table.table is not None or table.to_table is not None or table.in_place:
        raise ColumnError(f"{input_path}: --table, --to-table and --in-place need a DuckDB input (.duckdb, .db)")
    from histmig.sources.parquet import run_parquet

    return run_parquet(
        input_path,
        output_path,
        options,
        messages_column=table.messages_column,
        id_column=table.id_column,
        progress=progress,
        jobs=jobs,
    )
