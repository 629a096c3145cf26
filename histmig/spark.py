"""Spark: the migration as a Spark job, for lakes one machine cannot migrate in a maintenance
window (issue 17). An entry point beside :mod:`histmig.api`; the only module that imports
pyspark (``pip install 'histmig[spark]'``), and imported only by a program that asks for it
and by ``histmig convert --engine spark``.

Every partition's record batches go through :class:`~histmig.sources.arrow.ColumnMigrator`
inside ``DataFrame.mapInArrow``: the same cell function, and so the same record loop
(:func:`histmig.engine.run_records`), as the Parquet path. A cell's output depends on the cell
alone, so the result is the same bytes whatever the partitioning and however often Spark
re-runs a task, and equal to the single-machine output; rows are never dropped, nor reordered
within a partition; a rejected row keeps its original value.

- :func:`migrate`: a DataFrame with its messages column migrated: a JSON-text column keeps its
  type, a nested one is widened as the Parquet path widens it
  (:func:`~histmig.sources.arrow.widened_type`); with ``report=True``, two more columns,
  ``histmig_status`` and ``histmig_changes`` (:data:`STATUS`, :data:`CHANGES`).
- :func:`summarize`: those columns summed up into the summary the CLI report gives
  (:meth:`histmig.report.Report.summary`).
- :func:`check`: the rows ``histmig check`` would fail on.
- :func:`migrate_files`: the job of ``histmig convert IN OUT --engine spark`` (the Spark
  engine of :mod:`histmig.run.spark`): Parquet files in, a directory of Parquet files out,
  and the same report as the local engine.
- :func:`session`: the session :func:`migrate_files` runs on (the active one, else a new one).
"""

from __future__ import annotations

import glob
import io
import itertools
import os
import pickle
import re
import shutil
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote, urlparse

import orjson
import pyarrow as pa
from pyspark.accumulators import Accumulator, AccumulatorParam
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_type
from pyspark.sql.types import StringType, StructField, StructType

from histmig.engine import Plan
from histmig.errors import UsageError
from histmig.options import RECORD_OPTIONS, Options
from histmig.parallel import Progress
from histmig.records import Outcome
from histmig.report import PLACE_FIELDS, Report, change_rows, finding_rows, summary_of
from histmig.report.rows import ChangeRow, FindingRow
from histmig.sources.arrow import ColumnMigrator, find_id_column, find_messages_column
from histmig.sources.fs import make_parents
from histmig.sources.jsonl import FORMAT as JSONL
from histmig.sources.jsonl import read_chunks, write_chunk
from histmig.sources.parquet import BATCH_ROWS, compression, open_parquet

STATUS = "histmig_status"
"""The per-row status column of ``migrate(..., report=True)`` and :func:`check`: ``unchanged``,
``changed`` or ``rejected`` (as in the report), ``invalid`` (:func:`check`: a record no rule
changes that fails validation); null for a null cell, which is not a record."""

CHANGES = "histmig_changes"
"""The per-row report column: the record's entry in the report as JSON text,
``{"changes": [...], "findings": [...], "errors": [...], "warnings": [...]}``, each change and
finding row in the report's shape (README "Report") less ``source``, its place and ``id``
(the row is its own place), errors and warnings as ``path: message`` lines; null for a record
with nothing to report (unchanged, valid, no finding or warning) and for a null cell."""

_FILE, _ROW = "__histmig_file", "__histmig_row"
"""Columns :func:`migrate_files` adds for the report's places (each row's file and its row in the
file, from Spark's ``_metadata``), dropped from the output."""


def migrate(df: DataFrame, messages_column: str = "messages", *, report: bool = False, **options: Any) -> DataFrame:
    """``df`` with every cell of ``messages_column`` migrated, as ``histmig convert`` migrates
    a Parquet file's: a JSON-text cell (string or binary) that needs no rule keeps its bytes, a
    migrated one is written compact; a nested column (``array<struct>``) takes the Parquet
    path's widened type. Same rows, same order within each partition, every other column as
    it is; a rejected row keeps its original value. ``options`` are those of
    :class:`~histmig.options.Options` about records (:data:`~histmig.options.RECORD_OPTIONS`:
    ``select``, ``ignore``, ``unsafe_fixes``, ``causes``, ``messages_field``, ``target``,
    ``attempts``, ``counting``, ``max_retries``); with ``report=True`` the result has two more
    columns, :data:`STATUS` and :data:`CHANGES`. Lazy, like any transformation. Raises
    :class:`~histmig.errors.UsageError` for an unknown option or rule code, and
    :class:`~histmig.errors.ColumnError` for a messages column that is missing or of
    another type."""
    return _mapped(df, messages_column, _options(options), checking=False, report=report)


