"""The Spark engine (histmig.run.spark): a planned convert as one Spark job, with the local
engine's Result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from histmig import api
from histmig.errors import UsageError
from histmig.options import Options
from histmig.run.spark import _Object
from tests.conftest import LAKE_DAYS, ROOT, Bucket, make_lake
from tests.sources.conftest import corpus_records, table_of, write_parquet


def test_a_spark_run_gives_the_local_engines_result_and_verdict(spark: SparkSession, tmp_path: Path) -> None:
    source = write_parquet(tmp_path / "chats.parquet", table_of(corpus_records()[:20], nested=False))
    local = api.convert(str(source), str(tmp_path / "local.parquet"), Options(target="2.59.0"))
    result = api.convert(str(source), str(tmp_path / "lake.v2"), Options(target="2.59.0", jobs=2), engine="spark")
    assert (result.inputs, result.output, result.target) == ([str(source)], str(tmp_path / "lake.v2"), "2.59.0")
    assert result.verdict == local.verdict.replace(str(tmp_path / "local.parquet"), str(tmp_path / "lake.v2"))
    assert "rewritten for 2.59.0" in result.verdict
    assert result.report.counts == local.report.counts and result.exit_code == local.exit_code
    assert result.report.run.options["engine"] == "spark" and result.report.run.options["spark_master"] is None
    assert pq.read_table(tmp_path / "lake.v2").num_rows == 20


def _rows_by_partition(root: Path) -> dict[str, list[dict]]:
    """Every Parquet file's rows under ``root``, by the partition directory holding it, sorted by id."""
    found: dict[str, list[dict]] = {}
    for file in sorted(root.rglob("*.parquet")):
        found.setdefault(str(file.parent.relative_to(root)), []).extend(pq.read_table(file).to_pylist())
    return {folder: sorted(rows, key=lambda row: row["id"]) for folder, rows in found.items()}


@pytest.mark.parametrize("levels", [(LAKE_DAYS,), (("region=eu", "region=us"), ("day=01", "day=02"))])
def test_a_partitioned_dataset_on_spark_is_written_as_the_same_partitions_with_the_local_rows(
    spark: SparkSession, tmp_path: Path, levels: tuple[tuple[str, ...], ...]
) -> None:
    lake = tmp_path / "lake"
    files = make_lake(lake, "parquet", levels)
    local = api.convert(str(lake), str(tmp_path / "local"), Options(jobs=2))
    result = api.convert(str(lake), str(tmp_path / "made" / "lake.v2"), Options(jobs=2), engine="spark")
    out = tmp_path / "made" / "lake.v2"
    assert (out / "_SUCCESS").is_file()
    expected = _rows_by_partition(tmp_path / "local")
    assert sorted(expected) == sorted(str(f.parent.relative_to(lake)) for f in files[::2])
    assert _rows_by_partition(out) == expected
    for file in out.rglob("*.parquet"):
        assert pq.read_schema(file).names == ["id", "messages"]  # the partition columns are in no file
    assert result.report.counts == local.report.counts
    assert [row["source"] for row in result.report.changes] == [row["source"] for row in local.report.changes]


