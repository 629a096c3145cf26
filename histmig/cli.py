"""The ``histmig`` command line: a thin shell over :mod:`histmig.api` (design.md "CLI
contract"). Options shared by several commands are declared once, in bundles
(:data:`SELECT`, :data:`RECORDS`, ...), and added to a command by :func:`shared`; this module
parses, calls the API, renders the report, prints the verdict line and exits.

Exit codes: 0 success (``check``: every record current and valid); 1 something needs
attention (``check``: a record needs a rule, is invalid or has a finding; ``convert``/
``audit``: a record was rejected or the input ended early); 2 usage error or unreadable input.
"""

from __future__ import annotations

import errno
import functools
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from io import TextIOWrapper
from pathlib import Path
from typing import Annotated, Any, Optional, TextIO

import orjson
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
from rich.table import Table
from typer.core import TyperArgument, TyperCommand, TyperGroup

from histmig import __version__, api
from histmig.errors import UnreadableInput, UnwritableOutput, UsageError
from histmig.options import Options
from histmig.report import DETAIL_ROWS, Rendering
from histmig.schema.releases import NEWEST
from histmig.sources import formats, input_paths
from histmig.sources.atomic import atomic_output
from histmig.tuning import keep_heap_slack, tune_allocators, use_jemalloc

EXIT_OK, EXIT_USAGE = 0, 2
"""The exit codes the command line sets itself; the others come from :attr:`histmig.api.Result.exit_code`."""


class _PlainArgument(TyperArgument):
    """An argument shown by its metavar alone (``INPUT...``, ``[CODE]``): typer 0.29 shows a
    required one as ``{INPUT}`` in the usage line and adds its Python type (``<str>``)."""

    def _usage_display_name(self) -> str:
        return self.display_name_raw if self.required else f"[{self.display_name_raw}]"

    def display_type_rich(self, ctx: typer.Context) -> str | None:
        return None


class _Command(TyperCommand):
    """A command whose help shows plain metavars: its arguments are :class:`_PlainArgument` objects
    and its help option (``-h``, ``--help``) shows no ``<bool>``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if type(param) is TyperArgument:
                param.__class__ = _PlainArgument

    def get_help_option(self, ctx: typer.Context) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option


class _Group(TyperGroup):
    """The ``histmig`` group: every command is a :class:`_Command`, and an error of the
    command line itself (an unknown option, a bad value, a missing argument) is one line on
    stderr, pointing at the command's help, with exit code 2."""

    def get_help_option(self, ctx: typer.Context) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option

    def main(
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except (
            typer.TyperException
        ) as exc:  # a command-line error (typer tells "no arguments: the help was shown" by its name too)
            if type(exc).__name__ == "NoArgsIsHelpError":
                sys.exit(exc.exit_code)  # type: ignore[attr-defined]
            ctx = getattr(exc, "ctx", None)
            hint = f" (see {ctx.command_path} -h)" if ctx is not None else ""
            stderr.print(f"histmig: {exc.format_message().rstrip('.')}{hint}", markup=False, soft_wrap=True)
            sys.exit(exc.exit_code)  # type: ignore[attr-defined]
        except typer.Abort:
            stderr.print("Aborted!", markup=False)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else EXIT_OK)


app = typer.Typer(
    help="Migrate stored pydantic-ai message histories: legacy retry-prompt parts become the parts they always meant.",
    epilog=(
        "Examples:\n\n"
        "  histmig convert chats.jsonl chats.v2.jsonl   # migrate an export\n\n"
        "  histmig audit chats.jsonl                    # dry run, report only\n\n"
        "  histmig check chats.v2.jsonl                 # in CI: 0 = all current\n\n"
        "  histmig rules                                # what each rule does\n\n"
        "Each command has its own --help (-h)."
    ),
    cls=_Group,
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)
command = partial(app.command, cls=_Command)
"""``app.command`` making a :class:`_Command`."""
stderr = Console(
    stderr=True, highlight=False, soft_wrap=True, emoji=False
)  # no :name: shortcodes: a path:table: is not an emoji


