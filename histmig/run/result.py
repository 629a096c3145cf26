"""What a run came to: its :class:`Result` (the report, what was written) and the verdict line
and exit code made from it (README "Report", "Exit codes"); every engine's runs are recorded
the same way (:func:`recorded`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from histmig import __version__, redact
from histmig.engine import Plan
from histmig.options import Command, Options
from histmig.problems import InvalidJson
from histmig.report import Report, RunInfo, record_name, unknown_parts
from histmig.report.baseline import Entry, Judged
from histmig.sources.base import Job, Written


@dataclass
class Result:
    """What a command did: the ``command``, its ``input`` (one path or several) and ``output``
    as given (``-``: stdout; ``None``: nothing written, or a table), the new table
    (``to_table``) or ``in_place``, the :class:`~histmig.report.Report`, the ``inputs`` read
    (every file, as named in the report) and what each ``wrote``
    (:class:`~histmig.sources.base.Written`), the rejects files that were there before the
    run (``earlier_rejects``), whether the input was read as JSONL from stdin
    (``stdin_lines``), whether ``check`` fails on parts of an unknown ``part_kind``
    (``strict``), the ``target`` release (``convert``/``audit --target``, ``check
    --reader``; ``None``: not given), the ``warnings`` to show (an input that changed while it
    was read in place, a temporary file a killed run left beside an output), the temporary
    files removed (``cleaned``, ``--clean``), and for ``check --baseline`` the ``baseline``
    read and how the run fared against it (``judged``, :func:`histmig.report.baseline.judge`), for
    ``--write-baseline`` the file written (``wrote_baseline``), and whether records were grouped
    into conversations (``grouped``, ``--conversation``) and whether HM407's unsafe fix was
    asked for without it (``closes_last_calls``). :attr:`verdict` and
    :attr:`exit_code` are made from these."""

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
    warnings: list[str] = field(default_factory=list)
    cleaned: list[str] = field(default_factory=list)
    baseline: list[Entry] | None = None
    judged: Judged | None = None
    wrote_baseline: str | None = None
    grouped: bool = False
    closes_last_calls: bool = False

    @property
    def exit_code(self) -> int:
        """0 done and clean; 1 a record was rejected, a row was skipped (written by another
        client meanwhile), an input ended early, an input written in place changed while it
        was read (it is kept, its migrated copy beside it), a record the ``--target`` release cannot
        load was kept as it is, or (``check``) a record needs a rule, is invalid (for
        ``--reader``: that release cannot load it) or has a finding (a warning does not
        count), or, with ``strict``, holds a part of an unknown ``part_kind``; against a
        baseline (``check --baseline``), only for what it does not hold or an input ended early,
        and writing one, only for the latter (README "Exit codes")."""
        if self.command == "check" and (self.judged is not None or self.wrote_baseline is not None):
            new = self.judged.new if self.judged is not None else []
            failing = [entry for entry in new if entry.rule != "unknown-part" or self.strict]
            return 1 if failing or self.report.counts["read_errors"] else 0
        if self.command == "check":
            return 1 if self.report.needs_attention or (self.strict and unknown_parts(self.report)[0]) else 0
        return 1 if self.report.failed or any(w.kept for w in self.wrote) else 0

    @property
    def verdict(self) -> str:
        """What the command did, in one line (README "Report"), and what it makes of records that
        look like pieces of a conversation, when there are any."""
        return self._did() + self._fragments()

    def _did(self) -> str:
        counts = self.report.counts
        cut = "; the input could not be read to its end (see the unreadable error)" if counts["read_errors"] else ""
        of = f"{counts['changed']} of {counts['records_in']} records"
        if self.command == "check" and (self.judged is not None or self.wrote_baseline is not None):
            return self._against_baseline(cut)
        if self.command == "check":
            unknown = self._unknown_parts()
            others = self.report.counts["warnings"] - unknown_parts(self.report)[0]
            warnings = _plural(others, "warning") if others else ""
            warned = f"; {warnings} (see the report)" if warnings else ""
            found = ", ".join(
                filter(None, [_plural(counts["findings"], "finding") if counts["findings"] else "", warnings])
            )
            found = f"; {found}" if found else ""
            flagged = self.report.flagged
            ready = counts["unchanged"] - counts["invalid"] - flagged  # the classes partition the records
            rest = f"{counts['rejected']} rejected, {flagged} with findings only, {ready}"
            if self.target is not None:
                summary = self.report.summary()
                if not self.report.needs_attention:
                    return f"histmig check: {self.target} loads {_every(counts['records_in'])} as they are{warned}"
                return (
                    f"histmig check: {self.target} loads {summary.get('reader_loads', 0)} of "
                    f"{counts['records_in']} records as they are; the {counts['records_in']}: "
                    f"{counts['changed']} to rewrite for it (convert --target {self.target}), "
                    f"{counts['invalid']} that no rule makes loadable, {rest} ready{found}{cut}"
                )
            if not self.report.needs_attention:
                if unknown:
                    fails = "--strict fails on them" if self.strict else "--strict would fail on them"
                    return (
                        f"histmig check: {_plural(counts['records_in'], 'record')} "
                        f"need{'s' if counts['records_in'] == 1 else ''} no rule, but {unknown}, carried "
                        f"unchanged ({fails}){warned}"
                    )
                are = "is" if counts["records_in"] == 1 else "are"
                return f"histmig check: {_every(counts['records_in'])} {are} current and valid{warned}"
            unknown = f"; {unknown}" if unknown else ""
            return (
                f"histmig check: {of} to migrate, {counts['invalid']} invalid, {rest} current and "
                f"valid{found}{unknown}{cut}"
            )
        migrated, kept = ("migrated", "") if self.target is None else (f"rewritten for {self.target}", self._kept())
        left = (
            f", {_plural(counts['findings'], 'finding')} left as found (see the report)" if counts["findings"] else ""
        )
        if self.command == "audit":
            return (
                f"histmig audit: {of} would be {migrated}, {counts['unchanged']} need nothing{kept}, "
                f"{counts['rejected']} would be rejected{left}; nothing was written{cut}"
            )
        if self.command in ("otel", "otel-upgrade"):
            done = counts["records_in"] - counts["rejected"]
            what = (
                "exported" if self.command == "otel" else f"upgraded ({counts['unchanged']} already in version 6 roles)"
            )
            return f"histmig: {done} records {what}, {counts['rejected']} rejected"
        wrote = "them, or a row of their conversation," if self.grouped else "them"
        skipped = (
            f", {counts['skipped']} skipped (another client wrote {wrote} after histmig read them; run again to "
            "migrate them)"
            if counts["skipped"]
            else ""
        )
        return (
            f"histmig convert: {of} {migrated}, {counts['unchanged']} unchanged{kept}, {counts['rejected']} "
            f"rejected{skipped}{left}; {self._written()}{cut}"
        )

    def _against_baseline(self, cut: str) -> str:
        """The verdict of ``check --baseline`` or ``--write-baseline``: the findings beyond the
        baseline (by rule), the known ones passed over, the entries no longer found."""
        if self.judged is None:
            count = len(self.baseline or ())
            entries = f"{count} baseline entr{'y' if count == 1 else 'ies'}"
            return f"histmig check: wrote {entries} to {self.wrote_baseline}{cut}"
        new, known, gone = self.judged
        by_rule = Counter(entry.rule for entry in new)
        rules = ", ".join(f"{rule}: {count}" for rule, count in sorted(by_rule.items()))
        said = f"{_plural(len(new), 'finding')} not in the baseline ({rules})" if new else "nothing beyond the baseline"
        passed = f"{known} known one{'' if known == 1 else 's'} passed over"
        left = (
            f"; {len(gone)} baseline entr{'y' if len(gone) == 1 else 'ies'} no longer found (see the notes; "
            "--write-baseline drops them)"
            if gone
            else ""
        )
        return f"histmig check: {said}; {passed}{left}{cut}"

    def _fragments(self) -> str:
        """What the verdict says of the records that look like pieces of a conversation stored
        over several records (``fragments``), or ``""`` for none."""
        count = self.report.fragments
        if not count:
            return ""
        look, its = ("record looks", "its") if count == 1 else ("records look", "their")
        helps = (
            f"{its} conversation{'' if count == 1 else 's'} look{'s' if count == 1 else ''} incomplete or out of "
            "order: give every record of a conversation, and --order COLUMN to sort them"
            if self.grouped
            else "give --conversation COLUMN, or '*' for one conversation an input, to treat each conversation whole"
        )
        return (
            f"; {count} {look} like part of a conversation stored over several records: {its} tool pairing "
            f"was not repaired and {its} findings are warnings ({helps})"
        )

    def _unknown_parts(self) -> str:
        """How many parts of an unknown ``part_kind`` (a newer release's) are in how many
        records, in words, or ``""`` for none."""
        parts, records = unknown_parts(self.report)
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
            (w.named for w in self.wrote if w.named is not None),
            redact.location(self.inputs[0] if self.inputs else self.input),  # type: ignore[arg-type]
        )
        in_place = f"{named} (in place)" if len(self.inputs) <= 1 else f"the {len(self.inputs)} inputs (in place)"
        where = "stdout" if self.output == "-" else self.output or self.to_table or in_place
        withheld = bool(self.wrote) and all(w.withheld for w in self.wrote)
        said = f"nothing written to {where}" if withheld else f"written to {where}"
        kept = [w.kept for w in self.wrote if w.kept is not None]
        if kept:
            changed = f"{named} changed" if len(self.inputs) <= 1 else f"{len(kept)} of them changed"
            said += (
                f" but {changed} while histmig read it: kept as it was, the migrated copy beside it (see the warning)"
            )
        not_copied = [what for w in self.wrote for what in w.not_copied]
        if not_copied:
            listed = " and ".join([", ".join(not_copied[:-1]), not_copied[-1]] if len(not_copied) > 1 else not_copied)
            said += f" (without the {listed} of the table read: --to-table does not copy them)"
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
        """Notes for the user besides the verdict: how a table's rows were told apart when its
        primary key could not (:class:`~histmig.sources.base.Written`); a rejects file an
        earlier run left there, added to; a stdin read as JSONL that looks like one JSON
        document; a ``.json`` file that looks like JSONL; the temporary files ``--clean`` removed;
        the entries of a ``--baseline`` no longer found; the records whose last calls HM407's
        unsafe fix left open as naming a conversation (:attr:`~histmig.report.Report.last_calls_open`)."""
        notes = [*self.cleaned, *(note for written in self.wrote for note in written.notes)]
        gone = self.judged.gone if self.judged is not None else []
        notes += [f"baseline entry no longer found: {e.record} {e.rule} {e.what}" for e in gone[:_GONE_SHOWN]]
        if len(gone) > _GONE_SHOWN:
            notes.append(f"and {len(gone) - _GONE_SHOWN} more baseline entries no longer found")
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
            and isinstance(first["errors"][0], InvalidJson)
        ):
            notes.append(
                "stdin was read as JSONL and no line of it is a record; "
                "if it holds one JSON document, add --format json"
            )
        for row in self.report.errors:
            if row["location"] == "file" and isinstance(row["errors"][0], InvalidJson) and row["errors"][0].more:
                notes.append(
                    f"{row['source']} holds more than one JSON document; if it holds one record a line, add "
                    "--format jsonl"
                )
        open_ones = self.report.last_calls_open if self.closes_last_calls else 0
        if open_ones:
            records = "record names" if open_ones == 1 else "records name"
            documents = any(path.lower().endswith((".json", ".json.gz")) for path in self.inputs)
            notes.append(
                f"{open_ones} {records} a conversation (conversation_id, session_id, ... in the record or a column): "
                "HM407 left the calls of the last response open, as another record of it may answer them; "
                "give --conversation COLUMN, or '*' for one conversation an input, to close them where a "
                "conversation is whole"
                + (
                    " (a .json file is one record, which --conversation does not take: give its history as a line "
                    "of JSONL, `jq -c . F.json | histmig convert - OUT.jsonl --conversation '*' --unsafe-fixes`)"
                    if documents
                    else ""
                )
            )
        return notes

    @property
    def rejected(self) -> list[tuple[str, str]]:
        """Every rejected record's name and error lines, as ``(name, line)`` pairs."""
        return [
            (record_name(row), line)
            for row in self.report.errors
            if row["status"] == "rejected"
            for line in row["errors"]
        ]


_GONE_SHOWN = 20
"""Baseline entries no longer found that the notes name one by one."""


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _every(count: int) -> str:
    """``all 212 records``, ``the one record``."""
    return "the one record" if count == 1 else f"all {count} records"


def recorded(result: Result, options: Options, job: Job, started: str, given: dict[str, Any]) -> Result:
    """``result`` with its report's :class:`~histmig.report.RunInfo`: the options as given
    (and ``given``, what the command took besides them), the rules that ran, the inputs read,
    the output, the start time (``started``), the verdict and the exit code. Every engine's
    runs are recorded by it (:mod:`histmig.run.spark` too), and told whether ``--conversation``
    grouped the records (:attr:`Result.grouped`, which the verdict's advice depends on)."""
    result.grouped = bool(options.conversation)
    result.closes_last_calls = isinstance(job, Plan) and job.closes_alone
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
