"""SQLite (histmig.sources.sqlite): the shared corpus in tables of TEXT, BLOB and JSON columns,
with extra columns of several types; in place, to a new table and to files; unchanged rows
never rewritten (an UPDATE trigger); a run killed mid-way, an application writing meanwhile,
a database another connection holds locked, bad rows, keys and errors."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from histmig import api
from histmig.cli import app
from histmig.errors import UnreadableInput, UnwritableOutput, UsageError
from histmig.options import Options
from histmig.report import SKIPPED, SKIPPED_WITH_CONVERSATION
from histmig.sources import format_of, sqlite
from histmig.sources.sqlite import SqliteTable, affinity
from tests.conftest import CORPUS, ROOT, assert_reassembled, not_applicable, run_pieces, stored_apart, whole_conversion
from tests.sources.conftest import CALL, PROMPT, RETRY, corpus_records, jsonl_path_output, without_place

TABLE = "conversations"
OTHER = "id, name, created, score, data, n"
runner = CliRunner()


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    return corpus_records()


def make_db(path: Path, records: list[dict[str, Any]], messages_type: str = "TEXT", copies: int = 1) -> Path:
    """A database whose table ``conversations`` holds ``records`` (``copies`` times):
    ``id`` INTEGER PRIMARY KEY, ``name`` TEXT, ``created`` TEXT, ``messages`` of
    ``messages_type`` (a BLOB column holds bytes, any other text), ``score`` REAL (some
    null), ``data`` BLOB, ``n`` NUMERIC; and a ``log`` of the ids its UPDATE trigger saw."""
    with sqlite3.connect(path) as con:
        con.execute(
            f"CREATE TABLE {TABLE} (id INTEGER PRIMARY KEY, name TEXT, created TEXT, messages {messages_type}, score REAL, data BLOB, n NUMERIC)"
        )
        con.execute("CREATE TABLE log (id INTEGER)")
        con.execute(f"CREATE TRIGGER logged AFTER UPDATE ON {TABLE} BEGIN INSERT INTO log VALUES (old.id); END")
        rows = []
        for c in range(copies):
            for i, r in enumerate(records):
                text = orjson.dumps(r["messages"])
                key = 1000 + c * len(records) + i
                rows.append(
                    (
                        key,
                        r["id"],
                        f"2025-01-01T00:{i % 60:02d}:00Z",
                        text if messages_type == "BLOB" else text.decode(),
                        None if i % 4 == 0 else i / 8,
                        bytes([i % 256]) * 3,
                        i * 7,
                    )
                )
        con.executemany(f"INSERT INTO {TABLE} VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    return path


def query(path: Path, statement: str, params: tuple = ()) -> list[tuple]:
    con = sqlite3.connect(path)
    try:
        return con.execute(statement, params).fetchall()
    finally:
        con.close()


def stored(path: Path, table: str = TABLE) -> list[bytes]:
    return [value for (value,) in query(path, f"SELECT CAST(messages AS BLOB) FROM {table} ORDER BY id")]


@pytest.mark.parametrize("messages_type", ["TEXT", "BLOB", "JSON"])
def test_in_place_matches_the_jsonl_path_and_rewrites_only_changed_rows(
    tmp_path: Path, records, messages_type: str
) -> None:
    db = make_db(tmp_path / "chats.sqlite", records, messages_type)
    before, classes = (
        query(db, f"SELECT {OTHER} FROM {TABLE} ORDER BY id"),
        query(db, f"SELECT typeof(messages) FROM {TABLE} ORDER BY id"),
    )
    original = stored(db)
    result = api.convert(str(db), None, Options(table=TABLE, messages_column="messages", jobs=2), in_place=True)
    assert result.exit_code == 0
    expected, jsonl_report = jsonl_path_output(records, tmp_path)
    assert stored(db) == expected
    assert query(db, f"SELECT {OTHER} FROM {TABLE} ORDER BY id") == before
    assert query(db, f"SELECT typeof(messages) FROM {TABLE} ORDER BY id") == classes
    changed = [1000 + i for i, (old, new) in enumerate(zip(original, expected)) if old != new]
    assert [row[0] for row in query(db, "SELECT id FROM log ORDER BY id")] == changed and len(changed) == 138
    report = result.report.to_json()
    assert report["summary"] == jsonl_report["summary"]
    assert without_place(report["changes"]) == without_place(jsonl_report["changes"])
    assert report["changes"][0]["source"] == f"{db}:{TABLE}" and report["changes"][0]["key"].startswith("id=10")
    assert (
        result.verdict
        == f"histmig convert: 138 of 212 records migrated, 74 unchanged, 0 rejected; written to {db}:{TABLE} (in place)"
    )
    again = api.convert(str(db), None, Options(table=TABLE, jobs=1), in_place=True)
    assert again.report.counts["changed"] == 0 and len(query(db, "SELECT id FROM log")) == 138
    assert api.check(str(db), Options(table=TABLE)).exit_code == 0


def test_to_table_and_files_match_the_jsonl_path(tmp_path: Path, records) -> None:
    db = make_db(tmp_path / "chats.db", records)
    before = query(db, f"SELECT {OTHER} FROM {TABLE} ORDER BY id")
    expected = jsonl_path_output(records, tmp_path)[0]
    invoke = lambda *args: runner.invoke(app, [args[0], str(db), *args[1:], "--table", TABLE, "-q"])  # noqa: E731

    assert invoke("convert", "--to-table", "converted").exit_code == 0
    assert stored(db, "converted") == expected
    assert query(db, f"SELECT {OTHER} FROM converted ORDER BY id") == before
    assert [row[1:] for row in query(db, "SELECT * FROM pragma_table_info('converted')")] == [
        row[1:] for row in query(db, f"SELECT * FROM pragma_table_info('{TABLE}')")
    ]
    refused = invoke("convert", "--to-table", "converted")
    assert (refused.exit_code, refused.stderr) == (
        2,
        f"histmig: cannot write {db}: table 'converted' already exists (--overwrite replaces it)\n",
    )
    with closing(sqlite3.connect(db)) as con, con:
        con.execute("UPDATE converted SET messages = '[]'")
    assert invoke("convert", "--to-table", "converted", "--overwrite").exit_code == 0
    assert stored(db, "converted") == expected
    for name in (TABLE, "Conversations"):  # SQLite's names ignore ASCII case: the input table must not be dropped
        same = invoke("convert", "--to-table", name, "--overwrite")
        assert (same.exit_code, same.stderr) == (
            2,
            f"histmig: {db}: --to-table names the table read; use --in-place to rewrite it\n",
        )
    assert query(db, f"SELECT count(*) FROM {TABLE}") == [(len(records),)]
    cased = invoke("convert", "--to-table", "CONVERTED")
    assert (cased.exit_code, cased.stderr) == (
        2,
        f"histmig: cannot write {db}: table 'CONVERTED' already exists (--overwrite replaces it)\n",
    )

    assert invoke("convert", str(tmp_path / "out.jsonl")).exit_code == 0
    rows = [orjson.loads(line) for line in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert [orjson.dumps(r["messages"]) for r in rows] == [orjson.dumps(orjson.loads(e)) for e in expected]
    assert [(r["id"], r["name"], r["created"], r["score"], r["n"]) for r in rows] == [b[:4] + b[5:] for b in before]

    assert invoke("convert", str(tmp_path / "out.parquet")).exit_code == 0
    table = pq.read_table(tmp_path / "out.parquet")
    assert [c.encode() for c in table.column("messages").to_pylist()] == expected
    assert [str(t) for t in table.schema.types] == ["int64", "string", "string", "string", "double", "binary", "string"]
    assert table.column("data").to_pylist() == [b[4] for b in before] and table.column("n").to_pylist()[3] == "21"
    assert stored(db) != expected  # the input is untouched


def test_bad_rows_are_named_by_key_and_left_as_they_were(tmp_path: Path, records) -> None:
    db = tmp_path / "bad.sqlite"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE messages (id INT PRIMARY KEY, message_list TEXT)")  # pydantic-ai's chat app example
        good = orjson.dumps(records[5]["messages"]).decode()
        con.executemany(
            "INSERT INTO messages VALUES (?, ?)",
            [(1, good), (2, '[{"kind": "request"'), (3, '{"note": 1}'), (4, 42), (5, None), (6, b"\xff[]")],
        )
    before = query(db, "SELECT id, message_list, typeof(message_list) FROM messages ORDER BY id")
    result = runner.invoke(
        app, ["convert", str(db), "--table", "messages", "--messages-column", "message_list", "--in-place"]
    )
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if ": rejected: " in line]
    assert [line.split(": rejected: ")[0] for line in lines] == [f"{db}:messages:id={n}" for n in (2, 3, 4, 6)]
    assert "not UTF-8: byte 0xff at byte 1 of the record" in lines[3]
    after = query(db, "SELECT id, message_list, typeof(message_list) FROM messages ORDER BY id")
    assert after[1:] == before[1:] and after[0][1] != before[0][1]
    assert "rejected rows unchanged" in result.stderr.splitlines()[-1]


def test_an_application_update_between_read_and_write_is_kept_and_reported(
    tmp_path: Path, records, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = make_db(tmp_path / "chats.sqlite", records)
    legacy = [i for i, r in enumerate(records) if b"retry-prompt" in orjson.dumps(r["messages"])]
    victim, app_value = 1000 + legacy[0], orjson.dumps(records[legacy[-1]]["messages"]).decode()
    real = SqliteTable._finish

    def app_writes_first(table: SqliteTable, ok: bool) -> None:
        with sqlite3.connect(db) as con:  # the application rewrites a row histmig read and migrated
            con.execute(f"UPDATE {TABLE} SET messages = ? WHERE id = ?", (app_value, victim))
        real(table, ok)

    monkeypatch.setattr(SqliteTable, "_finish", app_writes_first)
    result = api.convert(str(db), None, Options(table=TABLE), in_place=True)
    assert query(db, f"SELECT messages FROM {TABLE} WHERE id = ?", (victim,)) == [(app_value,)]
    counts = result.report.counts
    assert (counts["changed"], counts["skipped"], result.exit_code) == (137, 1, 1)
    assert result.report.errors == [
        {
            "source": f"{db}:{TABLE}",
            "location": f"id={victim}",
            "id": str(victim),
            "status": "skipped",
            "errors": [SKIPPED],
        }
    ]
    monkeypatch.undo()
    assert api.convert(str(db), None, Options(table=TABLE), in_place=True).report.counts["changed"] == 1
    assert api.check(str(db), Options(table=TABLE)).exit_code == 0


@pytest.mark.parametrize("lock", ["EXCLUSIVE", "IMMEDIATE"])
def test_a_locked_database_is_waited_for_then_refused_with_nothing_written(
    tmp_path: Path, records, monkeypatch: pytest.MonkeyPatch, lock: str
) -> None:
    db = make_db(tmp_path / "chats.sqlite", records[:30])
    original = stored(db)
    monkeypatch.setattr(sqlite, "LOCK_WAIT", 0.3)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute(f"BEGIN {lock}")
    holder.execute("INSERT INTO log VALUES (-1)")  # an uncommitted write: another client mid-transaction
    started = time.monotonic()
    error = UnreadableInput if lock == "EXCLUSIVE" else UnwritableOutput  # EXCLUSIVE: not even read
    with pytest.raises(
        error, match=r"the database is locked by another connection \(waited 0.3 s\); nothing was written"
    ):
        api.convert(str(db), None, Options(table=TABLE, jobs=1), in_place=True)
    assert 0.3 <= time.monotonic() - started < 5
    holder.execute("ROLLBACK")
    holder.close()
    assert stored(db) == original and query(db, "SELECT count(*) FROM log") == [(0,)]
    assert query(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name") == [(TABLE,), ("log",)]


def test_a_run_killed_mid_way_leaves_the_table_old_or_migrated_and_a_second_run_completes(
    tmp_path: Path, records
) -> None:
    expected = jsonl_path_output(records, tmp_path)[0] * 25
    command = [sys.executable, "-m", "histmig", "convert", "", "--table", TABLE, "--in-place", "-q"]
    timing = make_db(tmp_path / "timing.sqlite", records, copies=25)
    started = time.monotonic()
    assert subprocess.run([*command[:4], str(timing), *command[5:]], cwd=ROOT).returncode == 0
    duration = time.monotonic() - started
    db = make_db(tmp_path / "chats.sqlite", records, copies=25)
    original = stored(db)
    outcomes = set()
    for fraction in (0.3, 0.6, 0.9):
        process = subprocess.Popen([*command[:4], str(db), *command[5:]], cwd=ROOT)
        time.sleep(duration * fraction)
        process.send_signal(signal.SIGKILL)
        process.wait()
        now = stored(db)
        assert now in (original, expected)  # one transaction: all rows old or all migrated
        outcomes.add(now == expected)
        if now == expected:
            break
    assert False in outcomes, "no kill landed before the end of the run: make the table larger"
    assert subprocess.run([*command[:4], str(db), *command[5:]], cwd=ROOT).returncode == 0
    assert stored(db) == expected


def test_keys_views_names_and_errors(tmp_path: Path, records) -> None:
    db = tmp_path / "plain.data"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE plain (messages TEXT, tenant TEXT)")  # no primary key: the rowid
        con.executemany(
            "INSERT INTO plain VALUES (?, ?)",
            [(orjson.dumps(r["messages"]).decode(), f"t{i % 2}") for i, r in enumerate(records[:20])],
        )
        con.execute("CREATE VIEW by_tenant AS SELECT tenant, messages FROM plain")
    assert format_of(str(db)).name == "sqlite"  # its first bytes, whatever its name
    audit = api.audit(str(db), Options(format="sqlite", table="plain", id_column="tenant"))
    assert audit.report.counts["records_in"] == 20 and {(c["location"], c["id"]) for c in audit.report.changes} <= {
        (f"rowid={i + 1}", f"t{i % 2}") for i in range(20)
    }
    assert api.convert(str(db), None, Options(format="sqlite", table="plain"), in_place=True).exit_code == 0
    with pytest.raises(UnreadableInput, match="no primary key; name a unique column with --key-column"):
        api.check(str(db), Options(format="sqlite", table="by_tenant"))
    with pytest.raises(UnreadableInput, match="key tenant=t0 is on two rows"):
        api.check(str(db), Options(format="sqlite", table="by_tenant", key_column="tenant"))
    with pytest.raises(UsageError, match="--schema does not apply to a SQLite input"):
        api.check(str(db), Options(format="sqlite", table="plain", schema="main"))
    with pytest.raises(UnreadableInput, match=r"no table 'plian' \(its tables: by_tenant, plain"):
        api.check(str(db), Options(format="sqlite", table="plian"))
    text = tmp_path / "not.sqlite"
    text.write_text("hello")
    assert (
        "file is not a database"
        in runner.invoke(app, ["audit", str(text), "--format", "sqlite", "--table", "t"]).stderr
    )
    assert runner.invoke(app, ["audit", str(tmp_path / "none.sqlite"), "--table", "t"]).exit_code == 2
    assert not (tmp_path / "none.sqlite").exists()


def test_db_files_are_told_apart_by_their_first_bytes(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "a.db") as con:
        con.execute("CREATE TABLE t (x)")
    with duckdb.connect(str(tmp_path / "b.db")) as con:
        con.execute("CREATE TABLE t (x INTEGER)")
    (tmp_path / "c.duckdb").write_bytes((tmp_path / "a.db").read_bytes())
    (tmp_path / "x.sqlite3").touch()
    assert [format_of(str(tmp_path / name)).name for name in ("a.db", "b.db", "c.duckdb", "x.sqlite3")] == [
        "sqlite",
        "duckdb",
        "sqlite",
        "sqlite",
    ]


def test_affinity_follows_sqlites_rules() -> None:
    declared = [
        "INT",
        "BIGINT",
        "VARCHAR(20)",
        "CLOB",
        "TEXT",
        "BLOB",
        "",
        "REAL",
        "DOUBLE PRECISION",
        "FLOAT",
        "NUMERIC",
        "JSON",
        "DECIMAL(10,5)",
        "BOOLEAN",
    ]
    assert [affinity(d) for d in declared] == [
        "INTEGER",
        "INTEGER",
        "TEXT",
        "TEXT",
        "TEXT",
        "BLOB",
        "BLOB",
        "REAL",
        "REAL",
        "REAL",
        "NUMERIC",
        "NUMERIC",
        "NUMERIC",
        "NUMERIC",
    ]


def test_jobs_give_the_same_table_and_report(tmp_path: Path, records) -> None:
    one, two = make_db(tmp_path / "one.sqlite", records, copies=3), make_db(tmp_path / "two.sqlite", records, copies=3)
    first = api.convert(str(one), None, Options(table=TABLE, jobs=1), in_place=True).report.to_json()
    second = api.convert(str(two), None, Options(table=TABLE, jobs=2), in_place=True).report.to_json()
    assert (
        stored(one) == stored(two) and first["summary"] == second["summary"] and first["summary"]["changed"] == 3 * 138
    )
    assert without_place(first["changes"]) == without_place(second["changes"])


def test_overwrite_keeps_the_table_when_the_run_fails_and_reads_a_view_before_it_replaces_its_table(
    tmp_path: Path, records
) -> None:
    """The new table is filled under another name and takes the old one's name last, in the
    one transaction: a view of the replaced table is read whole first; SQLite then refuses to
    rename past the view it breaks, and the old table stays as it was."""
    db = make_db(tmp_path / "chats.db", records)
    with closing(sqlite3.connect(db)) as con, con:
        con.execute(f"CREATE VIEW chats AS SELECT * FROM {TABLE}")
    before = query(db, f"SELECT * FROM {TABLE} ORDER BY id")
    result = runner.invoke(
        app, ["convert", str(db), "--table", "chats", "--key-column", "id", "--to-table", TABLE, "--overwrite", "-q"]
    )
    assert (result.exit_code, result.stderr) == (
        2,
        f"histmig: cannot write {db}:chats: error in view chats: no such table: main.{TABLE}\n",
    )
    assert query(db, f"SELECT * FROM {TABLE} ORDER BY id") == before
    assert [row[0] for row in query(db, "SELECT name FROM sqlite_master WHERE type = 'table'")] == [TABLE, "log"]


def test_a_journal_a_killed_writer_left_is_rolled_back_before_reading(tmp_path: Path, records) -> None:
    """A writer killed mid-transaction (here: one that exits without committing, its changes
    partly written to the file) leaves its rollback journal: SQLite rolls it back at the first
    read, which a read-only connection cannot do ("attempt to write a readonly database")."""
    db = make_db(tmp_path / "chats.db", records)
    before = query(db, f"SELECT id, messages FROM {TABLE} ORDER BY id")
    killed = (
        "import os, sqlite3, sys\n"
        "con = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "con.execute('PRAGMA cache_size=1')\n"
        "con.execute('BEGIN IMMEDIATE')\n"
        f"con.execute(\"UPDATE {TABLE} SET messages = '[]', name = 'gone'\")\n"
        "os._exit(9)\n"
    )
    assert subprocess.run([sys.executable, "-c", killed, str(db)]).returncode == 9
    assert (tmp_path / "chats.db-journal").stat().st_size > 0
    audited = api.audit(str(db), Options(table=TABLE))
    assert (audited.exit_code, audited.report.counts["changed"]) == (
        0,
        138,
    )  # the rows as they were before the killed transaction
    assert query(db, f"SELECT id, messages FROM {TABLE} ORDER BY id") == before


def test_histmig_s_own_table_names_never_stand_for_a_user_s(tmp_path: Path, records) -> None:
    db = make_db(tmp_path / "chats.db", records)
    expected = jsonl_path_output(records, tmp_path)[0]
    with closing(sqlite3.connect(db)) as con, con:
        con.execute("CREATE TABLE __HISTMIG_NEW_TABLE (kept TEXT)")  # a user's, of the name the scratch copy had
        con.execute("INSERT INTO __HISTMIG_NEW_TABLE VALUES ('mine')")
    for name, more in [("__histmig_changes", ()), ("__histmig_changes_2", ()), ("__histmig_changes", ("--overwrite",))]:
        done = runner.invoke(app, ["convert", str(db), "--table", TABLE, "--to-table", name, *more, "-q"])
        assert (done.exit_code, done.stderr) == (0, ""), done.stderr
        assert stored(db, name) == expected
    assert query(db, "SELECT * FROM __histmig_new_table") == [("mine",)]
    assert query(db, "SELECT count(*) FROM sqlite_master WHERE name LIKE '__histmig%'") == [(3,)]


# ------------------------------------------------------------ conversations over many rows (issue 25)


def sessions_db(path: Path, records: list[dict[str, Any]]) -> Path:
    """A fork of pydantic-ai's chat-app table with a ``session_id``: ``messages (id INTEGER
    PRIMARY KEY, session_id TEXT, seq INTEGER, message_list BLOB)``, ``records``
    (:func:`~tests.conftest.stored_apart`) in their shuffled order, each ``message_list`` the
    bytes Python's json writes (spaced: a value written back compact shows histmig rewrote it)."""
    with closing(sqlite3.connect(path)) as con, con:
        con.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, seq INTEGER, message_list BLOB)")
        con.executemany(
            "INSERT INTO messages (session_id, seq, message_list) VALUES (?, ?, ?)",
            [(r["conversation_id"], r["seq"], json.dumps(r["messages"], ensure_ascii=False).encode()) for r in records],
        )
    return path