def _choice(*values: str) -> Callable[[Any], Any]:
    """A callback accepting one of ``values``, and refusing anything else in plain words
    (``choose text, json or markdown, not 'xml'``)."""
    words = ", ".join(values[:-1]) + f" or {values[-1]}"

    def check(value: Any) -> Any:
        if value is not None and value not in values:
            raise typer.BadParameter(f"choose {words}, not {value!r}")
        return value

    return check


CAUSE_MODES = ("inferred", "framework")
REPORT_FORMATS = ("text", "json", "markdown")
INPUT_FORMATS = tuple(formats())
"""``--format``: the name of any format of the registry (:func:`histmig.sources.formats`)."""
OTEL_VERSIONS = ("5", "6")
REPORT_DETAILS = ("auto", "full", "summary")
ENGINES = ("local", "spark")


@dataclass(frozen=True)
class Bundle:
    """Options several commands share, declared once: each a parameter (name, typer
    annotation, default) added to a command's signature by :func:`shared`."""

    parameters: tuple[inspect.Parameter, ...]


def _bundle(**params: tuple[Any, Any]) -> Bundle:
    return Bundle(
        tuple(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
            for name, (annotation, default) in params.items()
        )
    )


SELECT = _bundle(
    select=(
        Annotated[
            Optional[list[str]],
            typer.Option(
                "--select", metavar="CODES", help="Only these rule codes or prefixes (comma-separated or repeated)."
            ),
        ],
        None,
    ),
    ignore=(
        Annotated[
            Optional[list[str]],
            typer.Option(
                "--ignore", metavar="CODES", help="Skip these rule codes or prefixes (comma-separated or repeated)."
            ),
        ],
        None,
    ),
)
FIXES = _bundle(
    unsafe_fixes=(
        Annotated[
            bool,
            typer.Option(
                "--unsafe-fixes",
                metavar="",
                help="Also apply the fixes of unsafe rules (they may remove or rewrite stored content; see `histmig rules`).",
            ),
        ],
        False,
    ),
)
CAUSES = _bundle(
    causes=(
        Annotated[
            str,
            typer.Option(
                "--causes",
                metavar="MODE",
                callback=_choice(*CAUSE_MODES),
                help="inferred: causes from evidence; framework: exactly the retry values pydantic-ai 2.68's loader writes (HM103 off).",
            ),
        ],
        "inferred",
    ),
)
ATTEMPTS = _bundle(
    attempts=(
        Annotated[
            bool,
            typer.Option(
                "--attempts",
                metavar="",
                help="Fill retry.attempt of every retry part that has none by replaying the framework's retry counters (rule HM104).",
            ),
        ],
        False,
    ),
    counting=(
        Annotated[
            str,
            typer.Option(
                "--counting",
                metavar="RULES",
                help="With --attempts: current (today's counting rules), writer (those of the releases that wrote each run, told from its fields) or a release such as 1.0.18.",
            ),
        ],
        "current",
    ),
    max_retries=(
        Annotated[
            Optional[str],
            typer.Option(
                "--max-retries",
                metavar="BUDGETS",
                help="With --attempts: the agent's retry budgets, tools=N,output=M,tool:NAME=K; they fill retry.max_retries (default: left null).",
            ),
        ],
        None,
    ),
)
RECORDS = _bundle(
    messages_field=(
        Annotated[
            Optional[str],
            typer.Option(
                "--messages-field", metavar="FIELD", help="Envelope field holding the messages (default: auto-detect)."
            ),
        ],
        None,
    ),
    input_format=(
        Annotated[
            Optional[str],
            typer.Option(
                "--format",
                metavar="FORMAT",
                callback=_choice(*INPUT_FORMATS),
                help=f"Input format when INPUT does not tell: {', '.join(INPUT_FORMATS)} (postgres: INPUT may be a connection string or a database name, the rest from the PG* variables).",
            ),
        ],
        None,
    ),
)
COLUMNS = _bundle(
    messages_column=(
        Annotated[
            Optional[str],
            typer.Option(
                "--messages-column",
                metavar="COLUMN",
                help="Parquet/database: column holding the messages (default: auto-detect).",
            ),
        ],
        None,
    ),
    id_column=(
        Annotated[
            Optional[str],
            typer.Option(
                "--id-column",
                metavar="COLUMN",
                help="Parquet/database: column naming each record in the report (default: the row, or the key).",
            ),
        ],
        None,
    ),
    table=(
        Annotated[
            Optional[str],
            typer.Option("--table", metavar="TABLE", help="DuckDB/PostgreSQL/SQLite: table (or view) to read."),
        ],
        None,
    ),
    schema=(
        Annotated[
            Optional[str],
            typer.Option(
                "--schema", metavar="SCHEMA", help="PostgreSQL: the table's schema (default: the search path)."
            ),
        ],
        None,
    ),
    key_column=(
        Annotated[
            Optional[str],
            typer.Option(
                "--key-column",
                metavar="COLUMN",
                help="PostgreSQL/SQLite: unique column the rows are read in order of and named by (default: the primary key; SQLite: else the rowid).",
            ),
        ],
        None,
    ),
    single_transaction=(
        Annotated[
            bool,
            typer.Option(
                "--single-transaction",
                metavar="",
                help="PostgreSQL --in-place: the whole table in one transaction (all or nothing) instead of one a page of rows.",
            ),
        ],
        False,
    ),
)
TARGET = _bundle(
    target=(
        Annotated[
            Optional[str],
            typer.Option(
                "--target",
                metavar="RELEASE",
                help="Write the shapes this pydantic-ai release (e.g. 2.59.0) writes and loads, for a rollback or an older service: "
                "retried tool-returns and retry-feedback parts become retry-prompt parts before 2.60.0 (rules HM5xx); what the older "
                "form cannot hold is reported as lost. Default: the newest, 2.68.0.",
            ),
        ],
        None,
    ),
)
READER = _bundle(
    reader=(
        Annotated[
            Optional[str],
            typer.Option(
                "--reader",
                metavar="RELEASE",
                help="Exit 0 only if this pydantic-ai release (e.g. 2.0.0) loads every record as it is and no rule would rewrite one "
                "for it; the report gives, per record, the oldest release that loads it.",
            ),
        ],
        None,
    ),
)
JOBS = _bundle(
    jobs=(
        Annotated[
            Optional[int],
            typer.Option(
                "--jobs",
                "-j",
                metavar="N",
                help="Worker processes, 1 or more (default: the number of cores); 1 runs in this process. Output and report are the same for any N.",
            ),
        ],
        None,
    ),
)
REJECTS = _bundle(
    rejects=(
        Annotated[
            Optional[str],
            typer.Option(
                "--rejects",
                metavar="FILE",
                help="File for rejected records, added to if it exists, or - for stdout (default: OUTPUT.rejects.jsonl; with - as OUTPUT, rejected records go to stdout unchanged, in place).",
            ),
        ],
        None,
    ),
)
REPORT = _bundle(
    report=(
        Annotated[
            Optional[str],
            typer.Option(
                "--report", metavar="FILE", help="Write the report to this file (- for stdout) instead of stderr."
            ),
        ],
        None,
    ),
    report_format=(
        Annotated[
            str,
            typer.Option(
                "--report-format",
                metavar="FORMAT",
                callback=_choice(*REPORT_FORMATS),
                help="Report format: text, json or markdown.",
            ),
        ],
        "text",
    ),
    quiet=(
        Annotated[
            bool,
            typer.Option(
                "--quiet",
                "-q",
                metavar="",
                help="Nothing on stderr: no report, error lines nor summary line (a --report file is still written; the exit code tells).",
            ),
        ],
        False,
    ),
    report_detail=(
        Annotated[
            str,
            typer.Option(
                "--report-detail",
                metavar="DETAIL",
                callback=_choice(*REPORT_DETAILS),
                help=f"full: a line per change; summary: the counts (findings by rule) and the error and unknown-part warning lines only; auto: full up to {DETAIL_ROWS:,} changes, else the summary (the JSON report always lists every change).",
            ),
        ],
        "auto",
    ),
    no_timestamp=(
        Annotated[
            bool,
            typer.Option(
                "--no-timestamp",
                metavar="",
                help="Leave the start time out of the JSON report, so two runs give the same bytes.",
            ),
        ],
        False,
    ),
)

