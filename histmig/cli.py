"""The ``histmig`` command line: argument parsing and exit codes only (design.md "CLI
contract"); the work is done by :func:`histmig.runner.run`.

Exit codes: 0 success (``check``: every record current and valid); 1 something needs
attention (``check``: a record needs a rule or is invalid; ``convert``/``audit``: a record
was rejected); 2 usage error or unreadable input.
"""

from __future__ import annotations

import sys
from enum import Enum
from io import StringIO
from pathlib import Path
from typing import Annotated, Optional

import orjson
import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
from rich.table import Table

from histmig.parallel import default_jobs
from histmig.pipeline import Options, UnknownRule, select_rules
from histmig.report import Report
from histmig.rules import REGISTRY
from histmig.runner import input_size, run
from histmig.sources import UnreadableInput, atomic_output

EXIT_OK, EXIT_ATTENTION, EXIT_USAGE = 0, 1, 2

app = typer.Typer(
    help="Migrate stored pydantic-ai message histories: legacy retry-prompt parts become the parts they always meant.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
)
stderr = Console(stderr=True, highlight=False)


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


InputArg = Annotated[str, typer.Argument(help="Archive to read: .json (one history), .jsonl/.jsonl.gz (one record a line), or - for stdin.")]
SelectOpt = Annotated[Optional[list[str]], typer.Option("--select", help="Only these rule codes or prefixes (comma-separated or repeated).")]
IgnoreOpt = Annotated[Optional[list[str]], typer.Option("--ignore", help="Skip these rule codes or prefixes.")]
CausesOpt = Annotated[CauseChoice, typer.Option("--causes", help="inferred: causes from evidence; framework: exactly the retry values pydantic-ai 2.68's loader writes (HM103 off).")]
FieldOpt = Annotated[Optional[str], typer.Option("--messages-field", help="Envelope field holding the messages (default: auto-detect).")]
FormatOpt = Annotated[Optional[InputFormat], typer.Option("--format", help="Input format, when the file name does not tell.")]
ReportOpt = Annotated[Optional[str], typer.Option("--report", help="Write the report to this file (- for stdout) instead of stderr.")]
ReportFormatOpt = Annotated[ReportFormat, typer.Option("--report-format", help="Report format.")]
JobsOpt = Annotated[Optional[int], typer.Option("--jobs", "-j", min=1, help="Worker processes (default: the number of cores); 1 runs in this process. Output order is kept.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No report on stderr (a --report file is still written).")]


def _codes(values: list[str] | None) -> list[str]:
    return [code.strip() for value in values or () for code in value.split(",") if code.strip()]


def _options(select: list[str] | None, ignore: list[str] | None, causes: CauseChoice, messages_field: str | None, *, validate_all: bool) -> Options:
    try:
        rules = select_rules(_codes(select), _codes(ignore))
    except UnknownRule as exc:
        stderr.print(f"histmig: {exc}")
        raise typer.Exit(EXIT_USAGE) from exc
    return Options(rules=rules, causes=causes.value, messages_field=messages_field, validate_all=validate_all)


def _run(input_path: str, output_path: str | None, options: Options, fmt: InputFormat | None, rejects: str | None, jobs: int | None) -> Report:
    size = input_size(input_path)
    jobs = default_jobs() if jobs is None else jobs
    try:
        if not sys.stderr.isatty():
            return run(input_path, output_path, options, fmt=fmt and fmt.value, rejects_path=rejects, jobs=jobs)
        columns = (*Progress.get_default_columns()[:1], BarColumn(), DownloadColumn(), TimeRemainingColumn())
        with Progress(*columns, console=stderr, transient=True) as bar:
            task = bar.add_task(Path(input_path).name, total=size)
            return run(input_path, output_path, options, fmt=fmt and fmt.value, rejects_path=rejects, progress=lambda n: bar.advance(task, n), jobs=jobs)
    except UnreadableInput as exc:
        stderr.print(f"histmig: cannot read {exc}")
        raise typer.Exit(EXIT_USAGE) from exc


def _emit(report: Report, path: str | None, fmt: ReportFormat, quiet: bool) -> None:
    if path is not None:
        with atomic_output(path) as out:
            out.write(_render(report, fmt).encode())
    elif not quiet:
        if fmt is ReportFormat.text:
            report.render_text(sys.stderr)
        else:
            sys.stderr.write(_render(report, fmt))


def _render(report: Report, fmt: ReportFormat) -> str:
    if fmt is ReportFormat.json:
        return orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode() + "\n"
    if fmt is ReportFormat.markdown:
        return report.render_markdown()
    buffer = StringIO()
    report.render_text(buffer)
    return buffer.getvalue()