def read_back(db: Path) -> list[dict[str, Any]]:
    return [
        {"conversation_id": name, "seq": seq, "messages": orjson.loads(value)}
        for name, seq, value in query(db, "SELECT session_id, seq, message_list FROM messages ORDER BY id")
    ]


@pytest.mark.parametrize("layout", ["per run", "per message"])
def test_a_session_table_converts_conversation_by_conversation_as_the_whole_histories_do(
    tmp_path: Path, layout: str
) -> None:
    histories, stored = stored_apart(layout)
    db = sessions_db(tmp_path / "chat.sqlite", stored)
    before = query(db, "SELECT id, message_list FROM messages ORDER BY id")
    options = Options(
        table="messages",
        messages_column="message_list",
        unsafe_fixes=True,
        conversation=("session_id",),
        order="seq",
        jobs=2,
    )
    result = api.convert(str(db), None, options, in_place=True)
    changed = {row["location"] for row in result.report.changes}
    after = query(db, "SELECT id, message_list, typeof(message_list) FROM messages ORDER BY id")
    for (key, old), (_, new, kind) in zip(before, after):
        assert kind == "blob"
        if f"id={key}" not in changed:
            assert new == old  # a row no rule touched is not written
    assert_reassembled(histories, read_back(db), options, not_applicable(layout, True))
    assert api.check(str(db), replace(options, unsafe_fixes=False)).report.counts["changed"] == 0


