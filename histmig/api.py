"""The documented Python API: one function per command (sqlite-utils style: the command line
is a thin shell over these), and the one-history functions an application calls.

Each command takes the input (a path: a file, a directory or a glob, each file in its own
format, a database file, or ``-`` for stdin; or a list of them), for ``convert`` and the
exports the output (one rule: :func:`~histmig.run.outputs.output_paths`), and an
:class:`~histmig.options.Options` (its default ``jobs`` the command line's: every core); the
other options a command takes are keywords of the same names as its flags
(:attr:`~histmig.options.Options.PARAMETERS`). Each returns a :class:`Result`: the
:class:`~histmig.report.Report`, what was written, the verdict line and the exit code. They
raise :class:`~histmig.errors.UsageError`, :class:`~histmig.errors.UnreadableInput` or
:class:`~histmig.errors.UnwritableOutput` (exit code 2) before any record is read when the
options, the input or an output will not do; bad records never raise. The run itself is
:mod:`histmig.run`'s.

>>> from histmig.api import convert, check
>>> from histmig.options import Options
>>> result = convert("chats.jsonl", "chats.v2.jsonl", Options(jobs=2))  # doctest: +SKIP
>>> result.verdict, result.exit_code  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import msgspec

from histmig.engine import findings as _findings
from histmig.engine import migrate as _migrate
from histmig.engine import process_full, validation_errors
from histmig.errors import MigrationError, NotAHistory, UsageError
from histmig.options import Options
from histmig.parallel import Progress
from histmig.problems import Problem
from histmig.records import Record, check_messages, dumps
from histmig.report import Report
from histmig.report.baseline import dumps as baseline_text
from histmig.report.baseline import entries, judge
from histmig.report.baseline import read as read_baseline
from histmig.rules import registry
from histmig.rules.base import Change, Finding, Rule
from histmig.run.driver import run
from histmig.run.result import Result
from histmig.sources.atomic import atomic_output, check_writable
from histmig.sources.base import Destination

if TYPE_CHECKING:  # the command imports its module (and pydantic_core) only when it runs
    from histmig.otel.restore import Restored

__all__ = [
    "Progress",
    "Result",
    "audit",
    "check",
    "convert",
    "from_otel",
    "migrate",
    "migrate_json",
    "otel",
    "otel_upgrade",
    "rules",
    "validate",
]


def convert(
    input: str | Sequence[str],
    output: str | None = None,
    options: Options = Options(),
    *,
    rejects: str | None = None,
    in_place: bool = False,
    to_table: str | None = None,
    overwrite: bool = False,
    engine: str = "local",
    spark_master: str | None = None,
    report: str | None = None,
    clean: bool = False,
    progress: Progress | None = None,
    tune: bool = False,
) -> Result:
    """``histmig convert``: migrate every record of ``input`` (a path, a directory, a glob,
    or several of them) to ``output`` (a file or a directory, by the one rule of
    :func:`~histmig.run.outputs.output_paths`; ``-``: stdout), or over the input (``in_place``;
    a database table in one transaction), or to a new table of a database input
    (``to_table``; an existing one is replaced only with ``overwrite``): unchanged records
    byte for byte, migrated ones compact, in input order; rejected records to ``rejects``
    (default ``OUTPUT.rejects.jsonl``, ``IN.rejects.jsonl`` in place; added to when it
    exists; with stdout and no ``rejects``, unchanged in place). Give exactly one
    destination. ``engine``: ``"local"`` (this machine's worker processes, ``options.jobs``)
    or ``"spark"`` (Parquet in, ``output`` a directory of Parquet files, on ``spark_master``
    or a local session: :mod:`histmig.spark`). ``report``: the file the caller writes the
    report to, refused when it is a file the run reads or writes. ``clean``: remove the
    temporary files killed runs left beside the files the run writes (else each is named in
    :attr:`Result.warnings`; :func:`~histmig.sources.atomic.stale_temps`). ``progress`` is told how
    far the run is; ``tune`` sets up the process as the command line does
    (:mod:`histmig.tuning`). Raises :class:`~histmig.errors.UsageError` for destinations that
    do not fit (a blank ``to_table``, a path written twice or written and read:
    :class:`~histmig.errors.SamePath`)."""
    destination = Destination(output, rejects, in_place, to_table, overwrite=overwrite)
    return run(
        "convert",
        input,
        destination,
        options,
        options.plan(),
        engine=engine,
        spark_master=spark_master,
        report=report,
        clean=clean,
        progress=progress,
        tune=tune,
    )


def audit(
    input: str | Sequence[str],
    options: Options = Options(),
    *,
    report: str | None = None,
    clean: bool = False,
    progress: Progress | None = None,
    tune: bool = False,
) -> Result:
    """``histmig audit``: what ``convert`` would do to ``input`` (one path or several),
    nothing written; ``report``, ``clean``, ``progress`` and ``tune`` as for :func:`convert`."""
    return run(
        "audit", input, Destination(), options, options.plan(), report=report, clean=clean, progress=progress, tune=tune
    )


def check(
    input: str | Sequence[str],
    options: Options = Options(),
    *,
    strict: bool = False,
    baseline: str | None = None,
    write_baseline: str | None = None,
    report: str | None = None,
    clean: bool = False,
    progress: Progress | None = None,
    tune: bool = False,
) -> Result:
    """``histmig check``: every record of ``input`` (one path or several) parsed and
    validated; the exit code is 0 only when every record is current and valid and no rule
    finds anything, and, with ``strict``, no record holds a part of a ``part_kind`` 2.68 does
    not know (a newer release's, carried unchanged: a warning otherwise). With
    ``options.target`` (``--reader``), "current and valid" is for that release: it loads
    every record and no rule would rewrite one for it; the report then tells, per record,
    which releases load it (:class:`~histmig.report.rows.ReaderRow`). ``report``, ``clean``,
    ``progress`` and ``tune`` as for :func:`convert`.

    With ``baseline`` (a file ``write_baseline`` wrote, :mod:`histmig.baseline`), the exit code
    is 1 only for what the baseline does not hold (or an input not read to its end); the
    verdict says how many known ones it passed over and the notes which entries no longer
    occur. ``write_baseline`` records this run's entries in a file instead (exit 0 unless an
    input was not read to its end). Raises :class:`~histmig.errors.UsageError` for both at
    once, :class:`~histmig.errors.UnreadableInput` for a baseline that is none."""
    if baseline is not None and write_baseline is not None:
        raise UsageError("give --baseline or --write-baseline, not both")
    known = read_baseline(baseline) if baseline is not None else None
    if write_baseline is not None:
        check_writable(write_baseline)
    result = run(
        "check",
        input,
        Destination(),
        options,
        options.plan(
            validate_all=True,
            readers=options.target is not None,
            digests=baseline is not None or write_baseline is not None,
        ),
        strict=strict,
        report=report,
        clean=clean,
        progress=progress,
        tune=tune,
    )
    if known is None and write_baseline is None:
        return result
    found = list(entries(result.report))
    if write_baseline is not None:
        with atomic_output(write_baseline) as out:
            out.write(baseline_text(found))
        result.baseline, result.wrote_baseline = found, write_baseline
    else:
        result.baseline, result.judged = known, judge(found, known)  # type: ignore[arg-type]
    recorded_run = result.report.run
    if recorded_run is not None:
        given = {**recorded_run.options, "baseline": baseline, "write_baseline": write_baseline}
        result.report.run = replace(recorded_run, options=given, verdict=result.verdict, exit_code=result.exit_code)
    return result


def otel(
    input: str | Sequence[str],
    output: str,
    options: Options = Options(),
    *,
    version: int = 5,
    include_content: bool = True,
    rejects: str | None = None,
    clean: bool = False,
) -> Result:
    """``histmig otel``: each history of ``input`` (legacy parts migrated first, with the
    options' cause mode) exported as the OpenTelemetry GenAI message list pydantic-ai 2.68's
    instrumentation ``version`` records (docs/framework.md §5), to ``output`` in the input's
    format (``clean`` as for :func:`convert`). With ``options.conversation`` (a JSONL input) the
    records of one conversation are migrated as one history and each exported on its own messages
    (:func:`histmig.otel.jobs.export_conversation`). Raises :class:`~histmig.errors.UsageError`
    for a version other than 5 or 6 or a columnar input."""
    from histmig.otel import SUPPORTED_VERSIONS
    from histmig.otel.jobs import ExportJob

    if version not in SUPPORTED_VERSIONS:
        raise UsageError(f"--version must be one of {', '.join(map(str, SUPPORTED_VERSIONS))}, not {version}")
    job = ExportJob(version, include_content, options.causes, options.messages_field)
    return run("otel", input, Destination(output, rejects, keep_rejected=False), options, job, clean=clean)


def otel_upgrade(
    input: str | Sequence[str],
    output: str,
    options: Options = Options(),
    *,
    rejects: str | None = None,
    clean: bool = False,
) -> Result:
    """``histmig otel-upgrade``: OTel message arrays exported with version 5 roles moved to
    version 6 roles; a record already in version 6 roles is copied byte for byte (``clean``
    as for :func:`convert`)."""
    from histmig.otel.jobs import UpgradeJob

    return run(
        "otel-upgrade",
        input,
        Destination(output, rejects, keep_rejected=False),
        options,
        UpgradeJob(options.messages_field),
        clean=clean,
    )


def from_otel(
    input: str | Sequence[str],
    output: str,
    *,
    runs: str = "last",
    rejects: str | None = None,
    report: str | None = None,
    max_retries: str | None = None,
) -> Restored:
    """``histmig from-otel``: the histories of the pydantic-ai agent runs in span exports
    (OpenTelemetry Collector file exporter OTLP JSON lines, gzipped or not; ``-`` for stdin),
    one JSONL line a conversation (``runs="last"``) or a run (``runs="all"``), in the stored
    format, with a report row a run (:func:`histmig.otel.restore.from_otel`, docs/from-otel.md);
    ``max_retries``, the agent's retry budgets (``"tools=N,output=M,tool:NAME=K"``), fills
    ``retry.max_retries`` of the retries whose attempt it counts. Raises
    :class:`~histmig.errors.UsageError` for an unknown ``runs``, budgets that do not parse or
    colliding paths."""
    from histmig.otel.restore import from_otel as _from_otel

    return _from_otel(
        [input] if isinstance(input, str) else list(input),
        output,
        runs=runs,
        rejects=rejects,
        report=report,
        max_retries=max_retries,
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
    fixes; returns the changes made, in order. The result is validated as ``check``
    validates a record: it is one pydantic-ai 2.68 loads (a part of a ``part_kind`` no
    release knows, a newer one's, is carried as it is). Raises :class:`MigrationError`,
    leaving ``messages`` as it was, for what ``convert`` would reject or ``check`` call
    invalid, each line naming the path in the history (``messages[2].parts[0].content``):
    :class:`~histmig.errors.NotAHistory` (a subclass) when ``messages`` is not a list of
    message objects (each with ``kind`` and ``parts``), :class:`~histmig.errors.Malformed`
    (a subclass) for a part a rule targets that no release wrote, and for a value JSON cannot
    hold (a ``str`` with a lone surrogate, an object that is no JSON value)."""
    _check_history(messages)
    work = _DECODER.decode(_encoded(messages))  # a copy: ``messages`` stays as it was unless all goes well
    plan = options.plan()
    changes = _migrate(work, plan)
    errors = validation_errors(work, plan.target)
    if errors:
        raise MigrationError(errors)
    if changes:
        messages[:] = work
    return changes


_DECODER = msgspec.json.Decoder()
_JSON_SCALARS = (str, int, float, bool, type(None))


def _unencodable(value: Any, path: str) -> Problem | None:
    """Where under ``value`` (at ``path``) the first value JSON text cannot hold is, and what
    it is: a string with a lone surrogate (UTF-8 has no such character), a non-string key, an
    object of another type than JSON's."""
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError as exc:
            return Problem(
                path, f"a lone surrogate (U+{ord(value[exc.start]):04X}) at character {exc.start + 1}: not UTF-8 text"
            )
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return Problem(path, f"a key that is not a string ({type(key).__name__})")
            found = _unencodable(key, path) or _unencodable(item, f"{path}.{key}" if path else key)
            if found is not None:
                return found
        return None
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = _unencodable(item, f"{path}[{index}]")
            if found is not None:
                return found
        return None
    if isinstance(value, _JSON_SCALARS):
        return None
    return Problem(path, f"a value of type {type(value).__name__}, which JSON cannot hold")


def _encoded(messages: list[Any]) -> bytes:
    """The JSON text of a history given as data. Raises :class:`MigrationError` naming the
    first value that is no JSON data (:func:`_unencodable`: a ``bytes`` or a ``datetime``
    too, which an encoder would quietly turn into a string)."""
    problem = _unencodable(messages, "messages")
    if problem is not None:
        raise MigrationError([problem])
    return dumps(messages)


def _text_bytes(data: str) -> bytes:
    """``data`` as UTF-8. Raises :class:`MigrationError` for a lone surrogate, naming where
    it is in the record when the text parses as JSON (Python's reader takes one), else at
    which character."""
    try:
        return data.encode()
    except UnicodeEncodeError as exc:
        try:
            parsed = json.loads(data)
        except ValueError:
            parsed = None
        found = _unencodable(parsed, "messages" if isinstance(parsed, list) else "") if parsed is not None else None
        if found is not None and found.path:
            raise MigrationError([found]) from None
        raise MigrationError(
            [f"not UTF-8 text: a lone surrogate (U+{ord(data[exc.start]):04X}) at character {exc.start + 1}"]
        ) from None


def _check_history(messages: Any) -> None:
    """Raise :class:`~histmig.errors.NotAHistory` unless ``messages`` is a list of objects
    each holding ``kind`` and a ``parts`` list, saying what it is instead."""
    if isinstance(messages, (str, bytes, bytearray, memoryview)):
        raise NotAHistory(
            "expected a history (a list of messages), got JSON text: parse it first (orjson.loads), or use migrate_json"
        )
    if isinstance(messages, dict):
        raise NotAHistory(
            "expected a history (a list of messages), got an object: pass "
            "the list it holds (record['messages']), or use migrate_json"
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
    outcome = process_full(Record(_encoded(messages), "history", "validate"), plan)
    if outcome.errors:
        raise MigrationError([str(error) for error in outcome.errors])
    return sorted(
        _findings(messages, plan), key=lambda finding: (finding.message, -1 if finding.part is None else finding.part)
    )


def migrate_json(data: bytes | str, options: Options = Options(), *, source: str = "-") -> tuple[bytes, Report]:
    """Migrate one record given as JSON text (a history as ``all_messages_json()`` writes
    it, or an envelope object holding one, found as the command line finds it), for an
    application that migrates at load time: returns the JSON text to load (the same bytes
    when nothing needs a rule; else compact, every other field kept: an envelope stays an
    envelope, whose messages field is the history to load) and the record's
    :class:`~histmig.report.Report` (its changes, findings and warnings; ``source`` names it
    there). The output is validated against pydantic-ai 2.68's schema whether or not a rule
    changed it. Raises :class:`MigrationError` when the text is not JSON, holds no history,
    or gives a history 2.68 cannot load (the record would be rejected or invalid); a part of
    an unknown ``part_kind`` (a newer release's) is carried unchanged and reported as a
    warning, not raised."""
    raw = _text_bytes(data) if isinstance(data, str) else bytes(data)
    outcome = process_full(Record(raw, source, "record"), options.plan(validate_all=True))
    if outcome.status == "rejected" or outcome.errors:
        raise MigrationError([str(error) for error in outcome.errors])
    report = Report.in_memory()
    report.add(outcome)
    return outcome.output or raw, report
