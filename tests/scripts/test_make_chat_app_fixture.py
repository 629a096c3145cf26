"""The chat-app databases are what pydantic-ai's chat-app example writes, of real 2.68 runs: its
table, a BLOB of ``new_messages_json()`` a run and a NULL ``id`` on every row; the deferred
tool's run ends with its call unanswered and the next run starts with the person's answer."""

from __future__ import annotations

import importlib.util
import sqlite3
import sys
from pathlib import Path

import orjson
import pytest
from pydantic_ai.messages import ModelMessagesTypeAdapter

from tests.conftest import ROOT

_SPEC = importlib.util.spec_from_file_location("make_chat_app_fixture", ROOT / "scripts" / "make_chat_app_fixture.py")
script = sys.modules["make_chat_app_fixture"] = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(script)

COMMITTED = ROOT / "fixtures" / "chat_app"


def _rows(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as con:
        return con.execute(
            "SELECT rowid, id, typeof(message_list), message_list FROM messages ORDER BY rowid"
        ).fetchall()


def _shape(rows: list[tuple[object, ...]]) -> list[list[tuple[str, list[str]]]]:
    return [
        [(m["kind"], [p["part_kind"] for p in m["parts"]]) for m in orjson.loads(row[3])]  # type: ignore[arg-type]
        for row in rows
    ]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("chat_app")
    script.main(folder)
    return folder


@pytest.mark.parametrize("where", ["written", "committed"])
def test_the_example_table_holds_a_blob_a_run_and_no_id(where: str, written: Path) -> None:
    folder = written if where == "written" else COMMITTED
    with sqlite3.connect(folder / "deferred.sqlite") as con:
        (sql,) = con.execute("SELECT sql FROM sqlite_master WHERE name = 'messages'").fetchone()
    assert sql == "CREATE TABLE messages (id INT PRIMARY KEY, message_list TEXT)"  # the example's, as SQLite keeps it
    deferred, weather = _rows(folder / "deferred.sqlite"), _rows(folder / "weather.sqlite")
    for rows in (deferred, weather, _rows(folder / "sessions.sqlite")):
        assert {(row[1], row[2]) for row in rows} == {(None, "blob")}
        for row in rows:  # each run's messages load in 2.68 as they are
            assert ModelMessagesTypeAdapter.validate_json(row[3])  # type: ignore[arg-type]
    assert _shape(deferred) == [
        [("request", ["user-prompt"]), ("response", ["tool-call"])],
        [("request", ["tool-return"]), ("response", ["text"])],
        [
            ("request", ["user-prompt"]),
            ("response", ["tool-call"]),
            ("request", ["tool-return"]),
            ("response", ["text"]),
        ],
    ]
    call = orjson.loads(deferred[0][3])[1]["parts"][0]  # type: ignore[arg-type]
    answer = orjson.loads(deferred[1][3])[0]["parts"][0]  # type: ignore[arg-type]
    assert (answer["tool_call_id"], answer["content"], answer["outcome"]) == (
        call["tool_call_id"],
        "Refused: destructive command; list first.",
        "denied",
    )
    assert [len(orjson.loads(row[3])) for row in weather] == [6, 2]  # type: ignore[arg-type]
    with sqlite3.connect(folder / "sessions.sqlite") as con:
        sessions = con.execute("SELECT session_id, message_list FROM messages ORDER BY rowid").fetchall()
    assert [session for session, _ in sessions] == ["admin", "weather", "admin", "weather", "admin"]
    assert [stored for session, stored in sessions if session == "admin"] == [row[3] for row in deferred]
