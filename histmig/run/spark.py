"""The Spark engine: a planned ``convert`` of Parquet files as one Spark job
(:func:`histmig.spark.migrate_files`), or of objects in a store, one a task
(:func:`migrate_objects`), its :class:`~histmig.run.result.Result` the local
engine's (report, verdict line, exit code). pyspark is imported only when a run asks for this
engine."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, replace

from histmig import redact
from histmig.errors import UnreadableInput, UnwritableOutput, UsageError
from histmig.options import Options
from histmig.parallel import Progress
from histmig.report import Report
from histmig.run.local import run_local
from histmig.run.plan import Planned, Planning
from histmig.run.result import Result
from histmig.sources.atomic import added_to
from histmig.sources.base import Written
from histmig.sources.fs import exists, filesystem, is_object, open_input, store_errors


def run_spark(planning: Planning, options: Options, progress: Progress | None) -> Result:
    """Run ``planning`` (``convert``, Parquet inputs, a directory OUTPUT; or objects to objects:
    checked by :func:`~histmig.run.plan.plan`) on Spark. Raises as
    :func:`histmig.spark.migrate_files` and :func:`migrate_objects` do (no
    Java, a missing column, an object that cannot be read or written)."""
    from histmig import spark

    if planning.objects:
        return migrate_objects(planning, options, progress)
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


def migrate_objects(planning: Planning, options: Options, progress: Progress | None = None) -> Result:
    """The Spark engine over object storage (``histmig convert s3://b/chats/ s3://b/chats.v2/
    --engine spark``, planned by :func:`histmig.run.plan.plan`, its ``objects``): the driver
    has listed the input objects (a prefix is an input like a directory), each one is a
    Spark task, and the executor running it converts the object with the local engine's own
    per-file code (:func:`histmig.run.local.run_local` of that object alone, in one process),
    reading and writing through histmig's object-storage layer (:mod:`histmig.sources.fs`,
    fsspec): the same bytes as the local engine, to the destination the local engine gives
    the object, written whole or not at all (a multipart upload completed at the end), so a
    task Spark runs again writes the same object again. Spark's own readers are not used:
    pyspark ships no Hadoop S3 connector (``s3a://`` needs hadoop-aws and the AWS SDK on the
    cluster), and the file formats' own readers already stream an object with flat memory.
    The executors find the store's credentials and endpoint as the store's tools do, in their
    own environment (``--conf spark.executorEnv.AWS_ENDPOINT_URL=...``, an instance role).
    Rejected records go where the local engine puts them, each task's share to a piece of its
    own beside the rejects object (:func:`_piece`), which the driver adds to it in input order.
    Returns the local engine's result: the objects' reports merged in input order. Raises
    :class:`~histmig.errors.UnreadableInput`, :class:`~histmig.errors.UnwritableOutput` or
    :class:`~histmig.errors.UsageError` with the executor's one line (a refused credential,
    a missing bucket), of the first object in input order that failed, once every task has
    ended, and :class:`~histmig.errors.UsageError` when there is no Java."""
    from histmig.spark import session

    items = list(enumerate(planning.inputs))
    shared = list(dict.fromkeys(item.destination.rejects for _, item in items if _pieced(item.destination.rejects)))
    earlier = [path for path in shared if exists(path, UnwritableOutput)]  # type: ignore[arg-type]  # pieced: a URL
    pieces = [(at, item.destination.rejects) for at, item in items if item.destination.rejects in shared]
    _refuse_pieces([_piece(rejects, at) for at, rejects in pieces])  # type: ignore[arg-type]  # pieced: a URL
    spark, log = session(planning.spark_master, options.workers)
    try:
        if progress is not None:
            progress.start(None)
        run = _Object(planning, replace(options, jobs=1))
        done = sorted(spark.sparkContext.parallelize(items, len(items)).map(run).collect(), key=lambda entry: entry[0])
    finally:
        if log is not None:
            spark.stop()
            os.unlink(log)
    try:
        report = Report()
        result = Result(planning.command, planning.input, report, output=planning.destination.output)
        result.earlier_rejects = earlier  # type: ignore[assignment]  # pieced: a URL
        for _, one in done:
            if isinstance(one, tuple):
                raise _RAISED[one[0]](one[1])
            report.merge(one.report)
            result.wrote += one.wrote
            result.inputs += one.inputs
            result.warnings += one.warnings
            result.target = one.target
        for rejects in shared:
            if any(w.rejected == rejects and w.rejects_used for w in result.wrote):
                with added_to(rejects) as out:  # type: ignore[arg-type]  # pieced: a URL
                    for at, item in items:
                        piece = _piece(rejects, at)  # type: ignore[arg-type]  # pieced: a URL
                        if item.destination.rejects == rejects and exists(piece, UnwritableOutput):
                            with open_input(piece) as written:
                                shutil.copyfileobj(written, out, 1 << 20)
    finally:
        for at, item in items:
            if item.destination.rejects in shared:
                _remove(_piece(item.destination.rejects, at))  # type: ignore[arg-type]  # pieced: a URL
    return result


def _pieced(rejects: str | None) -> bool:
    """Whether a rejects file of :func:`migrate_objects` is written in pieces: an object,
    which the tasks of several input objects could otherwise add to at once (an object is
    replaced whole: the last writer's would be all that is left)."""
    return rejects is not None and is_object(rejects)


def _refuse_pieces(pieces: list[str]) -> None:
    """Refuse a run whose rejects pieces (:func:`_piece`) are already there: each task removes
    its piece before it writes (a piece an attempt before left, when Spark runs a task again)
    and the driver removes every piece at the end, so an object of that name that was there
    before the run, another's data, would be lost. Raises :class:`~histmig.errors.UsageError`
    naming them."""
    there = [piece for piece in pieces if exists(piece, UnwritableOutput)]
    if there:
        named = ", ".join(redact.location(piece) for piece in there)
        raise UsageError(
            f"{named} already exist{'s' if len(there) == 1 else ''}: --engine spark writes the rejected records "
            "of each input object there and removes them; remove them or pick another OUTPUT"
        )


def _piece(rejects: str, at: int) -> str:
    """The object the task of the input at ``at`` writes its share of ``rejects`` to; the
    driver adds the pieces to ``rejects`` in input order, as the local engine adds each
    input's rejected records, and removes them."""
    return f"{rejects}.{at:06d}.piece"


def _remove(path: str) -> None:
    """Remove the object ``path`` when it is there (a piece of a rejects file)."""
    store, inner = filesystem(path)
    with store_errors(path, UnwritableOutput):
        if store.exists(inner):
            store.rm(inner)


_RAISED: dict[str, type[Exception]] = {
    "UsageError": UsageError,
    "UnreadableInput": UnreadableInput,
    "UnwritableOutput": UnwritableOutput,
}
"""The errors an executor of :func:`migrate_objects` sends back as one line, raised again by
the driver: by the name of the class (or of its base) they were raised as."""


@dataclass(frozen=True)
class _Object:
    """What an executor runs for one object of :func:`migrate_objects`: the local engine over
    ``(place, item)``, the ``item`` of ``planning`` alone; its result (the report's rows in
    memory, to be sent to the driver), or the class and line of the error it raised."""

    planning: Planning
    options: Options

    def __call__(self, entry: tuple[int, Planned]) -> tuple[int, Result | tuple[str, str]]:
        at, item = entry
        rejects = item.destination.rejects
        try:
            if _pieced(rejects):  # its own piece; one there is an earlier attempt's (the driver refused any before)
                piece = _piece(rejects, at)  # type: ignore[arg-type]  # pieced: a URL
                _remove(piece)
                item = replace(item, destination=replace(item.destination, rejects=piece))
            alone = replace(self.planning, input=item.path, inputs=[item], engine="local", objects=False)
            result = run_local(alone, self.options, self.options.plan(), None, strict=False, in_memory=True)
            for written in result.wrote:
                if written.rejected == item.destination.rejects:
                    written.rejected = rejects
            return at, result
        except (UsageError, UnreadableInput, UnwritableOutput) as exc:
            kind = next(name for name, error in _RAISED.items() if isinstance(exc, error))
            return at, (kind, str(exc))
