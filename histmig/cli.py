"""The ``histmig`` command line: a thin shell over :mod:`histmig.api` (design.md "CLI
contract"). Options shared by several commands are declared once, in bundles
(:data:`SELECT`, :data:`RECORDS`, ...), and added to a command by :func:`shared`; this module
parses, calls the API, renders the report, prints the verdict line and exits.

Exit codes: 0 success (``check``: every record current and valid); 1 something needs
attention (``check``: a record needs a rule, is invalid or has a finding; ``convert``/
``audit``: a record was rejected or the input ended early); 2 usage error or unreadable input.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from io import TextIOWrapper
from pathlib import Path
from typing import Annotated, Any, Optional, TextIO

import orjson
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
from rich.table import Table

from histmig import __version__, api
from histmig.options import Options
from histmig.sources import format_of
from histmig.sources.atomic import atomic_output
from histmig.sources.base import UnreadableInput, UnwritableOutput, UsageError
from histmig.tuning import keep_heap_slack, tune_allocators, use_jemalloc

EXIT_OK, EXIT_USAGE = 0, 2
"""The exit codes the command line sets itself; the others come from :attr:`histmig.api.Result.exit_code`."""

app = typer.Typer(
    help="Migrate stored pydantic-ai message histories: legacy retry-prompt parts become the parts they always meant.",
    epilog=(
        "Examples:\n\n"
        "  histmig convert chats.jsonl chats.v2.jsonl   # migrate an export\n\n"
        "  histmig audit chats.jsonl                    # dry run, report only\n\n"
        "  histmig check chats.v2.jsonl                 # in CI: 0 = all current\n\n"
        "  histmig rules                                # what each rule does\n\n"
        "Each command has its own --help."
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
)
stderr = Console(stderr=True, highlight=False, soft_wrap=True)


class CauseChoice(str, Enum):
    inferred = "inferred"
    framework = "framework"


class ReportFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"


class InputFormat(str, Enum):
    json = "json"
    jsonl = "jsonl"


class OtelVersion(str, Enum):
    v5 = "5"
    v6 = "6"


@dataclass(frozen=True)
class Bundle:
    """Options several commands share, declared once: each a parameter (name, typer
    annotation, default) added to a command's signature by :func:`shared`."""

    parameters: tuple[inspect.Parameter, ...]


def _bundle(**params: tuple[Any, Any]) -> Bundle:
    return Bundle(tuple(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default) for name, (annotation, default) in params.items()))


SELECT = _bundle(
    select=(Annotated[Optional[list[str]], typer.Option("--select", metavar="CODES", help="Only these rule codes or prefixes (comma-separated or repeated).")], None),
    ignore=(Annotated[Optional[list[str]], typer.Option("--ignore", metavar="CODES", help="Skip these rule codes or prefixes (comma-separated or repeated).")], None),
)
FIXES = _bundle(
    unsafe_fixes=(Annotated[bool, typer.Option("--unsafe-fixes", metavar="", help="Also apply the fixes of unsafe rules (they may remove or rewrite stored content; see `histmig rules`).")], False),
)
CAUSES = _bundle(
    causes=(
        Annotated[CauseChoice, typer.Option("--causes", metavar="MODE", help="inferred: causes from evidence; framework: exactly the retry values pydantic-ai 2.68's loader writes (HM103 off).")],
        CauseChoice.inferred,
    ),
)
ATTEMPTS = _bundle(
    attempts=(
        Annotated[bool, typer.Option("--attempts", metavar="", help="Fill retry.attempt of every retry part that has none by replaying the framework's retry counters (rule HM104).")],
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
            typer.Option("--max-retries", metavar="BUDGETS", help="With --attempts: the agent's retry budgets, tools=N,output=M,tool:NAME=K; they fill retry.max_retries (default: left null)."),
        ],
        None,
    ),
)
RECORDS = _bundle(
    messages_field=(Annotated[Optional[str], typer.Option("--messages-field", metavar="FIELD", help="Envelope field holding the messages (default: auto-detect).")], None),
    input_format=(Annotated[Optional[InputFormat], typer.Option("--format", metavar="FORMAT", help="Input format, json or jsonl, when the file name does not tell.")], None),
)
COLUMNS = _bundle(
    messages_column=(Annotated[Optional[str], typer.Option("--messages-column", metavar="COLUMN", help="Parquet/DuckDB: column holding the messages (default: auto-detect).")], None),
    id_column=(Annotated[Optional[str], typer.Option("--id-column", metavar="COLUMN", help="Parquet/DuckDB: column naming each record in the report (default: the row).")], None),
    table=(Annotated[Optional[str], typer.Option("--table", metavar="TABLE", help="DuckDB: table to read.")], None),
)
JOBS = _bundle(
    jobs=(
        Annotated[Optional[int], typer.Option("--jobs", "-j", min=1, metavar="N", help="Worker processes (default: the number of cores); 1 runs in this process. Output and report are the same for any N.")],
        None,
    ),
)
REJECTS = _bundle(
    rejects=(
        Annotated[
            Optional[str],
            typer.Option("--rejects", metavar="FILE", help="File for rejected records, added to if it exists, or - for stdout (default: OUTPUT.rejects.jsonl; with - as OUTPUT, rejected records go to stdout unchanged, in place)."),
        ],
        None,
    ),
)
REPORT = _bundle(
    report=(Annotated[Optional[str], typer.Option("--report", metavar="FILE", help="Write the report to this file (- for stdout) instead of stderr.")], None),
    report_format=(Annotated[ReportFormat, typer.Option("--report-format", metavar="FORMAT", help="Report format: text, json or markdown.")], ReportFormat.text),
    quiet=(Annotated[bool, typer.Option("--quiet", "-q", metavar="", help="Nothing on stderr: no report, error lines nor summary line (a --report file is still written; the exit code tells).")], False),
)

