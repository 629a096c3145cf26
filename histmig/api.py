"""The documented Python API: one function per command (sqlite-utils style: the command line
is a thin shell over these).

Each takes the input (a path, a directory or glob of Parquet files, a database file, or ``-``
for stdin), for ``convert`` and the exports the output, and an :class:`~histmig.options.Options`;
each returns a :class:`Result`: the :class:`~histmig.report.Report`, what was written, the
verdict line and the exit code. They raise :class:`~histmig.sources.base.UsageError`,
:class:`~histmig.sources.base.UnreadableInput` or :class:`~histmig.sources.base.UnwritableOutput`
(exit code 2) before any record is read when the options, the input or an output will not do;
bad records never raise.

>>> from histmig.api import convert, check
>>> from histmig.options import Options
>>> result = convert("chats.jsonl", "chats.v2.jsonl", Options(jobs=2))  # doctest: +SKIP
>>> result.verdict, result.exit_code  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, Protocol

from histmig.engine import migrate as _migrate
from histmig.parallel import Workers
from histmig.report import Report
from histmig.rules import registry
from histmig.rules.base import Change, Rule
from histmig.options import Options
from histmig.sources import format_of, output_format
from histmig.sources.atomic import check_writable
from histmig.sources.base import Input, InputEnded, Job, Target, Task, TaskResult, UsageError, Written

Command = Literal["convert", "audit", "check", "otel", "otel-upgrade"]


class Progress(Protocol):
    """Told how far a run is: ``start(total)`` once (input bytes, ``None`` when unknown), then
    ``advance(n)`` as each task's ``n`` input bytes are done."""

    def start(self, total: int | None) -> None: ...

    def advance(self, done: int) -> None: ...


@dataclass
class Result:
    """What a command did: the ``command``, its ``input`` and ``output`` as given (``-``:
    stdout; ``None``: nothing written, or a table), the new table (``to_table``) or
    ``in_place``, the :class:`~histmig.report.Report`, what each input ``wrote``
    (:class:`~histmig.sources.base.Written`), whether the input was read as JSONL from
    stdin (``stdin_lines``) and the ``target`` release (``convert``/``audit --target``,
    ``check --reader``; ``None``: not given). :attr:`verdict` and :attr:`exit_code` are made
    from these."""

    command: Command
    input: str
    report: Report
    output: str | None = None
    to_table: str | None = None
    in_place: bool = False
    wrote: list[Written] = field(default_factory=list)
    stdin_lines: bool = False
    target: str | None = None

    @property
    def exit_code(self) -> int:
        """0 done and clean; 1 a record was rejected, an input ended early, a record the
        ``--target`` release cannot load was kept as it is, or (``check``) a record needs a
        rule, is invalid (for ``--reader``: that release cannot load it) or has a finding
        (README "Exit codes")."""
        if self.command == "check":
            return 1 if self.report.needs_attention else 0
        return 1 if self.report.failed else 0

    @property
    def verdict(self) -> str:
        """What the command did, in one line (README "Report")."""
        counts = self.report.counts
        cut = "; the input could not be read to its end (see the unreadable error)" if counts["read_errors"] else ""
        of = f"{counts['changed']} of {counts['records_in']} records"
        if self.command == "check":
            found = f", {counts['findings']} findings" if counts["findings"] else ""
            if self.target is not None:
                summary = self.report.summary()
                if not self.report.needs_attention:
                    return f"histmig check: {self.target} loads all {counts['records_in']} records as they are"
                return (
                    f"histmig check: {self.target} loads {summary.get('reader_loads', 0)} of {counts['records_in']} records as they are; "
                    f"{counts['changed']} to rewrite for it (convert --target {self.target}), {counts['invalid']} that no rule makes loadable, {counts['rejected']} rejected{found}{cut}"
                )
            if not self.report.needs_attention:
                return f"histmig check: all {counts['records_in']} records are current and valid"
            return f"histmig check: {of} to migrate, {counts['invalid']} invalid, {counts['rejected']} rejected{found}{cut}"
        migrated, kept = ("migrated", "") if self.target is None else (f"rewritten for {self.target}", self._kept())
        if self.command == "audit":
            return f"histmig audit: {of} would be {migrated}, {counts['unchanged']} need nothing{kept}, {counts['rejected']} would be rejected; nothing was written{cut}"
        if self.command in ("otel", "otel-upgrade"):
            done = counts["records_in"] - counts["rejected"]
            what = "exported" if self.command == "otel" else f"upgraded ({counts['unchanged']} already in version 6 roles)"
            return f"histmig: {done} records {what}, {counts['rejected']} rejected"
        return f"histmig convert: {of} {migrated}, {counts['unchanged']} unchanged{kept}, {counts['rejected']} rejected; {self._written()}{cut}"

    def _kept(self) -> str:
        """`` (N of them TARGET cannot load)`` when the ``--target`` release cannot load records
        kept as they are."""
        invalid = self.report.counts["invalid"]
        return f" ({invalid} of them {self.target} cannot load)" if invalid else ""

    def _written(self) -> str:
        where = "stdout" if self.output == "-" else self.output or self.to_table or f"{self.input} (in place)"
        withheld = any(w.withheld for w in self.wrote)
        said = f"nothing written to {where}" if withheld else f"written to {where}"
        if not self.report.counts["rejected"]:
            return said
        rejected = next((w.rejected for w in self.wrote if w.rejected is not None), None)
        if rejected == "rows":
            return said + ", rejected rows unchanged"
        if rejected == "in place":
            return said + ", rejected records among them unchanged"
        return said + f", rejected records to {rejected}" if rejected else said

    @property
    def notes(self) -> list[str]:
        """Notes for the user besides the verdict: a rejects file an earlier run left there,
        added to; a stdin read as JSONL that looks like one JSON document."""
        notes = [note for written in self.wrote for note in written.notes]
        first = self.report.errors[0] if self.report.errors else None
        counts = self.report.counts
        if (
            self.stdin_lines
            and counts["records_in"] > 1
            and counts["rejected"] == counts["records_in"]
            and first is not None
            and first["location"] == "line 1"
            and first["errors"][0].startswith("invalid JSON")
        ):
            notes.append("stdin was read as JSONL and no line of it is a record; if it holds one JSON document, add --format json")
        return notes

    @property
    def rejected(self) -> list[tuple[str, str]]:
        """Every rejected record's name and error lines, as ``(name, line)`` pairs."""
        from histmig.report import record_name

        return [(record_name(row), line) for row in self.report.errors if row["status"] == "rejected" for line in row["errors"]]


