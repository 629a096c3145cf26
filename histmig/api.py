"""The documented Python API: one function per command (sqlite-utils style: the command line
is a thin shell over these).

Each takes the input (a path: a file, a directory or a glob, each file in its own format, a
database file, or ``-`` for stdin; or a list of them), for ``convert`` and the exports the
output (one rule: :func:`~histmig.sources.output_paths`), and an
:class:`~histmig.options.Options` (its default ``jobs`` the command line's: every core);
each returns a :class:`Result`: the :class:`~histmig.report.Report`, what was written, the
verdict line and the exit code. They raise :class:`~histmig.errors.UsageError`,
:class:`~histmig.errors.UnreadableInput` or :class:`~histmig.errors.UnwritableOutput`
(exit code 2) before any record is read when the options, the input or an output will not do;
bad records never raise.

>>> from histmig.api import convert, check
>>> from histmig.options import Options
>>> result = convert("chats.jsonl", "chats.v2.jsonl", Options(jobs=2))  # doctest: +SKIP
>>> result.verdict, result.exit_code  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from functools import partial
from typing import Any, Literal, Protocol

from histmig import __version__
from histmig.engine import Plan, process_full
from histmig.engine import findings as _findings
from histmig.engine import migrate as _migrate
from histmig.errors import InputEnded, MigrationError, NotAHistory, UsageError
from histmig.options import Options
from histmig.parallel import Workers
from histmig.records import Record, check_messages, dumps
from histmig.report import Report, RunInfo
from histmig.rules import registry
from histmig.rules.base import Change, Finding, Rule
from histmig.sources import expands, formats, input_paths, output_paths
from histmig.sources.atomic import check_directory, check_writable
from histmig.sources.base import FORMAT_OPTIONS, Format, Input, Job, Target, Task, TaskResult, Written

Command = Literal["convert", "audit", "check", "otel", "otel-upgrade"]


class Progress(Protocol):
    """Told how far a run is: ``start(total)`` once (input bytes, ``None`` when unknown), then
    ``advance(n)`` as each task's ``n`` input bytes are done."""

    def start(self, total: int | None) -> None: ...

    def advance(self, done: int) -> None: ...


