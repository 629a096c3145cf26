"""``histmig from-otel``: histories back from span exports (:mod:`histmig.otel.spans`,
:mod:`histmig.otel.history`).

Unlike the record loop of ``convert``, a history is made of many spans, spread over lines and
files (a conversation's runs are separate traces), so every input is read first and the
conversations are put together from all of them. The output is JSONL, one history a line, in the
order of each conversation's first run (then its span id): same input, same bytes.

Nothing is dropped: a line that cannot be read, or a run span that cannot be rebuilt (no
messages, another framework's attributes), goes to the rejects file with its file, line, span id
and reason, and its line as it was read; a run recorded without content gets a report row saying
what its spans recorded, and no history.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from histmig.errors import RebuildError, SpanError, UsageError
from histmig.options import Options
from histmig.otel.history import (
    RunSpans,
    conversation_messages,
    group_runs,
    rebuild,
    recorded_content,
    run_fields,
    summary,
)
from histmig.otel.spans import Span, is_logfire_export, parse_export, parse_logfire_row, read_lines
from histmig.run.paths import check_apart
from histmig.sources.atomic import atomic_output, check_writable, input_stream
from histmig.sources.base import Destination

Runs = Literal["last", "all"]
RUNS_CHOICES: tuple[Runs, ...] = ("last", "all")


@dataclass
class Restored:
    """What ``from-otel`` did: ``written`` histories, ``rows`` (one report row a run looked at:
    its ids, ``status`` ``written``/``no-content``/``rejected``, where its messages came from,
    what was ``derived`` and ``unknowable``), ``rejected`` lines (``where: reason``, as the
    command line prints them) and the paths it wrote."""

    written: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    no_content: int = 0
    output: str = "-"
    rejects: str | None = None
    report: str | None = None

    @property
    def exit_code(self) -> int:
        """0 when every run gave a history; 1 when a line or span was rejected or a run was
        recorded without content."""
        return 1 if self.rejected or self.no_content else 0

    @property
    def verdict(self) -> str:
        """The one summary line: histories written, runs without content, rejects."""
        said = "history" if self.written == 1 else "histories"
        parts = [f"histmig from-otel: {self.written} {said} written to {self.output}"]
        if self.no_content:
            parts.append(f"{self.no_content} run(s) recorded without content (see the report)")
        if self.rejected:
            parts.append(f"{len(self.rejected)} rejected to {self.rejects or 'nowhere (stdout output)'}")
        return "; ".join(parts)


def _default_beside(output: str, suffix: str) -> str | None:
    return None if output == "-" else f"{output}{suffix}"


def _read(path: str) -> Iterator[tuple[int, bytes, list[Span] | _Unreadable]]:
    """Each line of an OTLP JSON lines file, or each row of a Logfire export (a file that is one
    JSON document ``{"columns", "rows"}``), with its number, its bytes and its spans or why it
    cannot be read. Raises :class:`~histmig.errors.UnreadableInput` when ``path`` cannot be opened."""
    with input_stream(path) as stream:
        data = stream.read()
    try:
        whole = orjson.loads(data)
    except orjson.JSONDecodeError:
        whole = None
    if is_logfire_export(whole):
        for number, row in enumerate(whole["rows"], start=1):
            raw = orjson.dumps(row)
            try:
                yield number, raw, [parse_logfire_row(row, number)]
            except SpanError as exc:
                yield number, raw, _Unreadable(str(exc), "row")
        return
    for number, raw in read_lines(io.BytesIO(data)):
        try:
            yield number, raw, parse_export(raw, number)
        except SpanError as exc:
            yield number, raw, _Unreadable(str(exc), "line")


class _Unreadable(SpanError):
    """A line or row that cannot be read, and which of the two it is."""

    def __init__(self, message: str, unit: str) -> None:
        super().__init__(message)
        self.unit = unit


def _reject(
    path: str, line: int, raw: bytes, reason: str, span: Span | None = None, unit: str = "line"
) -> dict[str, Any]:
    row: dict[str, Any] = {"file": path, (span.unit if span is not None else unit): line}
    if span is not None:
        row.update(trace_id=span.trace_id, span_id=span.span_id, span_name=span.name)
    row["error"] = reason
    row["raw"] = raw.decode("utf-8", errors="replace").rstrip("\n")
    return row


def _ids(run: RunSpans) -> dict[str, Any]:
    return {
        "trace_id": run.run.trace_id,
        "span_id": run.run.span_id,
        "conversation_id": run.conversation_id,
        "run_id": run.run_id,
    }


def from_otel(
    inputs: Sequence[str],
    output: str,
    *,
    runs: str = "last",
    rejects: str | None = None,
    report: str | None = None,
    max_retries: str | None = None,
) -> Restored:
    """Rebuild every pydantic-ai conversation in the span files ``inputs`` (OTLP JSON lines,
    gzipped or not, ``-`` for stdin) and write it to ``output`` (JSONL, ``-`` for stdout): one
    line ``{"trace_id", "span_id", "conversation_id", "run_id", "attributes", "messages"}`` a
    history, ``attributes`` the run span's own (``final_result``, ``model_name``, usage…) and
    ``messages`` in the stored format (:func:`histmig.otel.history.rebuild`). ``runs``:
    ``"last"`` each conversation once, from its last run; ``"all"`` one history a run.
    ``rejects`` (default ``OUTPUT.rejects.jsonl``) gets one line a rejected line or span;
    ``report`` (default ``OUTPUT.report.jsonl``) one row a run looked at. Both are replaced.
    ``max_retries``: the agent's retry budgets (``tools=N,output=M,tool:NAME=K``, as
    ``convert --max-retries`` takes them), which fill ``retry.max_retries`` of every retry whose
    attempt is counted (:func:`histmig.otel.history.rebuild`); ``None``: left null.

    Raises :class:`UsageError` for an unknown ``runs``, ``max_retries`` that does not parse, or
    a written path that is an input or another output, :class:`~histmig.errors.UnreadableInput`
    for an input that cannot be opened and :class:`~histmig.errors.UnwritableOutput` for an
    output that cannot be written (both before anything is written)."""
    if runs not in RUNS_CHOICES:
        raise UsageError(f"--runs must be one of {', '.join(RUNS_CHOICES)}, not {runs!r}")
    budgets = Options(attempts=True, max_retries=max_retries).budgets
    rejects = rejects if rejects is not None else _default_beside(output, ".rejects.jsonl")
    report = report if report is not None else _default_beside(output, ".report.jsonl")
    check_apart([(path, Destination(output, rejects)) for path in inputs], rejects=rejects, report=report)
    for path in (output, rejects, report):
        if path is not None:
            check_writable(path)
    restored = Restored(output=output, rejects=rejects, report=report)
    reject_rows: list[dict[str, Any]] = []
    spans: list[Span] = []
    lines: dict[tuple[str, int], bytes] = {}
    origin: dict[tuple[str, str], str] = {}
    for path in inputs:
        for number, raw, read in _read(path):
            if isinstance(read, _Unreadable):
                reject_rows.append(_reject(path, number, raw, str(read), unit=read.unit))
                continue
            lines[(path, number)] = raw
            for span in read:
                origin[(span.trace_id, span.span_id)] = path
            spans.extend(read)
    grouped, foreign = group_runs(spans)
    for span in foreign:
        path = origin[(span.trace_id, span.span_id)]
        reason = (
            f"{span.place}: span {span.span_id} ({span.name}): an agent run span "
            "without pydantic-ai's attributes (another framework's)"
        )
        reject_rows.append(_reject(path, span.line, lines[(path, span.line)], reason, span))
    conversations: dict[str, list[RunSpans]] = {}
    for run in grouped:
        conversations.setdefault(run.conversation_id, []).append(run)
    histories: list[bytes] = []
    for conversation in conversations.values():
        ends = range(len(conversation)) if runs == "all" else [len(conversation) - 1]
        for end in ends:
            run = conversation[end]
            row = _ids(run)
            path = origin[(run.run.trace_id, run.run.span_id)]
            try:
                otel, source = conversation_messages(run)
                if not recorded_content(otel):
                    restored.no_content += 1
                    restored.rows.append({**row, "status": "no-content", "source": source, "recorded": summary(otel)})
                    continue
                rebuilt = rebuild(conversation[: end + 1], budgets)
            except RebuildError as exc:
                reason = f"{run.run.place}: {exc}"
                reject_rows.append(_reject(path, run.run.line, lines[(path, run.run.line)], reason, run.run))
                restored.rows.append({**row, "status": "rejected", "error": str(exc)})
                continue
            record = {**row, "attributes": run_fields(run), "messages": rebuilt.messages}
            histories.append(orjson.dumps(record) + b"\n")
            restored.rows.append(
                {
                    **row,
                    "status": "written",
                    "source": source,
                    # a run that raised: what capture_run_messages() held after its last model
                    # request (the request it was building) is on no span
                    "raised": run.run.status_code == 2,
                    "messages": len(rebuilt.messages),
                    "derived": rebuilt.derived,
                    "unknowable": rebuilt.unknowable,
                }
            )
    restored.written = len(histories)
    restored.rejected = [f"{row['file']}: {row['error']}" for row in reject_rows]
    with atomic_output(output) as out:
        out.writelines(histories)
    if rejects is not None and reject_rows:
        with atomic_output(rejects) as out:
            out.writelines(orjson.dumps(row) + b"\n" for row in reject_rows)
    if report is not None:
        with atomic_output(report) as out:
            out.writelines(orjson.dumps(row) + b"\n" for row in restored.rows)
    return restored
