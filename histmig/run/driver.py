"""The run driver under the API: plan a run (:mod:`histmig.run.plan`), tune the process for it
when asked (the command line's), run it on its engine (:mod:`histmig.run.local`,
:mod:`histmig.run.spark`) and record it in its report (:func:`~histmig.run.result.recorded`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace

from histmig import redact
from histmig.engine import FRONTIER, Plan
from histmig.options import MIGRATING, Command, Options
from histmig.parallel import Progress
from histmig.run.local import run_local
from histmig.run.paths import file_key
from histmig.run.plan import Planning, plan
from histmig.run.result import Result, recorded, started_now
from histmig.run.spark import run_spark
from histmig.sources import fs, unread_folders
from histmig.sources.atomic import stale_temps
from histmig.sources.base import Destination, Job
from histmig.sources.fs import is_object
from histmig.tuning import keep_heap_slack, use_jemalloc


def run(
    command: Command,
    input: str | Sequence[str],
    destination: Destination,
    options: Options,
    job: Job,
    *,
    engine: str = "local",
    spark_master: str | None = None,
    strict: bool = False,
    report: str | None = None,
    clean: bool = False,
    progress: Progress | None = None,
    tune: bool = False,
) -> Result:
    """Run ``command`` over ``input`` to ``destination``, its records through ``job``, on
    ``engine`` (``"local"``, ``"spark"``), and return its :class:`~histmig.run.result.Result`
    with the report's :class:`~histmig.report.RunInfo` (its start time is the one value of a
    run the clock gives). ``report`` is the path the caller writes the report to (checked
    against what the run reads and writes); ``tune`` sets up this process as the command line
    does (:mod:`histmig.tuning`: the heap's slack; Arrow's jemalloc pool for a columnar
    input), which a library caller's process is spared. The temporary files killed runs left
    beside the files the run writes are named in the result's warnings, or, with ``clean``,
    removed (:func:`tidied`). Raises what
    :func:`~histmig.run.plan.plan` raises, before anything is read."""
    started = started_now()
    if tune:
        keep_heap_slack()
    planning = plan(command, input, destination, options, engine=engine, spark_master=spark_master, report=report)
    if tune and planning.columnar:
        use_jemalloc()
    warnings, cleaned = tidied(written_paths(planning, report), clean, [item.path for item in planning.inputs])
    warnings += _linked(planning) + _unread(planning)
    if planning.engine == "spark":
        result = run_spark(planning, options, progress)
    else:
        once = False
        if isinstance(job, Plan) and _closes_last_calls(command, planning, job):
            if _rereadable(planning):
                job = replace(job, answered=_answered(input, options, progress))
            else:
                job, once = replace(job, keep_frontier=True), True
        result = run_local(planning, options, job, progress, strict=strict)
        if once and result.report.findings_of(FRONTIER):
            warnings.append(_NOT_READ_TWICE)
    result.warnings[:0] = warnings
    result.cleaned += cleaned
    given = {
        "rejects": destination.rejects,
        "in_place": destination.in_place,
        "to_table": destination.to_table,
        "overwrite": destination.overwrite,
        "strict": strict,
        "engine": planning.engine,
    }
    if planning.engine == "spark":
        given["spark_master"] = spark_master
    return recorded(result, options, job, started, given)


def _closes_last_calls(command: Command, planning: Planning, job: Plan) -> bool:
    """Whether the run's HM407 fix may close the calls of a record's last response that a later
    record answers: ``convert``, and ``audit`` saying what it does, with ``--unsafe-fixes`` and
    without ``--conversation``, of inputs of several records (not one JSON document). Then its
    inputs are read twice when they can be (:func:`_rereadable`), first to find those calls
    (:func:`_answered`); else every such call is left open, and the run warns
    (:data:`_NOT_READ_TWICE`)."""
    return (
        command in MIGRATING
        and job.closes_alone
        and (len(planning.inputs) > 1 or any(item.format.name != "json" for item in planning.inputs))
    )


def _rereadable(planning: Planning) -> bool:
    """Whether every input can be read again: a regular file, an object, a table (not
    standard input, a pipe, a FIFO or ``/dev/stdin``, which a second read would find empty)."""
    return "-" not in planning.paths and all(
        item.format.columnar or is_object(item.path) or os.path.isfile(item.path) for item in planning.inputs
    )


_NOT_READ_TWICE = (
    "the input cannot be read twice (standard input or a pipe), so the calls of a record's last response that a "
    "later record may answer could not be told: HM407 left every one open; give a file, or --conversation COLUMN "
    "('*' for one conversation) to treat each conversation whole"
)
"""The warning of a run whose HM407 fix keeps every last response's calls open
(:func:`_closes_last_calls`)."""


def _answered(input: str | Sequence[str], options: Options, progress: Progress | None) -> frozenset[str]:
    """The calls (:func:`~histmig.rules.pairing.call_names`) that a record of ``input`` leaves
    open in its last response and another record answers, found by an ``audit`` of it with
    every rule and without the unsafe fixes (:meth:`~histmig.report.Report.answered`). A
    conversation stored over several records that names itself nowhere (a release before 1.89
    wrote no ``conversation_id``) is told by its call ids alone, and the record that answers
    may come after the one HM407 would close: so every record is read before one is written."""
    ahead = replace(options, select=(), ignore=(), unsafe_fixes=False)  # every rule: a selection may leave out HM401
    return run_local(
        plan("audit", input, Destination(), ahead), ahead, ahead.plan(), progress, strict=False
    ).report.answered()


def written_paths(planning: Planning, report: str | None) -> list[str]:
    """The files a planned run writes: each input's OUTPUT, or the input itself when it is a
    file rewritten in place (a database's table is written in its transaction, not by file),
    and its rejects file; and the ``report`` file."""
    paths = [
        path
        for item in planning.inputs
        for path in (
            item.destination.output,
            item.path if item.destination.in_place and not item.format.columnar else None,
            item.destination.rejects,
        )
        if path is not None
    ]
    return paths + ([report] if report is not None else [])


def _unread(planning: Planning) -> list[str]:
    """A warning for each INPUT directory with subdirectories holding input files that it
    does not read (:func:`~histmig.sources.unread_folders`): a run over the tree a glob's
    convert wrote would pass them over unsaid, and ``check`` pass. Local directories only: a
    lake's prefixes are not listed twice over object storage."""
    said = []
    for path in planning.paths:
        if path == "-" or fs.is_url(path) or not os.path.isdir(path):
            continue
        folders, glob = unread_folders(path)
        if folders:
            named = [redact.location(folder) for folder in folders[:3]]
            shown = ", ".join(named) + (f" and {len(folders) - 3} more" if len(folders) > 3 else "")
            said.append(
                f"{redact.location(path)}: {shown} hold{'s' if len(folders) == 1 else ''} input files that are not "
                f"read (a directory INPUT reads its own files and key=value partition directories): give them as "
                f"INPUTs, or a quoted glob, {redact.location(glob)}"
            )
    return said


def _linked(planning: Planning) -> list[str]:
    """A warning for each file rewritten in place that has other hard links: the new file
    replaces this name alone (a rename: atomic), so the others keep the bytes read."""
    said = []
    for item in planning.inputs:
        if not item.destination.in_place or item.format.columnar or is_object(item.path) or item.path == "-":
            continue
        try:
            links = os.stat(item.path).st_nlink
        except OSError:
            continue
        if links > 1:
            said.append(
                f"{item.path} has {links - 1} other hard link(s): written in place by a rename, this name alone "
                "gets the migrated file, and the others keep the bytes as read"
            )
    return said


def tidied(paths: Sequence[str], clean: bool, inputs: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """The warning lines naming the temporary files killed runs left beside the files
    ``paths`` name (:func:`~histmig.sources.atomic.stale_temps`), and, with ``clean``, none but
    the note lines of the ones removed (one that cannot be removed stays a warning). A file
    the run reads (``inputs``) or writes (``paths``) is no temporary file, whatever its name."""
    warnings, cleaned = [], []
    used = {file_key(path) for path in [*paths, *inputs]}
    for stale in stale_temps(paths):
        if file_key(str(stale.path)) in used:
            continue
        if not clean:
            warnings.append(stale.said(False))
            continue
        try:
            stale.path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            warnings.append(f"{stale.said(False)} (cannot remove it: {exc.strerror or exc})")
            continue
        cleaned.append(stale.said(True))
    return warnings, cleaned