@app.command(
    epilog=(
        "Examples:\n\n"
        "  histmig convert chats.jsonl chats.v2.jsonl\n\n"
        "  histmig convert chats.jsonl.gz --in-place\n\n"
        "  histmig convert history.json - --report report.json --report-format json\n\n"
        "  zcat logs.jsonl.gz | histmig convert - - --messages-field conversation > out.jsonl"
    )
)
def convert(
    input_path: InputArg,
    output_path: Annotated[Optional[str], typer.Argument(help="Where to write the migrated archive (same format), or - for stdout.")] = None,
    select: SelectOpt = None,
    ignore: IgnoreOpt = None,
    causes: CausesOpt = CauseChoice.inferred,
    messages_field: FieldOpt = None,
    input_format: FormatOpt = None,
    rejects: Annotated[Optional[str], typer.Option("--rejects", help="File for rejected records (default: OUTPUT.rejects.jsonl).")] = None,
    in_place: Annotated[bool, typer.Option("--in-place", help="Replace INPUT with the migrated archive once it is complete (no OUTPUT).")] = False,
    report: ReportOpt = None,
    report_format: ReportFormatOpt = ReportFormat.text,
    quiet: QuietOpt = False,
    jobs: JobsOpt = None,
) -> None:
    """Write the migrated archive. Unchanged records are copied byte for byte."""
    if in_place == (output_path is not None) or (in_place and input_path == "-"):
        stderr.print("histmig: give OUTPUT, or --in-place with a file INPUT (not both)")
        raise typer.Exit(EXIT_USAGE)
    output_path = input_path if in_place else output_path
    options = _options(select, ignore, causes, messages_field, validate_all=False)
    result = _run(input_path, output_path, options, input_format, rejects, jobs)
    _emit(result, report, report_format, quiet)
    raise typer.Exit(EXIT_ATTENTION if result.failed else EXIT_OK)


@app.command(epilog="Examples:\n\n  histmig audit chats.jsonl\n\n  histmig audit chats.jsonl --report audit.md --report-format markdown")
def audit(
    input_path: InputArg,
    select: SelectOpt = None,
    ignore: IgnoreOpt = None,
    causes: CausesOpt = CauseChoice.inferred,
    messages_field: FieldOpt = None,
    input_format: FormatOpt = None,
    report: ReportOpt = None,
    report_format: ReportFormatOpt = ReportFormat.text,
    quiet: QuietOpt = False,
    jobs: JobsOpt = None,
) -> None:
    """Dry run: the same pipeline and report as convert; nothing is written but the report."""
    options = _options(select, ignore, causes, messages_field, validate_all=False)
    result = _run(input_path, None, options, input_format, None, jobs)
    _emit(result, report, report_format, quiet)
    raise typer.Exit(EXIT_ATTENTION if result.failed else EXIT_OK)


@app.command(epilog="Examples:\n\n  histmig check chats.jsonl          # in CI: exit 1 when anything needs migrating\n\n  histmig check history.json --select HM2")
def check(
    input_path: InputArg,
    select: SelectOpt = None,
    ignore: IgnoreOpt = None,
    messages_field: FieldOpt = None,
    input_format: FormatOpt = None,
    report: ReportOpt = None,
    report_format: ReportFormatOpt = ReportFormat.text,
    quiet: QuietOpt = False,
    jobs: JobsOpt = None,
) -> None:
    """Exit 0 when every record is current and valid, 1 when any needs a rule or fails validation, 2 when the input is unreadable."""
    options = _options(select, ignore, CauseChoice.inferred, messages_field, validate_all=True)
    result = _run(input_path, None, options, input_format, None, jobs)
    _emit(result, report, report_format, quiet)
    raise typer.Exit(EXIT_ATTENTION if result.needs_attention else EXIT_OK)


@app.command()
def rules(code: Annotated[Optional[str], typer.Argument(help="Show one rule in full.")] = None) -> None:
    """List the rules: code, summary and the framework-facts section each comes from."""
    console = Console(highlight=False)
    selected = [rule for rule in sorted(REGISTRY, key=lambda r: r.code) if code is None or rule.code == code.upper()]
    if not selected:
        stderr.print(f"histmig: unknown rule code {code!r}")
        raise typer.Exit(EXIT_USAGE)
    if code is not None:
        rule = selected[0]
        console.print(f"[bold]{rule.code}[/]: {rule.summary}\nsource: {rule.source}\n\n{rule.apply.__doc__ or ''}")
        return
    table = Table("code", "summary", "source")
    for rule in selected:
        table.add_row(rule.code, rule.summary, rule.source)
    console.print(table)


def main() -> None:
    """Console-script entry point (``histmig``)."""
    app()