def check(df: DataFrame, messages_column: str = "messages", **options: Any) -> DataFrame:
    """The rows of ``df`` that ``histmig check`` fails on, as they are (not migrated), with
    :data:`STATUS` and :data:`CHANGES`: a record a rule would change (``changed``), that is
    invalid, rejected, or has a finding. Every record is parsed and validated. ``options`` as
    for :func:`migrate`."""
    checked = _mapped(df, messages_column, _options(options), checking=True, report=True)
    findings = F.from_json(F.col(CHANGES), "struct<findings: array<struct<severity: string>>>")["findings"]
    failing = (F.col(STATUS) != "unchanged") | F.exists(
        F.coalesce(findings, F.array()), lambda f: f["severity"] == "error"
    )
    return checked.where(failing)


_ENTRY = (
    "struct<changes: array<struct<rule: string, cause: string, evidence: string, certainty: string>>, findings: "
    "array<struct<rule: string, severity: string>>, warnings: array<string>>"
)
"""What :func:`summarize` reads of a :data:`CHANGES` entry."""


def summarize(df: DataFrame) -> dict[str, Any]:
    """The summary ``histmig`` reports (:meth:`histmig.report.Report.summary`: records in,
    changed, unchanged, rejected, invalid, warnings, findings, read errors, parts by rule, by
    cause, by evidence, findings by rule) of a DataFrame with :data:`STATUS` and
    :data:`CHANGES` (from ``migrate(..., report=True)`` or :func:`check`), in one Spark job.
    Rows with a null status (null cells) are not records. Raises
    :class:`~histmig.errors.UsageError` when the columns are missing."""
    if STATUS not in df.columns or CHANGES not in df.columns:
        raise UsageError(
            f"summarize needs the {STATUS} and {CHANGES} columns: migrate(df, report=True) or check(df) makes them"
        )
    entry = F.from_json(F.col(CHANGES), _ENTRY)
    changes = F.coalesce(entry["changes"], F.array())

    def tally(kind: str, name: Column, detail: Column | None = None) -> Column:
        return F.struct(
            F.lit(kind).alias("kind"),
            name.cast("string").alias("name"),
            (detail if detail is not None else F.lit(None)).cast("string").alias("detail"),
        )

    tallies = F.concat(
        F.array(tally("status", F.col(STATUS))),
        F.transform(changes, lambda c: tally("rule", c["rule"])),
        F.transform(F.filter(changes, lambda c: c["cause"].isNotNull()), lambda c: tally("cause", c["cause"])),
        F.transform(changes, lambda c: tally("evidence", c["evidence"], c["certainty"])),
        F.transform(F.coalesce(entry["findings"], F.array()), lambda f: tally("finding", f["rule"], f["severity"])),
        F.transform(F.coalesce(entry["warnings"], F.array()), lambda w: tally("warning", F.lit(None))),
    )
    exploded = (
        df.select(F.explode(tallies).alias("t"))
        .select("t.*")
        .where((F.col("kind") != "status") | F.col("name").isNotNull())
    )
    counts: Counter[str] = Counter()
    by: dict[str, Counter[Any]] = {kind: Counter() for kind in ("rule", "cause", "evidence", "finding")}
    for kind, name, detail, count in exploded.groupBy("kind", "name", "detail").count().collect():
        if kind == "status":
            counts["records_in"] += count
            counts["unchanged" if name == "invalid" else name] += count
            counts["invalid"] += count if name == "invalid" else 0
        elif kind == "warning":
            counts["warnings"] += count
        elif kind == "finding":  # a warning-severity finding counts among the warnings, as in Report.add
            by[kind][name] += count
            counts["warnings" if detail == "warning" else "findings"] += count
        else:
            by[kind][(name, detail) if kind == "evidence" else name] += count
    return summary_of(counts, by["rule"], by["cause"], by["evidence"], by["finding"])


