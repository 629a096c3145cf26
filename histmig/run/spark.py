"""The Spark engine: a planned ``convert`` of Parquet files as one Spark job
(:func:`histmig.spark.migrate_files`), or of objects in a store, one a task
(:func:`histmig.spark.migrate_objects`), its :class:`~histmig.run.result.Result` the local
engine's (report, verdict line, exit code). pyspark is imported only when a run asks for this
engine."""

from __future__ import annotations

from histmig.options import Options
from histmig.parallel import Progress
from histmig.run.plan import Planning
from histmig.run.result import Result
from histmig.sources.base import Written


def run_spark(planning: Planning, options: Options, progress: Progress | None) -> Result:
    """Run ``planning`` (``convert``, Parquet inputs, a directory OUTPUT; or objects to objects:
    checked by :func:`~histmig.run.plan.plan`) on Spark. Raises as
    :func:`histmig.spark.migrate_files` and :func:`histmig.spark.migrate_objects` do (no
    Java, a missing column, an object that cannot be read or written)."""
    from histmig import spark

    if planning.objects:
        return spark.migrate_objects(planning, options, progress)
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