InputArg = Annotated[
    str,
    typer.Argument(
        metavar="INPUT",
        help="Archive to read: .json (one history), .jsonl/.ndjson (one record a line, maybe gzipped), "
        ".parquet (a file, a directory or a glob), .duckdb (with --table), or - for stdin.",
    ),
]


@dataclass(frozen=True)
class Shown:
    """Where the report goes (the :data:`REPORT` bundle): a ``path`` (``-``: stdout; ``None``:
    stderr), its ``format``, and ``quiet`` (nothing on stderr)."""

    path: str | None
    format: ReportFormat
    quiet: bool


_OPTION_NAMES = {"select", "ignore", "unsafe_fixes", "causes", "messages_field", "input_format", "messages_column", "id_column", "table", "jobs", "attempts", "counting", "max_retries"}
"""Bundle parameters that make the :class:`~histmig.options.Options`."""

_SHOWN_NAMES = {"report": "path", "report_format": "format", "quiet": "quiet"}
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
                values["shown"] = Shown(**{_SHOWN_NAMES[name]: values.pop(name) for name in list(values) if name in _SHOWN_NAMES})
            command(options=options, **values)

        run.__signature__ = signature.replace(parameters=own + added)  # type: ignore[attr-defined]
        return run

    return decorate


def _options(
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    unsafe_fixes: bool = False,
    causes: CauseChoice = CauseChoice.inferred,
    messages_field: str | None = None,
    input_format: InputFormat | None = None,
    messages_column: str | None = None,
    id_column: str | None = None,
    table: str | None = None,
    jobs: int | None = None,
    attempts: bool = False,
    counting: str = "current",
    max_retries: str | None = None,
) -> Options:
    options = Options(
        tuple(select or ()),
        tuple(ignore or ()),
        unsafe_fixes,
        causes.value,
        messages_field,
        input_format and input_format.value,
        messages_column,
        id_column,
        table,
        jobs,
        attempts,
        counting,
        max_retries,
    )
    options.rules  # noqa: B018 (an unknown code is a usage error before anything is read)
    return options


class _usage_errors:
    """A block whose usage errors, unreadable inputs and unwritable outputs end the command
    with one line on stderr and exit code 2."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, *_: object) -> None:
        if isinstance(exc, (UsageError, UnreadableInput, UnwritableOutput)):
            what = "cannot read " if isinstance(exc, UnreadableInput) else "cannot write " if isinstance(exc, UnwritableOutput) else ""
            stderr.print(f"histmig: {what}{exc}", markup=False)
            raise typer.Exit(EXIT_USAGE) from exc


def _show_version(value: bool) -> None:
    if value:
        print(f"histmig {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=_show_version, is_eager=True, metavar="", help="Print the version and exit.")] = False,
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


def _run(command: Callable[..., api.Result], input_path: str, *args: Any, options: Options, **kwargs: Any) -> api.Result:
    """``command(input_path, ...)`` with process tuning (:mod:`histmig.tuning`; Arrow's pool
    for a columnar input), a progress bar on a terminal, and exit 2 on a usage error."""
    keep_heap_slack()
    with _usage_errors():
        if format_of(input_path, options.format).columnar:
            use_jemalloc()
        args = (*args, options)
        if not sys.stderr.isatty():
            return command(input_path, *args, **kwargs)
        columns = (*Progress.get_default_columns()[:1], BarColumn(), DownloadColumn(), TimeRemainingColumn())
        with Progress(*columns, console=stderr, transient=True) as bar:
            return command(input_path, *args, progress=_Bar(bar, Path(input_path).name), **kwargs)


def _finish(result: api.Result, shown: Shown) -> None:
    """Render the report as ``shown`` says, print the verdict line (unless quiet) and the
    notes, and exit with the result's code."""
    _emit(result.report, shown.path, shown.format, shown.quiet)
    if not shown.quiet:
        stderr.print(result.verdict, markup=False)
    for note in result.notes:
        stderr.print(f"histmig: note: {note}", markup=False)
    raise typer.Exit(result.exit_code)