def migrate_files(
    files: Sequence[str],
    output: str,
    options: Options = Options(),
    *,
    master: str | None = None,
    progress: Progress | None = None,
    base: str | None = None,
    partition_by: Sequence[str] = (),
) -> Report:
    """The Spark engine's job (``histmig convert IN OUT --engine spark``, planned and checked
    by :mod:`histmig.run.plan`): the Parquet ``files``, read as one Spark DataFrame, migrated
    (:func:`migrate`) and written as the directory ``output`` of Parquet files (one a Spark
    partition, its rows in input order, the partitions as Spark orders the pieces of the files
    it reads, by size; the first file's compression codec). The directory is written beside
    ``output`` and renamed into place once Spark has committed it (a previous Spark output
    there is replaced). Returns the report, that of the local engine: every record named by
    its file and row (Spark's ``_metadata``), in input order, whatever order the tasks end
    in; a task Spark re-runs is counted once. The session: the active one, else a new one on
    ``master`` (default, and not under ``spark-submit``: ``local[N]``, N = ``options.jobs``
    or the number of cores). ``progress`` is told the input bytes as tasks end. A partitioned
    dataset (``partition_by``, its columns outermost first, below the INPUT directory
    ``base``: :func:`histmig.run.plan.spark_partitions`) is read with its partition values as
    strings, as the directory names spell them (no type inference: ``01`` stays ``01``), and
    written as the same tree of ``key=value`` directories (``partitionBy``), the columns in no
    file. Raises :class:`~histmig.errors.UsageError` when there is no Java, for a partition
    column the files hold as a data column too, or a partition value Spark would write
    spelled otherwise (before the output is renamed into place), and
    :class:`~histmig.errors.ColumnError` for a messages or id column that is missing or of
    another type (before Spark starts)."""
    if options.grouping is not None:
        raise UsageError(NOT_GROUPED)
    lines = JSONL.named(files[0])
    if not lines:
        first = open_parquet(files[0]).schema_arrow
        column = find_messages_column(first, options.messages_column, where=files[0])
        id_column = find_id_column(first, options.id_column, where=files[0])
        held = [key for key in partition_by if key in first.names]
        if held:
            raise UsageError(
                f"{files[0]}: holds {', '.join(held)} as a column and as partition directories; "
                "convert it without --engine spark"
            )
    sources = {_local(os.path.abspath(f)): f for f in files}
    places = (sources, tuple(files))
    spark, log = session(master, options.workers)
    inferring = spark.conf.get(_INFERENCE, None)
    try:
        reader = spark.read
        if partition_by and base is not None:
            spark.conf.set(_INFERENCE, "false")
            reader = reader.option("basePath", os.path.abspath(base))
        chunks = spark.sparkContext.accumulator(_Chunks(), _ChunksParam())
        writer: Callable[[str], None]
        if lines:
            df = reader.text(list(sources), wholetext=True).select("*", F.col("_metadata.file_path").alias(_FILE))
            migrated = df.mapInArrow(_LineFiles(options, places, chunks), StructType(df.schema.fields[:-1]))
            writer = migrated.write.mode("overwrite").partitionBy(*partition_by).text
        else:
            df = reader.parquet(*sources).select(
                "*", F.col("_metadata.file_path").alias(_FILE), F.col("_metadata.row_index").alias(_ROW)
            )
            migrated = _mapped(
                df, column, options, checking=False, report=False, id_column=id_column, places=places, chunks=chunks
            )
            codec = compression(open_parquet(files[0]).metadata)
            writer = migrated.write.mode("overwrite").option("compression", codec).partitionBy(*partition_by).parquet
        with _replacing(output) as written, _tracked(spark, progress, sum(os.path.getsize(f) for f in files)):
            writer(written)
            _plain_names(written)
            if partition_by:
                _check_spelled(written, base, len(partition_by))  # type: ignore[arg-type]
        return chunks.value.report()
    finally:
        if partition_by:
            spark.conf.unset(_INFERENCE) if inferring is None else spark.conf.set(_INFERENCE, inferring)
        if log is not None:
            spark.stop()
            os.unlink(log)


_INFERENCE = "spark.sql.sources.partitionColumnTypeInference.enabled"
"""Spark's setting that reads a partition value as a number or a date when it looks like one
(``01`` as ``1``); off while histmig reads a partitioned dataset."""