def chat_app_db(path: Path, runs: list[list[Any]]) -> Path:
    """pydantic-ai's chat-app example's own table (examples/pydantic_ai_examples/chat_app.py):
    ``messages (id INT PRIMARY KEY, message_list TEXT)``, each run's ``new_messages_json()`` a
    row, inserted as the example does (``INSERT INTO messages (message_list) VALUES (?)``, the
    value bytes, so a BLOB; ``id`` never set, so NULL), read back ``ORDER BY id``: in rowid order."""
    with closing(sqlite3.connect(path)) as con, con:
        con.execute("CREATE TABLE messages (id INT PRIMARY KEY, message_list TEXT);")
        for run in runs:
            con.execute("INSERT INTO messages (message_list) VALUES (?);", (orjson.dumps(run),))
    return path


def test_the_chat_app_table_is_one_conversation_and_a_deferred_tool_keeps_its_result(tmp_path: Path) -> None:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    history = orjson.loads((CORPUS / "v2.59.0" / "m_deferred_tool_model_retry.json").read_bytes())
    runs = run_pieces(history)
    assert len(runs) == 2 and runs[0][-1]["kind"] == "response"  # the run stopped for the deferred tool
    db = chat_app_db(tmp_path / "chat_app.sqlite", runs)
    options = Options(table="messages", unsafe_fixes=True, conversation=("*",))  # the column and key found
    audit = api.audit(str(db), options)
    changes = {(row["location"], row["rule"]) for row in audit.report.changes}
    assert changes == {("rowid=2", "HM101"), ("rowid=2", "HM407")}  # as the whole history: no return invented in row 1
    assert audit.report.findings == []
    result = api.convert(str(db), None, options, in_place=True)
    assert result.exit_code == 0
    rows = [value for (value,) in query(db, "SELECT message_list FROM messages ORDER BY rowid")]
    for value in rows:
        ModelMessagesTypeAdapter.validate_json(value)  # 2.68 loads each row
    together = [message for value in rows for message in orjson.loads(value)]
    assert together == orjson.loads(orjson.dumps(whole_conversion(history, options, set())[1]))
    assert orjson.loads(rows[0]) == runs[0]  # the run that stopped for the deferred tool, as it was
    result_part = orjson.loads(rows[1])[0]["parts"][0]  # the next run starts with the deferred call's retry, kept
    assert (result_part["part_kind"], result_part["content"], result_part["tool_call_id"]) == (
        "tool-return",
        "Refused: destructive command; list first.",
        runs[0][-1]["parts"][0]["tool_call_id"],
    )