INPUT_HELP = (
    "Archives to read: .json (one history), .jsonl/.ndjson (one record a line, maybe gzipped), .parquet, "
    ".duckdb or .sqlite (with --table), a postgresql:// URL (with --table), - for stdin, a directory (its .json, .jsonl, .ndjson and "
    ".parquet files) or a quoted glob; several may be given."
)
InputArg = Annotated[list[str], typer.Argument(metavar="INPUT...", help=INPUT_HELP)]


@dataclass(frozen=True)
class Shown:
    """Where the report goes (the :data:`REPORT` bundle): a ``path`` (``-``: stdout; ``None``:
    stderr), its ``format``, ``quiet`` (nothing on stderr), and how it is rendered
    (:class:`~histmig.report.Rendering`: ``detail``, and the start time unless
    ``no_timestamp``)."""

    path: str | None
    format: str
    quiet: bool
    detail: str = "auto"
    no_timestamp: bool = False

    @property
    def rendering(self) -> Rendering:
        return Rendering(self.detail, not self.no_timestamp)  # type: ignore[arg-type]


_OPTION_NAMES = {
    "select",
    "ignore",
    "unsafe_fixes",
    "causes",
    "messages_field",
    "input_format",
    "messages_column",
    "id_column",
    "table",
    "jobs",
    "schema",
    "key_column",
    "single_transaction",
    "target",
    "reader",
    "attempts",
    "counting",
    "max_retries",
}
"""Bundle parameters that make the :class:`~histmig.options.Options`."""

