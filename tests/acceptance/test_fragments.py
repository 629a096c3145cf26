"""A conversation stored over several records, converted without ``--conversation`` (issue: a
conversation stored as many records, items 3, 4 and 6): every corpus and captured history split
at every run boundary (a request holding a user prompt, or of a new ``run_id``), into one
message a record, and mid-run after its first tool call, stored as JSONL lines (an envelope naming the conversation, ``session_id``),
as rows of the chat-app example's table (the bare messages of a run, a BLOB, ``id`` never
set), and as Parquet and DuckDB rows (a ``session_id`` column beside the bare messages).
``convert --unsafe-fixes`` removes no part and adds none on a record it takes for a fragment,
takes for one every record that starts with a response or with a result and holds a
tool part, and every record whose last response's calls a later record answers (told by the
conversation the record names, or by the calls' ids when it names none, as a bare row of a
release before 2.60 does); the report counts them and the verdict names the option. And the
chat-app database of real runs with a deferred tool keeps the person's answer in row 2 and
gets nothing invented in row 1.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic_ai.messages import ModelMessagesTypeAdapter

from histmig import api
from histmig.options import Options
from histmig.rules.pairing import analyse, fragment, is_result
from tests.conftest import CORPUS, FIXTURES, HISTORIES, history_id, load

CAPTURED = sorted((CORPUS / "captured").glob("v*/*.json"))
OPTION = "give --conversation COLUMN, or '*' for one conversation an input, to treat each conversation whole"


def by_run(history: list[Any]) -> list[list[Any]]:
    """``history`` cut before each request that starts a run: one holding a user prompt, or
    whose ``run_id`` is not the one before (a run resumed with a deferred tool's results)."""
    pieces: list[list[Any]] = []
    run_id = None
    for message in history:
        new_run = message.get("run_id") is not None and message.get("run_id") != run_id
        prompt = any(part.get("part_kind") == "user-prompt" for part in message["parts"])
        if not pieces or (message["kind"] == "request" and (prompt or new_run)):
            pieces.append([])
        pieces[-1].append(message)
        run_id = message.get("run_id", run_id)
    return pieces


def by_message(history: list[Any]) -> list[list[Any]]:
    return [[message] for message in history]


def after_a_call(history: list[Any]) -> list[list[Any]]:
    """``history`` cut after its first response that holds a tool call, mid-run: the first
    piece is a whole-looking history whose last calls the second answers."""
    for at, message in enumerate(history[:-1]):
        if message["kind"] == "response" and any(part["part_kind"] == "tool-call" for part in message["parts"]):
            return [history[: at + 1], history[at + 1 :]]
    return [history]


def _tool_parts(piece: list[Any]) -> bool:
    return any(
        part.get("part_kind") == "tool-call" or is_result(message, part)
        for message in piece
        for part in message["parts"]
    )


def _continued(pieces: list[list[Any]], at: int) -> bool:
    """Whether a later piece answers a call of piece ``at``'s last response."""
    piece = pieces[at]
    open_ids = {piece[m]["parts"][p]["tool_call_id"] for m, p in analyse(piece).frontier}
    later = [part.get("tool_call_id") for other in pieces[at + 1 :] for m in other for part in m["parts"]]
    return bool(open_ids & set(later))


def _parts(piece: list[Any]) -> list[int]:
    """How many parts each message holds (a legacy part is migrated in its place)."""
    return [len(message["parts"]) for message in piece]


class Stored:
    """The pieces of every history, with what each must come to."""

    def __init__(self, split: Callable[[list[Any]], list[list[Any]]]) -> None:
        self.pieces: list[list[Any]] = []
        self.sessions: list[str] = []
        self.must_flag: list[bool] = []  # starts with a response or a result, and holds a tool part
        self.continued: list[bool] = []  # a later piece answers its last response's calls
        for path in HISTORIES + CAPTURED:
            pieces = split(load(path))
            for at, piece in enumerate(pieces):
                self.pieces.append(piece)
                self.sessions.append(f"{'captured/' if path in CAPTURED else ''}{history_id(path)}")
                self.must_flag.append(fragment(piece) and _tool_parts(piece))
                self.continued.append(_continued(pieces, at))


@pytest.fixture(
    scope="module",
    params=[by_run, by_message, after_a_call],
    ids=["a-run-a-record", "a-message-a-record", "cut-after-a-call"],
)
def stored(request: pytest.FixtureRequest) -> Stored:
    return Stored(request.param)


def _jsonl(stored: Stored, tmp_path: Path, nested: bool = False) -> tuple[api.Result, list[list[Any]], list[str]]:
    """Each piece a JSONL line naming its conversation by ``session_id``, or, ``nested``, by
    ``meta.session_id``."""
    source, out = tmp_path / "runs.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(
        b"".join(
            orjson.dumps(
                ({"meta": {"session_id": session}} if nested else {"session_id": session}) | {"messages": piece}
            )
            + b"\n"
            for session, piece in zip(stored.sessions, stored.pieces)
        )
    )
    result = api.convert(str(source), str(out), Options(unsafe_fixes=True, jobs=1))
    written = iter(out.read_bytes().splitlines())
    locations = [f"line {n + 1}" for n in range(len(stored.pieces))]
    rejected = {row["location"] for row in result.report.errors if row["status"] == "rejected"}
    outputs = [  # a rejected record is kept whole in the rejects file
        piece if where in rejected else orjson.loads(next(written))["messages"]
        for where, piece in zip(locations, stored.pieces)
    ]
    return result, outputs, locations