@dataclass
class Result:
    """What a command did: the ``command``, its ``input`` (one path or several) and ``output``
    as given (``-``: stdout; ``None``: nothing written, or a table), the new table
    (``to_table``) or ``in_place``, the :class:`~histmig.report.Report`, the ``inputs`` read
    (every file, as named in the report) and what each ``wrote``
    (:class:`~histmig.sources.base.Written`), the rejects files that were there before the
    run (``earlier_rejects``), whether the input was read as JSONL from stdin
    (``stdin_lines``), whether ``check`` fails on parts of an unknown ``part_kind``
    (``strict``), and the ``target`` release (``convert``/``audit --target``, ``check
    --reader``; ``None``: not given). :attr:`verdict` and :attr:`exit_code` are made from
    these."""

    command: Command
    input: str | Sequence[str]
    report: Report
    output: str | None = None
    to_table: str | None = None
    in_place: bool = False
    wrote: list[Written] = field(default_factory=list)
    stdin_lines: bool = False
    strict: bool = False
    inputs: list[str] = field(default_factory=list)
    earlier_rejects: list[str] = field(default_factory=list)
    target: str | None = None

    @property
    def exit_code(self) -> int:
        """0 done and clean; 1 a record was rejected, a row was skipped (written by another
        client meanwhile), an input ended early, a record the ``--target`` release cannot
        load was kept as it is, or (``check``) a record needs a rule, is invalid (for
        ``--reader``: that release cannot load it) or has a finding (a warning does not
        count), or, with ``strict``, holds a part of an unknown ``part_kind`` (README "Exit
        codes")."""
        if self.command == "check":
            return 1 if self.report.needs_attention or (self.strict and self._unknown_part_count()) else 0
        return 1 if self.report.failed else 0

    @property
    def verdict(self) -> str:
        """What the command did, in one line (README "Report")."""
        counts = self.report.counts
        cut = "; the input could not be read to its end (see the unreadable error)" if counts["read_errors"] else ""
        of = f"{counts['changed']} of {counts['records_in']} records"
        if self.command == "check":
            unknown = self._unknown_parts()
            warnings = _plural(self._warning_findings(), "warning") if self._warning_findings() else ""
            warned = f"; {warnings} (see the report)" if warnings else ""
            found = f", {_plural(counts['findings'], 'finding')}" if counts["findings"] else ""
            found += f", {warnings}" if warnings else ""
            if self.target is not None:
                summary = self.report.summary()
                if not self.report.needs_attention:
                    return f"histmig check: {self.target} loads {_every(counts['records_in'])} as they are{warned}"
                return (
                    f"histmig check: {self.target} loads {summary.get('reader_loads', 0)} of {counts['records_in']} records as they are; "
                    f"{counts['changed']} to rewrite for it (convert --target {self.target}), {counts['invalid']} that no rule makes loadable, {counts['rejected']} rejected{found}{cut}"
                )
            if not self.report.needs_attention:
                if unknown:
                    fails = "--strict fails on them" if self.strict else "--strict would fail on them"
                    return f"histmig check: {_plural(counts['records_in'], 'record')} need{'s' if counts['records_in'] == 1 else ''} no rule, but {unknown}, carried unchanged ({fails}){warned}"
                are = "is" if counts["records_in"] == 1 else "are"
                return f"histmig check: {_every(counts['records_in'])} {are} current and valid{warned}"
            unknown = f"; {unknown}" if unknown else ""
            return f"histmig check: {of} to migrate, {counts['invalid']} invalid, {counts['rejected']} rejected{found}{unknown}{cut}"
        migrated, kept = ("migrated", "") if self.target is None else (f"rewritten for {self.target}", self._kept())
        left = (
            f", {_plural(counts['findings'], 'finding')} left as found (see the report)" if counts["findings"] else ""
        )
        if self.command == "audit":
            return f"histmig audit: {of} would be {migrated}, {counts['unchanged']} need nothing{kept}, {counts['rejected']} would be rejected{left}; nothing was written{cut}"
        if self.command in ("otel", "otel-upgrade"):
            done = counts["records_in"] - counts["rejected"]
            what = (
                "exported" if self.command == "otel" else f"upgraded ({counts['unchanged']} already in version 6 roles)"
            )
            return f"histmig: {done} records {what}, {counts['rejected']} rejected"
        skipped = (
            f", {counts['skipped']} skipped (another client wrote them after histmig read them; run again to migrate them)"
            if counts["skipped"]
            else ""
        )
        return f"histmig convert: {of} {migrated}, {counts['unchanged']} unchanged{kept}, {counts['rejected']} rejected{skipped}{left}; {self._written()}{cut}"

    def _unknown_part_count(self) -> int:
        """The parts of an unknown ``part_kind`` (a newer release's) carried unchanged: a
        warning line each."""
        return sum(len(row["warnings"]) for row in self.report.warnings)

    def _warning_findings(self) -> int:
        """The findings of severity ``warning`` (HM407): the report's other warnings."""
        return self.report.counts["warnings"] - self._unknown_part_count()

    def _unknown_parts(self) -> str:
        """How many parts of an unknown ``part_kind`` (a newer release's) are in how many
        records, in words, or ``""`` for none."""
        parts, records = self._unknown_part_count(), len(self.report.warnings)
        if not parts:
            return ""
        holds = "record holds" if records == 1 else "records hold"
        return (
            f"{records} {holds} {_plural(parts, 'part')} of a part_kind pydantic-ai 2.68 does not know and cannot load"
        )

    def _kept(self) -> str:
        """`` (N of them TARGET cannot load)`` when the ``--target`` release cannot load records
        kept as they are."""
        invalid = self.report.counts["invalid"]
        return f" ({invalid} of them {self.target} cannot load)" if invalid else ""

    def _written(self) -> str:
        named = next(
            (w.target for w in self.wrote if w.target is not None), self.inputs[0] if self.inputs else self.input
        )
        in_place = f"{named} (in place)" if len(self.inputs) <= 1 else f"the {len(self.inputs)} inputs (in place)"
        where = "stdout" if self.output == "-" else self.output or self.to_table or in_place
        withheld = bool(self.wrote) and all(w.withheld for w in self.wrote)
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
        added to; a stdin read as JSONL that looks like one JSON document; a ``.json`` file
        that looks like JSONL."""
        notes = []
        for path in self.earlier_rejects:
            if any(w.rejected == path for w in self.wrote):
                used = any(w.rejected == path and w.rejects_used for w in self.wrote)
                added = (
                    "this run's rejected records were added after them"
                    if used
                    else "this run wrote no rejected record to it"
                )
                notes.append(f"{path} already held rejected records of an earlier run; {added}")
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
            notes.append(
                "stdin was read as JSONL and no line of it is a record; if it holds one JSON document, add --format json"
            )
        for row in self.report.errors:
            if row["location"] == "file" and row["errors"][0].startswith(
                "invalid JSON: unexpected content after document: line 2 "
            ):
                notes.append(
                    f"{row['source']} holds more than one JSON document; if it holds one record a line, add --format jsonl"
                )
        return notes

    @property
    def rejected(self) -> list[tuple[str, str]]:
        """Every rejected record's name and error lines, as ``(name, line)`` pairs."""
        from histmig.report import record_name

        return [
            (record_name(row), line)
            for row in self.report.errors
            if row["status"] == "rejected"
            for line in row["errors"]
        ]


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _every(count: int) -> str:
    """``all 212 records``, ``the one record``."""
    return "the one record" if count == 1 else f"all {count} records"