@dataclass(frozen=True)
class _LineFiles:
    """What ``mapInArrow`` runs on a partition of JSONL files read whole (one row a file, its
    text in ``value``, its name in the place column): each file's lines through the JSONL
    path's own chunks (:func:`~histmig.sources.jsonl.read_chunks`, :meth:`Chunk.run`,
    :func:`~histmig.sources.jsonl.write_chunk`; a rejected record kept as it is), so a file's
    output is the local engine's bytes; its last line end is left to Spark's text writer,
    which ends every row with ``\n``. Each file's report is added to ``chunks``, named by
    its file and line."""

    options: Options
    places: tuple[dict[str, str], tuple[str, ...]]
    chunks: Accumulator[Any]

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        plan = _plan(self.options, False)
        names, order = self.places
        done: list[tuple[int, int, Report]] = []
        for batch in batches:
            values: list[bytes] = []
            texts = batch.column("value").cast(pa.binary()).to_pylist()
            for text, uri in zip(texts, batch.column(_FILE).to_pylist()):
                source = names[_local(uri)]
                report, out = Report.in_memory(), io.BytesIO()
                for chunk in read_chunks(io.BytesIO(text), source):
                    result = chunk.run(plan, None)
                    report.merge(result.report)
                    write_chunk(chunk.data, result.edits, out, None)
                done.append((order.index(source), 0, report))
                values.append(out.getvalue().removesuffix(b"\n"))
            rest = [name for name in batch.schema.names if name not in ("value", _FILE)]
            yield pa.RecordBatch.from_arrays(
                [pa.array(values, pa.binary()).cast(pa.string()), *(batch.column(name) for name in rest)],
                names=["value", *rest],
            )
        self.chunks.add(done)