@pytest.mark.parametrize(
    ("write", "row"),
    [
        pytest.param("message_list = CAST(message_list || ' ' AS BLOB)", "victim", id="messages"),
        pytest.param("seq = -1", "victim", id="order"),  # it stays first
        pytest.param("session_id = 'moved'", "alone", id="key-of-a-row-read-without-one"),
    ],
)
def test_a_conversation_an_application_changes_mid_run_is_skipped_whole_and_a_rerun_completes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write: str, row: str
) -> None:
    _, stored = stored_apart("per run")
    alone = orjson.loads((CORPUS / "v2.59.0" / "a_tool_model_retry.json").read_bytes())
    db = sessions_db(tmp_path / "chat.sqlite", [*stored, {"conversation_id": None, "seq": 0, "messages": alone}])
    options = Options(table="messages", messages_column="message_list", conversation=("session_id",), order="seq")
    victim = "v2.59.0/m_deferred_tool_model_retry"
    first = query(db, "SELECT id FROM messages WHERE session_id = ? AND seq = 0", (victim,))[0][0]
    written = first if row == "victim" else query(db, "SELECT id FROM messages WHERE session_id IS NULL")[0][0]
    real = SqliteTable._finish

    def app_writes_first(table: SqliteTable, ok: bool) -> None:
        with closing(sqlite3.connect(db)) as con, con:  # the application rewrites a row histmig read
            con.execute(f"UPDATE messages SET {write} WHERE id = ?", (written,))
        real(table, ok)

    monkeypatch.setattr(SqliteTable, "_finish", app_writes_first)
    result = api.convert(str(db), None, options, in_place=True)
    skipped = [row["location"] for row in result.report.errors if row["status"] == "skipped"]
    rows = dict(query(db, "SELECT id, session_id FROM messages"))
    assert skipped and {rows[int(location[3:])] for location in skipped} == {victim if row == "victim" else "moved"}
    assert result.report.counts["skipped"] == len(skipped) and result.exit_code == 1
    assert {message for row in result.report.errors if row["status"] == "skipped" for message in row["errors"]} == {
        SKIPPED_WITH_CONVERSATION  # not each row's own doing: its conversation's
    }
    assert "skipped (another client wrote them, or a row of their conversation, after histmig read them" in (
        result.verdict
    )
    assert b"retry-prompt" in b"".join(
        v for (v,) in query(db, "SELECT message_list FROM messages WHERE session_id = ?", (rows[written],))
    )
    monkeypatch.undo()
    again = api.convert(str(db), None, options, in_place=True)
    assert again.report.counts["changed"] == len(skipped) and again.exit_code == 0
    assert api.check(str(db), options).report.counts["changed"] == 0