def convert(
    input: str,
    output: str | None = None,
    options: Options = Options(),
    *,
    rejects: str | None = None,
    in_place: bool = False,
    to_table: str | None = None,
    progress: Progress | None = None,
) -> Result:
    """``histmig convert``: migrate every record of ``input`` to ``output`` (``-``: stdout), or
    over the input (``in_place``; a database table in one transaction), or to a new table of a
    database input (``to_table``): unchanged records byte for byte, migrated ones compact, in
    input order; rejected records to ``rejects`` (default ``OUTPUT.rejects.jsonl``, added to
    when it exists; with stdout and no ``rejects``, unchanged in place). Give exactly one
    destination. Raises :class:`~histmig.sources.base.UsageError` otherwise."""
    if (output is None) == (not in_place and to_table is None) or (in_place and input == "-"):
        raise UsageError("give OUTPUT, or --in-place with a file INPUT (not both), or --to-table for a DuckDB input")
    target = Target(output, rejects, in_place, to_table)
    return _run("convert", input, target, options, options.plan(), progress)


def audit(input: str, options: Options = Options(), *, progress: Progress | None = None) -> Result:
    """``histmig audit``: what ``convert`` would do to ``input``, nothing written."""
    return _run("audit", input, Target(), options, options.plan(), progress)


def check(input: str, options: Options = Options(), *, progress: Progress | None = None) -> Result:
    """``histmig check``: every record of ``input`` parsed and validated; the exit code is 0
    only when every record is current and valid and no rule finds anything. With
    ``options.target`` (``--reader``), "current and valid" is for that release: it loads
    every record and no rule would rewrite one for it; the report then tells, per record,
    which releases load it (:class:`~histmig.report.rows.ReaderRow`)."""
    return _run("check", input, Target(), options, options.plan(validate_all=True, readers=options.target is not None), progress)


def otel(
    input: str,
    output: str,
    options: Options = Options(),
    *,
    version: int = 5,
    include_content: bool = True,
    rejects: str | None = None,
) -> Result:
    """``histmig otel``: each history of ``input`` (legacy parts migrated first, with the
    options' cause mode) exported as the OpenTelemetry GenAI message list pydantic-ai 2.68's
    instrumentation ``version`` records (framework-facts §5), to ``output`` in the input's
    format. Raises :class:`~histmig.sources.base.UsageError` for a version other than 5 or 6
    or a columnar input."""
    from histmig.otel import SUPPORTED_VERSIONS
    from histmig.otel.jobs import ExportJob

    if version not in SUPPORTED_VERSIONS:
        raise UsageError(f"--version must be one of {', '.join(map(str, SUPPORTED_VERSIONS))}, not {version}")
    job = ExportJob(version, include_content, options.causes, options.messages_field)
    return _run("otel", input, Target(output, rejects, keep_rejected=False), options, job, None)