_SHOWN_NAMES = {
    "report": "path",
    "report_format": "format",
    "quiet": "quiet",
    "report_detail": "detail",
    "no_timestamp": "no_timestamp",
}
"""The :data:`REPORT` bundle's parameters, which make a :class:`Shown`."""


def shared(*bundles: Bundle) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Add the parameters of ``bundles`` to a command's signature (after its own), and call
    it with ``options``, the :class:`~histmig.options.Options` they make, and ``shown``, the
    :class:`Shown` of the report bundle, when its signature asks for them; other bundle
    parameters (rejects) are passed by name. Exits 2 for options that do not fit (an unknown
    rule code)."""

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(command, eval_str=True)
        added = [param for bundle in bundles for param in bundle.parameters]
        given = {param.name for param in added} | {"options", "shown"}
        own = [param for name, param in signature.parameters.items() if name not in given]

        @functools.wraps(command)
        def run(**values: Any) -> None:
            picked = {name: values.pop(name) for name in list(values) if name in _OPTION_NAMES}
            with _usage_errors():
                options = _options(**picked)
            if "shown" in signature.parameters:
                values["shown"] = Shown(
                    **{_SHOWN_NAMES[name]: values.pop(name) for name in list(values) if name in _SHOWN_NAMES}
                )
            command(options=options, **values)

        run.__signature__ = signature.replace(parameters=own + added)  # type: ignore[attr-defined]
        return run

    return decorate


def _options(
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    unsafe_fixes: bool = False,
    causes: str = "inferred",
    messages_field: str | None = None,
    input_format: str | None = None,
    messages_column: str | None = None,
    id_column: str | None = None,
    table: str | None = None,
    jobs: int | None = None,
    schema: str | None = None,
    key_column: str | None = None,
    single_transaction: bool = False,
    target: str | None = None,
    reader: str | None = None,
    attempts: bool = False,
    counting: str = "current",
    max_retries: str | None = None,
) -> Options:
    options = Options(
        tuple(select or ()),
        tuple(ignore or ()),
        unsafe_fixes,
        causes,
        messages_field,
        input_format,
        messages_column,
        id_column,
        table,
        jobs,
        schema=schema,
        key_column=key_column,
        single_transaction=single_transaction,
        target=target or reader,
        attempts=attempts,
        counting=counting,
        max_retries=max_retries,
    )
    options.rules  # noqa: B018 (an unknown code is a usage error before anything is read)
    return options


class _usage_errors:
    """A block whose usage errors, unreadable inputs, unwritable outputs and any other
    ``OSError`` (a disk that fills up, a file that vanishes) end the command with one line on
    stderr, naming the path and the cause, and exit code 2 (``-q`` does not silence it)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, *_: object) -> None:
        if isinstance(exc, (UsageError, UnreadableInput, UnwritableOutput)):
            what = (
                "cannot read "
                if isinstance(exc, UnreadableInput)
                else "cannot write "
                if isinstance(exc, UnwritableOutput)
                else ""
            )
            stderr.print(_one_line(f"histmig: {what}{exc}"), markup=False, soft_wrap=True)
            raise typer.Exit(EXIT_USAGE) from exc
        if (
            isinstance(exc, OSError) and exc.errno != errno.EPIPE
        ):  # a closed stdout ends the run silently, exit 1, as click does
            where = f"{exc.filename}: " if exc.filename else ""
            stderr.print(_one_line(f"histmig: {where}{exc.strerror or exc}"), markup=False, soft_wrap=True)
            raise typer.Exit(EXIT_USAGE) from exc


