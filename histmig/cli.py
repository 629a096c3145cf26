"""The ``histmig`` command line: a thin shell over :mod:`histmig.api` (design.md "CLI
contract"). Every option is declared once, in :mod:`histmig.options`, and added to each
command that takes it by :func:`takes` (sqlite-utils' shared options, applied by decorator);
this module parses, calls the API, renders the report, prints the verdict line and exits.

Exit codes: 0 success (``check``: every record current and valid); 1 something needs
attention (``check``: a record needs a rule, is invalid or has a finding; ``convert``/
``audit``: a record was rejected or the input ended early); 2 usage error or unreadable input.
"""

from __future__ import annotations

import errno
import functools
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from functools import partial
from io import TextIOWrapper
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, TextIO, get_args, get_origin

import orjson
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
from rich.table import Table
from typer.core import TyperArgument, TyperCommand, TyperGroup

from histmig import __version__, api, interrupt, redact
from histmig.errors import UnreadableInput, UnwritableOutput, UsageError
from histmig.options import FIELDS, IMPLIED, Flag, Options, flags, flags_of
from histmig.report import Detail, Rendering
from histmig.report.escape import terminal
from histmig.schema.releases import NEWEST
from histmig.sources.atomic import atomic_output
from histmig.tuning import tune_allocators

EXIT_OK, EXIT_USAGE = 0, 2
"""The exit codes the command line sets itself; the others come from :attr:`histmig.api.Result.exit_code`."""


class _PlainArgument(TyperArgument):
    """An argument shown by its metavar alone (``INPUT...``, ``[CODE]``): typer 0.29 shows a
    required one as ``{INPUT}`` in the usage line and adds its Python type (``<str>``)."""

    def _usage_display_name(self) -> str:
        return self.display_name_raw if self.required else f"[{self.display_name_raw}]"

    def display_type_rich(self, ctx: typer.Context) -> str | None:  # type: ignore[override]  # typer's own Context
        return None


class _Command(TyperCommand):
    """A command whose help shows plain metavars: its arguments are :class:`_PlainArgument` objects
    and its help option (``-h``, ``--help``) shows no ``<bool>``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if type(param) is TyperArgument:
                param.__class__ = _PlainArgument

    def get_help_option(self, ctx: typer.Context) -> Any:  # type: ignore[override]  # typer's own Context
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option


class _Group(TyperGroup):
    """The ``histmig`` group: every command is a :class:`_Command`, and an error of the
    command line itself (an unknown option, a bad value, a missing argument) is one line on
    stderr, pointing at the command's help, with exit code 2."""

    def get_help_option(self, ctx: typer.Context) -> Any:  # type: ignore[override]  # typer's own Context
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, windows_expand_args, **extra)
        self.interrupted = interrupt.SAID  # what an interrupt says, unless the input tells more
        try:
            with interrupt.run():
                code = super().main(
                    args,
                    prog_name,
                    complete_var,
                    standalone_mode=False,
                    windows_expand_args=windows_expand_args,
                    **extra,
                )
        except (
            typer.TyperException
        ) as exc:  # a command-line error (typer tells "no arguments: the help was shown" by its name too)
            if type(exc).__name__ == "NoArgsIsHelpError":
                sys.exit(exc.exit_code)
            ctx = getattr(exc, "ctx", None)
            hint = f" (see {ctx.command_path} -h)" if ctx is not None else ""
            say(f"histmig: {exc.format_message().rstrip('.')}{hint}")
            sys.exit(exc.exit_code)
        except typer.Abort:
            stderr.print("Aborted!", markup=False)
            sys.exit(1)
        if code == interrupt.EXIT_INTERRUPTED:  # typer's word for a KeyboardInterrupt it caught
            say(self.interrupted)
        sys.exit(code if isinstance(code, int) else EXIT_OK)

    def invoke(self, ctx: Any) -> Any:
        """Run the command; an interrupt (Ctrl-C) exits 130, said by :meth:`main` in one line,
        with what it left as it was when the input says (:class:`~histmig.interrupt.Interrupted`)."""
        try:
            return super().invoke(ctx)
        except interrupt.Interrupted as exc:
            self.interrupted = f"{interrupt.SAID}; {exc}"
            raise


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
    pretty_exceptions_show_locals=False,  # a crash's traceback must not show a location's password
    context_settings={"help_option_names": ["-h", "--help"]},
)
command = partial(app.command, cls=_Command)
"""``app.command`` making a :class:`_Command`."""
stderr = Console(
    stderr=True, highlight=False, soft_wrap=True, emoji=False
)  # no :name: shortcodes: a path:table: is not an emoji


