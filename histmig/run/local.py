"""The local engine: a planned run's inputs, one at a time, their tasks on this machine's
worker processes (:class:`~histmig.parallel.Workers`), in order, each result written back by
its input (see :mod:`histmig.sources.base`); an input whose tasks cannot go to workers (a
database connection, a document) runs in this process."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial

from histmig.errors import InputChanged, InputEnded, UnwritableOutput, partly_written
from histmig.options import Options
from histmig.parallel import Progress, Workers
from histmig.report import Report
from histmig.run.plan import Planning
from histmig.run.result import Result
from histmig.sources.base import Input, Job, Task, TaskResult, Written
from histmig.sources.fs import exists, is_object, make_parents


def _work(job: Job, task: Task, slot: memoryview | None) -> TaskResult:
    return task.run(job, slot)


def _opened(planning: Planning, options: Options, job: Job) -> list[Input]:
    """The inputs of ``planning``: each file's (:attr:`~histmig.sources.base.Format.open`), or,
    under ``--conversation``, the files of a format that groups several together as one
    (:attr:`~histmig.sources.base.Format.open_together`: a conversation may span them)."""
    items = planning.inputs
    together = items[0].format.open_together if items else None
    if options.grouping is not None and len(items) > 1 and together is not None:
        return together([(item.path, item.destination) for item in items], options, job)
    return [opened for item in items for opened in item.format.open(item.path, item.destination, options, job)]


def run_local(
    planning: Planning,
    options: Options,
    job: Job,
    progress: Progress | None,
    *,
    strict: bool,
    in_memory: bool = False,
) -> Result:
    """Run every input of ``planning`` through ``job`` on ``options.jobs`` workers, each
    written to its own destination; ``in_memory``: the report's rows stay in memory, for the
    result to be sent to another process (:func:`histmig.run.spark.migrate_objects`). Opening the
    inputs may still raise what :func:`~histmig.run.plan.plan` raises (a table or column that
    is not there); bad records never raise."""
    inputs = _opened(planning, options, job)
    earlier = list(
        dict.fromkeys(
            item.destination.rejects
            for item in planning.inputs
            if item.destination.rejects not in (None, "-")
            and (  # an earlier rejects file (a regular file; an object)
                exists(item.destination.rejects, UnwritableOutput)
                if is_object(item.destination.rejects)
                else os.path.isfile(item.destination.rejects)
            )
        )
    )
    if planning.directory is not None:
        make_parents(os.path.join(planning.directory, ""))
    for item in planning.inputs:
        if item.destination.output not in (None, "-"):
            make_parents(item.destination.output)
    report = Report.in_memory() if in_memory else Report()
    if progress is not None:
        sizes = [i.size for i in inputs]
        progress.start(None if None in sizes else sum(sizes))  # type: ignore[arg-type]  # no None in the sum
    jobs = 1 if all(i.in_process for i in inputs) else options.workers
    advance: Callable[[int], None] = progress.advance if progress is not None else lambda n: None
    wrote: list[Written] = []
    warnings: list[str] = []
    written = _written_names(planning, inputs)
    with Workers(partial(_work, job), jobs, slot_bytes=max(i.slot_bytes for i in inputs)) as workers:
        for done, current in enumerate(inputs):
            kept = None
            try:
                with current:
                    last = "the start"
                    try:
                        for task, result, slot in _results(current, workers, job):
                            report.merge(result.report)
                            last = result.last or last
                            advance(task.size)
                            current.write(task, result, slot)
                    except InputEnded as exc:
                        report.add_read_error(current.name, f"after {last}", str(exc))
            except InputChanged as exc:  # the input is kept, its migrated copy beside it; on to the next
                warnings.append(str(exc))
                kept = exc.kept
            except OSError as exc:  # the run ends here: say what the inputs before it wrote
                raise partly_written(exc, written[:done], written[done + 1 :]) from exc
            wrote.append(replace(current.written(), kept=kept))
            for row in wrote[-1].skipped:
                report.add_skipped(row.source, row.location, row.id, row.conversation)
    destination = planning.destination
    return Result(
        planning.command,
        planning.input,
        report,
        output=destination.output,
        to_table=destination.to_table,
        in_place=destination.in_place,
        wrote=wrote,
        stdin_lines=planning.paths == ["-"] and planning.inputs[0].format.name == "jsonl" and options.format is None,
        strict=strict,
        inputs=[i.name for i in inputs],
        earlier_rejects=earlier,
        target=options.target and str(options.release),
        warnings=warnings,
    )


def _written_names(planning: Planning, inputs: list[Input]) -> list[str]:
    """What each of ``inputs`` writes, as an error names it: its output (a file the run
    writes each input to), else the input itself (written in place); none for a run that
    writes nothing (``audit``, ``check``)."""
    if all(item.destination.output is None and not item.destination.in_place for item in planning.inputs):
        return []
    outputs = [item.destination.output for item in planning.inputs]
    if len(outputs) == len(inputs) and None not in outputs and "-" not in outputs:
        return outputs  # type: ignore[return-value]  # no None among them
    return [current.name for current in inputs]


def _results(
    current: Input, workers: Workers[Task, TaskResult], job: Job
) -> Iterator[tuple[Task, TaskResult, memoryview | None]]:
    """Each task of ``current`` with its result and slot, in order: on the workers, or in
    this process for an input whose tasks cannot go to them."""
    if current.in_process:
        for task in current.tasks():
            yield task, task.run(job, None), None
        return
    yield from workers.map(
        current.tasks(), message=lambda task: task.sent(), depth=lambda task: task.depth, window=current.window
    )
