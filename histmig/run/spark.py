"""The Spark engine: a planned ``convert`` of Parquet files as one Spark job
(:func:`histmig.spark.migrate_files`), its :class:`~histmig.run.result.Result` the local
engine's (report, verdict line, exit code). pyspark is imported only when a run asks for this
engine."""

from __future__ import annotations

from histmig.options import Options
from histmig.parallel import Progress
from histmig.run.plan import Planning
from histmig.run.result import Result
from histmig.sources.base import Written


def run_spark(planning: Planning, options: Options, progress: Progress | None) -> Result:
    """Run ``planning`` (``convert``, Parquet inputs, a directory OUTPUT: checked by
    :func:`~histmig.run.plan.plan`) on Spark. Raises as
    :func:`histmig.spark.migrate_files` does (no Java, a missing column)."""
    from histmig import spark

    files = [item.path for item in planning.inputs]
    output: str = planning.destination.output  # type: ignore[assignment]  # a Spark run has an OUTPUT
    report = spark.migrate_files(
        files,
        output,
        options,
        master=planning.spark_master,
        progress=progress,
        base=planning.base,
        partition_by=planning.partition_by,
    )
    return Result(
        "convert",
        planning.input,
        report,
        output=output,
        wrote=[Written(rejected="rows")],
        inputs=files,
        target=options.target and str(options.release),
    )
