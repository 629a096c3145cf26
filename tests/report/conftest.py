"""A report of the corpus and three bad lines, rendered, with spill batches of several sizes."""

from __future__ import annotations

import io
from importlib import import_module
from pathlib import Path

import orjson
import pytest

from histmig import api
from histmig.options import Options
from histmig.records import Outcome, Record
from histmig.report import Rendering, Report, rows
from tests.conftest import CORPUS

RETRY = {"part_kind": "retry-prompt", "content": "x", "tool_name": None}
FUTURE = orjson.dumps(
    {
        "id": "f\x1b[1m",
        "messages": [{"kind": "request", "parts": [{"part_kind": "hologram", "content": "later"}, RETRY]}],
    }
)
BAD_LINES = [b"{not json", FUTURE, b'{"id": "b", "note": 42}']
ORPHAN = (
    orjson.dumps(
        {
            "messages": [
                {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "go"}]},
                {
                    "kind": "response",
                    "parts": [{"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": "c"}],
                },
                {
                    "kind": "request",
                    "parts": [
                        {"part_kind": "tool-return", "tool_name": "t", "content": "ok", "tool_call_id": "c"},
                        {"part_kind": "tool-return", "tool_name": "t", "content": "late", "tool_call_id": "gone"},
                    ],
                },
            ]
        }
    )
    + b"\n"
)
"""A history whose second result answers no call (HM401 drops it with ``--unsafe-fixes``)."""
UNKNOWN_TOOL = orjson.loads((CORPUS / "all.jsonl").read_bytes().splitlines()[5])["messages"]
api.migrate(UNKNOWN_TOOL)
REBOUND_ID = UNKNOWN_TOOL[2]["parts"][0]["tool_call_id"]
"""The id HM103 binds line 6's unknown-tool retry to (the call's id HM201 derived)."""
CHANGE = f"[v0.0.20/c_unknown_tool]: messages[2].parts[0] HM103 retry-prompt -> tool-return cause=unknown_tool tool_call_id={REBOUND_ID} evidence=unknown-tool+preceding-call (template)"


def legacy_report(tmp_path: Path) -> tuple[Report, str]:
    """The report of the corpus's 212 histories then three bad lines (one rejected as invalid
    JSON, one with an unknown part kind, one without messages), and the input's path."""
    source = tmp_path / "in.jsonl"
    source.write_bytes((CORPUS / "all.jsonl").read_bytes() + b"\n".join(BAD_LINES) + b"\n")
    return api.audit(str(source)).report, str(source)


def rendered(report: Report, renderer: str, how: Rendering = Rendering()) -> str:
    """``report`` as the renderer ``histmig.report.<renderer>`` writes it."""
    stream = io.StringIO()
    import_module(f"histmig.report.{renderer}").render(report, stream, how)
    return stream.getvalue()


@pytest.fixture(params=[rows.ROWS_PER_BATCH, 7], ids=["default-batches", "batches-of-7"])
def batch_size(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """Spill batches of the default size (one batch here) and of 7 rows (many batches)."""
    monkeypatch.setattr(rows, "ROWS_PER_BATCH", request.param)
    return request.param


def skipped_report() -> Report:
    """A report of two migrated rows of a table, one of them then skipped (another client
    wrote it after it was read)."""
    report = Report()
    for key in ("id=1", "id=2"):
        report.add(Outcome(Record(b"[]", "db:chats", key), "changed", b"[]"))
    report.add_skipped("db:chats", "id=2", "c-2")
    return report


FEEDBACK = {
    "part_kind": "retry-feedback",
    "content": "Please call a tool.",
    "retry": {"cause": "no_output", "attempt": 1, "max_retries": 1},
}
READER_LINES = [
    orjson.dumps({"id": "new", "messages": [{"kind": "request", "parts": [FEEDBACK]}]}),
    orjson.dumps(
        {"id": "plain", "messages": [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]}]}
    ),
    b"{not json",
    orjson.dumps(
        {
            "id": "old",
            "messages": [
                {
                    "kind": "response",
                    "parts": [{"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": None}],
                }
            ],
        }
    ),
]


def reader_report(tmp_path: Path, jobs: int = 1) -> tuple[Report, str]:
    """The report of ``check --reader 2.0.0`` over four lines: a 2.60+ history, one every
    release loads, one that is not JSON, one with a null id (0.0.20's), and the input's path."""
    source = tmp_path / "readers.jsonl"
    source.write_bytes(b"\n".join(READER_LINES) + b"\n")
    return api.check(str(source), Options(target="2.0.0", jobs=jobs)).report, str(source)