def _one_line(text: str) -> str:
    """``text`` on one line: a driver's message of several (libpq's "Is the server running
    ...?") joined by ``; ``."""
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def _show_version(value: bool) -> None:
    if value:
        print(f"histmig {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, metavar="", help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Migrate stored pydantic-ai message histories: legacy retry-prompt parts become the parts they always meant."""


class _Bar:
    """A rich progress bar on stderr (a terminal), told how far the run is (:class:`histmig.api.Progress`)."""

    def __init__(self, bar: Progress, name: str) -> None:
        self.bar, self.name = bar, name

    def start(self, total: int | None) -> None:
        self.task = self.bar.add_task(self.name, total=total)

    def advance(self, done: int) -> None:
        self.bar.advance(self.task, done)


def _run(
    command: Callable[..., api.Result], inputs: list[str], *args: Any, options: Options, **kwargs: Any
) -> api.Result:
    """``command(inputs, ...)`` with process tuning (:mod:`histmig.tuning`; Arrow's pool
    for a columnar input), a progress bar on a terminal, and exit 2 on a usage error."""
    keep_heap_slack()
    with _usage_errors():
        if any(fmt.columnar for _, fmt in input_paths(inputs, options.format)):
            use_jemalloc()
        args = (*args, options)
        if not sys.stderr.isatty():
            return command(inputs, *args, **kwargs)
        columns = (*Progress.get_default_columns()[:1], BarColumn(), DownloadColumn(), TimeRemainingColumn())
        name = Path(inputs[0]).name if len(inputs) == 1 else f"{len(inputs)} inputs"
        with Progress(*columns, console=stderr, transient=True) as bar:
            return command(inputs, *args, progress=_Bar(bar, name), **kwargs)


def _finish(result: api.Result, shown: Shown) -> None:
    """Render the report as ``shown`` says, print the verdict line (unless quiet) and the
    notes, and exit with the result's code."""
    with _usage_errors():
        _emit(result.report, shown)
    if not shown.quiet:
        stderr.print(result.verdict, markup=False)
    for note in result.notes:
        stderr.print(f"histmig: note: {note}", markup=False)
    raise typer.Exit(result.exit_code)


def _emit(report: Any, shown: Shown) -> None:
    """Write ``report`` as ``shown`` says: to its path (``-`` is stdout), or to stderr unless
    quiet, streamed rather than held whole in memory. A file is written atomically: an error
    while writing (raised as is) leaves the previous file, if any, and no other."""
    render = _renderer(shown.format)
    if shown.path is not None:
        with atomic_output(shown.path) as out:
            stream = TextIOWrapper(out, encoding="utf-8", newline="\n")
            try:
                render(report, stream, shown.rendering)
            finally:
                stream.detach()
    elif not shown.quiet:
        render(report, sys.stderr, shown.rendering)


def _renderer(fmt: str) -> Callable[[Any, TextIO, Rendering], None]:
    from importlib import import_module

    return import_module(f"histmig.report.{fmt}").render


@command(
    epilog=(
        "Examples:\n\n"
        "  histmig convert chats.jsonl chats.v2.jsonl\n\n"
        "  histmig convert chats.jsonl.gz --in-place\n\n"
        "  histmig convert history.json - --report report.json --report-format json\n\n"
        "  zcat logs.jsonl.gz | histmig convert - - --messages-field conversation > out.jsonl\n\n"
        "  histmig convert lake/chats.parquet chats.v2.parquet --messages-column messages\n\n"
        "  histmig convert chats.duckdb --table conversations --messages-column messages --in-place\n\n"
        "  histmig convert postgresql://app@db:5432/app --table conversations --messages-column messages --in-place\n\n"
        "  histmig convert chats.sqlite --table messages --messages-column message_list --in-place\n\n"
        "  histmig convert 'lake/*.parquet' lake.v2 --engine spark --jobs 8   # a local Spark job\n\n"
        "  histmig convert /mnt/lake lake.v2 --engine spark --spark-master spark://head:7077\n\n"
        "  histmig convert chats.v2.jsonl chats.v2-59.jsonl --target 2.59.0   # roll back\n\n"
        "  histmig convert chats.jsonl chats.v2.jsonl --attempts --max-retries tools=3,output=1"
    )
)
@shared(SELECT, FIXES, CAUSES, TARGET, ATTEMPTS, RECORDS, COLUMNS, JOBS, REJECTS, REPORT)
def convert(
    paths: Annotated[
        list[str],
        typer.Argument(
            metavar="INPUT... [OUTPUT]",
            help=INPUT_HELP
            + " The last is OUTPUT, unless --in-place or --to-table: a file (its name tells the format: the input's own, or "
            "for Parquet and databases .parquet or .jsonl), - for stdout, or a directory (for several inputs, a directory or a glob: each "
            "written there under its own name; --engine spark: a directory of Parquet files).",
        ),
    ],
    in_place: Annotated[
        bool,
        typer.Option(
            "--in-place",
            metavar="",
            help="Replace each INPUT once its migrated archive is complete (DuckDB, SQLite: rewrite --table in one transaction; PostgreSQL: "
            "update the changed rows, a transaction a page, never a row another client wrote meanwhile); no OUTPUT.",
        ),
    ] = False,
    to_table: Annotated[
        Optional[str],
        typer.Option(
            "--to-table", metavar="TABLE", help="DuckDB/PostgreSQL/SQLite: write to this new table instead of OUTPUT."
        ),
    ] = None,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            metavar="",
            help="With --to-table (DuckDB, PostgreSQL, SQLite): replace the table if it exists, in the transaction that writes the new one (an output file is always replaced, once the new one is complete).",
        ),
    ] = False,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            metavar="ENGINE",
            callback=_choice(*ENGINES),
            help="local: this machine's worker processes (--jobs); spark: a Spark job, Parquet in, a directory of Parquet files out (pip install 'histmig\\[spark]', Java 17).",
        ),
    ] = "local",
    spark_master: Annotated[
        Optional[str],
        typer.Option(
            "--spark-master",
            metavar="URL",
            help="--engine spark: the cluster to run on (spark://host:7077, yarn, local[8]); default a local session of --jobs cores.",
        ),
    ] = None,
    *,
    options: Options,
    shown: Shown,
    rejects: Optional[str],
) -> None:
    """Write the migrated archive. Unchanged records are copied byte for byte."""
    inputs, output_path = (
        (paths, None) if in_place or to_table is not None or len(paths) == 1 else (paths[:-1], paths[-1])
    )
    with _usage_errors():
        if engine == "spark":  # a Spark OUTPUT is a directory (histmig.spark checks it)
            api.check_outputs(("--rejects", rejects), ("--report", shown.path))
            if output_path is None or in_place or to_table is not None or rejects is not None or overwrite:
                raise UsageError(
                    "--engine spark writes OUTPUT, a directory of Parquet files (rejected rows stay in their rows): give OUTPUT, without --in-place, --to-table, --overwrite or --rejects"
                )
            try:
                from histmig import spark
            except ImportError as exc:
                raise UsageError(f"--engine spark needs pyspark: pip install 'histmig[spark]' ({exc})") from exc
        else:
            api.check_outputs(("OUTPUT", output_path), ("--rejects", rejects), ("--report", shown.path))
            if spark_master is not None:
                raise UsageError("--spark-master needs --engine spark")
            if output_path is None and not in_place and to_table is None:
                raise UsageError("give OUTPUT after INPUT, or --in-place, or --to-table for a database input")
    if engine == "spark":
        _finish(_run(spark.convert, inputs, output_path, options=options, master=spark_master), shown)
    else:
        _finish(
            _run(
                api.convert,
                inputs,
                output_path,
                options=options,
                rejects=rejects,
                in_place=in_place,
                to_table=to_table,
                overwrite=overwrite,
            ),
            shown,
        )


