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
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_type
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from histmig.engine import Plan
from histmig.errors import UsageError
from histmig.options import RECORD_OPTIONS, Options
from histmig.parallel import Progress
from histmig.records import Grouping, Outcome
from histmig.report import PLACE_FIELDS, Report, change_rows, finding_rows, summary_of
from histmig.report.rows import ChangeRow, FindingRow
from histmig.sources.arrow import CellGroup, ColumnMigrator, find_id_column, find_messages_column
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

_KEY, _POSITION, _SIZE, _BYTES, _RECORDS = (
    "__histmig_key",
    "__histmig_position",
    "__histmig_size",
    "__histmig_bytes",
    "__histmig_records",
)
"""Columns ``conversation=`` adds (:func:`_grouped`): a row's conversation key (a struct of the
key columns), its position (the ties of the order broken by it), its cell's bytes, and its
conversation's bytes and records; dropped from the output."""

_ADDED = (_FILE, _ROW, _KEY, _POSITION, _SIZE, _BYTES, _RECORDS)


def migrate(df: DataFrame, messages_column: str = "messages", *, report: bool = False, **options: Any) -> DataFrame:
    """``df`` with every cell of ``messages_column`` migrated, as ``histmig convert`` migrates
    a Parquet file's: a JSON-text cell (string or binary) that needs no rule keeps its bytes, a
    migrated one is written compact; a nested column (``array<struct>``) takes the Parquet
    path's widened type. Same rows, same order within each partition, every other column as
    it is; a rejected row keeps its original value. ``options`` are those of
    :class:`~histmig.options.Options` about records (:data:`~histmig.options.RECORD_OPTIONS`:
    ``select``, ``ignore``, ``unsafe_fixes``, ``causes``, ``messages_field``, ``target``,
    ``attempts``, ``counting``, ``max_retries``); with ``report=True`` the result has two more
    columns, :data:`STATUS` and :data:`CHANGES`. Lazy, like any transformation.

    ``conversation`` (a column, several for a composite key, or ``"*"``: every row is one
    conversation) groups the rows into conversations and ``order`` (a column, nulls last)
    sorts each one's rows, ties broken by the DataFrame's own order (partition, then row):
    each conversation goes through the engine whole (:func:`~histmig.engine.process_conversation`,
    design.md "The unit of work"), so each row's cell is the local engine's whatever the
    partitioning. The rows are shuffled by conversation (one Spark partition holds a
    conversation whole) and come out in conversation order; a row whose key is null is a
    conversation of its own; a conversation holding more than ``max_conversation_bytes``
    (default 64 MiB) is rejected whole, its rows kept.

    Raises :class:`~histmig.errors.UsageError` for an unknown option, rule code or column,
    and :class:`~histmig.errors.ColumnError` for a messages column that is missing or of
    another type."""
    return _mapped(df, messages_column, _options(options), checking=False, report=report)


def check(df: DataFrame, messages_column: str = "messages", **options: Any) -> DataFrame:
    """The rows of ``df`` that ``histmig check`` fails on, as they are (not migrated), with
    :data:`STATUS` and :data:`CHANGES`: a record a rule would change (``changed``), that is
    invalid, rejected, or has a finding. Every record is parsed and validated. ``options`` as
    for :func:`migrate` (with ``conversation``: the rows come in conversation order)."""
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
    another type (before Spark starts).

    With ``options.grouping`` (``--conversation``, one Parquet file), the rows are grouped
    into conversations as :func:`migrate` groups them, ties of ``--order`` broken by the
    row's place in the file (as the local engine breaks them); the part files then hold
    whole conversations, each in its order. Raises :class:`~histmig.errors.UsageError` for a
    JSONL input or several files."""
    lines = JSONL.named(files[0])
    if options.grouping is not None and (lines or len(files) > 1):
        raise UsageError(NOT_GROUPED)
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
    "--conversation: the Spark engine groups the rows of one Parquet input; give one file, or convert "
    "a JSONL input's conversations without --engine spark"
)
"""Why :func:`migrate_files` refuses ``conversation`` for a JSONL input or several files (never
ignored)."""

GROUP_OPTIONS = frozenset({"conversation", "order", "max_conversation_bytes"})
"""The options about conversations :func:`migrate` and :func:`check` take besides
:data:`~histmig.options.RECORD_OPTIONS`."""


def _options(given: dict[str, Any]) -> Options:
    """The :class:`~histmig.options.Options` of :func:`migrate`'s keyword arguments (a rule
    code or a conversation column may be given as one string). Raises
    :class:`~histmig.errors.UsageError` for an option it does not take (one of
    :data:`~histmig.options.RECORD_OPTIONS` and :data:`GROUP_OPTIONS`), an unknown rule
    code, or an ``order`` without ``conversation``."""
    taken = RECORD_OPTIONS | GROUP_OPTIONS
    unknown = sorted(set(given) - taken)
    if unknown:
        raise UsageError(f"unknown option {', '.join(map(repr, unknown))} (options: {', '.join(sorted(taken))})")
    values: dict[str, Any] = {
        k: ((v,) if isinstance(v, str) else tuple(v)) if k in ("select", "ignore", "conversation") else v
        for k, v in given.items()
    }
    options = Options(**values)
    options.rules  # noqa: B018 (an unknown code is a usage error before Spark runs anything)
    options.grouping  # noqa: B018 (and so is an order without a conversation)
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
    dropped, the report columns added; under ``options.grouping``, first sorted into
    conversations (:func:`_grouped`)."""
    if column not in df.columns:
        raise UsageError(f"no column {column!r} (columns: {', '.join(df.columns)})")
    grouping = options.grouping
    if grouping is not None:
        df = _grouped(df, column, grouping, F.col(_ROW) if places is not None else F.monotonically_increasing_id())
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
        if f.name not in _ADDED
    ]
    added = [StructField(STATUS, StringType()), StructField(CHANGES, StringType())] if report else []
    function = _Cells(options, column, checking, report, id_column, places, chunks, grouping)
    return df.mapInArrow(function, StructType(kept + added))