def say(line: str) -> None:
    """Print ``line`` on stderr as one line of plain text: no markup, and what a path, an id
    or a driver's message holds shown inert (:func:`histmig.report.escape.terminal`)."""
    stderr.print(terminal(line), markup=False, soft_wrap=True)


def _choice(*values: str) -> Callable[[Any], Any]:
    """A callback accepting one of ``values``, and refusing anything else in plain words
    (``choose text, json or markdown, not 'xml'``)."""
    words = ", ".join(values[:-1]) + f" or {values[-1]}"

    def check(value: Any) -> Any:
        if value is not None and str(value) not in values:
            raise typer.BadParameter(f"choose {words}, not {str(value)!r}")
        return value

    return check


def _annotation(flag: Flag) -> Any:
    """The typer annotation of ``flag``: its type (a tuple of codes is a repeated option,
    a union with ``None`` an optional value, a ``Literal`` a string) and its typer option."""
    kind = flag.type
    if kind == tuple[str, ...]:
        kind = Optional[list[str]]
    elif get_origin(kind) is Literal:
        kind = str
    elif type(None) in get_args(kind):
        kind = Optional[next(arg for arg in get_args(kind) if arg is not type(None))]
    callback = _choice(*flag.choices) if flag.choices else None
    return Annotated[kind, typer.Option(*flag.flags, metavar=flag.metavar, help=flag.help, callback=callback)]


@dataclass(frozen=True)
class Shown:
    """Where the report goes, from the report options (:attr:`~histmig.options.Options.PARAMETERS`
    of ``about`` ``"report"``): a path (``report``; ``-``: stdout; ``None``: stderr), its
    format (:attr:`format`), ``quiet`` (nothing on stderr), and how it is rendered
    (:class:`~histmig.report.Rendering`: ``report_detail``, and the start time unless
    ``no_timestamp``)."""

    report: str | None = None
    report_format: str | None = None
    quiet: bool = False
    report_detail: Detail = "auto"
    no_timestamp: bool = False
    known: tuple[Any, ...] = ()  # the entries of a --baseline, which the GitHub report leaves out

    @property
    def format(self) -> str:
        """The report format: ``report_format``, else the one the ``report`` file's name says
        (``.json``: json, ``.md``: markdown), else text."""
        if self.report_format is not None:
            return self.report_format
        name = (self.report or "").lower()
        return "json" if name.endswith(".json") else "markdown" if name.endswith(".md") else "text"

    @property
    def rendering(self) -> Rendering:
        return Rendering(self.report_detail, not self.no_timestamp, self.known)


_SHOWN = frozenset(f.name for f in fields(Shown))