@command(
    epilog=(
        "Examples:\n\n  histmig audit chats.jsonl\n\n  histmig audit chats.jsonl --report audit.md --report-format markdown\n\n"
        "  histmig audit 'lake/*.parquet' --id-column conversation_id\n\n  histmig audit chats.duckdb --table conversations\n\n"
        "  histmig audit postgresql://app@db/app --table conversations --schema chat\n\n"
        "  histmig audit chats.v2.jsonl --target 2.0.0   # what a rollback to 2.0.0 would rewrite and lose\n\n"
        "  histmig audit chats.jsonl --attempts --counting writer"
    )
)
@shared(SELECT, FIXES, CAUSES, TARGET, ATTEMPTS, RECORDS, COLUMNS, JOBS, REPORT)
def audit(
    input_path: InputArg,
    *,
    options: Options,
    shown: Shown,
) -> None:
    """Dry run: the same pipeline and report as convert; nothing is written but the report."""
    _report_only(api.audit, input_path, options, shown)


@command(
    epilog=(
        "Examples:\n\n  histmig check chats.jsonl   # in CI: exit 1 if anything needs migrating\n\n  histmig check history.json --select HM2\n\n"
        "  histmig check chats.parquet\n\n  histmig check chats.duckdb --table conversations --id-column id\n\n"
        "  histmig check chats.sqlite --table messages\n\n"
        "  histmig check chats.jsonl --reader 2.0.0   # before upgrading: can the oldest service still read everything?"
    )
)
@shared(SELECT, READER, RECORDS, COLUMNS, JOBS, REPORT)
def check(
    input_path: InputArg,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            metavar="",
            help="Also fail (exit 1) when a record holds a part of a part_kind pydantic-ai 2.68 does not know (a newer release's, carried unchanged).",
        ),
    ] = False,
    *,
    options: Options,
    shown: Shown,
) -> None:
    """Exit 0 when every record is current and valid (with --reader: that release loads it and no rule would rewrite it), 1 when any needs a rule, fails validation or has a finding (with --strict: or holds a part of an unknown part_kind), 2 when the input is unreadable."""
    _report_only(api.check, input_path, options, shown, strict=strict)


