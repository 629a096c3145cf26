"""Options: every option of every command, declared once, and the one object a run takes.

Each option is declared here once, as a :class:`Flag`: its flag, its help, the commands that
take it and the input formats it applies to. An option about what a run does to records or
how it reads them is a field of :class:`Options` (declared by :func:`option`); one a command
takes besides (where it writes, how its report is shown) is among
:attr:`Options.PARAMETERS`, and the Python API takes it by keyword of the same name. Everything
else is derived from these declarations: the command line's options
(:func:`histmig.cli.takes`), the check that each input takes the options given
(:mod:`histmig.run.plan`), the options Spark's functions take (:data:`RECORD_OPTIONS`) and the
docs' option table (:func:`option_table`).

A program builds an :class:`Options` by hand (``Options(select=("HM1",), jobs=2)``) and passes
it to the functions of :mod:`histmig.api`; :meth:`Options.plan` turns it into the engine's
:class:`~histmig.engine.Plan`.
"""

from __future__ import annotations

import os
import typing
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any, ClassVar, Literal, NamedTuple

from histmig.engine import Plan
from histmig.errors import BadFieldPath, UnknownRule, UsageError
from histmig.records import MAX_CONVERSATION_BYTES, WHOLE_INPUT, Grouping, field_path, struct_key
from histmig.report import DETAIL_ROWS
from histmig.rules import opt_ins, select
from histmig.rules.base import Budgets, CauseMode, Rule
from histmig.rules.counting import counting_rules
from histmig.schema.releases import NEWEST, Release, release
from histmig.sources import formats

Command = Literal["convert", "audit", "check", "otel", "otel-upgrade", "from-otel"]
COMMANDS: tuple[Command, ...] = ("convert", "audit", "check", "otel", "otel-upgrade", "from-otel")
"""The commands that run over an input, in the order the docs give them."""
MIGRATING = frozenset({"convert", "audit"})
RUNS = MIGRATING | {"check"}
EXPORTS = frozenset({"otel", "otel-upgrade"})
IMPLIED: dict[str, dict[str, Any]] = {"from-otel": {"attempts": True}}
"""The :class:`Options` fields a command sets whatever is given: ``from-otel`` always counts the
attempts its spans did not record (HM104), so its ``--max-retries`` needs no ``--attempts``."""

About = Literal["records", "input", "output", "run", "report"]
"""What an option is about: what is done to each record (``records``: the engine's plan, what
Spark's functions take), where and how the input is read (``input``), where a run writes
(``output``), how it runs (``run``), and its report and verdict (``report``)."""

CAUSE_MODES: tuple[CauseMode, ...] = ("inferred", "framework")
TABLES = frozenset({"duckdb", "postgres", "sqlite"})
"""The formats that are a table of a database."""
COLUMNAR = TABLES | {"parquet"}
"""The formats that hold a column of histories among other columns."""
GROUPED = frozenset({"jsonl", "parquet", "duckdb", "postgres", "sqlite"})
"""The formats whose records ``--conversation`` groups into conversations (docs/layouts.md)."""


@dataclass(frozen=True)
class Flag:
    """One option as the command line and the docs know it.

    - ``flags``: its flag and short forms (``("--jobs", "-j")``; a boolean with a negative
      form as ``"--include-content/--no-include-content"``);
    - ``help``: one paragraph, as ``--help`` shows it;
    - ``commands``: the commands that take it (:data:`COMMANDS`);
    - ``formats``: the input formats (names of :func:`histmig.sources.formats`) it applies
      to, ``None`` for every one: given for an input of another format, it is a usage error
      naming both;
    - ``about``: what it is about (:data:`About`);
    - ``metavar``: its value's name in the help (``""`` for a switch);
    - ``choices``: the values it takes, when they are few (anything else is refused);
    - ``name``: the Python name (the :class:`Options` field, or the API's keyword), and
      ``type``/``default`` for a parameter (a field has its own)."""

    flags: tuple[str, ...]
    help: str
    commands: frozenset[str]
    about: About
    formats: frozenset[str] | None = None
    metavar: str = ""
    choices: tuple[str, ...] = ()
    name: str = ""
    type: Any = None
    default: Any = None

    @property
    def flag(self) -> str:
        """The long flag (``--key-column``)."""
        return self.flags[0].split("/")[0]