def takes(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Add every option the command ``name`` takes (:func:`histmig.options.flags_of`, each
    declared once) to a command's signature, after its own parameters, and call it with
    ``options``, the :class:`~histmig.options.Options` of those that are its fields, with
    ``shown``, the :class:`Shown` of the report options, when its signature asks for it, and
    with every other option by name (the API function's keywords). Exits 2 for options that
    do not fit (an unknown rule code)."""

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(command, eval_str=True)
        declared = flags_of(name)
        added = [
            inspect.Parameter(
                flag.name,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=_annotation(flag),
                default=None if flag.default == () else flag.default,
            )
            for flag in declared
        ]
        own = [
            param
            for param in signature.parameters.values()
            if param.name not in {"options", "shown", *(flag.name for flag in declared)}
            and param.kind is not inspect.Parameter.VAR_KEYWORD
        ]
        shows = "shown" in signature.parameters

        @functools.wraps(command)
        def run(**values: Any) -> None:
            given: dict[str, Any] = {
                key: tuple(value or ()) if key in _REPEATED else value
                for key, value in [(key, values.pop(key)) for key in list(values) if key in FIELDS]
            }
            with _usage_errors():
                options = Options(**{**IMPLIED.get(name, {}), **given})
                options.rules  # noqa: B018 (an unknown code is a usage error before anything is read)
            if shows:
                values["shown"] = Shown(**{key: values.pop(key) for key in list(values) if key in _SHOWN})
            command(options=options, **values)

        run.__signature__ = signature.replace(parameters=own + added)  # type: ignore[attr-defined]  # read by typer
        return run

    return decorate


_REPEATED = frozenset(flag.name for flag in flags() if flag.default == ())
"""The options given one by one or repeated (rule codes): a list on the command line, a tuple
in :class:`~histmig.options.Options`."""

INPUT_HELP = (
    "Archives to read: .json (one history), .jsonl/.ndjson (one record a line, maybe gzipped), .parquet, "
    ".duckdb or .sqlite (with --table), a postgresql:// URL (with --table), - for stdin, a directory (its .json, "
    ".jsonl, .ndjson and "
    ".parquet files) or a quoted glob; several may be given."
)
InputArg = Annotated[list[str], typer.Argument(metavar="INPUT...", help=INPUT_HELP)]


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
            say(_one_line(f"histmig: {what}{redact.message(str(exc))}"))
            raise typer.Exit(EXIT_USAGE) from exc
        if (
            isinstance(exc, OSError) and exc.errno != errno.EPIPE
        ):  # a closed stdout ends the run silently, exit 1, as click does
            where = f"{redact.location(str(exc.filename))}: " if exc.filename else ""
            say(_one_line(f"histmig: {where}{redact.message(str(exc.strerror or exc))}"))
            raise typer.Exit(EXIT_USAGE) from exc


def _one_line(text: str) -> str:
    """``text`` on one line: a driver's message of several (libpq's "Is the server running
    ...?") joined by ``; ``."""
    return "; ".join(line.strip() for line in text.split("\n") if line.strip())


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


def _run(command: Callable[..., api.Result], inputs: list[str], *args: Any, **kwargs: Any) -> api.Result:
    """``command(inputs, ...)`` tuned as a command line's run is (``tune``: :mod:`histmig.tuning`),
    with a progress bar on a terminal, and exit 2 on a usage error."""
    with _usage_errors():
        if not sys.stderr.isatty():
            return command(inputs, *args, tune=True, **kwargs)
        columns = (*Progress.get_default_columns()[:1], BarColumn(), DownloadColumn(), TimeRemainingColumn())
        name = Path(redact.location(inputs[0])).name if len(inputs) == 1 else f"{len(inputs)} inputs"
        with Progress(*columns, console=stderr, transient=True) as bar:
            return command(inputs, *args, tune=True, progress=_Bar(bar, name), **kwargs)


def _finish(result: api.Result, shown: Shown) -> None:
    """Render the report as ``shown`` says (the GitHub report without the entries of a
    ``--baseline``, and the Markdown report added to ``$GITHUB_STEP_SUMMARY`` when that is
    set), print the warnings, the verdict line (unless quiet) and the notes, and exit with the
    result's code."""
    if result.judged is not None:
        shown = replace(shown, known=tuple(result.baseline or ()))
    with _usage_errors():
        _emit(result.report, shown)
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if shown.format == "github" and summary:
            with open(summary, "a", encoding="utf-8", newline="\n") as stream:
                _renderer("markdown")(result.report, stream, shown.rendering)
    _warn(result)
    if not shown.quiet:
        say(result.verdict)
    for note in result.notes:
        say(f"histmig: note: {note}")
    raise typer.Exit(result.exit_code)


def _warn(result: api.Result) -> None:
    """Print the result's warnings, one line each (``-q`` does not silence them)."""
    for warning in result.warnings:
        say(f"histmig: warning: {warning}")


def _emit(report: Any, shown: Shown) -> None:
    """Write ``report`` as ``shown`` says: to its path (``-`` is stdout), or to stderr unless
    quiet, streamed rather than held whole in memory. A file is written atomically: an error
    while writing (raised as is) leaves the previous file, if any, and no other."""
    render = _renderer(shown.format)
    if shown.report is not None:
        with atomic_output(shown.report) as out:
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
@takes("convert")
def convert(
    paths: Annotated[
        list[str],
        typer.Argument(
            metavar="INPUT... [OUTPUT]",
            help=INPUT_HELP
            + " The last is OUTPUT, unless --in-place or --to-table: a file (its name tells the format: the "
            "input's own, or for Parquet and databases .parquet or .jsonl), - for stdout, or a directory (for "
            "several inputs, a directory or a glob: each written there under its own name; --engine spark: a "
            "directory of Parquet files).",
        ),
    ],
    *,
    options: Options,
    shown: Shown,
    **given: Any,
) -> None:
    """Write the migrated archive. Unchanged records are copied byte for byte."""
    with_output = not given["in_place"] and given["to_table"] is None and len(paths) > 1
    inputs, output = (paths[:-1], paths[-1]) if with_output else (paths, None)
    if output is None and not given["in_place"] and given["to_table"] is None:
        with _usage_errors():
            raise UsageError("give OUTPUT after INPUT, or --in-place, or --to-table for a database input")
    _finish(_run(api.convert, inputs, output, options, report=shown.report, **given), shown)


@command(
    epilog=(
        "Examples:\n\n"
        "  histmig audit chats.jsonl\n\n"
        "  histmig audit chats.jsonl --report audit.md --report-format markdown\n\n"
        "  histmig audit 'lake/*.parquet' --id-column conversation_id\n\n"
        "  histmig audit chats.duckdb --table conversations\n\n"
        "  histmig audit postgresql://app@db/app --table conversations --schema chat\n\n"
        "  histmig audit chats.v2.jsonl --target 2.0.0   # what a rollback to 2.0.0 would rewrite and lose\n\n"
        "  histmig audit chats.jsonl --attempts --counting writer"
    )
)
@takes("audit")
def audit(
    input_path: InputArg,
    *,
    options: Options,
    shown: Shown,
    clean: bool,
) -> None:
    """Dry run: the same pipeline and report as convert; nothing is written but the report."""
    _finish(_run(api.audit, input_path, options, report=shown.report, clean=clean), shown)


@command(
    help="Exit 0 when every record is current and valid (with --reader: that release loads it and no rule would "
    "rewrite it), 1 when any needs a rule, fails validation or has a finding (with --strict: or holds a part of "
    "an unknown part_kind), 2 when the input is unreadable.",
    epilog=(
        "Examples:\n\n  histmig check chats.jsonl   # in CI: exit 1 if anything needs migrating\n\n"
        "  histmig check history.json --select HM2\n\n"
        "  histmig check chats.parquet\n\n  histmig check chats.duckdb --table conversations --id-column id\n\n"
        "  histmig check chats.sqlite --table messages\n\n"
        "  histmig check chats.jsonl --reader 2.0.0   # before upgrading: can the oldest service still read "
        "everything?\n\n"
        "  histmig check chats.jsonl --write-baseline histmig-baseline.json   # today's findings, accepted\n\n"
        "  histmig check chats.jsonl --baseline histmig-baseline.json --report - --report-format github   "
        "# in CI: fail on new ones only"
    ),
)
@takes("check")
def check(
    input_path: InputArg,
    *,
    options: Options,
    shown: Shown,
    strict: bool,
    clean: bool,
    baseline: str | None,
    write_baseline: str | None,
) -> None:
    _finish(
        _run(
            api.check,
            input_path,
            options,
            strict=strict,
            baseline=baseline,
            write_baseline=write_baseline,
            report=shown.report,
            clean=clean,
        ),
        shown,
    )


@command(
    help="List the rules: code, summary and its fix (safe, unsafe, or none: it only reports); with CODE, a rule "
    "in full (what it does, why, where it comes from in pydantic-ai, an example)."
)
def rules(
    code: Annotated[
        Optional[str],
        typer.Argument(
            metavar="CODE", help="Show the rules with this code or prefix in full, with an example (HM103, HM2)."
        ),
    ] = None,
) -> None:
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
        if docs.severity:
            severity += f"Severity\n  {escape(docs.severity)}\n"
        for_target = f" (--target {docs.target})" if docs.target else ""
        example = (
            f"Before{for_target}\n{escape(_indented(docs.before))}\n\nAfter\n{escape(_indented(docs.after))}"
            if docs.after
            else f"Example (what it finds)\n{escape(_indented(docs.before))}"
        )
        console.print(
            f"[bold]{rule.code}[/] ({rule.name}): {escape(rule.summary)}\n\n"
            f"What it does\n  {escape(docs.what)}\n\nWhy it matters\n  {escape(docs.why)}\n\n"
            f"{fix}\n{severity}Runs for targets: {rule.target_text} (--target; default {NEWEST})\nSource: "
            f"{escape(rule.source)}\n\n{example}\n",
            soft_wrap=True,
        )


def _indented(text: str) -> str:
    """JSON ``text`` indented by two spaces a level."""
    return orjson.dumps(orjson.loads(text), option=orjson.OPT_INDENT_2).decode()


OTEL_INPUT_HELP = (
    "Archives to read: .json (one history), .jsonl/.ndjson (one record a line, maybe gzipped), - for stdin, or a "
    "directory or quoted glob of them; "
    "the last is OUTPUT: a file, - for stdout, or a directory for several inputs."
)


def _otel_done(result: api.Result, quiet: bool) -> None:
    for name, line in result.rejected:
        say(f"histmig: {name}: {line}")
    _warn(result)
    if not quiet:
        say(result.verdict)
    for note in result.notes:  # a --conversation that no record holds, among others
        say(f"histmig: note: {note}")
    raise typer.Exit(result.exit_code)


@command(
    "otel",
    help="Export each history (legacy parts migrated first) as the "
    "OpenTelemetry GenAI message list pydantic-ai's instrumentation records.",
    epilog=(
        "Examples:\n\n"
        "  histmig otel chats.jsonl chats.otel.jsonl --version 6\n\n"
        "  histmig otel history.json - --version 5 --no-include-content"
    ),
)
@takes("otel")
def otel(
    paths: Annotated[list[str], typer.Argument(metavar="INPUT... OUTPUT", help=OTEL_INPUT_HELP)],
    *,
    options: Options,
    quiet: bool,
    **given: Any,
) -> None:
    with _usage_errors():
        inputs, output_path = _inputs_and_output(paths)
        result = api.otel(inputs, output_path, options, **given)
    _otel_done(result, quiet)


@command(
    "otel-upgrade",
    help="Move OTel message arrays exported with version 5 roles to version 6 roles; records already in version 6 "
    "roles are copied byte for byte.",
    epilog="Examples:\n\n  histmig otel-upgrade spans.v5.jsonl spans.v6.jsonl\n\n"
    "  cat spans.jsonl | histmig otel-upgrade - - > spans.v6.jsonl",
)
@takes("otel-upgrade")
def otel_upgrade(
    paths: Annotated[list[str], typer.Argument(metavar="INPUT... OUTPUT", help=OTEL_INPUT_HELP)],
    *,
    options: Options,
    quiet: bool,
    **given: Any,
) -> None:
    with _usage_errors():
        inputs, output_path = _inputs_and_output(paths)
        result = api.otel_upgrade(inputs, output_path, options, **given)
    _otel_done(result, quiet)


@command(
    "from-otel",
    help="Rebuild the stored histories of pydantic-ai agent runs from their OpenTelemetry spans "
    "(instrumentation versions 2-6): one JSONL line a conversation, with a report row a run.",
    epilog="Examples:\n\n  histmig from-otel traces.jsonl histories.jsonl\n\n"
    "  histmig from-otel spans/*.jsonl.gz - --runs all --report report.jsonl",
)
@takes("from-otel")
def from_otel(
    paths: Annotated[
        list[str],
        typer.Argument(
            metavar="SPANS... OUTPUT",
            help="Span files an OpenTelemetry Collector's file exporter wrote (OTLP JSON, one export a line, maybe "
            "gzipped), - for stdin; the last is OUTPUT, a JSONL file or - for stdout.",
        ),
    ],
    *,
    options: Options,
    quiet: bool,
    **given: Any,
) -> None:
    with _usage_errors():
        inputs, output_path = _inputs_and_output(paths)
        result = api.from_otel(inputs, output_path, max_retries=options.max_retries, **given)
    for line in result.rejected:
        say(f"histmig: {line}")
    if not quiet:
        say(result.verdict)
    raise typer.Exit(result.exit_code)


def _inputs_and_output(paths: list[str]) -> tuple[list[str], str]:
    """The INPUTs and the OUTPUT of an export: every argument but the last, and the last."""
    if len(paths) < 2:
        raise UsageError("give INPUT and OUTPUT (- for stdout)")
    return paths[:-1], paths[-1]


def main() -> None:
    """Run the command line (:mod:`histmig.__main__` calls it once it is imported): tunes the
    allocators (:mod:`histmig.tuning`), then runs the command (Ctrl-C: :meth:`_Group.main`)."""
    tune_allocators()
    app()