def _report_only(
    command: Callable[..., api.Result], input_path: str, options: Options, shown: Shown, **kwargs: Any
) -> None:
    """``audit`` and ``check``: run ``command``, which writes nothing, and show its report."""
    with _usage_errors():
        api.check_outputs(("--report", shown.path))
    _finish(_run(command, input_path, options=options, **kwargs), shown)


@command()
def rules(
    code: Annotated[
        Optional[str],
        typer.Argument(
            metavar="CODE", help="Show the rules with this code or prefix in full, with an example (HM103, HM2)."
        ),
    ] = None,
) -> None:
    """List the rules: code, summary and its fix (safe, unsafe, or none: it only reports); with CODE, a rule in full (what it does, why, where it comes from in pydantic-ai, an example)."""
    console = Console(highlight=False, emoji=False)
    with _usage_errors():
        selected = api.rules(code)
    if code is None:
        table = Table("code", "summary", "fix")
        for rule in selected:
            table.add_row(rule.code, rule.summary, rule.applicability if rule.fix else "none")
        console.print(table)
        return
    for rule in selected:
        docs = rule.docs
        fix = f"Fix: {rule.applicability}" if rule.fix else "Fix: none (reported only)"
        severity = "Findings: warnings (check does not fail on them)\n" if rule.severity == "warning" else ""
        for_target = f" (--target {docs.target})" if docs.target else ""
        example = (
            f"Before{for_target}\n{escape(_indented(docs.before))}\n\nAfter\n{escape(_indented(docs.after))}"
            if docs.after
            else f"Example (what it finds)\n{escape(_indented(docs.before))}"
        )
        console.print(
            f"[bold]{rule.code}[/] ({rule.name}): {escape(rule.summary)}\n\n"
            f"What it does\n  {escape(docs.what)}\n\nWhy it matters\n  {escape(docs.why)}\n\n"
            f"{fix}\n{severity}Runs for targets: {rule.target_text} (--target; default {NEWEST})\nSource: {escape(rule.source)}\n\n{example}\n",
            soft_wrap=True,
        )