def test_the_verdict_says_an_index_on_the_conversation_would_help_until_there_is_one(tmp_path: Path) -> None:
    _, stored = stored_apart("per run")
    db = sessions_db(tmp_path / "chat.sqlite", stored[:20])
    options = Options(table="messages", messages_column="message_list", conversation=("session_id",), order="seq")
    notes = api.audit(str(db), options).notes
    assert notes == [
        f'{db}:messages: no index on ("session_id", "seq"), so the table was sorted to read it conversation by '
        'conversation; CREATE INDEX "messages_session_id_seq_idx" ON "messages" ("session_id", "seq") would let it '
        "be read in that order"
    ]
    statement = notes[0].split("; ")[1].removesuffix(" would let it be read in that order")
    with closing(sqlite3.connect(db)) as con:
        con.execute(statement)
    assert api.audit(str(db), options).notes == []
    with closing(sqlite3.connect(db)) as con:
        con.execute('DROP INDEX "messages_session_id_seq_idx"')
        con.execute("CREATE INDEX by_session ON messages (session_id, seq, id)")
    assert api.audit(str(db), options).notes == []
    assert api.audit(str(db), Options(table="messages", messages_column="message_list")).notes == []


def test_every_history_in_a_chat_app_table_of_its_own_converts_as_the_whole_history(tmp_path: Path) -> None:
    """pydantic-ai's chat-app layout, a database a conversation, one row a run, for every corpus and
    captured history: the rows put together are the whole history's conversion, each row loads in 2.68."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    histories, _ = stored_apart("per run")
    options = Options(table="messages", unsafe_fixes=True, conversation=("*",), jobs=1)
    out = []
    for i, (name, history) in enumerate(histories.items()):
        db = chat_app_db(tmp_path / f"chat_app_{i}.sqlite", run_pieces(history))
        api.convert(str(db), None, options, in_place=True)
        for seq, (value,) in enumerate(query(db, "SELECT message_list FROM messages ORDER BY rowid")):
            ModelMessagesTypeAdapter.validate_json(value)
            out.append({"conversation_id": name, "seq": seq, "messages": orjson.loads(value)})
    assert_reassembled(histories, out, options, not_applicable("per run", True))


def test_a_row_without_a_conversation_key_is_its_own_and_a_conversation_past_the_limit_is_left_whole(
    tmp_path: Path,
) -> None:
    runs = run_pieces(orjson.loads((CORPUS / "v2.59.0" / "m_deferred_tool_model_retry.json").read_bytes()))
    alone = orjson.loads((CORPUS / "v2.59.0" / "h_empty_response.json").read_bytes())
    db = sessions_db(
        tmp_path / "chat.sqlite",
        [
            {"conversation_id": "big", "seq": 0, "messages": runs[0]},
            {"conversation_id": None, "seq": 0, "messages": alone},
            {"conversation_id": "big", "seq": 1, "messages": runs[1]},
        ],
    )
    before = query(db, "SELECT id, message_list FROM messages ORDER BY id")
    sizes = [len(value) for _, value in before]
    limit = max(sizes) + 10
    assert sizes[0] + sizes[2] > limit  # the two rows of "big" together hold more
    options = Options(
        table="messages",
        messages_column="message_list",
        conversation=("session_id",),
        order="seq",
        max_conversation_bytes=limit,
    )
    result = api.convert(str(db), None, options, in_place=True)
    after = query(db, "SELECT id, message_list FROM messages ORDER BY id")
    assert [after[0], after[2]] == [before[0], before[2]]  # the conversation past the limit: nothing written
    assert after[1] != before[1]  # the row without a key: migrated as the whole history it holds
    errors = {row["location"]: row["errors"] for row in result.report.errors}
    said = (
        f"conversation session_id=big holds {sizes[0] + sizes[2]} bytes in 2 rows, past --max-conversation-bytes "
        f"{limit}: rejected whole, nothing written for it"
    )
    assert errors == {"id=1": [said], "id=3": [said]}
    assert [(row["location"], row["warnings"]) for row in result.report.warnings] == [
        ("id=2", ["no conversation key (session_id null): a conversation of its own"])
    ]


@pytest.mark.parametrize("collation", ["NOCASE", "RTRIM"])
def test_a_conversation_key_with_a_collation_groups_as_sqlite_compares_it(tmp_path: Path, collation: str) -> None:
    """``'S1'`` and ``'s1'`` (``'s1 '`` under RTRIM) are one conversation where the column's
    collation says so: its records are judged together (the retry answers the call of the row
    before it) and written, not skipped as changed because a re-read by the key found both."""
    other = "s1 " if collation == "RTRIM" else "s1"
    db = tmp_path / "chat.sqlite"
    with closing(sqlite3.connect(db)) as con, con:
        con.execute(
            f"CREATE TABLE runs (id INTEGER PRIMARY KEY, session TEXT COLLATE {collation}, seq INT, messages TEXT)"
        )
        con.executemany(
            "INSERT INTO runs (session, seq, messages) VALUES (?, ?, ?)",
            [
                ("S1" if collation == "NOCASE" else "s1", 0, orjson.dumps([PROMPT, CALL])),
                (other, 1, orjson.dumps([RETRY])),
            ],
        )
    result = api.convert(str(db), None, Options(table="runs", conversation=("session",), order="seq"), in_place=True)
    assert (result.exit_code, result.report.counts["skipped"], result.report.fragments) == (0, 0, 0)
    assert [(row["location"], row["rule"]) for row in result.report.changes] == [("id=2", "HM101")]
    assert "retry-prompt" not in query(db, "SELECT CAST(messages AS TEXT) FROM runs WHERE id = 2")[0][0]


@pytest.mark.parametrize(
    ("ddl", "options"),
    [
        ("CREATE TABLE t (k INT, conv TEXT, seq INT, message TEXT)", {"key_column": "k"}),
        ("CREATE TABLE t (rowid INT, conv TEXT, seq INT, message TEXT)", {}),  # a column that hides the rowid
    ],
    ids=["key-column", "a-column-named-rowid"],
)
def test_a_grouped_table_whose_key_is_on_two_rows_is_refused_before_anything_is_written(
    tmp_path: Path, ddl: str, options: dict[str, Any]
) -> None:
    """Under ``--conversation`` the rows are read in conversation order, not key order, so the
    key's uniqueness is asked first: a write by a key two rows hold would rewrite both."""
    db = tmp_path / "chat.sqlite"
    with closing(sqlite3.connect(db)) as con, con:
        con.execute(ddl)
        con.executemany(
            "INSERT INTO t VALUES (1, ?, ?, ?)",
            [("A", 0, orjson.dumps([PROMPT, CALL]).decode()), ("B", 0, orjson.dumps([RETRY]).decode())],
        )
    before = db.read_bytes()
    grouped = Options(table="t", messages_column="message", conversation=("conv",), order="seq", **options)
    with pytest.raises(
        UnreadableInput, match=r"key (k|rowid)=1 is on two rows; name a unique column with --key-column"
    ):
        api.convert(str(db), None, grouped, in_place=True)
    assert db.read_bytes() == before