def test_a_partitioned_dataset_spark_cannot_write_as_it_is_spelled_is_refused(
    spark: SparkSession, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    make_lake(lake, "parquet", (("at=10:00", "at=11:00"),))
    with pytest.raises(UsageError, match=r"Spark writes a partition of this dataset as 'at=10%3A00'"):
        api.convert(str(lake), str(tmp_path / "out"), engine="spark")
    assert not (tmp_path / "out").exists()
    (lake / "at=10:00" / "part-0.parquet").rename(lake / "part-0.parquet")
    with pytest.raises(UsageError, match=r"its partition directories are by none, .*at=10:00/part-1.parquet's by at"):
        api.convert(str(lake), str(tmp_path / "out"), engine="spark")


def test_a_partitioned_jsonl_dataset_on_spark_gives_each_file_the_local_engines_lines(
    spark: SparkSession, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    files = make_lake(lake, "jsonl")
    local = api.convert(str(lake), str(tmp_path / "local"), Options(jobs=2))
    result = api.convert(str(lake), str(tmp_path / "lake.v2"), Options(jobs=2), engine="spark")
    out = tmp_path / "lake.v2"
    for day in LAKE_DAYS:
        written = sorted((out / day).glob("part-*.jsonl"))
        assert written, day
        lines = sorted(line for file in written for line in file.read_bytes().splitlines())
        expected = sorted(
            line for file in (tmp_path / "local" / day).iterdir() for line in file.read_bytes().splitlines()
        )
        assert lines == expected
    assert sorted(p.name for p in out.iterdir()) == ["_SUCCESS", *LAKE_DAYS]
    assert result.report.counts == local.report.counts
    assert [(r["source"], r["location"]) for r in result.report.changes] == [
        (r["source"], r["location"]) for r in local.report.changes
    ]
    assert files[0].name == "part-0.jsonl"


def test_objects_on_spark_give_the_local_engines_objects_report_and_verdict(bucket: Bucket, tmp_path: Path) -> None:
    """A prefix of JSONL objects, some records rejected, on a Spark session of its own (its
    executors started with the store's environment, as a user's are): each output object is
    the local engine's, the tasks' rejected records make the local engine's one rejects
    object (no piece left), and the report, the verdict and the exit code are the local
    engine's."""
    for file in make_lake(tmp_path / "lake", "jsonl"):
        bucket.put(f"in/{file.relative_to(tmp_path / 'lake')}", file.read_bytes())
    options = Options(select=("HM1",), ignore=("HM103",), jobs=2)
    local = api.convert(f"{bucket.url}/in/", f"{bucket.url}/local/", options)
    argv = [f"{bucket.url}/in/", f"{bucket.url}/spark/", "--select", "HM1", "--ignore", "HM103", "--jobs", "2"]
    report = ["--report", str(tmp_path / "r.json"), "--report-format", "json"]
    done = subprocess.run(
        [sys.executable, "-m", "histmig", "convert", *argv, "--engine", "spark", *report],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=600,
    )
    assert done.returncode == local.exit_code == 1, done.stderr
    assert done.stderr == local.verdict.replace("/local", "/spark") + "\n"
    assert f"rejected records to {bucket.url}/spark.rejects.jsonl" in done.stderr
    on_spark = json.loads((tmp_path / "r.json").read_text())
    expected = local.report.to_json()
    assert (on_spark["changes"], on_spark["errors"]) == (expected["changes"], expected["errors"])
    assert len(on_spark["errors"]) == 11 and on_spark["summary"] == expected["summary"]
    written = bucket.keys("spark")
    assert [key.removeprefix("spark") for key in written] == [key.removeprefix("local") for key in bucket.keys("local")]
    assert "spark.rejects.jsonl" in written and len(written) == 7
    for key in written:
        assert bucket.get(key) == bucket.get("local" + key.removeprefix("spark")), key
    with pytest.raises(UsageError, match="--engine spark over object storage reads objects and writes objects"):
        api.convert(f"{bucket.url}/in/", str(tmp_path / "out"), options, engine="spark")
    grouped = Options(conversation=("conversation_id",), jobs=2)
    with pytest.raises(UsageError, match=r"^--conversation on --engine spark over object storage \(6 objects\): "):
        api.convert(f"{bucket.url}/in/", f"{bucket.url}/grouped/", grouped, engine="spark")
    assert bucket.keys("grouped") == []


def test_each_object_task_writes_its_rejected_records_to_a_piece_of_its_own(bucket: Bucket, tmp_path: Path) -> None:
    """Tasks of several input objects run at once, and an object cannot be added to by two
    writers (each replaces it whole): a task's rejected records go to its own piece of the
    rejects object, never to the rejects object itself, whatever piece an attempt before left."""
    from histmig.run.plan import plan
    from histmig.sources.base import Destination

    for file in make_lake(tmp_path / "lake", "jsonl"):
        bucket.put(f"in/{file.relative_to(tmp_path / 'lake')}", file.read_bytes())
    options = Options(select=("HM1",), ignore=("HM103",), jobs=1)
    planning = plan("convert", f"{bucket.url}/in/", Destination(f"{bucket.url}/out/"), options, engine="spark")
    assert planning.objects and {item.destination.rejects for item in planning.inputs} == {
        f"{bucket.url}/out.rejects.jsonl"
    }
    bucket.put("out.rejects.jsonl.000001.piece", b"left by an attempt before\n")
    results = [_Object(planning, options)((at, item)) for at, item in enumerate(planning.inputs)]
    rejected = [at for at, result in results if any(w.rejects_used for w in result.wrote)]  # type: ignore[union-attr]
    assert rejected and all(w.rejected == f"{bucket.url}/out.rejects.jsonl" for _, r in results for w in r.wrote)  # type: ignore[union-attr]
    assert bucket.keys("out.") == [f"out.rejects.jsonl.{at:06d}.piece" for at in rejected]
    assert sum(bucket.get(key).count(b"\n") for key in bucket.keys("out.")) == 11


def test_an_object_storage_run_refuses_rejects_pieces_that_were_there_before_it(bucket: Bucket, tmp_path: Path) -> None:
    """An object named like a piece of the rejects object before the run is another's data:
    the driver refuses the run (before any task, before a Spark session) and removes nothing."""
    from histmig.run.plan import plan
    from histmig.run.spark import migrate_objects
    from histmig.sources.base import Destination

    for file in make_lake(tmp_path / "lake", "jsonl"):
        bucket.put(f"in/{file.relative_to(tmp_path / 'lake')}", file.read_bytes())
    options = Options(select=("HM1",), ignore=("HM103",), jobs=1)
    planning = plan("convert", f"{bucket.url}/in/", Destination(f"{bucket.url}/out/"), options, engine="spark")
    bucket.put("out.rejects.jsonl.000001.piece", b"a user's data\n")
    with pytest.raises(UsageError) as raised:
        migrate_objects(planning, options)
    assert str(raised.value) == (
        f"{bucket.url}/out.rejects.jsonl.000001.piece already exists: --engine spark writes the rejected records "
        "of each input object there and removes them; remove them or pick another OUTPUT"
    )
    assert bucket.keys("out") == ["out.rejects.jsonl.000001.piece"]
    assert bucket.get("out.rejects.jsonl.000001.piece") == b"a user's data\n"
