"""Spark (histmig.spark), on a real local Spark session (``local[2, 2]``, tests/conftest.py):
the corpus as a JSON string column and as a nested column gives the Parquet path's cells,
record for record and byte for byte, and its report's summary; the same bytes for 1, 2 and 7
partitions and when every task fails once and is re-run; ``histmig convert --engine spark``
writes the same cells and prints the same report, verdict line and exit code as the local
engine."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark import TaskContext, cloudpickle
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import StringType, StructField, StructType
from typer.testing import CliRunner

import histmig.spark as hs
from histmig import api
from histmig.cli import app
from histmig.errors import ColumnError, UsageError
from histmig.options import Options
from histmig.sources.arrow import widened_type
from tests.conftest import CORPUS, ROOT
from tests.sources.conftest import corpus_records, nested_records, table_of, without_place, write_parquet

cloudpickle.register_pickle_by_value(
    sys.modules[__name__]
)  # the workers cannot import the tests: fail_once goes by value

runner = CliRunner()
REJECTING = Options(select=("HM1",), ignore=("HM103",))
"""Options under which 11 corpus records are rejected (a retry-prompt part with null ids)."""


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    return corpus_records()


@pytest.fixture(scope="module")
def text_parquet(tmp_path_factory: pytest.TempPathFactory, records) -> Path:
    return write_parquet(tmp_path_factory.mktemp("text") / "chats.parquet", table_of(records, nested=False))


def typed(type_: pa.DataType) -> pa.DataType:
    """``type_`` with Arrow's null type, which Spark reads from Parquet as an integer, made a
    string (as a lake Spark wrote has it)."""
    if pa.types.is_null(type_):
        return pa.string()
    if pa.types.is_struct(type_):
        return pa.struct([field.with_type(typed(field.type)) for field in type_])
    if pa.types.is_list(type_):
        return pa.list_(type_.value_field.with_type(typed(type_.value_type)))
    return type_


@pytest.fixture(scope="module")
def nested_parquet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The nested corpus table (its messages column typed all through, see :func:`typed`)."""
    table = table_of(nested_records(), nested=True)
    schema = pa.schema(
        [field.with_type(typed(field.type)) if field.name == "messages" else field for field in table.schema],
        metadata=table.schema.metadata,
    )
    return write_parquet(tmp_path_factory.mktemp("nested") / "nested.parquet", table.cast(schema))


def local(source: Path, out: Path, options: Options = Options()) -> tuple[list[Any], dict[str, Any]]:
    """The local engine's output cells (JSON text as bytes) and JSON report for ``source``."""
    report = api.convert(str(source), str(out), options).report.to_json()
    cells = pq.read_table(out).column("messages").to_pylist()
    return [cell.encode() if isinstance(cell, str) else cell for cell in cells], report


