"""The Spark engine (histmig.run.spark): a planned convert as one Spark job, with the local
engine's Result."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from histmig import api
from histmig.options import Options
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