def session(master: str | None = None, cores: int = 1) -> tuple[SparkSession, str | None]:
    """The active Spark session, else a new one: on ``master`` (default: ``local[cores]``
    unless run by ``spark-submit``, which gives its own), UI and console progress off,
    timestamps written as Parquet ``TIMESTAMP_MICROS`` (as pyarrow writes them), Spark's log
    level ``ERROR``; a local session's Python workers run this interpreter. Also the file the
    new session's JVM writes its stderr to (Spark's log, kept off the command's stderr;
    ``None`` for the active session): stop the session and delete the file when done. Raises
    :class:`~histmig.errors.UsageError` when there is no Java to run Spark, or Spark
    does not start (naming the log)."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active, None
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else shutil.which("java")
    if java is None or not os.path.exists(java):
        raise UsageError(
            "--engine spark needs Java 17 or later to run Spark (no java on PATH and JAVA_HOME unset): install a JRE "
            "(apt-get install openjdk-17-jre-headless)"
        )
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:  # spark-submit starts the JVM and gives the master
        master = f"local[{cores}]"
    builder = (
        SparkSession.builder.appName("histmig")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.log.level", "ERROR")
    )
    if master is not None:
        builder = builder.master(master)
        if master.startswith("local"):  # the workers are this machine's: this interpreter, this histmig
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            builder = builder.config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
            # A worker puts its working directory first on its path: a folder named histmig there
            # (a clone, run from its parent) would stand for the package an editable install
            # finds only after the path; the package's own folder on PYTHONPATH is found first.
            home = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (home, os.environ.get("PYTHONPATH")) if p)
    with tempfile.NamedTemporaryFile(prefix="histmig-spark-", suffix=".log", delete=False) as log:
        saved = os.dup(2)
        os.dup2(log.fileno(), 2)  # the JVM (and its Python workers) inherit the log as stderr
        try:
            spark = builder.getOrCreate()
        except Exception as exc:
            raise UsageError(
                f"Spark did not start ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); its log: "
                f"{log.name}"
            ) from exc
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    return spark, log.name


NOT_GROUPED = (
    "--conversation: the Spark engine does not group records into conversations yet; "
    "the local engine does, for a JSONL, Parquet, DuckDB, PostgreSQL or SQLite input"
)
"""Why :func:`migrate`, :func:`check` and :func:`migrate_files` refuse ``conversation``
(never ignored)."""


def _options(given: dict[str, Any]) -> Options:
    """The :class:`~histmig.options.Options` of :func:`migrate`'s keyword arguments (a rule
    code may be given as one string). Raises :class:`~histmig.errors.UsageError` for an
    option it does not take (one of :data:`~histmig.options.RECORD_OPTIONS`) or an unknown
    rule code."""
    if given.get("conversation") or given.get("order") is not None:
        raise UsageError(NOT_GROUPED)
    unknown = sorted(set(given) - RECORD_OPTIONS)
    if unknown:
        raise UsageError(
            f"unknown option {', '.join(map(repr, unknown))} (options: {', '.join(sorted(RECORD_OPTIONS))})"
        )
    values: dict[str, Any] = {
        k: ((v,) if isinstance(v, str) else tuple(v)) if k in ("select", "ignore") else v for k, v in given.items()
    }
    options = Options(**values)
    options.rules  # noqa: B018 (an unknown code is a usage error before Spark runs anything)
    return options


def _mapped(
    df: DataFrame,
    column: str,
    options: Options,
    *,
    checking: bool,
    report: bool,
    id_column: str | None = None,
    places: tuple[dict[str, str], tuple[str, ...]] | None = None,
    chunks: Accumulator[Any] | None = None,
) -> DataFrame:
    """``df`` through :class:`_Cells` with ``DataFrame.mapInArrow``, declared with the
    output schema: the messages column's type widened (nested) or kept, the place columns
    dropped, the report columns added."""
    if column not in df.columns:
        raise UsageError(f"no column {column!r} (columns: {', '.join(df.columns)})")
    for name in (STATUS, CHANGES) if report else ():
        if name in df.columns:
            raise UsageError(f"the DataFrame already has a {name} column")
    field = df.schema[column]
    arrow_type = to_arrow_type(field.dataType, timezone="UTC")
    migrator = ColumnMigrator(
        pa.schema([(column, arrow_type)]), column, column, options.plan()
    )  # a column of another type is refused here, not in a task
    out_type = field.dataType if checking or migrator.kind != "nested" else from_arrow_type(migrator.output_type)
    kept = [
        StructField(f.name, out_type, f.nullable, f.metadata) if f.name == column else f
        for f in df.schema
        if f.name not in (_FILE, _ROW)
    ]
    added = [StructField(STATUS, StringType()), StructField(CHANGES, StringType())] if report else []
    function = _Cells(options, column, checking, report, id_column, places, chunks)
    return df.mapInArrow(function, StructType(kept + added))


@cache
def _plan(options: Options, checking: bool) -> Plan:
    """The plan of ``options`` (``check``: every record validated), built once a worker."""
    return options.plan(validate_all=checking)


@dataclass
class _Chunk:
    """A run of rows of one input file a task migrated: the file's place among the inputs
    (``order``), its ``first`` row and next one (``end``), and their ``report``."""

    order: int
    first: int
    end: int
    report: Report


@dataclass(frozen=True)
class _Cells:
    """What ``mapInArrow`` runs on a partition's record batches: each batch, a slice of up to
    :data:`~histmig.sources.parquet.BATCH_ROWS` rows at a time (as the Parquet path reads
    them), through a :class:`~histmig.sources.arrow.ColumnMigrator` of ``column``, with the
    plan of ``options`` (``checking``: every record validated, the cells kept as they are).
    With ``report``, each batch gains :data:`STATUS` and :data:`CHANGES`. With ``places``
    (:func:`migrate_files`: the input files by Spark's name for them, and in input order), each
    record is named by its file and row, those columns are dropped, and the task's reports,
    one a run of rows of one file, are added to ``chunks``."""

    options: Options
    column: str
    checking: bool
    report: bool
    id_column: str | None = None
    places: tuple[dict[str, str], tuple[str, ...]] | None = None
    chunks: Accumulator[Any] | None = None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        plan = _plan(self.options, self.checking)
        migrators: dict[str, ColumnMigrator] = {}
        done: list[_Chunk] = []
        row = 0
        for batch in batches:
            for start in range(0, batch.num_rows, BATCH_ROWS):
                for piece, source, rows in self._runs(batch.slice(start, BATCH_ROWS), row):
                    row += piece.num_rows
                    migrator = migrators.get(source)
                    if migrator is None:
                        migrator = migrators[source] = ColumnMigrator(
                            piece.schema, self.column, source, plan, self.id_column
                        )
                    yield self._migrated(piece, migrator, rows, self._report(done, source, rows))
        if self.chunks is not None:
            self.chunks.add([(c.order, c.first, c.report) for c in done])

    def _runs(self, batch: pa.RecordBatch, first: int) -> Iterator[tuple[pa.RecordBatch, str, range | list[int]]]:
        """``batch`` as runs of rows of one input file: ``(rows, source, row numbers)``; the
        whole batch, named after the column, without ``places``."""
        if self.places is None:
            yield batch, self.column, range(first, first + batch.num_rows)
            return
        names = self.places[0]
        files = batch.column(_FILE).to_pylist()
        rows = batch.column(_ROW).to_pylist()
        start = 0
        for end in range(1, len(files) + 1):
            if end == len(files) or files[end] != files[start]:
                yield batch.slice(start, end - start), names[_local(files[start])], rows[start:end]
                start = end

    def _report(self, done: list[_Chunk], source: str, rows: range | list[int]) -> Report:
        """The report a run of rows goes into: the last chunk's when it goes on from there,
        else a new chunk's (``places`` only: otherwise a report nobody reads)."""
        if self.places is None:
            return Report.in_memory()
        order = self.places[1].index(source)
        if not done or done[-1].order != order or done[-1].end != rows[0]:
            done.append(_Chunk(order, rows[0], rows[0], Report.in_memory()))
        done[-1].end = rows[-1] + 1
        return done[-1].report

    def _migrated(
        self, batch: pa.RecordBatch, migrator: ColumnMigrator, rows: range | list[int], report: Report
    ) -> pa.RecordBatch:
        """``batch`` with its messages column migrated (kept, when ``checking``), without
        the place columns, with the report columns when asked for."""
        entries: dict[int, Outcome] = {}
        observe = entries.__setitem__ if self.report else None
        if self.checking:
            migrator.migrate_cells(batch, rows, report, observe)
            out = batch
        else:
            out, _ = migrator.migrate(batch, rows, report, observe)
        names = [name for name in out.schema.names if name not in (_FILE, _ROW)]
        arrays = [out.column(name) for name in names]
        if self.report:
            nulls = batch.column(self.column).is_null().to_pylist()
            statuses = [None if null else "unchanged" for null in nulls]
            cells: list[bytes | None] = [None] * len(nulls)
            for i, outcome in entries.items():
                statuses[i] = "invalid" if outcome.status == "unchanged" and outcome.errors else outcome.status
                cells[i] = None if outcome.quiet else _entry(outcome)
            names += [STATUS, CHANGES]
            arrays += [pa.array(statuses, pa.string()), pa.array(cells, pa.binary()).view(pa.string())]
        return pa.RecordBatch.from_arrays(arrays, names=names)


_CHANGE_KEYS = ChangeRow._fields[PLACE_FIELDS:]
_FINDING_KEYS = FindingRow._fields[PLACE_FIELDS:]


def _entry(outcome: Outcome) -> bytes:
    """The :data:`CHANGES` entry of an outcome: its rows as the report has them, less their
    place."""
    return orjson.dumps(
        {
            "changes": [dict(zip(_CHANGE_KEYS, row)) for row in change_rows(outcome)],
            "findings": [dict(zip(_FINDING_KEYS, row)) for row in finding_rows(outcome)],
            "errors": outcome.errors,
            "warnings": outcome.warnings,
        }
    )


def _local(uri: str) -> str:
    """The local path of a ``file:`` URI as Spark names a file it read (a plain path as it is)."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


class _Chunks:
    """The driver's side of :func:`migrate_files`'s report accumulator: each task's chunks
    (``(order, first row, report)``) written to a temporary file as they come, read back in
    input order (:meth:`report`), so the driver holds one chunk at a time."""

    def __init__(self) -> None:
        self._file: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed by report(), once read back)
        self._index: list[tuple[int, int, int]] = []

    def add(self, chunks: list[tuple[int, int, Report]]) -> None:
        for order, first, report in chunks:
            self._index.append((order, first, self._file.tell()))
            pickle.dump(report, self._file, pickle.HIGHEST_PROTOCOL)

    def report(self) -> Report:
        """Every chunk's report merged, in input order (file, then row)."""
        merged = Report()
        for _, _, offset in sorted(self._index):
            self._file.seek(offset)
            merged.merge(pickle.load(self._file))
        self._file.close()
        return merged


class _ChunksParam(AccumulatorParam):
    """A task's chunks are a list (added to a list in the worker); the driver's value is
    :class:`_Chunks`."""

    def zero(self, value: Any) -> list[Any]:
        return []

    def addInPlace(self, value1: Any, value2: list[Any]) -> Any:
        if isinstance(value1, _Chunks):
            value1.add(value2)
            return value1
        return value1 + value2


_PART = re.compile(r"^(part-\d+)-[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}[-.](c\d+\..+)$")
"""A part file's name as Spark writes it: its number, the write job's random id, the rest."""


def _plain_names(directory: str) -> None:
    """Rename the part files Spark wrote in ``directory`` and its partition directories
    without the job's random id (``part-00000-c000.zstd.parquet``; a text part, JSONL lines,
    as ``part-00000-c000.jsonl``), so the same input gives the same files, and delete
    Hadoop's checksum files (``.*.crc``), which name the old names."""
    for folder, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(folder, name)
            if name.startswith(".") and name.endswith(".crc"):
                os.unlink(path)
            elif (match := _PART.match(name)) is not None:
                rest = match[2].removesuffix(".txt") + ".jsonl" if match[2].endswith(".txt") else match[2]
                os.rename(path, os.path.join(folder, f"{match[1]}-{rest}"))


def _check_spelled(written: str, base: str, depth: int) -> None:
    """Raise :class:`~histmig.errors.UsageError` for a partition directory Spark wrote in
    ``written`` (``depth`` levels) that is none of ``base``'s: a value it spells otherwise
    (it escapes ``:`` as ``%3A``, writes an empty value as ``__HIVE_DEFAULT_PARTITION__``)."""
    for folder in sorted(glob.glob(os.path.join(glob.escape(written), *["*"] * depth))):
        below = os.path.relpath(folder, written)
        if os.path.isdir(folder) and not os.path.isdir(os.path.join(base, below)):
            raise UsageError(
                f"{base}: Spark writes a partition of this dataset as {below!r}, which is none of its "
                "directories (it spells the value otherwise); convert it without --engine spark"
            )


@contextmanager
def _replacing(output: str) -> Iterator[str]:
    """A temporary directory beside ``output`` to write into, which becomes ``output`` when
    the block ends without an exception (an earlier output there is replaced: the old one is
    renamed away, the new one in, the old one deleted); removed otherwise."""
    target = Path(output)
    make_parents(output)
    written = tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        yield written
    except BaseException:
        shutil.rmtree(written, ignore_errors=True)
        raise
    old = None
    if target.exists():
        old = tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent)
        os.replace(target, os.path.join(old, target.name))
    os.replace(written, target)
    if old is not None:
        shutil.rmtree(old)