def otel_upgrade(input: str, output: str, options: Options = Options(), *, rejects: str | None = None) -> Result:
    """``histmig otel-upgrade``: OTel message arrays exported with version 5 roles moved to
    version 6 roles; a record already in version 6 roles is copied byte for byte."""
    from histmig.otel.jobs import UpgradeJob

    return _run("otel-upgrade", input, Target(output, rejects, keep_rejected=False), options, UpgradeJob(options.messages_field), None)


def rules(code: str | None = None) -> list[Rule]:
    """``histmig rules``: every rule, sorted by code, or those whose code starts with
    ``code`` (any case). Raises :class:`~histmig.sources.base.UsageError` when none does."""
    found = [rule for rule in sorted(registry(), key=lambda r: r.code) if code is None or rule.code.startswith(code.upper())]
    if not found:
        raise UsageError(f"unknown rule code {code!r}")
    return found


def migrate(messages: list[Any], options: Options = Options()) -> list[Change]:
    """Migrate one history (plain JSON data: a list of message objects, as
    ``orjson.loads(all_messages_json())`` gives it) in place with the options' rules and
    fixes; returns the changes made, in order. Raises
    :class:`~histmig.rules.base.Malformed` for a part a rule targets that no release wrote."""
    return _migrate(messages, options.plan())


def check_outputs(*paths: tuple[str, str | None]) -> None:
    """Raise :class:`~histmig.sources.base.UnwritableOutput` unless each named path (given as
    ``(name, path)``, ``path`` maybe ``None``) can be created, and
    :class:`~histmig.sources.base.UsageError` when two of them are stdout."""
    for _, path in paths:
        if path is not None:
            check_writable(path)
    on_stdout = [name for name, path in paths if path == "-"]
    if len(on_stdout) > 1:
        raise UsageError(f"{' and '.join(on_stdout)} cannot {'both' if len(on_stdout) == 2 else 'all'} go to stdout")


def _fit(command: Command, input: str, target: Target, options: Options) -> Any:
    """The input's format, once the options and outputs are known to fit it."""
    fmt = format_of(input, options.format)
    if command.startswith("otel") and fmt.columnar:
        raise UsageError(f"{input}: the otel commands read JSON or JSONL, not Parquet or DuckDB")
    if not fmt.columnar and (options.messages_column or options.id_column or options.table or target.to_table):
        raise UsageError(f"{input}: --messages-column, --id-column, --table, --to-table and --in-place need a Parquet or DuckDB input")
    check_outputs(("OUTPUT", target.output), ("--rejects", target.rejects))
    output = target.output
    if output is not None:
        output_format(fmt, output)
        if output != "-" and input != "-" and os.path.exists(output) and os.path.exists(input) and os.path.samefile(output, input):
            raise UsageError(f"{output} is the input; use --in-place to replace it")
    return fmt


def _work(job: Job, task: Task, slot: memoryview | None) -> TaskResult:
    return task.run(job, slot)


def _run(command: Command, input: str, target: Target, options: Options, job: Job, progress: Progress | None) -> Result:
    """Run every input ``input`` names through ``job`` on ``options.jobs`` workers, writing to
    ``target``; one input at a time, its tasks in order (see :mod:`histmig.sources.base`)."""
    fmt = _fit(command, input, target, options)
    inputs: list[Input] = fmt.open(input, target, options, job)
    report = Report()
    if progress is not None:
        sizes = [i.size for i in inputs]
        progress.start(None if None in sizes else sum(sizes))  # type: ignore[arg-type]
    jobs = 1 if all(i.in_process for i in inputs) else options.workers
    advance: Callable[[int], None] = progress.advance if progress is not None else lambda n: None
    with Workers(partial(_work, job), jobs, slot_bytes=max(i.slot_bytes for i in inputs)) as workers:
        for current in inputs:
            with current:
                last = "the start"
                try:
                    for task, result, slot in workers.map(current.tasks(), message=lambda task: task.sent(), depth=lambda task: task.depth, window=current.window):
                        report.merge(result.report)
                        last = result.last or last
                        advance(task.size)
                        current.write(task, result, slot)
                except InputEnded as exc:
                    report.add_read_error(current.name, f"after {last}", str(exc))
    return Result(
        command,
        input,
        report,
        output=target.output,
        to_table=target.to_table,
        in_place=target.in_place,
        wrote=[i.written() for i in inputs],
        stdin_lines=input == "-" and fmt.name == "jsonl" and options.format is None,
        target=options.target and str(options.release),
    )