def _sqlite(stored: Stored, tmp_path: Path) -> tuple[api.Result, list[list[Any]], list[str]]:
    db = tmp_path / "chat.sqlite"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE messages (id INT PRIMARY KEY, message_list TEXT)")  # the chat-app example's
        con.executemany("INSERT INTO messages (message_list) VALUES (?)", [(orjson.dumps(p),) for p in stored.pieces])
    result = api.convert(str(db), None, Options(table="messages", unsafe_fixes=True, jobs=1), in_place=True)
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT rowid, message_list FROM messages ORDER BY rowid").fetchall()
    return result, [orjson.loads(stored) for _, stored in rows], [f"rowid={rowid}" for rowid, _ in rows]


def _parquet(stored: Stored, tmp_path: Path) -> tuple[api.Result, list[list[Any]], list[str]]:
    """A ``session_id`` column beside each run's bare messages (JSON text), which the engine does
    not see: a row names its conversation by its messages alone, or by its calls' ids."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    source, out = tmp_path / "runs.parquet", tmp_path / "out.parquet"
    table = pa.table({"session_id": stored.sessions, "messages": [orjson.dumps(p).decode() for p in stored.pieces]})
    pq.write_table(table, source, row_group_size=50)
    result = api.convert(str(source), str(out), Options(unsafe_fixes=True, jobs=1))
    outputs = [orjson.loads(value) for value in pq.read_table(out).column("messages").to_pylist()]
    return result, outputs, [f"row {n}" for n in range(len(outputs))]


def _duckdb(stored: Stored, tmp_path: Path) -> tuple[api.Result, list[list[Any]], list[str]]:
    import duckdb

    db = tmp_path / "runs.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE runs (session_id VARCHAR, messages VARCHAR)")
        con.executemany(
            "INSERT INTO runs VALUES (?, ?)",
            [(s, orjson.dumps(p).decode()) for s, p in zip(stored.sessions, stored.pieces)],
        )
    result = api.convert(str(db), None, Options(table="runs", unsafe_fixes=True, jobs=1), in_place=True)
    with duckdb.connect(str(db), read_only=True) as con:
        outputs = [
            orjson.loads(value) for (value,) in con.execute("SELECT messages FROM runs ORDER BY rowid").fetchall()
        ]
    return result, outputs, [f"row {n}" for n in range(len(outputs))]


@pytest.mark.parametrize(
    "store",
    [_jsonl, partial(_jsonl, nested=True), _sqlite, _parquet, _duckdb],
    ids=["jsonl", "jsonl-nested-name", "chat-app-sqlite", "parquet", "duckdb"],
)
def test_without_the_option_no_part_is_removed_or_added_on_a_fragment(
    stored: Stored, store: Callable[..., Any], tmp_path: Path
) -> None:
    result, outputs, locations = store(stored, tmp_path)
    assert len(outputs) == len(stored.pieces)
    findings: dict[str, list[dict[str, Any]]] = {}
    for row in result.report.findings:
        findings.setdefault(row["location"], []).append(row)
    changed: dict[str, set[str]] = {}
    for row in result.report.changes:
        changed.setdefault(row["location"], set()).add(row["rule"])
    flagged = {where for where, rows in findings.items() if any(row["certainty"] == "fragment" for row in rows)}
    for n, (piece, output, where) in enumerate(zip(stored.pieces, outputs, locations)):
        if where in flagged:
            assert _parts(output) == _parts(piece), where  # none added or removed
            # a first piece's derived ids are the whole conversation's: its opening and places are the same
            derives = fragment(piece)
            assert not {
                rule for rule in changed.get(where, ()) if rule.startswith("HM4") or (derives and rule == "HM201")
            }, where
            assert all(row["severity"] == "warning" for row in findings[where] if row["certainty"] == "fragment")
        if stored.must_flag[n] or stored.continued[n]:  # by its name, or by the call id a later piece answers
            assert where in flagged, (where, stored.sessions[n])
    assert flagged and result.report.fragments == len(flagged) == result.report.summary()["fragments"]
    assert OPTION in result.verdict


def test_the_chat_app_database_keeps_the_answer_of_row_2_and_invents_nothing_in_row_1(tmp_path: Path) -> None:
    """The chat-app example's database of real 2.68 runs (scripts/make_chat_app_fixture.py): a
    tool a person must approve, refused; found as it is (the ``message_list`` BLOB column, the
    NULL ids), converted in place with ``--unsafe-fixes`` and nothing else."""
    db = tmp_path / "deferred.sqlite"
    shutil.copy(FIXTURES / "chat_app" / "deferred.sqlite", db)
    with sqlite3.connect(db) as con:
        before = con.execute("SELECT rowid, message_list FROM messages ORDER BY rowid").fetchall()
    result = api.convert(str(db), None, Options(table="messages", unsafe_fixes=True), in_place=True)
    with sqlite3.connect(db) as con:
        after = con.execute("SELECT rowid, message_list FROM messages ORDER BY rowid").fetchall()
    assert after == before and result.exit_code == 0
    answer = orjson.loads(after[1][1])[0]["parts"][0]
    assert (answer["part_kind"], answer["content"]) == ("tool-return", "Refused: destructive command; list first.")
    assert [len(orjson.loads(stored)) for _, stored in after] == [2, 2, 4]  # no request of invented returns in row 1
    for _, stored in after:
        ModelMessagesTypeAdapter.validate_json(stored)
    assert sorted((row["location"], row["rule"], row["certainty"]) for row in result.report.findings) == [
        ("rowid=1", "HM407", "fragment"),
        ("rowid=2", "HM401", "fragment"),
    ]
    assert result.verdict.endswith(OPTION + ")") and result.notes == [
        f"{db}:messages: the primary key (id) is null on every row; rows are read in rowid order and named by it"
    ]