def test_the_chat_app_table_with_a_session_column_converts_session_by_session_by_its_rowid(tmp_path: Path) -> None:
    """The chat-app example's table (``id INT PRIMARY KEY`` never set) with a ``session_id``
    column its forks add: the rows are keyed by the rowid, each session is one conversation,
    and each is found again by its first row's rowid when written (not skipped as changed)."""
    db = tmp_path / "chat.sqlite"
    with closing(sqlite3.connect(db)) as con, con:
        con.execute("CREATE TABLE messages (id INT PRIMARY KEY, session_id TEXT, message_list TEXT)")
        for session in ("s1", "s2"):
            con.executemany(
                "INSERT INTO messages (session_id, message_list) VALUES (?, ?)",
                [(session, orjson.dumps([PROMPT, CALL]).decode()), (session, orjson.dumps([RETRY]).decode())],
            )
    result = api.convert(str(db), None, Options(table="messages", conversation=("session_id",)), in_place=True)
    assert (result.exit_code, result.report.counts["skipped"], result.report.fragments) == (0, 0, 0)
    assert [(row["location"], row["rule"]) for row in result.report.changes] == [
        ("rowid=2", "HM101"),
        ("rowid=4", "HM101"),
    ]
    held = query(db, "SELECT CAST(message_list AS TEXT) FROM messages WHERE rowid IN (2, 4)")
    assert all("retry-prompt" not in text and '"outcome":"retried"' in text for (text,) in held)