def changes_by_row(report: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    by_row: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in report["changes"]:
        by_row[row["row"]].append(without_place([row])[0])
    return by_row


def summary(report: dict[str, Any]) -> dict[str, Any]:
    """A JSON report's summary, which is :meth:`~histmig.report.Report.summary` (what
    :func:`histmig.spark.summarize` gives)."""
    return report["summary"]


def assert_same_report(on_spark: dict[str, Any], local: dict[str, Any]) -> None:
    """``on_spark`` is the local engine's JSON report but for its run record's engine (and
    cluster), output and start time."""
    spark_run, local_run = orjson.loads(orjson.dumps(on_spark.pop("run"))), orjson.loads(orjson.dumps(local.pop("run")))
    assert (
        spark_run["options"].pop("engine"),
        spark_run["options"].pop("spark_master"),
        local_run["options"].pop("engine"),
    ) == ("spark", None, "local")
    for run in (spark_run, local_run):
        run.pop("started", None), run.pop("output")
    assert spark_run == local_run and on_spark == local


def entries(rows: list[Any]) -> list[dict[str, Any] | None]:
    return [None if row[hs.CHANGES] is None else orjson.loads(row[hs.CHANGES]) for row in rows]


def test_a_json_text_column_gives_the_parquet_paths_cells_report_rows_and_summary(
    spark: SparkSession, text_parquet: Path, tmp_path: Path
) -> None:
    expected, report = local(text_parquet, tmp_path / "local.parquet")
    df = spark.read.parquet(str(text_parquet))
    out = hs.migrate(df, report=True)
    assert out.schema == StructType(
        [*df.schema, StructField(hs.STATUS, StringType()), StructField(hs.CHANGES, StringType())]
    )
    rows = out.collect()
    inputs = df.collect()
    assert [row["messages"].encode() for row in rows] == expected
    assert sum(row["messages"] != before["messages"] for row, before in zip(rows, inputs)) == 138
    assert [row[: len(df.columns)] for row in rows if row[hs.STATUS] == "unchanged"] == [
        before for before, row in zip(inputs, rows) if row[hs.STATUS] == "unchanged"
    ]
    assert [[row[name] for name in df.columns if name != "messages"] for row in rows] == [
        [row[name] for name in df.columns if name != "messages"] for row in inputs
    ]
    assert Counter(row[hs.STATUS] for row in rows) == {"changed": 138, "unchanged": 74}
    by_row = changes_by_row(report)
    got = entries(rows)
    assert [entry["changes"] if entry else [] for entry in got] == [by_row.get(i, []) for i in range(len(rows))]
    assert all(entry is not None for entry, row in zip(got, rows) if row[hs.STATUS] != "unchanged")
    reported = [entry for entry, row in zip(got, rows) if row[hs.STATUS] == "unchanged" and entry is not None]
    assert [([f["rule"] for f in entry["findings"]], entry["changes"]) for entry in reported] == [
        (["HM407"], [])
    ] * 2  # the deferred calls of 2.60 and 2.68
    assert sum(len(entry["changes"]) for entry in got if entry) == 270
    assert hs.summarize(out) == summary(report)


def test_a_nested_column_is_widened_as_the_parquet_path_widens_it_and_gives_its_values(
    spark: SparkSession, nested_parquet: Path, tmp_path: Path
) -> None:
    _, report = local(nested_parquet, tmp_path / "local.parquet")
    df = spark.read.parquet(str(nested_parquet))
    out = hs.migrate(df, report=True)
    written = spark.read.parquet(str(tmp_path / "local.parquet"))
    parquet_type = widened_type(pq.ParquetFile(nested_parquet).schema_arrow.field("messages").type)
    assert out.schema["messages"].dataType == written.schema["messages"].dataType == from_arrow_type(parquet_type)
    rows = out.collect()
    assert [row["messages"] for row in rows] == [row["messages"] for row in written.collect()]
    statuses = Counter(row[hs.STATUS] for row in rows)
    assert statuses == {
        "changed": report["summary"]["changed"],
        "unchanged": report["summary"]["unchanged"],
        "rejected": report["summary"]["rejected"],
    }
    assert statuses["changed"] > 50 and statuses["rejected"] > 0
    inputs = df.collect()
    for row, before, entry in zip(rows, inputs, entries(rows)):
        if row[hs.STATUS] == "rejected":
            assert (
                row["messages"]
                == spark.createDataFrame([before], df.schema)
                .select(F.col("messages").cast(out.schema["messages"].dataType))
                .first()[0]
            )
            assert entry["changes"] == [] and "cannot hold the migrated messages" in entry["errors"][0]
    assert hs.summarize(out) == summary(report)


@pytest.mark.parametrize("kind", ["text", "nested"])
def test_1_2_and_7_partitions_give_the_same_cells_in_the_same_order_within_each(
    spark: SparkSession, text_parquet: Path, nested_parquet: Path, kind: str, tmp_path: Path
) -> None:
    source = text_parquet if kind == "text" else nested_parquet
    api.convert(str(source), str(tmp_path / "local.parquet"))
    written = spark.read.parquet(str(tmp_path / "local.parquet")).collect()
    locally = {row["id"]: row["messages"] if kind == "nested" else row["messages"].encode() for row in written}
    seen = []
    for partitions in (1, 2, 7):
        df = spark.read.parquet(str(source)).repartition(partitions).localCheckpoint()
        assert df.rdd.getNumPartitions() == partitions
        out = hs.migrate(df, report=True).select("*", F.spark_partition_id().alias("partition"))
        rows = out.collect()
        before = df.select("id", F.spark_partition_id().alias("partition")).collect()
        assert [(row["partition"], row["id"]) for row in rows] == [(row["partition"], row["id"]) for row in before]
        assert len({row["partition"] for row in rows}) == partitions
        seen.append(
            {
                row["id"]: (
                    row["messages"] if kind == "nested" else row["messages"].encode(),
                    row[hs.STATUS],
                    row[hs.CHANGES],
                )
                for row in rows
            }
        )
    assert seen[0] == seen[1] == seen[2]
    assert {key: cell for key, (cell, _, _) in seen[0].items()} == locally
    assert len(seen[0]) == spark.read.parquet(str(source)).count()


def fail_once(marks: str):
    """A mapInArrow function passing the batches on, whose first attempt at each task
    raises once it has passed them all on (a marker file a task says it was tried)."""

    def function(batches):
        context = TaskContext.get()
        mark = Path(marks) / f"{context.stageId()}-{context.partitionId()}"
        first = not mark.exists()
        mark.write_text(str(context.attemptNumber()))
        yield from batches
        if first:
            raise RuntimeError("the first attempt at every task fails")

    return function


def test_tasks_that_fail_once_and_are_run_again_give_the_same_result(
    spark: SparkSession, text_parquet: Path, tmp_path: Path
) -> None:
    df = spark.read.parquet(str(text_parquet)).repartition(3).localCheckpoint()
    expected = hs.migrate(df, report=True).collect()
    failing = df.mapInArrow(fail_once(str(tmp_path)), df.schema)
    assert hs.migrate(failing, report=True).collect() == expected
    assert sorted(mark.read_text() for mark in tmp_path.iterdir()) == ["1", "1", "1"]


def test_the_cli_report_counts_a_task_run_again_once(
    spark: SparkSession, text_parquet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cells, report = local(text_parquet, tmp_path / "local.parquet")
    real = hs._mapped
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setattr(
        hs,
        "_mapped",
        lambda df, *args, **kwargs: real(df.mapInArrow(fail_once(str(marks)), df.schema), *args, **kwargs),
    )
    result = api.convert(str(text_parquet), str(tmp_path / "out"), Options(jobs=2), engine="spark")
    assert [mark.read_text() for mark in marks.iterdir()] == ["1"]
    assert_same_report(result.report.to_json(), report)
    assert [cell.encode() for cell in pq.read_table(tmp_path / "out").column("messages").to_pylist()] == cells


def invoke(*args: str):
    return runner.invoke(app, [str(arg) for arg in args])


PART = re.compile(r"^part-\d{5}-c000\.zstd\.parquet$")


def test_convert_on_spark_prints_the_local_engines_report_and_verdict_and_writes_its_cells(
    spark: SparkSession, text_parquet: Path, tmp_path: Path
) -> None:
    cells, report = local(text_parquet, tmp_path / "local.parquet")
    out = tmp_path / "out.v2"  # a directory's name may hold a dot
    result = invoke(
        "convert", text_parquet, out, "--engine", "spark", "--report", tmp_path / "r.json", "--report-format", "json"
    )
    assert result.exit_code == 0, result.output
    assert (
        result.stderr == f"histmig convert: 138 of 212 records migrated, 74 unchanged, 0 rejected; written to {out}\n"
    )
    assert_same_report(orjson.loads((tmp_path / "r.json").read_bytes()), report)
    assert [cell.encode() for cell in pq.read_table(out).column("messages").to_pylist()] == cells
    names = sorted(os.listdir(out))
    assert names[0] == "_SUCCESS" and names[1:] and all(PART.match(name) for name in names[1:])
    first = {name: (out / name).read_bytes() for name in names}
    again = invoke("convert", text_parquet, out, "--engine", "spark", "-q")
    assert again.exit_code == 0 and again.stderr == ""
    assert {name: (out / name).read_bytes() for name in sorted(os.listdir(out))} == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["local.parquet", "out.v2", "r.json"]
    jsonl = invoke("convert", text_parquet, tmp_path / "out.jsonl", "--engine", "spark")
    assert (jsonl.exit_code, jsonl.stderr) == (
        2,
        f"histmig: {tmp_path / 'out.jsonl'}: --engine spark writes a directory of Parquet files; "
        "name one (no .jsonl)\n",
    )


def test_convert_on_spark_of_a_directory_with_rejected_rows(spark: SparkSession, records, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    lake.mkdir()
    write_parquet(lake / "a.parquet", table_of(records[:100], nested=False))
    write_parquet(lake / "b.parquet", table_of(records[100:], nested=False))
    expected = api.convert(
        str(lake), str(tmp_path / "local"), Options(select=("HM1",), ignore=("HM103",), id_column="name")
    )
    out = tmp_path / "out"
    result = invoke(
        "convert",
        lake,
        out,
        "--engine",
        "spark",
        "--select",
        "HM1",
        "--ignore",
        "HM103",
        "--id-column",
        "name",
        "--report",
        tmp_path / "r.json",
        "--report-format",
        "json",
    )
    assert result.exit_code == 1 == expected.exit_code
    assert (
        result.stderr == f"histmig convert: 124 of 212 records migrated, 77 unchanged, 11 rejected; written to {out}, "
        "rejected rows unchanged\n"
    )
    assert_same_report(orjson.loads((tmp_path / "r.json").read_bytes()), expected.report.to_json(True))
    assert {row["source"] for row in expected.report.changes} == {str(lake / "a.parquet"), str(lake / "b.parquet")}
    assert {row["id"] for row in expected.report.errors} <= {r["id"] for r in records}
    assert len(expected.report.errors) == 11
    locally = [
        pq.read_table(tmp_path / "local" / name).select(["name", "messages"]).to_pylist()
        for name in ("a.parquet", "b.parquet")
    ]
    on_spark = pq.read_table(out).select(["name", "messages"]).to_pylist()
    assert sorted(on_spark, key=lambda row: row["name"]) == sorted(locally[0] + locally[1], key=lambda row: row["name"])
    assert len(on_spark) == 212


def test_the_command_line_on_spark_in_a_process_of_its_own(text_parquet: Path, tmp_path: Path) -> None:
    cells, report = local(text_parquet, tmp_path / "local.parquet", REJECTING)
    out = tmp_path / "out"
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {**{key: value for key, value in os.environ.items() if not key.startswith("PYSPARK")}, "TMPDIR": str(temp)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "histmig",
            "convert",
            str(text_parquet),
            str(out),
            "--engine",
            "spark",
            "--jobs",
            "2",
            "--select",
            "HM1",
            "--ignore",
            "HM103",
            "--report",
            str(tmp_path / "r.json"),
            "--report-format",
            "json",
        ],
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert (
        done.stderr.decode()
        == f"histmig convert: 124 of 212 records migrated, 77 unchanged, 11 rejected; written to {out}, "
        "rejected rows unchanged\n"
    )
    assert done.returncode == 1
    assert_same_report(orjson.loads((tmp_path / "r.json").read_bytes()), report)
    assert [cell.encode() for cell in pq.read_table(out).column("messages").to_pylist()] == cells
    assert not list(temp.glob("histmig-spark-*.log"))  # Spark's log (the JVM's stderr) is deleted after a run


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("{corpus}/all.jsonl", "{source}", "{tmp}/out"), "--engine spark reads Parquet, or JSONL not gzipped"),
        (("{corpus}/v2.59.0/j_rich_content.json", "{tmp}/out"), "--engine spark reads Parquet, or JSONL not gzipped"),
        (("{corpus}/all.jsonl", "{tmp}/out.parquet"), "--engine spark writes a directory of JSONL files"),
        (("{source}", "{tmp}/out.jsonl"), "--engine spark writes a directory of Parquet files"),
        (("{source}", "-"), "--engine spark writes a directory of Parquet files"),
        (("{source}", "--in-place"), "give OUTPUT, without --in-place, --to-table, --overwrite or --rejects"),
        (
            ("{source}", "{tmp}/out", "--rejects", "{tmp}/r.jsonl"),
            "give OUTPUT, without --in-place, --to-table, --overwrite or --rejects",
        ),
        (("{source}", "{tmp}/out", "--messages-column", "nope"), "no column 'nope'"),
        (("{source}", "{tmp}/out", "--id-column", "nope"), "no id column 'nope'"),
        (("{source}", "{source}/out"), "is a file, not a directory"),
        (("{source}", "{tmp}/occupied"), "exists and is not the output of an earlier --engine spark run"),
    ],
)
def test_what_spark_cannot_do_exits_2_before_it_starts(
    text_parquet: Path, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    (tmp_path / "occupied").mkdir()
    filled = [arg.format(corpus=CORPUS, tmp=tmp_path, source=text_parquet) for arg in args]
    result = invoke("convert", *filled, "--engine", "spark")
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["occupied"]


def test_spark_master_needs_the_spark_engine(text_parquet: Path, tmp_path: Path) -> None:
    result = invoke("convert", text_parquet, tmp_path / "out.parquet", "--spark-master", "local[2]")
    assert result.exit_code == 2
    assert "--spark-master needs --engine spark" in result.stderr


def test_an_earlier_spark_output_holding_the_input_is_refused(
    spark: SparkSession, text_parquet: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    assert invoke("convert", text_parquet, out, "--engine", "spark", "-q").exit_code == 0
    result = invoke("convert", out, out, "--engine", "spark")
    assert result.exit_code == 2
    assert "holds the input" in result.stderr


def test_check_returns_the_failing_rows_as_they_are(spark: SparkSession, text_parquet: Path, tmp_path: Path) -> None:
    df = spark.read.parquet(str(text_parquet))
    failing = hs.check(df).collect()
    inputs = {row["id"]: row for row in df.collect()}
    assert len(failing) == 138
    assert {row[hs.STATUS] for row in failing} == {"changed"}
    assert all(row[: len(df.columns)] == inputs[row["id"]] for row in failing)
    local_check = api.check(str(text_parquet)).report.summary()
    summary = hs.summarize(hs.check(df))
    assert (summary["records_in"], summary["changed"], summary["parts_by_rule"]) == (
        138,
        local_check["changed"],
        local_check["parts_by_rule"],
    )
    assert hs.check(hs.migrate(df)).count() == 0
    invalid = b'[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi","timestamp":"yesterday"}]}]'
    rows = hs.check(spark.createDataFrame([(invalid.decode(),), (None,)], "messages string")).collect()
    assert [(row["messages"], row[hs.STATUS]) for row in rows] == [(invalid.decode(), "invalid")]
    assert (
        orjson.loads(rows[0][hs.CHANGES])["errors"][0]
        == "messages[0].parts[0].timestamp: Input should be a valid datetime or date, input is too short"
    )
    assert hs.summarize(hs.check(spark.createDataFrame([(invalid.decode(),)], "messages string")))["invalid"] == 1


@pytest.mark.parametrize(
    "options",
    [
        {"target": "2.0.0"},
        {"attempts": True, "max_retries": "tools=2,output=1"},
        {"unsafe_fixes": True, "causes": "framework"},
    ],
    ids=["rollback", "attempts", "unsafe-fixes-framework-causes"],
)
def test_the_rollback_and_attempt_options_give_the_parquet_paths_cells(
    spark: SparkSession, text_parquet: Path, tmp_path: Path, options: dict[str, Any]
) -> None:
    cells, report = local(text_parquet, tmp_path / "local.parquet", Options(**options))
    migrated = hs.migrate(spark.read.parquet(str(text_parquet)), "messages", report=True, **options).persist()
    assert [row["messages"].encode() for row in migrated.collect()] == cells
    assert hs.summarize(migrated) == summary(report)


def test_options_are_those_of_the_local_engine(spark: SparkSession, text_parquet: Path, tmp_path: Path) -> None:
    cells, report = local(text_parquet, tmp_path / "local.parquet", REJECTING)
    out = hs.migrate(spark.read.parquet(str(text_parquet)), "messages", report=True, select="HM1", ignore=["HM103"])
    rows = out.collect()
    assert [row["messages"].encode() for row in rows] == cells
    assert hs.summarize(out) == summary(report)
    assert Counter(row[hs.STATUS] for row in rows)["rejected"] == 11
    df = spark.read.parquet(str(text_parquet))
    with pytest.raises(UsageError, match="unknown option 'jobs'"):
        hs.migrate(df, jobs=2)
    with pytest.raises(UsageError, match="HM999"):
        hs.migrate(df, select="HM999")
    with pytest.raises(UsageError, match="no column 'chat'"):
        hs.migrate(df, "chat")
    with pytest.raises(ColumnError, match="column 'id'"):
        hs.migrate(df, "id")
    with pytest.raises(UsageError, match="already has a histmig_status column"):
        hs.migrate(out.drop(hs.CHANGES), report=True)
    with pytest.raises(UsageError, match="summarize needs the histmig_status and histmig_changes columns"):
        hs.summarize(df)


def test_null_cells_are_kept_and_not_counted(spark: SparkSession) -> None:
    legacy = next(line for line in (CORPUS / "all.jsonl").read_bytes().splitlines() if b"retry-prompt" in line)
    df: DataFrame = spark.createDataFrame(
        [(1, None), (2, legacy.decode()), (3, "[{"), (4, None)], "n long, messages string"
    )
    out = hs.migrate(df, report=True)
    rows = out.collect()
    assert [(row["n"], row[hs.STATUS]) for row in rows] == [(1, None), (2, "changed"), (3, "rejected"), (4, None)]
    assert [rows[0]["messages"], rows[2]["messages"], rows[3]["messages"]] == [None, "[{", None]
    assert hs.summarize(out)["records_in"] == 2 and hs.summarize(out)["rejected"] == 1


def test_without_java_spark_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SparkSession, "getActiveSession", staticmethod(lambda: None))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(UsageError, match="--engine spark needs Java 17 or later"):
        hs.session(None, 2)


def test_the_command_line_does_not_import_pyspark_unless_asked() -> None:
    code = "import sys, histmig.cli, histmig.api; print('pyspark' in sys.modules, 'py4j' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, cwd=ROOT).stdout
        == b"False False\n"
    )