_FLAGS = "histmig.flags"
"""The key of a field's metadata holding its :class:`Flag`\\ s."""


def option(default: Any, *flags: Flag) -> Any:
    """An :class:`Options` field with its ``default`` and its flags (one, or one for each
    set of commands that names it its own way: ``target`` is ``--target`` for ``convert`` and
    ``audit``, ``--reader`` for ``check``)."""
    return field(default=default, metadata={_FLAGS: flags})


def _flag(flags: str | tuple[str, ...], help: str, commands: frozenset[str], about: About, **rest: Any) -> Flag:
    return Flag((flags,) if isinstance(flags, str) else flags, help, commands, about, **rest)


def default_jobs() -> int:
    """The default number of worker processes: the number of cores (1 when it cannot be told)."""
    return os.cpu_count() or 1


def codes(values: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Rule codes or prefixes, given one by one or comma-separated, without blanks."""
    return tuple(code.strip() for value in values for code in value.split(",") if code.strip())


@dataclass(frozen=True)
class Options:
    """What a command does besides where it reads and writes (README "Commands"), each field
    an option declared with its flag (:func:`option`).

    - ``select``, ``ignore``: rule codes or prefixes (``HM2``), one by one or comma-separated;
      ``select`` empty means every rule.
    - ``unsafe_fixes``: apply the fixes of unsafe rules too (``convert``, ``audit``).
    - ``causes``: ``inferred`` (from evidence) or ``framework`` (pydantic-ai 2.68's loader).
    - ``messages_field``: the envelope field holding the messages (``None``: auto-detect), a
      path of keys for a nested one (``payload.messages``; ``\\.`` is a dot inside a key,
      :func:`~histmig.records.field_path`).
    - ``format``: the input's format when its name does not tell (a name of
      :func:`histmig.sources.formats`).
    - ``messages_column``, ``id_column``, ``table``: a columnar input's messages column, the
      column naming each record in the report, and a database's table.
    - ``jobs``: worker processes (``None``: the number of cores; 1: this process).
    - ``schema``, ``key_column``, ``single_transaction``: a PostgreSQL table's schema (``None``:
      the search path), the column whose order pages a table and names each row (``None``: the
      primary key; SQLite: else the rowid), and an in-place run as one transaction for the
      whole table instead of one a page (PostgreSQL; SQLite's always is one).
    - ``target``: the pydantic-ai release (``"2.59.0"``) whose shapes the histories are
      written in (``convert``/``audit`` ``--target``) or that must load them (``check
      --reader``); ``None``: the newest (2.68.0), today's migration. An older release runs
      the rollback rules (HM5xx) and validates against what it loads
      (:mod:`histmig.schema.releases`).
    - ``attempts``: run HM104, which fills ``retry.attempt`` (``convert``, ``audit``);
      ``counting``: the counting rules it replays (``current``, ``writer`` or a release such
      as ``"1.0.18"``); ``max_retries``: the agent's budgets, ``"tools=N,output=M,tool:NAME=K"``,
      which fill ``retry.max_retries`` (README "Attempts").
    - ``conversation``: what groups records into one conversation (design.md "The unit of
      work"): columns, or field paths of a JSON record (one by one or comma-separated; several:
      a composite key), or ``("*",)``: every record of an input is one; ``order``: the column
      or field ordering its records (default: the key order of a table, the line order of a
      file); ``max_conversation_bytes``: past it a conversation is rejected whole
      (:class:`~histmig.records.Grouping`, docs/layouts.md).

    **Adding an option** is one declaration here and its use in the module that reads it
    (and their tests): a field ``name: type = option(default, Flag(...))`` when it is about
    records or how the input is read (the format module reads ``options.name``; give
    ``formats={"name-of-the-format"}`` when it applies to some formats only), or a
    :class:`Flag` among :attr:`PARAMETERS` with ``name``, ``type`` and ``default`` when a
    command takes it besides (the API function of that command takes it by keyword). The
    command line, the check that each input takes it, Spark and the docs follow::

        key_column: str | None = option(
            None,
            Flag(("--key-column",), "PostgreSQL/SQLite: unique column ...", RUNS, "input",
                 formats=frozenset({"postgres", "sqlite"}), metavar="COLUMN"),
        )

    Raises :class:`~histmig.errors.UsageError` for an unknown cause mode, a
    ``messages_field`` that names no key, a ``jobs`` below 1, a ``target`` that is no
    release histmig knows (0.0.13 to 2.68.0), a ``counting`` or ``max_retries`` that does not
    parse, or either without ``attempts``."""

    select: tuple[str, ...] = option(
        (),
        _flag(
            "--select",
            "Only these rule codes or prefixes (comma-separated or repeated).",
            RUNS,
            "records",
            metavar="CODES",
        ),
    )
    ignore: tuple[str, ...] = option(
        (),
        _flag(
            "--ignore",
            "Skip these rule codes or prefixes (comma-separated or repeated).",
            RUNS,
            "records",
            metavar="CODES",
        ),
    )
    unsafe_fixes: bool = option(
        False,
        _flag(
            "--unsafe-fixes",
            "Also apply the fixes of unsafe rules (they may remove or rewrite stored content; see `histmig rules`).",
            MIGRATING,
            "records",
        ),
    )
    causes: CauseMode = option(  # noqa: RUF009 (option() is a dataclasses.field, its default immutable)
        "inferred",
        _flag(
            "--causes",
            "inferred: causes from evidence; framework: exactly the "
            "retry values pydantic-ai 2.68's loader writes (HM103 off).",
            MIGRATING | {"otel"},
            "records",
            metavar="MODE",
            choices=CAUSE_MODES,
        ),
    )
    messages_field: str | None = option(
        None,
        _flag(
            "--messages-field",
            "Envelope field holding the messages (default: auto-detect).",
            RUNS | EXPORTS,
            "records",
            metavar="FIELD",
        ),
    )
    format: str | None = option(
        None,
        _flag(
            "--format",
            f"Input format when INPUT does not tell: {', '.join(formats())} (postgres: INPUT may be a connection "
            "string or a database name, the rest from the PG* variables).",
            RUNS | EXPORTS,
            "input",
            metavar="FORMAT",
            choices=tuple(formats()),
        ),
    )
    messages_column: str | None = option(
        None,
        _flag(
            "--messages-column",
            "Parquet/database: column holding the messages (default: auto-detect).",
            RUNS,
            "input",
            formats=COLUMNAR,
            metavar="COLUMN",
        ),
    )
    id_column: str | None = option(
        None,
        _flag(
            "--id-column",
            "Parquet/database: column naming each record in the report (default: the row, or the key).",
            RUNS,
            "input",
            formats=COLUMNAR,
            metavar="COLUMN",
        ),
    )
    table: str | None = option(
        None,
        _flag(
            "--table",
            "DuckDB/PostgreSQL/SQLite: table (or view) to read.",
            RUNS,
            "input",
            formats=TABLES,
            metavar="TABLE",
        ),
    )
    jobs: int | None = option(
        None,
        _flag(
            ("--jobs", "-j"),
            "Worker processes, 1 or more (default: the number of cores); 1 "
            "runs in this process. Output and report are the same for any N.",
            RUNS,
            "run",
            metavar="N",
        ),
    )
    schema: str | None = option(
        None,
        _flag(
            "--schema",
            "PostgreSQL: the table's schema (default: the search path).",
            RUNS,
            "input",
            formats=frozenset({"postgres"}),
            metavar="SCHEMA",
        ),
    )
    key_column: str | None = option(
        None,
        _flag(
            "--key-column",
            "PostgreSQL/SQLite: unique column the rows are read in order of "
            "and named by (default: the primary key; SQLite: else the rowid).",
            RUNS,
            "input",
            formats=frozenset({"postgres", "sqlite"}),
            metavar="COLUMN",
        ),
    )
    single_transaction: bool = option(
        False,
        _flag(
            "--single-transaction",
            "PostgreSQL --in-place: the whole table in one transaction (all or nothing) instead of one a page of rows.",
            RUNS,
            "input",
            formats=frozenset({"postgres"}),
        ),
    )
    target: str | None = option(
        None,
        _flag(
            "--target",
            "Write the shapes this pydantic-ai release (e.g. 2.59.0) writes and loads, for a rollback or an older "
            "service: retried tool-returns and retry-feedback parts become retry-prompt parts before 2.60.0 (rules "
            "HM5xx); what the older form cannot hold is reported as lost. Default: the newest, 2.68.0.",
            MIGRATING,
            "records",
            metavar="RELEASE",
        ),
        _flag(
            "--reader",
            "Exit 0 only if this pydantic-ai release (e.g. 2.0.0) loads every record as it is and no rule would "
            "rewrite one for it; the report gives, per record, the oldest release that loads it.",
            frozenset({"check"}),
            "records",
            metavar="RELEASE",
        ),
    )
    attempts: bool = option(
        False,
        _flag(
            "--attempts",
            "Fill retry.attempt of every retry part that has none by "
            "replaying the framework's retry counters (rule HM104).",
            MIGRATING,
            "records",
        ),
    )
    counting: str = option(
        "current",
        _flag(
            "--counting",
            "With --attempts: current (today's counting rules), writer (those of the releases that wrote each run, "
            "told from its fields) or a release such as 1.0.18.",
            MIGRATING,
            "records",
            metavar="RULES",
        ),
    )
    max_retries: str | None = option(
        None,
        _flag(
            "--max-retries",
            "With --attempts: the agent's retry budgets, tools=N,output=M,tool:NAME=K; "
            "they fill retry.max_retries (default: left null).",
            MIGRATING,
            "records",
            metavar="BUDGETS",
        ),
        _flag(
            "--max-retries",
            "The agent's retry budgets, tools=N,output=M,tool:NAME=K; they fill retry.max_retries of each retry "
            "whose attempt no span recorded, as convert --attempts --max-retries does (default: left null, "
            "reported unknowable).",
            frozenset({"from-otel"}),
            "records",
            metavar="BUDGETS",
        ),
    )
    conversation: tuple[str, ...] = option(
        (),
        _flag(
            "--conversation",
            "The column or field (a path: payload.session_id) naming the conversation each record belongs to; several "
            "(comma-separated or repeated) for a composite key; '*': every record of the input is one conversation. "
            "The rules then see each conversation whole (default: each record is one; docs/layouts.md).",
            RUNS | {"otel"},
            "input",
            formats=GROUPED,
            metavar="KEY",
        ),
    )
    order: str | None = option(
        None,
        _flag(
            "--order",
            "With --conversation: the column or field ordering a conversation's records "
            "(default: a table's key order, a file's line or row order).",
            RUNS | {"otel"},
            "input",
            formats=GROUPED,
            metavar="KEY",
        ),
    )
    max_conversation_bytes: int = option(
        MAX_CONVERSATION_BYTES,
        _flag(
            "--max-conversation-bytes",
            "With --conversation: a conversation whose records hold more bytes is rejected whole, nothing written "
            "for it (default: 64 MiB).",
            RUNS | {"otel"},
            "input",
            formats=GROUPED,
            metavar="BYTES",
        ),
    )

    PARAMETERS: ClassVar[tuple[Flag, ...]] = (
        _flag(
            "--in-place",
            "Replace each INPUT once its migrated archive is complete (DuckDB, SQLite: rewrite --table in one "
            "transaction; PostgreSQL: update the changed rows, a transaction a page, never a row another client wrote "
            "meanwhile); no OUTPUT.",
            frozenset({"convert"}),
            "output",
            formats=frozenset({"json", "jsonl"}) | TABLES,
            name="in_place",
            type=bool,
            default=False,
        ),
        _flag(
            "--to-table",
            "DuckDB/PostgreSQL/SQLite: write to this new table instead of OUTPUT.",
            frozenset({"convert"}),
            "output",
            formats=TABLES,
            metavar="TABLE",
            name="to_table",
            type=str | None,
        ),
        _flag(
            "--overwrite",
            "With --to-table (DuckDB, PostgreSQL, SQLite): replace the table if it exists, in the transaction that "
            "writes the new one (an output file is always replaced, once the new one is complete).",
            frozenset({"convert"}),
            "output",
            formats=TABLES,
            name="overwrite",
            type=bool,
            default=False,
        ),
        _flag(
            "--engine",
            "local: this machine's worker processes (--jobs); spark: a Spark job, Parquet in, a directory of Parquet "
            "files out (pip install 'histmig\\[spark]', Java 17).",
            frozenset({"convert"}),
            "run",
            metavar="ENGINE",
            choices=("local", "spark"),
            name="engine",
            type=str,
            default="local",
        ),
        _flag(
            "--spark-master",
            "--engine spark: the cluster to run on (spark://host:7077, "
            "yarn, local[8]); default a local session of --jobs cores.",
            frozenset({"convert"}),
            "run",
            metavar="URL",
            name="spark_master",
            type=str | None,
        ),
        _flag(
            "--rejects",
            "File for rejected records, added to if it exists, or - for stdout (default: OUTPUT.rejects.jsonl; with - "
            "as OUTPUT, rejected records go to stdout unchanged, in place).",
            frozenset({"convert", "from-otel"}) | EXPORTS,
            "output",
            metavar="FILE",
            name="rejects",
            type=str | None,
        ),
        _flag(
            "--clean",
            "Remove the temporary files (.NAME.histmig-PID-*.tmp) that killed runs left beside the files this run "
            "writes (without it, each is named in a warning).",
            RUNS | EXPORTS,
            "output",
            name="clean",
            type=bool,
            default=False,
        ),
        _flag(
            "--strict",
            "Also fail (exit 1) when a record holds a part of a part_kind pydantic-ai 2.68 does not know (a newer "
            "release's, carried unchanged).",
            frozenset({"check"}),
            "report",
            name="strict",
            type=bool,
            default=False,
        ),
        _flag(
            "--baseline",
            "Fail (exit 1) only on findings this file (written by --write-baseline) does not hold; say how many "
            "known ones were passed over and which entries no longer occur (docs/ci.md).",
            frozenset({"check"}),
            "report",
            metavar="FILE",
            name="baseline",
            type=str | None,
        ),
        _flag(
            "--write-baseline",
            "Record this run's findings in FILE (per record id or key, else a digest of its messages; no line "
            "numbers), for --baseline; exit 0 unless an input could not be read to its end.",
            frozenset({"check"}),
            "report",
            metavar="FILE",
            name="write_baseline",
            type=str | None,
        ),
        _flag(
            "--version",
            "pydantic-ai instrumentation version: 5 (the framework's default) or 6 (tool results under role 'tool').",
            frozenset({"otel"}),
            "records",
            metavar="N",
            choices=("5", "6"),
            name="version",
            type=int,
            default=5,
        ),
        _flag(
            "--include-content/--no-include-content",
            "Record prompts, completions, arguments and results.",
            frozenset({"otel"}),
            "records",
            name="include_content",
            type=bool,
            default=True,
        ),
        _flag(
            "--runs",
            "last: each conversation once, from its last run (its all_messages holds the runs before); "
            "all: one history a run.",
            frozenset({"from-otel"}),
            "records",
            metavar="RUNS",
            choices=("last", "all"),
            name="runs",
            type=str,
            default="last",
        ),
        _flag(
            "--report",
            "File for the report, one JSON row a run: its ids, what was derived and what was unknowable "
            "(default: OUTPUT.report.jsonl; none for stdout).",
            frozenset({"from-otel"}),
            "report",
            metavar="FILE",
            name="report",
            type=str | None,
        ),
        _flag(
            "--report",
            "Write the report to this file (- for stdout) instead of stderr.",
            RUNS,
            "report",
            metavar="FILE",
            name="report",
            type=str | None,
        ),
        _flag(
            "--report-format",
            "Report format: text, json, markdown, or github (a GitHub Actions workflow command a finding; the "
            "Markdown report is added to $GITHUB_STEP_SUMMARY when it is set). Default: json for a --report "
            "FILE ending in .json, markdown for one ending in .md, else text.",
            RUNS,
            "report",
            metavar="FORMAT",
            choices=("text", "json", "markdown", "github"),
            name="report_format",
            type=str | None,
        ),
        _flag(
            ("--quiet", "-q"),
            "No report, error lines nor summary line on stderr (a --report file is still written; the exit "
            "code tells); usage errors, warnings and notes are still printed.",
            RUNS,
            "report",
            name="quiet",
            type=bool,
            default=False,
        ),
        _flag(
            ("--quiet", "-q"),
            "No summary line on stderr (rejected records are still named).",
            EXPORTS | {"from-otel"},
            "report",
            name="quiet",
            type=bool,
            default=False,
        ),
        _flag(
            "--report-detail",
            "full: a line per change; summary: the counts (findings by rule) and the error and unknown-part "
            f"warning lines only; auto: full up to {DETAIL_ROWS:,} changes, else the summary (the JSON report "
            "always lists every change).",
            RUNS,
            "report",
            metavar="DETAIL",
            choices=("auto", "full", "summary"),
            name="report_detail",
            type=str,
            default="auto",
        ),
        _flag(
            "--no-timestamp",
            "Leave the start time out of the JSON report, so two runs give the same bytes.",
            RUNS,
            "report",
            name="no_timestamp",
            type=bool,
            default=False,
        ),
    )
    """The options commands take besides :class:`Options`' fields, each by keyword of its
    ``name`` in the API function of the command (``api.convert(..., in_place=True)``); the
    ``report`` ones only on the command line, which renders the report (the API checks the
    ``report`` path against what the run reads and writes)."""

    def __post_init__(self) -> None:
        if self.causes not in CAUSE_MODES:
            raise UsageError(f"unknown cause mode {self.causes!r} (one of: {', '.join(CAUSE_MODES)})")
        if self.jobs is not None and self.jobs < 1:
            raise UsageError(f"jobs must be 1 or more, not {self.jobs}")
        if self.messages_field is not None:
            try:
                keys = field_path(self.messages_field)
            except BadFieldPath as exc:
                raise UsageError(str(exc)) from exc
            if not all(map(struct_key, keys)):  # the screen decodes a record into structs named by the path's keys
                raise UsageError(
                    f"--messages-field {self.messages_field!r}: a key holding a backslash, a double quote or a control "
                    "character cannot name the messages field"
                )
        self.release  # noqa: B018 (a target that is no release is a usage error at once)
        if not self.attempts and (self.counting != "current" or self.max_retries is not None):
            raise UsageError("--counting and --max-retries need --attempts")
        try:
            counting_rules(self.counting)
            self.budgets  # noqa: B018 (a budget that does not parse is a usage error before anything is read)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
        self.grouping  # noqa: B018 (a --conversation that names nothing is a usage error at once)

    @property
    def grouping(self) -> Grouping | None:
        """How records make conversations (``conversation``, ``order``,
        ``max_conversation_bytes``), ``None`` without ``conversation``: each record is one.
        Raises :class:`~histmig.errors.UsageError` for a key that is empty or no field path, ``*``
        beside another key, ``order`` or a limit without ``conversation``, or a limit below 1."""
        given = (self.conversation,) if isinstance(self.conversation, str) else self.conversation
        for value in given:
            if not all(name.strip() for name in value.split(",")):
                raise UsageError(
                    f"--conversation {value!r}: names an empty key (a column or field path, comma-separated for "
                    f"several, or {WHOLE_INPUT!r})"
                )
        keys = codes(given)
        if not keys:
            if self.order is not None or self.max_conversation_bytes != MAX_CONVERSATION_BYTES:
                raise UsageError("--order and --max-conversation-bytes need --conversation")
            return None
        if WHOLE_INPUT in keys and len(keys) > 1:
            raise UsageError(f"--conversation {WHOLE_INPUT!r} (the whole input is one conversation) takes no other key")
        if self.max_conversation_bytes < 1:
            raise UsageError(f"--max-conversation-bytes must be 1 or more, not {self.max_conversation_bytes}")
        try:
            for key in (*keys, *([self.order] if self.order is not None else [])):
                if key != WHOLE_INPUT:
                    field_path(key)
        except BadFieldPath as exc:
            raise UsageError(str(exc).replace("--messages-field", "--conversation/--order")) from exc
        return Grouping(keys, self.order, self.max_conversation_bytes)

    @property
    def budgets(self) -> Budgets:
        """The budgets of ``max_retries`` (none given: :class:`~histmig.rules.base.Budgets`
        all ``None``). Raises ``ValueError`` when it does not parse."""
        return Budgets() if self.max_retries is None else Budgets.parse(self.max_retries)

    @property
    def release(self) -> Release:
        """``target`` as a :class:`~histmig.schema.releases.Release` (the newest when not
        given). Raises :class:`~histmig.errors.UsageError` for one histmig does not know."""
        if self.target is None:
            return NEWEST
        try:
            return release(self.target)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc

    @property
    def rules(self) -> tuple[Rule, ...]:
        """The selected rules that run for the target, in their order; an opt-in rule only when
        the field it names is given (``attempts``). Raises
        :class:`~histmig.errors.UsageError` for a code or prefix no rule has, none of
        whose rules runs for the target, or the code of an opt-in rule whose field is not
        given."""
        enabled = [name for name in opt_ins() if getattr(self, name)]
        try:
            return select(codes(self.select), codes(self.ignore), self.release, enabled)
        except UnknownRule as exc:
            raise UsageError(str(exc)) from exc

    def plan(self, *, validate_all: bool = False, readers: bool = False, digests: bool = False) -> Plan:
        """The engine's :class:`~histmig.engine.Plan` for these options; ``validate_all``
        parses and validates every record (``check``), ``readers`` tells which releases load
        each (``check --reader``), ``digests`` gives each record with something to say its
        messages' digest (``check --baseline``)."""
        return Plan(
            rules=self.rules,
            unsafe_fixes=self.unsafe_fixes,
            causes=self.causes,
            messages_field=self.messages_field,
            validate_all=validate_all,
            target=self.release,
            readers=readers,
            counting=self.counting,
            budgets=self.budgets,
            grouped=self.grouping is not None,
            digests=digests,
            read_fields=self.grouping.fields if self.grouping is not None else (),
        )

    @property
    def workers(self) -> int:
        """``jobs``, or the number of cores."""
        return self.jobs if self.jobs is not None else default_jobs()


@cache
def flags() -> tuple[Flag, ...]:
    """Every option of every command, in declaration order: :class:`Options`' fields (each
    :class:`Flag` with its field's ``name``, ``type`` and ``default``), then
    :attr:`Options.PARAMETERS`."""
    hints = typing.get_type_hints(Options)
    declared = [
        Flag(**{**flag.__dict__, "name": f.name, "type": hints[f.name], "default": f.default})
        for f in fields(Options)
        for flag in f.metadata[_FLAGS]
    ]
    return (*declared, *Options.PARAMETERS)


def flags_of(command: str) -> tuple[Flag, ...]:
    """The options ``command`` takes, in declaration order (one a name)."""
    return tuple(flag for flag in flags() if command in flag.commands)


FIELDS = frozenset(f.name for f in fields(Options))
"""The names of :class:`Options`' fields."""

RECORD_OPTIONS = frozenset(flag.name for flag in flags() if flag.about == "records" and flag.name in FIELDS)
"""The :class:`Options` fields about what is done to each record (the engine's plan): those
:func:`histmig.spark.migrate` and :func:`histmig.spark.check` take by name; the others are
about files, tables and processes, which Spark decides."""


class OptionRow(NamedTuple):
    """One option as the docs' option table gives it: ``flag`` (with its short forms,
    ``--jobs, -j``), ``metavar``, ``help``, the ``commands`` that take it (in
    :data:`COMMANDS` order) and the ``formats`` it applies to (``()``: every input)."""

    flag: str
    metavar: str
    help: str
    commands: tuple[str, ...]
    formats: tuple[str, ...]


def option_table() -> list[OptionRow]:
    """Every option of every command as the docs' option table lists it (a CLI reference is
    generated from it), in declaration order."""
    return [
        OptionRow(
            ", ".join(flag.flags),
            flag.metavar,
            flag.help.replace("\\[", "["),
            tuple(c for c in COMMANDS if c in flag.commands),
            tuple(name for name in formats() if flag.formats is not None and name in flag.formats),
        )
        for flag in flags()
    ]


def given(flag: Flag, value: Any) -> bool:
    """Whether ``value`` of ``flag`` was given (is not its default)."""
    return value != flag.default and not (flag.default == () and not value)


__all__ = [
    "COMMANDS",
    "FIELDS",
    "IMPLIED",
    "RECORD_OPTIONS",
    "Flag",
    "OptionRow",
    "Options",
    "codes",
    "default_jobs",
    "flags",
    "flags_of",
    "option",
    "option_table",
]