_BLOCKS = itertools.count()
"""Numbers the blocks :func:`_tracked` watches, for their Spark job groups."""


@contextmanager
def _tracked(spark: SparkSession, progress: Progress | None, total: int) -> Iterator[None]:
    """Tell ``progress`` of the Spark jobs the block runs: ``total`` input bytes, advanced as
    their tasks end (polled from Spark's status tracker twice a second), the last byte when
    the block ends: the tasks of the jobs known may all have ended before the block does (a
    later job not begun, the output not yet renamed), and the end always advances the bar."""
    if progress is None:
        yield
        return
    context = spark.sparkContext
    # a group of this block's own: a session's earlier blocks left jobs under theirs, whose
    # skipped or failed stages never end
    group = f"histmig-{next(_BLOCKS)}"
    context.setJobGroup(group, "histmig convert")
    progress.start(total)
    stop = threading.Event()
    told = 0

    def poll() -> None:
        nonlocal told
        tracker = context.statusTracker()
        while not stop.wait(0.5):
            tasks = ended = 0
            for job in tracker.getJobIdsForGroup(group):
                info = tracker.getJobInfo(job)
                if info is None:  # a job the tracker no longer keeps
                    continue
                for stage in info.stageIds:
                    stage_info = tracker.getStageInfo(stage)
                    if stage_info is not None:
                        # a job that succeeded has ended every task it needed: a stage it skipped
                        # (its shuffle output reused) never counts its tasks completed
                        done = stage_info.numTasks if info.status == "SUCCEEDED" else stage_info.numCompletedTasks
                        tasks, ended = tasks + stage_info.numTasks, ended + done
            now = min(total * ended // tasks if tasks else 0, total - 1)
            if now > told:
                progress.advance(now - told)
                told = now

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()
        if total > told:
            progress.advance(total - told)