@pytest.mark.parametrize("column", ["session_id", "SESSION_ID", "sessionId", "note"])
def test_without_conversation_a_row_of_a_table_with_a_session_column_keeps_its_last_calls_open(
    tmp_path: Path, column: str
) -> None:
    """A table with a column naming conversations (a chat app's ``session_id``) holds runs:
    ``--unsafe-fixes`` without ``--conversation`` leaves the calls of a row's last response open
    (the next run's row may answer them, as a deferred tool's approval does) and says so, as
    for a JSON record naming its conversation; a table without one is a table of histories,
    whose last calls HM407 closes."""
    db = tmp_path / "chat.sqlite"
    with closing(sqlite3.connect(db)) as con, con:
        con.execute(f"CREATE TABLE messages (id INTEGER PRIMARY KEY, {column} TEXT, message_list TEXT)")
        con.execute(
            f"INSERT INTO messages ({column}, message_list) VALUES ('s', ?)", [orjson.dumps([PROMPT, CALL]).decode()]
        )
    before = query(db, "SELECT message_list FROM messages")
    result = api.convert(str(db), None, Options(table="messages", unsafe_fixes=True), in_place=True)
    kept = column != "note"  # in any case, with or without the underscore
    assert (query(db, "SELECT message_list FROM messages") == before) == kept
    assert [row["rule"] for row in result.report.changes] == ([] if kept else ["HM407"])
    said = (
        "1 record names a conversation (conversation_id, session_id, ... in the record or a column): HM407 left the "
        "calls of the last response open, as another record of it may answer them; give --conversation COLUMN, or "
        "'*' for one conversation an input, to close them where a conversation is whole"
    )
    assert result.notes == ([said] if kept else [])