def _emit(report: Any, path: str | None, fmt: ReportFormat, quiet: bool) -> None:
    """Write ``report`` in ``fmt`` to ``path`` (``-`` is stdout), or to stderr unless
    ``quiet``, streamed rather than held whole in memory. A file is written atomically: an
    error while writing (raised as is) leaves the previous file, if any, and no other."""
    render = _renderer(fmt)
    if path is not None:
        with atomic_output(path) as out:
            stream = TextIOWrapper(out, encoding="utf-8", newline="\n")
            try:
                render(report, stream)
            finally:
                stream.detach()
    elif not quiet:
        render(report, sys.stderr)


def _renderer(fmt: ReportFormat) -> Callable[[Any, TextIO], None]:
    from importlib import import_module

    return import_module(f"histmig.report.{fmt.value}").render


@app.command(
    epilog=(
        "Examples:\n\n"
        "  histmig convert chats.jsonl chats.v2.jsonl\n\n"
        "  histmig convert chats.jsonl.gz --in-place\n\n"
        "  histmig convert history.json - --report report.json --report-format json\n\n"
        "  zcat logs.jsonl.gz | histmig convert - - --messages-field conversation > out.jsonl\n\n"
        "  histmig convert lake/chats.parquet chats.v2.parquet --messages-column messages\n\n"
        "  histmig convert chats.duckdb --table conversations --messages-column messages --in-place\n\n"
        "  histmig convert chats.jsonl chats.v2.jsonl --attempts --max-retries tools=3,output=1"
    )
)
@shared(SELECT, FIXES, CAUSES, ATTEMPTS, RECORDS, COLUMNS, JOBS, REJECTS, REPORT)
def convert(
    input_path: InputArg,
    output_path: Annotated[Optional[str], typer.Argument(metavar="OUTPUT", help="Where to write the migrated archive (same format), or - for stdout; Parquet/DuckDB: a .parquet or .jsonl file.")] = None,
    in_place: Annotated[bool, typer.Option("--in-place", metavar="", help="Replace INPUT once the migrated archive is complete (DuckDB: rewrite --table in one transaction); no OUTPUT.")] = False,
    to_table: Annotated[Optional[str], typer.Option("--to-table", metavar="TABLE", help="DuckDB: write to this new table instead of OUTPUT.")] = None,
    *,
    options: Options,
    shown: Shown,
    rejects: Optional[str],
) -> None:
    """Write the migrated archive. Unchanged records are copied byte for byte."""
    with _usage_errors():
        api.check_outputs(("OUTPUT", output_path), ("--rejects", rejects), ("--report", shown.path))
    _finish(_run(api.convert, input_path, output_path, options=options, rejects=rejects, in_place=in_place, to_table=to_table), shown)


@app.command(
    epilog=(
        "Examples:\n\n  histmig audit chats.jsonl\n\n  histmig audit chats.jsonl --report audit.md --report-format markdown\n\n"
        "  histmig audit 'lake/*.parquet' --id-column conversation_id\n\n  histmig audit chats.duckdb --table conversations\n\n"
        "  histmig audit chats.jsonl --attempts --counting writer"
    )
)
@shared(SELECT, FIXES, CAUSES, ATTEMPTS, RECORDS, COLUMNS, JOBS, REPORT)
def audit(
    input_path: InputArg,
    *,
    options: Options,
    shown: Shown,
) -> None:
    """Dry run: the same pipeline and report as convert; nothing is written but the report."""
    _report_only(api.audit, input_path, options, shown)


@app.command(
    epilog=(
        "Examples:\n\n  histmig check chats.jsonl   # in CI: exit 1 if anything needs migrating\n\n  histmig check history.json --select HM2\n\n"
        "  histmig check chats.parquet\n\n  histmig check chats.duckdb --table conversations --id-column id"
    )
)
@shared(SELECT, RECORDS, COLUMNS, JOBS, REPORT)
def check(
    input_path: InputArg,
    *,
    options: Options,
    shown: Shown,
) -> None:
    """Exit 0 when every record is current and valid, 1 when any needs a rule, fails validation or has a finding, 2 when the input is unreadable."""
    _report_only(api.check, input_path, options, shown)