def _indented(text: str) -> str:
    """JSON ``text`` indented by two spaces a level."""
    return orjson.dumps(orjson.loads(text), option=orjson.OPT_INDENT_2).decode()


OTEL_INPUT_HELP = (
    "Archives to read: .json (one history), .jsonl/.ndjson (one record a line, maybe gzipped), - for stdin, or a directory or quoted glob of them; "
    "the last is OUTPUT: a file, - for stdout, or a directory for several inputs."
)
OtelQuietOpt = Annotated[
    bool,
    typer.Option("--quiet", "-q", metavar="", help="No summary line on stderr (rejected records are still named)."),
]


def _otel_done(result: api.Result, quiet: bool) -> None:
    for name, line in result.rejected:
        stderr.print(f"histmig: {name}: {line}", markup=False, soft_wrap=True)
    if not quiet:
        stderr.print(result.verdict, markup=False, soft_wrap=True)
    raise typer.Exit(result.exit_code)


@command(
    "otel",
    epilog=(
        "Examples:\n\n"
        "  histmig otel chats.jsonl chats.otel.jsonl --version 6\n\n"
        "  histmig otel history.json - --version 5 --no-include-content"
    ),
)
@shared(CAUSES, RECORDS, REJECTS)
def otel(
    paths: Annotated[list[str], typer.Argument(metavar="INPUT... OUTPUT", help=OTEL_INPUT_HELP)],
    version: Annotated[
        str,
        typer.Option(
            "--version",
            metavar="N",
            callback=_choice(*OTEL_VERSIONS),
            help="pydantic-ai instrumentation version: 5 (the framework's default) or 6 (tool results under role 'tool').",
        ),
    ] = "5",
    include_content: Annotated[
        bool,
        typer.Option(
            "--include-content/--no-include-content",
            metavar="",
            help="Record prompts, completions, arguments and results.",
        ),
    ] = True,
    quiet: OtelQuietOpt = False,
    *,
    options: Options,
    rejects: Optional[str],
) -> None:
    """Export each history (legacy parts migrated first) as the OpenTelemetry GenAI message list pydantic-ai's instrumentation records."""
    with _usage_errors():
        inputs, output_path = _inputs_and_output(paths)
        result = api.otel(
            inputs, output_path, options, version=int(version), include_content=include_content, rejects=rejects
        )
    _otel_done(result, quiet)


@command(
    "otel-upgrade",
    epilog="Examples:\n\n  histmig otel-upgrade spans.v5.jsonl spans.v6.jsonl\n\n  cat spans.jsonl | histmig otel-upgrade - - > spans.v6.jsonl",
)
@shared(RECORDS, REJECTS)
def otel_upgrade(
    paths: Annotated[list[str], typer.Argument(metavar="INPUT... OUTPUT", help=OTEL_INPUT_HELP)],
    quiet: OtelQuietOpt = False,
    *,
    options: Options,
    rejects: Optional[str],
) -> None:
    """Move OTel message arrays exported with version 5 roles to version 6 roles; records already in version 6 roles are copied byte for byte."""
    with _usage_errors():
        inputs, output_path = _inputs_and_output(paths)
        result = api.otel_upgrade(inputs, output_path, options, rejects=rejects)
    _otel_done(result, quiet)


def _inputs_and_output(paths: list[str]) -> tuple[list[str], str]:
    """The INPUTs and the OUTPUT of an export: every argument but the last, and the last."""
    if len(paths) < 2:
        raise UsageError("give INPUT and OUTPUT (- for stdout)")
    return paths[:-1], paths[-1]


def main() -> None:
    """Console-script entry point (``histmig``): tunes the allocators (:mod:`histmig.tuning`),
    then runs the command line."""
    tune_allocators()
    app()