def test_a_conversation_a_trigger_leaves_a_row_of_unwritten_is_skipped_whole(tmp_path: Path) -> None:
    """A trigger that leaves the UPDATE of one row undone (``RAISE(IGNORE)``: archived rows
    are kept as they are) skips that row's whole conversation, rolled back, not written
    beside it; the other conversation is written."""
    db = tmp_path / "chat.sqlite"
    with closing(sqlite3.connect(db)) as con, con:
        con.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, conv TEXT, seq INT, frozen INT, messages TEXT)")
        for conv in ("a", "b"):
            again = [orjson.loads(orjson.dumps(m).replace(b'"c1"', b'"c2"')) for m in (CALL, RETRY)]
            for seq, piece in enumerate(([PROMPT, CALL], [RETRY], again[:1], again[1:])):
                frozen = int(conv == "a" and seq == 3)
                con.execute(
                    "INSERT INTO runs (conv, seq, frozen, messages) VALUES (?, ?, ?, ?)",
                    [conv, seq, frozen, orjson.dumps(piece).decode()],
                )
        con.execute(
            "CREATE TRIGGER keep_frozen BEFORE UPDATE ON runs FOR EACH ROW WHEN old.frozen "
            "BEGIN SELECT RAISE(IGNORE); END"
        )
    options = Options(table="runs", conversation=("conv",), order="seq")
    result = api.convert(str(db), None, options, in_place=True)
    assert sorted(row["location"] for row in result.report.errors) == ["id=2", "id=4"]
    held = query(db, "SELECT conv, messages FROM runs WHERE seq IN (1, 3) ORDER BY id")
    assert [(conv, "retry-prompt" in text) for conv, text in held] == [
        ("a", True),
        ("a", True),
        ("b", False),
        ("b", False),
    ]


def test_a_table_of_one_message_a_row_finds_its_column_by_the_message_it_holds(tmp_path: Path) -> None:
    """``chat_messages (id, conversation_id, seq, message)``: under ``--conversation`` the
    ``message`` column is found as a history's would be; alone, a row of one message is no
    history: the column is not guessed, and the error names what would read it."""
    db = tmp_path / "chat.sqlite"
    with closing(sqlite3.connect(db)) as con, con:
        con.execute("CREATE TABLE chat_messages (id INTEGER PRIMARY KEY, conversation_id TEXT, seq INT, message TEXT)")
        con.executemany(
            "INSERT INTO chat_messages (conversation_id, seq, message) VALUES ('c', ?, ?)",
            [(seq, orjson.dumps(message).decode()) for seq, message in enumerate((PROMPT, CALL, RETRY))],
        )
    grouped = Options(table="chat_messages", conversation=("conversation_id",), order="seq")
    result = api.convert(str(db), None, grouped, in_place=True)
    assert [(row["location"], row["rule"]) for row in result.report.changes] == [("id=3", "HM101")]
    said = "chat_messages: column 'message' holds one message a row, not a history: put each conversation together"
    with pytest.raises(UnreadableInput, match=said):
        api.audit(str(db), Options(table="chat_messages"))