class Told:
    """A :class:`histmig.api.Progress` that keeps what it is told."""

    def __init__(self) -> None:
        self.total: int | None = None
        self.done: list[int] = []

    def start(self, total: int | None) -> None:
        self.total = total

    def advance(self, done: int) -> None:
        self.done.append(done)


def test_progress_is_told_the_input_bytes_as_the_tasks_end(spark: SparkSession, records, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    lake.mkdir()
    for n in range(3):
        write_parquet(lake / f"{n}.parquet", table_of(records[n * 70 : n * 70 + 70], nested=False))
    told = Told()
    result = api.convert(str(lake), str(tmp_path / "out"), Options(jobs=2), engine="spark", progress=told)
    assert result.report.counts["records_in"] == 210
    assert told.total == sum(path.stat().st_size for path in lake.iterdir())
    assert sum(told.done) == told.total and all(step > 0 for step in told.done)


def test_progress_is_full_only_when_the_block_ends_though_its_jobs_ended_before(spark: SparkSession) -> None:
    told = Told()
    with hs._tracked(spark, told, 1000):
        assert spark.range(0, 100, numPartitions=4).count() == 100  # every task of the block's jobs ends here
        for _ in range(100):  # then the poller sees them all ended, while the block goes on
            if sum(told.done) >= 999:
                break
            time.sleep(0.1)
        assert sum(told.done) == 999
    assert sum(told.done) == told.total == 1000 and told.done[-1] == 1 and all(step > 0 for step in told.done)
    empty = Told()
    with hs._tracked(spark, empty, 0):
        pass
    assert (empty.total, empty.done) == (0, [])


def test_convert_on_spark_from_a_folder_holding_a_histmig_folder(text_parquet: Path, tmp_path: Path) -> None:
    """A Spark worker puts its working directory first on its path: run from the parent of a
    clone named histmig, that folder stood for the package (ImportError in every task)."""
    (tmp_path / "histmig").mkdir()
    command = Path(sys.executable).parent / "histmig"
    done = subprocess.run(
        [str(command), "convert", str(text_parquet), "out.v2", "--engine", "spark", "--jobs", "2", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert pq.read_table(tmp_path / "out.v2").num_rows == 212


def apart(layout: str = "per run") -> tuple[dict[str, list[Any]], list[dict[str, Any]]]:
    """The corpus and captured histories stored apart (tests/conftest.py)."""
    from tests.conftest import stored_apart

    return stored_apart(layout)


def test_conversations_are_grouped_on_the_executors_with_their_options(spark: SparkSession) -> None:
    """``conversation=``, ``order=`` and ``max_conversation_bytes=`` reach the tasks: a
    history cut per run and shuffled comes back as its whole conversion, ties of the order
    broken by the DataFrame's order, ``"*"`` makes the DataFrame one conversation, a null key
    is a conversation of its own (told so), and past the limit each conversation is rejected
    whole, its cells kept; the summary counts records, not conversations."""
    from tests.conftest import whole_conversion

    histories, records = apart("per message")
    name = "v2.59.0/m_deferred_tool_model_retry"  # a deferred tool's run, then the run answering it
    mine = sorted((r for r in records if r["conversation_id"] == name), key=lambda r: r["seq"])
    assert len(mine) == 4
    status, whole = whole_conversion(histories[name], Options(), set())
    assert status == "changed"
    cells = [orjson.dumps(r["messages"]).decode() for r in mine]
    legacy = next(line for line in (CORPUS / "all.jsonl").read_bytes().splitlines() if b"retry-prompt" in line)
    rows = [
        *(("a", n, cell) for n, cell in reversed(list(enumerate(cells)))),  # the order sorts them
        *(("tie", 0, cell) for cell in cells),  # equal order values: the DataFrame's order
        (None, 0, legacy.decode()),
        (None, 1, legacy.decode()),
    ]
    df = spark.createDataFrame(rows, "c string, n long, messages string").coalesce(1)
    out = hs.migrate(df, report=True, conversation="c", order="n").persist()
    got = out.collect()
    by_c: dict[Any, list[Any]] = defaultdict(list)
    for row in got:
        by_c[row["c"]].append(row)

    def joined(rows: list[Any]) -> bytes:
        return orjson.dumps([m for row in rows for m in orjson.loads(row["messages"])])

    for key in ("a", "tie"):
        assert joined(sorted(by_c[key], key=lambda r: r["n"])) == orjson.dumps(whole), key
    assert [row["n"] for row in by_c["tie"]] == [0] * len(cells)
    alone = hs.migrate(spark.createDataFrame([(legacy.decode(),)], "messages string")).first()["messages"]
    assert [(row[hs.STATUS], row["messages"]) for row in by_c[None]] == [("changed", alone)] * 2
    assert [orjson.loads(row[hs.CHANGES])["warnings"] for row in by_c[None]] == [
        ["no conversation key (c null): a conversation of its own"]
    ] * 2
    summary = hs.summarize(out)
    moved = sum(row["messages"] != before for row, before in zip(sorted(by_c["a"], key=lambda r: r["n"]), cells))
    assert 0 < moved < len(cells)  # a record no rule changed keeps its cell, and is counted unchanged
    warned = sum(f["severity"] == "warning" for row in got if row[hs.CHANGES] for f in entries([row])[0]["findings"])
    assert (summary["records_in"], summary["changed"], summary["warnings"]) == (
        2 * len(cells) + 2,
        2 * moved + 2,
        warned + 2,
    )
    every = hs.migrate(df.where("c = 'a'").orderBy("n").coalesce(1), conversation="*").collect()
    assert [row["n"] for row in every] == list(range(len(cells)))  # no order: the DataFrame's
    assert joined(every) == orjson.dumps(whole)
    limit = len("".join(cells)) - 1
    refused = hs.migrate(df, report=True, conversation=["c"], order="n", max_conversation_bytes=limit).collect()
    said = {(row["c"], orjson.loads(row[hs.CHANGES])["errors"][0]) for row in refused if row[hs.STATUS] == "rejected"}
    held = f"holds {len(''.join(cells))} bytes in {len(cells)} records, past --max-conversation-bytes {limit}"
    assert said == {
        (key, f"conversation c={key!r} {held}: rejected whole, nothing written for it") for key in ("a", "tie")
    }
    assert sorted(row["messages"] for row in refused if row["c"] is not None) == sorted(cells * 2)
    with pytest.raises(UsageError, match="--conversation/--order: no column 'nope'"):
        hs.migrate(df, conversation="c", order="nope")
    with pytest.raises(UsageError, match="--order and --max-conversation-bytes need --conversation"):
        hs.check(df, order="n")


def test_a_nested_column_grouped_by_a_unique_key_gives_the_cells_of_each_row_alone(
    spark: SparkSession, nested_parquet: Path
) -> None:
    """Conversations of one row each: every nested cell, status and entry as without
    ``conversation``, the widened type the same."""
    df = spark.read.parquet(str(nested_parquet))
    alone = hs.migrate(df, report=True)
    grouped = hs.migrate(df, report=True, conversation="id")
    assert grouped.schema == alone.schema
    by_id = {row["id"]: row for row in alone.collect()}
    rows = grouped.collect()
    assert len(rows) == len(by_id) and all(row == by_id[row["id"]] for row in rows)
    assert Counter(row[hs.STATUS] for row in rows)["changed"] > 50


def test_convert_on_spark_groups_a_parquet_files_rows_as_the_local_engine_groups_jsonl_lines(
    spark: SparkSession, tmp_path: Path
) -> None:
    """``histmig convert in.parquet OUT --engine spark --conversation --order``: the cells, the
    report's changes and the verdict of the local engine's run over the same records as
    JSONL lines."""
    _, records = apart("per message")
    lines = tmp_path / "apart.jsonl"
    lines.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    grouped = ("--conversation", "conversation_id", "--order", "seq")
    local_out = tmp_path / "local.jsonl"
    local_run = invoke(
        "convert",
        lines,
        local_out,
        *grouped,
        "--unsafe-fixes",
        "--report",
        tmp_path / "l.json",
        "--report-format",
        "json",
    )
    source = tmp_path / "apart.parquet"
    pq.write_table(
        pa.table(
            {
                "conversation_id": [r["conversation_id"] for r in records],
                "seq": [r["seq"] for r in records],
                "messages": [orjson.dumps(r["messages"]).decode() for r in records],
            }
        ),
        source,
    )
    out = tmp_path / "out"
    on_spark = invoke(
        "convert",
        source,
        out,
        "--engine",
        "spark",
        *grouped,
        "--unsafe-fixes",
        "--report",
        tmp_path / "s.json",
        "--report-format",
        "json",
    )
    assert on_spark.exit_code == local_run.exit_code, on_spark.output
    assert on_spark.stderr.split("; written")[0] == local_run.stderr.split("; written")[0]
    assert "records migrated" in on_spark.stderr
    expected = {
        (r["conversation_id"], r["seq"]): r["messages"] for r in map(orjson.loads, local_out.read_bytes().splitlines())
    }
    written = pq.read_table(out).to_pylist()
    assert {(r["conversation_id"], r["seq"]): orjson.loads(r["messages"]) for r in written} == expected
    local_report, spark_report = (orjson.loads((tmp_path / name).read_bytes()) for name in ("l.json", "s.json"))
    assert spark_report["summary"] == local_report["summary"] and local_report["summary"]["changed"] > 0

    def placed(rows: list[dict[str, Any]], at: str) -> list[tuple[Any, ...]]:
        return [
            (records[row[at] - (at == "line")]["conversation_id"], records[row[at] - (at == "line")]["seq"], *rest)
            for row in rows
            for rest in [tuple(without_place([row])[0].values())]
        ]

    # the same rows; in input order on Spark, a conversation at a time in the local engine's
    assert sorted(placed(spark_report["changes"], "row"), key=repr) == sorted(
        placed(local_report["changes"], "line"), key=repr
    )
    rows = [row["row"] for row in spark_report["changes"]]
    assert rows == sorted(rows) and len(rows) > 100
    jsonl = invoke("convert", lines, tmp_path / "o", "--engine", "spark", *grouped)
    assert (jsonl.exit_code, jsonl.stderr) == (2, f"histmig: {hs.NOT_GROUPED}\n")
    alone = invoke("convert", source, tmp_path / "o.parquet", *grouped, "--unsafe-fixes")  # the local engine's Parquet
    assert alone.exit_code == local_run.exit_code, alone.output
    local_rows = pq.read_table(tmp_path / "o.parquet").to_pylist()  # in the input's row order; Spark's in its own
    assert sorted(local_rows, key=repr) == sorted(written, key=repr)