def _quoted(name: str) -> Column:
    """The column named ``name`` (a dot in it is no struct field)."""
    return F.col("`" + name.replace("`", "``") + "`")


def _grouped(df: DataFrame, column: str, grouping: Grouping, position: Column) -> DataFrame:
    """``df`` in conversations (``grouping``): shuffled by its conversation key (the key
    columns as a struct, :data:`_KEY`; one constant for the whole DataFrame), each Spark
    partition sorted by key, ``order`` (nulls last) and ``position``, with each row's cell
    bytes (:data:`_SIZE`: a text or binary cell's, a nested cell's as JSON) and its
    conversation's bytes and records (a window over the key, which Spark computes in the
    same shuffle and sort). Raises :class:`~histmig.errors.UsageError` for a key or order
    column ``df`` lacks."""
    named = [*(() if grouping.whole else grouping.keys), *filter(None, [grouping.order])]
    for name in named:
        if name not in df.columns:
            raise UsageError(f"--conversation/--order: no column {name!r} (columns: {', '.join(df.columns)})")
    key = F.struct(F.lit(0)) if grouping.whole else F.struct(*(_quoted(name) for name in grouping.keys))
    cell = _quoted(column)
    size = F.octet_length(cell if isinstance(df.schema[column].dataType, (StringType, BinaryType)) else F.to_json(cell))
    ordered = [*([_quoted(grouping.order).asc_nulls_last()] if grouping.order else []), F.col(_POSITION).asc()]
    conversation = (
        Window.partitionBy(_KEY).orderBy(*ordered).rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    )
    return (
        df.select("*", key.alias(_KEY), position.alias(_POSITION), size.alias(_SIZE))
        .select(
            "*",
            F.sum(_SIZE).over(conversation).alias(_BYTES),
            F.count(_SIZE).over(conversation).alias(_RECORDS),
        )
        .sortWithinPartitions(F.col(_KEY), *ordered)
    )


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
    one a run of rows of one file, are added to ``chunks``. With ``grouping``, the batches
    come sorted into conversations (:func:`_grouped`) and go through the engine a
    conversation at a time (:meth:`_conversations`)."""

    options: Options
    column: str
    checking: bool
    report: bool
    id_column: str | None = None
    places: tuple[dict[str, str], tuple[str, ...]] | None = None
    chunks: Accumulator[Any] | None = None
    grouping: Grouping | None = None

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if self.grouping is not None:
            yield from self._conversations(batches, self.grouping)
            return
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

    def _conversations(self, batches: Iterator[pa.RecordBatch], grouping: Grouping) -> Iterator[pa.RecordBatch]:
        """The grouped batches (:func:`_grouped`) cut into pieces of whole conversations
        (:meth:`_pieces`), each through the migrator with its conversations
        (:class:`~histmig.sources.arrow.CellGroup`). Each record's report goes to ``chunks``
        under its row, so that the driver merges them in input order."""
        plan = _plan(self.options, self.checking)
        migrator: ColumnMigrator | None = None
        done: list[tuple[int, int, Report]] = []
        quiet = Report.in_memory()
        row = 0
        for piece in _pieces(batches, grouping.limit):
            if self.places is not None:
                rows: list[int] | range = piece.column(_ROW).to_pylist()
                source = self.places[0][_local(piece.column(_FILE)[0].as_py())]
                order = self.places[1].index(source)
            else:
                rows, source, order = range(row, row + piece.num_rows), self.column, 0
            row += piece.num_rows
            if migrator is None:
                migrator = ColumnMigrator(piece.schema, self.column, source, plan, self.id_column)

            def told(i: int, outcome: Outcome, rows: Sequence[int] = rows, order: int = order) -> None:
                if outcome.quiet:
                    quiet.add_unchanged(1)
                    return
                own = Report.in_memory()
                own.add(outcome)
                done.append((order, rows[i], own))

            groups = _cell_groups(piece, grouping, rows)
            yield self._migrated(piece, migrator, rows, Report.in_memory(), groups, told)
        if self.chunks is not None:
            self.chunks.add([(-1, 0, quiet), *done])

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
        self,
        batch: pa.RecordBatch,
        migrator: ColumnMigrator,
        rows: range | list[int],
        report: Report,
        groups: list[CellGroup] | None = None,
        told: Callable[[int, Outcome], None] | None = None,
    ) -> pa.RecordBatch:
        """``batch`` with its messages column migrated (kept, when ``checking``; its
        conversations ``groups``, when given, each as one), without the place columns, with
        the report columns when asked for; ``told``, when given, is told each record's
        outcome."""
        entries: dict[int, Outcome] = {}

        def observe(i: int, outcome: Outcome) -> None:
            entries[i] = outcome
            if told is not None:
                told(i, outcome)

        watching = observe if self.report or told is not None else None
        if self.checking:
            migrator.migrate_cells(batch, rows, report, watching, groups)
            out = batch
        else:
            out, _ = migrator.migrate(batch, rows, report, watching, groups)
        names = [name for name in out.schema.names if name not in _ADDED]
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


def _pieces(batches: Iterator[pa.RecordBatch], limit: int) -> Iterator[pa.RecordBatch]:
    """The batches of a partition sorted into conversations (:func:`_grouped`), as pieces
    that each end where a conversation does: the rows of a conversation that goes on into the
    next batch are held until it ends (at most ``limit`` bytes of cells: a conversation past
    it is rejected row by row, never held); the last piece ends with the partition."""
    held: list[pa.RecordBatch] = []
    for batch in batches:
        if not batch.num_rows:
            continue
        keys = batch.column(_KEY).to_pylist()
        totals = batch.column(_BYTES).to_pylist()
        end = len(keys)
        last = keys[-1]
        if None not in last.values() and (totals[-1] or 0) <= limit:  # the last conversation may go on
            end -= 1
            while end > 0 and keys[end - 1] == last:
                end -= 1
        if held and keys[0] != held[0].column(_KEY)[0].as_py():
            yield _joined(held)  # the held conversation ended where this batch begins
            held = []
        if end == 0:
            held.append(batch)
            continue
        yield _joined([*held, batch.slice(0, end)])
        held = [batch.slice(end)] if end < len(keys) else []
    if held:
        yield _joined(held)


def _joined(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    return batches[0] if len(batches) == 1 else pa.concat_batches(batches)


def _cell_groups(piece: pa.RecordBatch, grouping: Grouping, rows: Sequence[int]) -> list[CellGroup]:
    """The conversations of a piece of whole ones (:func:`_pieces`): each run of rows of one
    key, in order, named by its key (:meth:`~histmig.records.Grouping.named`); a row whose key
    is null is a conversation of its own and told so; one past ``grouping.limit`` is refused
    (its bytes and records: :data:`_BYTES`, :data:`_RECORDS`, or a null key's own)."""
    keys = piece.column(_KEY).to_pylist()
    sizes, totals, counts = (piece.column(name).to_pylist() for name in (_SIZE, _BYTES, _RECORDS))
    groups: list[CellGroup] = []
    start = 0
    missing = f"no conversation key ({', '.join(grouping.keys)} null): a conversation of its own"
    for end in range(1, len(keys) + 1):
        alone = None in keys[start].values()
        if end < len(keys) and not alone and keys[end] == keys[start]:
            continue
        values = tuple(keys[start].values())
        name = f"row {rows[start]}" if alone else grouping.named(values)
        held, count = (sizes[start] or 0, 1) if alone else (totals[start] or 0, counts[start])
        refused = grouping.refusal(name, held, count)
        groups.append(CellGroup(range(start, end), name, missing if alone else None, refused))
        start = end
    return groups


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