def convert(
    input: str | Sequence[str],
    output: str | None = None,
    options: Options = Options(),
    *,
    rejects: str | None = None,
    in_place: bool = False,
    to_table: str | None = None,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> Result:
    """``histmig convert``: migrate every record of ``input`` (a path, a directory, a glob,
    or several of them) to ``output`` (a file or a directory, by the one rule of
    :func:`~histmig.sources.output_paths`; ``-``: stdout), or over the input (``in_place``;
    a database table in one transaction), or to a new table of a database input
    (``to_table``; an existing one is replaced only with ``overwrite``): unchanged records
    byte for byte, migrated ones compact, in input order; rejected records to ``rejects``
    (default ``OUTPUT.rejects.jsonl``, ``IN.rejects.jsonl`` in place; added to when it
    exists; with stdout and no ``rejects``, unchanged in place). Give exactly one
    destination. Raises :class:`~histmig.errors.UsageError` otherwise, or for a blank
    ``to_table``."""
    if (output is None) == (not in_place and to_table is None) or (in_place and "-" in _paths(input)):
        raise UsageError(
            "give OUTPUT, or --in-place with a file or database INPUT (not both), or --to-table for a database input"
        )
    if to_table is not None and not to_table.strip():
        raise UsageError(f"--to-table {to_table!r}: name a table")
    target = Target(output, rejects, in_place, to_table, overwrite=overwrite)
    return _run("convert", input, target, options, options.plan(), progress)


def audit(input: str | Sequence[str], options: Options = Options(), *, progress: Progress | None = None) -> Result:
    """``histmig audit``: what ``convert`` would do to ``input`` (one path or several),
    nothing written."""
    return _run("audit", input, Target(), options, options.plan(), progress)


def check(
    input: str | Sequence[str], options: Options = Options(), *, strict: bool = False, progress: Progress | None = None
) -> Result:
    """``histmig check``: every record of ``input`` (one path or several) parsed and
    validated; the exit code is 0 only when every record is current and valid and no rule
    finds anything, and, with ``strict``, no record holds a part of a ``part_kind`` 2.68 does
    not know (a newer release's, carried unchanged: a warning otherwise). With
    ``options.target`` (``--reader``), "current and valid" is for that release: it loads
    every record and no rule would rewrite one for it; the report then tells, per record,
    which releases load it (:class:`~histmig.report.rows.ReaderRow`)."""
    return _run(
        "check",
        input,
        Target(),
        options,
        options.plan(validate_all=True, readers=options.target is not None),
        progress,
        strict=strict,
    )


def otel(
    input: str | Sequence[str],
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
    format. Raises :class:`~histmig.errors.UsageError` for a version other than 5 or 6
    or a columnar input."""
    from histmig.otel import SUPPORTED_VERSIONS
    from histmig.otel.jobs import ExportJob

    if version not in SUPPORTED_VERSIONS:
        raise UsageError(f"--version must be one of {', '.join(map(str, SUPPORTED_VERSIONS))}, not {version}")
    job = ExportJob(version, include_content, options.causes, options.messages_field)
    return _run("otel", input, Target(output, rejects, keep_rejected=False), options, job, None)


def otel_upgrade(
    input: str | Sequence[str], output: str, options: Options = Options(), *, rejects: str | None = None
) -> Result:
    """``histmig otel-upgrade``: OTel message arrays exported with version 5 roles moved to
    version 6 roles; a record already in version 6 roles is copied byte for byte."""
    from histmig.otel.jobs import UpgradeJob

    return _run(
        "otel-upgrade",
        input,
        Target(output, rejects, keep_rejected=False),
        options,
        UpgradeJob(options.messages_field),
        None,
    )


def rules(code: str | None = None) -> list[Rule]:
    """``histmig rules``: every rule, sorted by code, or those whose code starts with
    ``code`` (any case). Raises :class:`~histmig.errors.UsageError` when none does."""
    found = [
        rule for rule in sorted(registry(), key=lambda r: r.code) if code is None or rule.code.startswith(code.upper())
    ]
    if not found:
        raise UsageError(f"unknown rule code {code!r}")
    return found


def migrate(messages: list[Any], options: Options = Options()) -> list[Change]:
    """Migrate one history (plain JSON data: a list of message objects, as
    ``orjson.loads(all_messages_json())`` gives it) in place with the options' rules and
    fixes; returns the changes made, in order. Raises
    :class:`~histmig.errors.NotAHistory` when ``messages`` is not a list of message objects
    (each with ``kind`` and ``parts``), and :class:`~histmig.errors.Malformed` for a part
    a rule targets that no release wrote."""
    _check_history(messages)
    return _migrate(messages, options.plan())


def _check_history(messages: Any) -> None:
    """Raise :class:`~histmig.errors.NotAHistory` unless ``messages`` is a list of objects
    each holding ``kind`` and a ``parts`` list, saying what it is instead."""
    if isinstance(messages, (str, bytes, bytearray, memoryview)):
        raise NotAHistory(
            "expected a history (a list of messages), got JSON text: parse it first (orjson.loads), or use migrate_json"
        )
    if isinstance(messages, dict):
        raise NotAHistory(
            "expected a history (a list of messages), got an object: pass the list it holds (record['messages']), or use migrate_json"
        )
    if not isinstance(messages, list):
        raise NotAHistory(f"expected a history (a list of messages), got {type(messages).__name__}")
    check_messages(messages)


def validate(messages: list[Any], options: Options = Options()) -> list[Finding]:
    """The findings of the options' rules in one history (plain JSON data, as
    :func:`migrate` takes it), each at its place in the history as given, which is left as it
    is: a legacy part a fix would rewrite (``text`` ``before -> after``), a dangling call at
    the call, an orphaned result at the result, and so on (``histmig rules``). Empty: the
    history is current and provider-valid, every call paired with one result. A finding of
    ``severity`` ``"warning"`` (HM407: a call of the last response, which a resumed run may
    still answer) does not fail ``check``. Raises :class:`~histmig.errors.NotAHistory` as
    :func:`migrate` does, and :class:`MigrationError` when the history is not one pydantic-ai
    2.68 loads even once migrated."""
    _check_history(messages)
    plan = options.plan(validate_all=True)
    outcome = process_full(Record(dumps(messages), "history", "validate"), plan)
    if outcome.errors:
        raise MigrationError([str(error) for error in outcome.errors])
    return sorted(
        _findings(messages, plan), key=lambda finding: (finding.message, -1 if finding.part is None else finding.part)
    )


def migrate_json(data: bytes | str, options: Options = Options(), *, source: str = "-") -> tuple[bytes, Report]:
    """Migrate one record given as JSON text (a history as ``all_messages_json()`` writes
    it, or an envelope object holding one, found as the command line finds it), for an
    application that migrates at load time: returns the JSON text to load (the same bytes
    when nothing needs a rule; else compact, every other field kept) and the record's
    :class:`~histmig.report.Report` (its changes, findings and warnings; ``source`` names it
    there). The output is validated against pydantic-ai 2.68's schema whether or not a rule
    changed it. Raises :class:`MigrationError` when the text is not JSON, holds no history,
    or gives a history 2.68 cannot load (the record would be rejected or invalid); a part of
    an unknown ``part_kind`` (a newer release's) is carried unchanged and reported as a
    warning, not raised."""
    raw = data.encode() if isinstance(data, str) else bytes(data)
    outcome = process_full(Record(raw, source, "record"), options.plan(validate_all=True))
    if outcome.status == "rejected" or outcome.errors:
        raise MigrationError([str(error) for error in outcome.errors])
    report = Report.in_memory()
    report.add(outcome)
    return outcome.output or raw, report


def check_outputs(*paths: tuple[str, str | None]) -> None:
    """Raise :class:`~histmig.errors.UnwritableOutput` unless each named path (given as
    ``(name, path)``, ``path`` maybe ``None``) but ``OUTPUT`` can be created (whether
    ``OUTPUT`` can depends on the inputs: the run checks it), and
    :class:`~histmig.errors.UsageError` when two of them are stdout."""
    for name, path in paths:
        if path is not None and name != "OUTPUT":
            check_writable(path)
    on_stdout = [name for name, path in paths if path == "-"]
    if len(on_stdout) > 1:
        raise UsageError(f"{' and '.join(on_stdout)} cannot {'both' if len(on_stdout) == 2 else 'all'} go to stdout")


def _paths(input: str | Sequence[str]) -> list[str]:
    return [input] if isinstance(input, str) else list(input)


@dataclass(frozen=True)
class _Planned:
    """One input file of a run: its ``path``, its ``format`` and its own ``target``."""

    path: str
    format: Format
    target: Target


def _plan(command: Command, paths: list[str], target: Target, options: Options) -> tuple[list[_Planned], str | None]:
    """Every input file ``paths`` name, each with its format and its own target (its output
    by the one rule of :func:`~histmig.sources.output_paths`, its rejects file), and the
    output directory to create, if any. Raises
    :class:`~histmig.errors.UsageError`, :class:`~histmig.errors.UnreadableInput`
    or :class:`~histmig.errors.UnwritableOutput` when the inputs, the options and the
    outputs do not fit, before anything is read or written."""
    found = input_paths(paths, options.format)
    _check_options(command, found, target, options)
    check_outputs(("OUTPUT", target.output), ("--rejects", target.rejects))
    outputs: list[str | None] = [None] * len(found)
    directory = None
    if target.output is not None:
        several = len(paths) > 1 or any(expands(path) for path in paths)
        outputs, directory = output_paths(found, target.output, several)  # type: ignore[assignment]
        if directory is not None:
            check_directory(directory)
        elif target.output != "-":
            check_writable(target.output)
    planned = []
    for (path, fmt), output in zip(found, outputs):
        if output not in (None, "-") and path != "-" and os.path.exists(output) and os.path.samefile(output, path):  # type: ignore[arg-type]
            raise UsageError(f"{output} is the input; use --in-place to replace it")
        if target.in_place and not fmt.columnar:
            check_writable(path)
        rejects = _rejects(target, path, output, directory)
        planned.append(_Planned(path, fmt, replace(target, output=output, rejects=rejects)))
    return planned, directory


def _rejects(target: Target, path: str, output: str | None, directory: str | None) -> str | None:
    """Where an input's rejected records go: ``--rejects``; else in place ``IN.rejects.jsonl``;
    else ``OUTPUT.rejects.jsonl`` beside the OUTPUT file or directory; none for stdout (they
    stay in the output, unchanged) or when nothing is written."""
    if target.rejects is not None:
        return target.rejects
    if target.in_place:
        return f"{path}.rejects.jsonl"
    if output is None or output == "-":
        return None
    return f"{(directory or output).rstrip('/' + os.sep)}.rejects.jsonl"


def _check_options(command: Command, found: list[tuple[str, Format]], target: Target, options: Options) -> None:
    """Raise :class:`~histmig.errors.UsageError` for an option that no input's format
    takes (:attr:`~histmig.sources.base.Format.takes`; with inputs of several formats, each
    takes what applies to it: ``--messages-column`` for the Parquet files of a directory),
    naming that option, the input and the formats it applies to."""
    given = {
        "in_place": target.in_place,
        "messages_column": options.messages_column,
        "id_column": options.id_column,
        "table": options.table,
        "to_table": target.to_table,
        "overwrite": target.overwrite,
        "schema": options.schema,
        "key_column": options.key_column,
        "single_transaction": options.single_transaction,
    }
    if target.overwrite and target.to_table is None:
        raise UsageError(
            "--overwrite replaces the table --to-table names (an output file is always replaced, once the new one is complete)"
        )
    if target.to_table is not None and len(found) > 1:
        raise UsageError("--to-table writes one table: give one DuckDB input")
    for path, fmt in found:
        if command.startswith("otel") and fmt.columnar:
            raise UsageError(f"{path}: the otel commands read JSON or JSONL, not Parquet or DuckDB")
    extra = [name for name in FORMAT_OPTIONS if given[name] and not any(name in fmt.takes for _, fmt in found)]
    if extra:
        flags = " and ".join(FORMAT_OPTIONS[name] for name in extra)
        takers = _alternatives([f.description for f in formats().values() if all(name in f.takes for name in extra)])
        inputs = f"{found[0][0]}: " if len(found) == 1 else ""
        kinds = _alternatives(list(dict.fromkeys(fmt.description for _, fmt in found)))
        apply = "does" if len(extra) == 1 else "do"
        raise UsageError(
            f"{inputs}{flags} {apply} not apply to a {kinds} input" + (f" (only to a {takers} one)" if takers else "")
        )


def _alternatives(words: list[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return " or ".join(words) if len(words) < 3 else f"{', '.join(words[:-1])} or {words[-1]}"


def _work(job: Job, task: Task, slot: memoryview | None) -> TaskResult:
    return task.run(job, slot)


def _run(
    command: Command,
    input: str | Sequence[str],
    target: Target,
    options: Options,
    job: Job,
    progress: Progress | None,
    *,
    strict: bool = False,
) -> Result:
    """Run every input file ``input`` names through ``job`` on ``options.jobs`` workers,
    each written to its own target (:func:`_plan`); one input at a time, its tasks in order
    (see :mod:`histmig.sources.base`); an input that cannot go to workers (a database
    connection, a document) runs in this process. The report gets the run's
    :class:`~histmig.report.RunInfo` (its start time is the one value of a run the clock
    gives)."""
    started = started_now()
    paths = _paths(input)
    planned, directory = _plan(command, paths, target, options)
    inputs: list[Input] = [
        opened for item in planned for opened in item.format.open(item.path, item.target, options, job)
    ]
    earlier = list(
        dict.fromkeys(
            item.target.rejects
            for item in planned
            if item.target.rejects not in (None, "-") and os.path.exists(item.target.rejects)
        )
    )  # type: ignore[arg-type]
    if directory is not None:
        os.makedirs(directory, exist_ok=True)
    report = Report()
    if progress is not None:
        sizes = [i.size for i in inputs]
        progress.start(None if None in sizes else sum(sizes))  # type: ignore[arg-type]
    jobs = 1 if all(i.in_process for i in inputs) else options.workers
    advance: Callable[[int], None] = progress.advance if progress is not None else lambda n: None
    wrote: list[Written] = []
    with Workers(partial(_work, job), jobs, slot_bytes=max(i.slot_bytes for i in inputs)) as workers:
        for current in inputs:
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
            wrote.append(current.written())
            for row in wrote[-1].skipped:
                report.add_skipped(row.source, row.location, row.id)
    result = Result(
        command,
        input,
        report,
        output=target.output,
        to_table=target.to_table,
        in_place=target.in_place,
        wrote=wrote,
        stdin_lines=paths == ["-"] and planned[0].format.name == "jsonl" and options.format is None,
        strict=strict,
        inputs=[i.name for i in inputs],
        earlier_rejects=earlier,
        target=options.target and str(options.release),
    )
    given = {
        "rejects": target.rejects,
        "in_place": target.in_place,
        "to_table": target.to_table,
        "overwrite": target.overwrite,
        "strict": strict,
    }
    return recorded(result, options, job, started, {**given, "engine": "local"})


def recorded(result: Result, options: Options, job: Job, started: str, given: dict[str, Any]) -> Result:
    """``result`` with its report's :class:`~histmig.report.RunInfo`: the options as given
    (and ``given``, what the command took besides them), the rules that ran, the inputs read,
    the output, the start time (``started``), the verdict and the exit code. Every engine's
    runs are recorded by it (:mod:`histmig.spark` too)."""
    result.report.run = RunInfo(
        __version__,
        result.command,
        {**_described(options, job), **given},
        result.inputs,
        result.output,
        started,
        result.verdict,
        result.exit_code,
    )
    return result


def started_now() -> str:
    """The start time of a run as the report records it: UTC, ISO 8601, to the second."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _described(options: Options, job: Job) -> dict[str, Any]:
    """The options of a run as the JSON report gives them: as given, and the rules that ran
    (an export's job says its own); ``jobs`` left out, as the output and report are the same
    for any number."""
    given = {
        name: list(value) if isinstance(value, tuple) else value
        for name, value in asdict(options).items()
        if name != "jobs"
    }
    rules = [rule.code for rule in job.rules] if isinstance(job, Plan) else []
    return {**given, "rules": rules}


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