def _report_only(command: Callable[..., api.Result], input_path: str, options: Options, shown: Shown) -> None:
    """``audit`` and ``check``: run ``command``, which writes nothing, and show its report."""
    with _usage_errors():
        api.check_outputs(("--report", shown.path))
    _finish(_run(command, input_path, options=options), shown)


@app.command()
def rules(code: Annotated[Optional[str], typer.Argument(metavar="CODE", help="Show the rules with this code or prefix in full, with an example (HM103, HM2).")] = None) -> None:
    """List the rules: code, summary, the framework-facts section each comes from and whether its fix is safe."""
    console = Console(highlight=False)
    with _usage_errors():
        selected = api.rules(code)
    if code is None:
        table = Table("code", "summary", "fix", "source")
        for rule in selected:
            table.add_row(rule.code, rule.summary, rule.applicability, rule.source)
        console.print(table)
        return
    for rule in selected:
        docs = rule.docs
        before = orjson.dumps(orjson.loads(docs.before), option=orjson.OPT_INDENT_2).decode()
        after = orjson.dumps(orjson.loads(docs.after), option=orjson.OPT_INDENT_2).decode()
        console.print(
            f"[bold]{rule.code}[/] ({rule.name}): {escape(rule.summary)}\n\n"
            f"What it does\n  {escape(docs.what)}\n\nWhy it matters\n  {escape(docs.why)}\n\n"
            f"Fix: {rule.applicability}\nSource: {escape(rule.source)}\n\nBefore\n{escape(before)}\n\nAfter\n{escape(after)}\n",
            soft_wrap=True,
        )


OTEL_INPUT_HELP = "Archive to read: .json (one history), .jsonl/.ndjson (one record a line, maybe gzipped), or - for stdin."
OtelQuietOpt = Annotated[bool, typer.Option("--quiet", "-q", metavar="", help="No summary line on stderr (rejected records are still named).")]


def _otel_done(result: api.Result, quiet: bool) -> None:
    for name, line in result.rejected:
        stderr.print(f"histmig: {name}: {line}", markup=False, soft_wrap=True)
    if not quiet:
        stderr.print(result.verdict, markup=False, soft_wrap=True)
    raise typer.Exit(result.exit_code)


@app.command(
    "otel",
    epilog=(
        "Examples:\n\n"
        "  histmig otel chats.jsonl chats.otel.jsonl --version 6\n\n"
        "  histmig otel history.json - --version 5 --no-include-content"
    ),
)
@shared(CAUSES, RECORDS, REJECTS)
def otel(
    input_path: Annotated[str, typer.Argument(metavar="INPUT", help=OTEL_INPUT_HELP)],
    output_path: Annotated[str, typer.Argument(metavar="OUTPUT", help="Where to write the OTel messages (same format), or - for stdout.")],
    version: Annotated[OtelVersion, typer.Option("--version", help="pydantic-ai instrumentation version (5, the framework's default, or 6, which puts tool results under role 'tool').")] = OtelVersion.v5,
    include_content: Annotated[bool, typer.Option("--include-content/--no-include-content", metavar="", help="Record prompts, completions, arguments and results.")] = True,
    quiet: OtelQuietOpt = False,
    *,
    options: Options,
    rejects: Optional[str],
) -> None:
    """Export each history (legacy parts migrated first) as the OpenTelemetry GenAI message list pydantic-ai's instrumentation records."""
    with _usage_errors():
        result = api.otel(input_path, output_path, options, version=int(version.value), include_content=include_content, rejects=rejects)
    _otel_done(result, quiet)


@app.command("otel-upgrade", epilog="Examples:\n\n  histmig otel-upgrade spans.v5.jsonl spans.v6.jsonl\n\n  cat spans.jsonl | histmig otel-upgrade - - > spans.v6.jsonl")
@shared(RECORDS, REJECTS)
def otel_upgrade(
    input_path: Annotated[str, typer.Argument(metavar="INPUT", help=OTEL_INPUT_HELP)],
    output_path: Annotated[str, typer.Argument(metavar="OUTPUT", help="Where to write the upgraded arrays (same format), or - for stdout.")],
    quiet: OtelQuietOpt = False,
    *,
    options: Options,
    rejects: Optional[str],
) -> None:
    """Move OTel message arrays exported with version 5 roles to version 6 roles; records already in version 6 roles are copied byte for byte."""
    with _usage_errors():
        result = api.otel_upgrade(input_path, output_path, options, rejects=rejects)
    _otel_done(result, quiet)


def main() -> None:
    """Console-script entry point (``histmig``): tunes the allocators (:mod:`histmig.tuning`),
    then runs the command line."""
    tune_allocators()
    app()
