"""DuckDB source and sinks (histmig.sources.duckdb): to Parquet, JSONL, a new table and in
place; the same messages as the JSONL path, every other column unchanged, and a failed
in-place run leaves the table as it was."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from histmig import api
from histmig.cli import app
from histmig.engine import Stream
from histmig.options import Options
from histmig.sources.duckdb import DuckdbTable, quote
from tests.conftest import CORPUS, run_pieces, stored_apart
from tests.sources.conftest import (
    CALL,
    PROMPT,
    corpus_records,
    jsonl_path_output,
    legacy_nested_table,
    nested_records,
    table_of,
    without_place,
)

runner = CliRunner()
OTHER = ["id", "name", "created", "tags", "nothing", "score"]
TABLE = 'conversations "2025"'


def invoke(*args: str):
    return runner.invoke(app, list(args))


def make_db(path: Path, records, messages_type: str) -> Path:
    """A database whose table :data:`TABLE` holds ``records`` (``messages_type``: JSON,
    VARCHAR or NESTED) and the extra columns of ``table_of``."""
    data = table_of(records, nested=messages_type == "NESTED")
    with duckdb.connect(str(path)) as con:
        con.register("src", data)
        cast = "messages" if messages_type == "NESTED" else f"CAST(messages AS {messages_type}) AS messages"
        con.execute(
            f"CREATE TABLE {quote(TABLE)} AS SELECT id, name, created, tags, CAST(nothing AS INTEGER) AS nothing, {cast}, score FROM src"
        )
    return path


def read_table(path: Path, table: str = TABLE) -> pa.Table:
    """The table's rows by ``id`` (DuckDB stores an updated nested value as a new row
    version, so scan order is not insertion order after an in-place run)."""
    with duckdb.connect(str(path), read_only=True) as con:
        return con.sql(f"SELECT * FROM {quote(table)} ORDER BY id").to_arrow_table()


def column_types(path: Path, table: str = TABLE) -> list[tuple]:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(f"DESCRIBE {quote(table)}").fetchall()


@pytest.fixture(scope="module")
def records():
    return corpus_records()


@pytest.mark.parametrize("messages_type", ["JSON", "VARCHAR"])
def test_to_parquet_matches_the_jsonl_path(tmp_path: Path, records, messages_type: str) -> None:
    db = make_db(tmp_path / "chats.duckdb", records, messages_type)
    out = tmp_path / "out.parquet"
    report = tmp_path / "r.json"
    result = invoke(
        "convert",
        str(db),
        str(out),
        "--table",
        TABLE,
        "--messages-column",
        "messages",
        "--report",
        str(report),
        "--report-format",
        "json",
    )
    assert result.exit_code == 0, result.output
    expected, jsonl_report = jsonl_path_output(records, tmp_path)
    written = pq.read_table(out)
    assert [c.encode() for c in written.column("messages").to_pylist()] == expected
    before = read_table(db)
    for name in OTHER:
        assert written.column(name).equals(before.column(name)), name
    data = orjson.loads(report.read_bytes())
    assert data["summary"] == jsonl_report["summary"]
    assert without_place(data["changes"]) == without_place(jsonl_report["changes"])
    assert data["changes"][0]["source"] == f"{db}:{TABLE}"


@pytest.mark.parametrize("column", ["chat_id", "note"])
def test_without_conversation_a_row_beside_a_column_naming_conversations_keeps_its_last_calls_open_in_place(
    tmp_path: Path, column: str
) -> None:
    """As a SQLite table's (``test_sqlite.py``), in place too, where only the messages are read:
    a table with a column naming conversations holds runs, whose last calls ``--unsafe-fixes``
    leaves open without ``--conversation``."""
    db = tmp_path / "chats.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(f"CREATE TABLE runs (id INTEGER, {column} VARCHAR, messages VARCHAR)")
        con.execute("INSERT INTO runs VALUES (1, 'c', ?)", [orjson.dumps([PROMPT, CALL]).decode()])
    result = api.convert(str(db), None, Options(table="runs", unsafe_fixes=True), in_place=True)
    kept = column == "chat_id"
    assert [row["rule"] for row in result.report.changes] == ([] if kept else ["HM407"])
    with duckdb.connect(str(db)) as con:
        (held,) = con.execute("SELECT messages FROM runs").fetchone()
    assert (orjson.loads(held) == [PROMPT, CALL]) == kept


def test_to_jsonl(tmp_path: Path, records) -> None:
    db = make_db(tmp_path / "chats.duckdb", records, "JSON")
    out = tmp_path / "out.jsonl"
    assert invoke("convert", str(db), str(out), "--table", TABLE, "-q").exit_code == 0
    expected, _ = jsonl_path_output(records, tmp_path)
    rows = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert [orjson.dumps(r["messages"]) for r in rows] == [orjson.dumps(orjson.loads(e)) for e in expected]
    assert [r["id"] for r in rows] == list(range(1000, 1000 + len(records)))
    assert invoke("check", str(out), "--messages-field", "messages", "-q").exit_code == 0


def test_to_table(tmp_path: Path, records) -> None:
    db = make_db(tmp_path / "chats.duckdb", records, "JSON")
    assert invoke("convert", str(db), "--table", TABLE, "--to-table", "converted", "-q").exit_code == 0
    expected, _ = jsonl_path_output(records, tmp_path)
    before, after = read_table(db), read_table(db, "converted")
    assert [c.encode() for c in after.column("messages").to_pylist()] == expected
    for name in OTHER:
        assert after.column(name).equals(before.column(name)), name
    assert column_types(db, "converted") == column_types(db)
    assert invoke("convert", str(db), "--table", TABLE, "--to-table", "converted", "-q").exit_code == 2


def test_in_place_then_check(tmp_path: Path, records) -> None:
    db = make_db(tmp_path / "chats.duckdb", records, "JSON")
    before = read_table(db)
    assert invoke("check", str(db), "--table", TABLE, "-q").exit_code == 1
    assert invoke("convert", str(db), "--table", TABLE, "--in-place", "-q").exit_code == 0
    after = read_table(db)
    expected, _ = jsonl_path_output(records, tmp_path)
    assert [c.encode() for c in after.column("messages").to_pylist()] == expected
    for name in OTHER:
        assert after.column(name).equals(before.column(name)), name
    assert invoke("check", str(db), "--table", TABLE, "--id-column", "name", "-q").exit_code == 0


def test_failed_in_place_run_leaves_the_table_untouched(
    tmp_path: Path, records, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = make_db(tmp_path / "chats.duckdb", records, "JSON")
    before, types = read_table(db), column_types(db)
    calls = {"n": 0}
    real = Stream.screened

    def failing(stream: Stream, raw: bytes) -> bool:
        calls["n"] += 1
        if calls["n"] > len(records) // 2:
            raise RuntimeError("interrupted half way")
        return real(stream, raw)

    monkeypatch.setattr(Stream, "screened", failing)
    with pytest.raises(RuntimeError, match="half way"):
        api.convert(str(db), None, Options(table=TABLE), in_place=True).report
    assert calls["n"] > len(records) // 2
    after = read_table(db)
    assert after.equals(before)
    assert [c.encode() for c in after.column("messages").to_pylist()] == [
        c.encode() for c in before.column("messages").to_pylist()
    ]
    assert column_types(db) == types
    with duckdb.connect(str(db), read_only=True) as con:
        assert [t[0] for t in con.execute("SELECT table_name FROM information_schema.tables").fetchall()] == [TABLE]


def test_nested_column_in_place_is_widened(tmp_path: Path) -> None:
    nested = nested_records()
    db = make_db(tmp_path / "nested.duckdb", nested, "NESTED")
    before = read_table(db)
    out = tmp_path / "nested.parquet"
    report = api.convert(str(db), str(out), Options(table=TABLE)).report
    in_place = api.convert(str(db), None, Options(table=TABLE), in_place=True).report
    assert in_place.summary() == report.summary()
    assert report.counts["changed"] > 50
    after = read_table(db)
    assert after.column("messages").to_pylist() == pq.read_table(out).column("messages").to_pylist()
    for name in OTHER:
        assert after.column(name).equals(before.column(name)), name
    messages_type = dict((row[0], row[1]) for row in column_types(db))["messages"]
    assert "outcome VARCHAR" in messages_type and "retry STRUCT(" in messages_type


def test_a_legacy_nested_column_widened_in_place_still_loads_in_2_68(tmp_path: Path) -> None:
    """As on Parquet: the unchanged row's tool-return gets the outcome it means, not the null
    the widened column would give it; a table with nothing to migrate is left as it is."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    db = tmp_path / "legacy.duckdb"
    with duckdb.connect(str(db)) as con:
        con.register("legacy", legacy_nested_table())
        con.execute("CREATE TABLE t AS SELECT * FROM legacy")
        con.execute("CREATE TABLE u AS SELECT * FROM legacy WHERE id = 'ok'")
    report = api.convert(str(db), None, Options(table="t"), in_place=True).report
    assert (report.counts["changed"], report.counts["unchanged"]) == (1, 1)
    assert api.convert(str(db), None, Options(table="u"), in_place=True).report.counts["changed"] == 0
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT id, to_json(messages)::VARCHAR FROM t ORDER BY id").fetchall()
        untouched = con.execute(
            "SELECT data_type FROM information_schema.columns WHERE table_name = 'u' AND column_name = 'messages'"
        ).fetchone()
    outcomes = {key: orjson.loads(text)[2]["parts"][0]["outcome"] for key, text in rows}
    assert outcomes == {"ok": "success", "retried": "retried"}
    for _, text in rows:
        ModelMessagesTypeAdapter.validate_json(text)
    assert untouched is not None and "outcome" not in untouched[0]


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("--table", "missing"),
        ("--table", TABLE, "--messages-column", "nothing"),
        ("--table", TABLE, "--in-place", "--to-table", "x"),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, records, args: tuple[str, ...]) -> None:
    db = make_db(tmp_path / "chats.duckdb", records[:5], "JSON")
    result = invoke("convert", str(db), *args) if "--in-place" in args else invoke("audit", str(db), *args)
    assert result.exit_code == 2, result.output


def test_missing_database_is_not_created(tmp_path: Path) -> None:
    assert invoke("audit", str(tmp_path / "none.duckdb"), "--table", TABLE).exit_code == 2
    assert not (tmp_path / "none.duckdb").exists()


def test_an_existing_table_is_replaced_only_with_overwrite(tmp_path: Path, records) -> None:
    db = make_db(tmp_path / "chats.duckdb", records[:20], "JSON")
    assert invoke("convert", str(db), "--table", TABLE, "--to-table", "converted", "-q").exit_code == 0
    first = read_table(db, "converted")
    again = invoke("convert", str(db), "--table", TABLE, "--to-table", "converted", "-q")
    assert (again.exit_code, again.stderr) == (
        2,
        f"histmig: cannot write {db}: table 'converted' already exists (--overwrite replaces it)\n",
    )
    with duckdb.connect(str(db)) as con:
        con.execute("DELETE FROM converted")
    replaced = invoke("convert", str(db), "--table", TABLE, "--to-table", "converted", "--overwrite", "-q")
    assert replaced.exit_code == 0, replaced.output
    assert read_table(db, "converted").equals(first)
    for name in (TABLE, TABLE.upper()):  # DuckDB's names ignore case
        itself = invoke("convert", str(db), "--table", TABLE, "--to-table", name, "--overwrite", "-q")
        assert (itself.exit_code, itself.stderr) == (
            2,
            f"histmig: {db}: --to-table names the table read; use --in-place to rewrite it\n",
        )
    assert read_table(db).num_rows == 20
    cased = invoke("convert", str(db), "--table", TABLE, "--to-table", "CONVERTED", "-q")
    assert (cased.exit_code, cased.stderr) == (
        2,
        f"histmig: cannot write {db}: table 'CONVERTED' already exists (--overwrite replaces it)\n",
    )


def test_a_database_without_table_says_which_tables_it_has(tmp_path: Path, records) -> None:
    db = make_db(tmp_path / "chats.duckdb", records[:2], "JSON")
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE archive (x INTEGER)")
    result = invoke("audit", str(db), "-q")
    assert (result.exit_code, result.stderr) == (
        2,
        f"histmig: {db}: a DuckDB input needs --table (its tables: archive, {TABLE})\n",
    )
    missing = invoke("audit", str(db), "--table", "chats", "-q")
    assert missing.stderr == f"histmig: cannot read {db}: no table 'chats' (its tables: archive, {TABLE})\n"


def test_to_table_keeps_the_keys_and_constraints_and_rows_are_named_by_the_primary_key(tmp_path: Path, records) -> None:
    db = tmp_path / "chats.duckdb"
    legacy = [r for r in records if b"retry-prompt" in orjson.dumps(r)][:4]
    with duckdb.connect(str(db)) as con:
        con.execute(
            'CREATE TABLE conv (conv_key VARCHAR PRIMARY KEY, "chat-history" JSON NOT NULL, n INTEGER DEFAULT 3 CHECK (n > 0), u VARCHAR UNIQUE, a INTEGER, b INTEGER, UNIQUE (a, b))'
        )
        con.executemany(
            "INSERT INTO conv VALUES (?, ?, ?, ?, ?, ?)",
            [(f"k-{i}", orjson.dumps(r["messages"]).decode(), i + 1, f"u{i}", i, i) for i, r in enumerate(legacy)],
        )
    result = invoke(
        "convert", str(db), "--table", "conv", "--to-table", "conv_v2", "--report", "-", "--report-format", "json"
    )
    assert result.exit_code == 0, result.output
    assert {row["id"] for row in orjson.loads(result.stdout)["changes"]} == {f"k-{i}" for i in range(4)}
    with duckdb.connect(str(db)) as con:

        def shape(table: str) -> list:
            return (
                sorted(
                    con.execute(
                        "SELECT constraint_type, constraint_text FROM duckdb_constraints() WHERE table_name = ?",
                        [table],
                    ).fetchall()
                )
                + con.execute(
                    "SELECT column_name, data_type, is_nullable, column_default FROM duckdb_columns() WHERE table_name = ? ORDER BY column_index",
                    [table],
                ).fetchall()
            )

        assert shape("conv_v2") == shape("conv")
        assert con.execute("SELECT count(*) FROM conv_v2").fetchone() == (4,)
        with pytest.raises(duckdb.ConstraintException):
            con.execute("INSERT INTO conv_v2 (conv_key, \"chat-history\") VALUES ('k-0', '[]')")


def test_to_table_of_a_table_without_rows_is_created_or_replaced_and_without_table_is_a_usage_error(
    tmp_path: Path, records
) -> None:
    db = make_db(tmp_path / "chats.duckdb", records[:3], "JSON")
    with duckdb.connect(str(db)) as con:
        con.execute(f"CREATE TABLE empty AS SELECT * FROM {quote(TABLE)} LIMIT 0")
        con.execute(f"CREATE TABLE old AS SELECT * FROM {quote(TABLE)}")
    assert invoke("convert", str(db), "--table", "empty", "--to-table", "fresh", "-q").exit_code == 0
    assert invoke("convert", str(db), "--table", "empty", "--to-table", "old", "--overwrite", "-q").exit_code == 0
    assert (read_table(db, "fresh").num_rows, read_table(db, "old").num_rows) == (0, 0)
    assert read_table(db, "old").schema == read_table(db, "empty").schema
    missing = invoke("convert", str(db), "--to-table", "out")
    assert missing.exit_code == 2 and missing.stderr.startswith(
        f"histmig: {db}: a DuckDB input needs --table (its tables: "
    )


def test_a_view_is_no_in_place_input_nor_a_table_to_overwrite(tmp_path: Path, records) -> None:
    db = make_db(tmp_path / "chats.duckdb", records[:5], "JSON")
    with duckdb.connect(str(db)) as con:
        con.execute(f"CREATE VIEW recent AS SELECT * FROM {quote(TABLE)}")
    in_place = invoke("convert", str(db), "--table", "recent", "--in-place")
    assert (in_place.exit_code, in_place.stderr) == (
        2,
        f"histmig: {db}: 'recent' is a view, which --in-place cannot write; use --to-table\n",
    )
    over = invoke("convert", str(db), "--table", TABLE, "--to-table", "recent", "--overwrite")
    assert over.exit_code == 2
    assert (
        over.stderr
        == f'histmig: cannot write {db}:{TABLE}: Catalog Error: Existing object "recent" is of type View, trying to drop type Table\n'
    )
    assert read_table(db).num_rows == 5 and read_table(db, "recent").num_rows == 5


@pytest.mark.parametrize("name", ["__histmig_batch", "__HISTMIG_UPDATES_2"])
def test_histmig_s_own_names_never_stand_for_a_user_s(tmp_path: Path, records, name: str) -> None:
    db = make_db(tmp_path / "chats.duckdb", records, "JSON")
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE __histmig_updates (kept VARCHAR)")  # a user's, of the name of histmig's own
        con.execute("INSERT INTO __histmig_updates VALUES ('mine')")
        con.execute(f"ALTER TABLE {quote(TABLE)} RENAME COLUMN name TO __histmig_rowid")
    common = ("--table", TABLE, "--messages-column", "messages", "--id-column", "__histmig_rowid", "-q")
    done = invoke("convert", str(db), "--to-table", name, *common)
    assert (done.exit_code, done.stderr) == (0, ""), done.stderr
    in_place = invoke("convert", str(db), "--in-place", *common)
    assert (in_place.exit_code, in_place.stderr) == (0, ""), in_place.stderr
    assert read_table(db, name).column("messages").to_pylist() == read_table(db).column("messages").to_pylist()
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT * FROM __histmig_updates").fetchall() == [("mine",)]


def test_to_table_says_which_foreign_keys_and_indexes_it_left_out(tmp_path: Path, records) -> None:
    db = tmp_path / "chats.duckdb"
    legacy = next(r for r in records if b"retry-prompt" in orjson.dumps(r))
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE users (id INTEGER PRIMARY KEY)")
        con.execute("INSERT INTO users VALUES (1)")
        con.execute("CREATE TABLE conv (id INTEGER PRIMARY KEY, user_id INTEGER REFERENCES users (id), messages JSON)")
        con.execute("CREATE INDEX by_user ON conv (user_id)")
        con.execute("CREATE INDEX by_messages ON conv (messages)")
        con.execute("INSERT INTO conv VALUES (1, 1, ?)", [orjson.dumps(legacy["messages"]).decode()])
        con.execute("CREATE TABLE plain AS SELECT id, messages FROM conv")
    result = api.convert(str(db), None, Options(table="conv"), to_table="conv_v2")
    assert result.verdict.endswith(
        "written to conv_v2 (without the 1 foreign key and 2 indexes of the table read: --to-table does not copy them)"
    )
    with duckdb.connect(str(db)) as con:
        assert con.execute("SELECT count(*) FROM duckdb_indexes() WHERE table_name = 'conv_v2'").fetchall() == [(0,)]
    bare = api.convert(str(db), None, Options(table="plain"), to_table="plain_v2")
    assert bare.verdict.endswith("written to plain_v2")  # nothing left out: nothing said


def test_in_place_writes_the_rows_holding_a_null_2_68_refuses_though_nothing_is_migrated(tmp_path: Path) -> None:
    """A mixed-era nested column with no legacy part: ``convert --in-place`` still writes the
    rows whose nulls 2.68 refuses (histmig.sources.arrow), so ``check`` passes after it."""
    from tests.sources.test_arrow import _mixed_era_parquet, _refusals

    source, back = tmp_path / "mixed.parquet", tmp_path / "back.parquet"
    names = _mixed_era_parquet(source)
    db = tmp_path / "chats.duckdb"
    with duckdb.connect(str(db)) as con:
        con.register("mixed", pq.read_table(source))
        con.execute("CREATE TABLE chats AS SELECT * FROM mixed")
    assert api.check(str(db), Options(table="chats")).exit_code == 1
    result = api.convert(str(db), None, Options(table="chats"), in_place=True)
    assert (result.exit_code, result.report.counts["changed"]) == (0, 0)
    assert api.check(str(db), Options(table="chats")).exit_code == 0
    with duckdb.connect(str(db)) as con:
        pq.write_table(con.sql("SELECT * FROM chats ORDER BY id").to_arrow_table(), back)
    assert _refusals(back) == {}
    assert sorted(pq.read_table(back).column("id").to_pylist()) == sorted(names)


# ------------------------------------------------------------ rows grouped into conversations (issue 25)


def sessions_db(path: Path, records: list[dict[str, Any]]) -> Path:
    """A table ``runs (id INTEGER PRIMARY KEY, session_id VARCHAR, seq INTEGER, messages JSON)`` of
    ``records`` (:func:`~tests.conftest.stored_apart`'s) in their order, ``id`` their position."""
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, session_id VARCHAR, seq INTEGER, messages JSON)")
        con.executemany(
            "INSERT INTO runs VALUES (?, ?, ?, ?)",
            [(n, r["conversation_id"], r["seq"], orjson.dumps(r["messages"]).decode()) for n, r in enumerate(records)],
        )
    return path


def rows_of(path: Path) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute("SELECT id, session_id, seq, messages FROM runs ORDER BY id").fetchall()


GROUPED = Options(table="runs", conversation=("session_id",), order="seq", unsafe_fixes=True)


@pytest.mark.parametrize(
    ("write", "kept"),
    [
        pytest.param(
            "messages = CAST(messages AS VARCHAR) || ' '", "ends_with(CAST(messages AS VARCHAR), ' ')", id="messages"
        ),
        pytest.param("seq = seq + 1000", "seq = 1001", id="order"),  # it stays last
    ],
)
def test_a_conversation_an_application_changes_mid_run_is_skipped_whole_and_a_rerun_completes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write: str, kept: str
) -> None:
    _, stored = stored_apart("per run")
    db = sessions_db(tmp_path / "runs.duckdb", stored)
    victim = "v2.59.0/m_deferred_tool_model_retry"
    first = next(n for n, r in enumerate(stored) if (r["conversation_id"], r["seq"]) == (victim, 1))
    real = DuckdbTable._replay

    def app_writes_first(table: DuckdbTable) -> None:
        with duckdb.connect(str(db)) as con:  # the application, in this process, rewrites a row histmig read
            con.execute(f"UPDATE runs SET {write} WHERE id = ?", [first])
        real(table)

    monkeypatch.setattr(DuckdbTable, "_replay", app_writes_first)
    result = api.convert(str(db), None, GROUPED, in_place=True)
    skipped = [row["location"] for row in result.report.errors if row["status"] == "skipped"]
    named = {f"row {n}": r["conversation_id"] for n, r in enumerate(stored)}
    assert skipped and {named[location] for location in skipped} == {victim}
    assert result.report.counts["skipped"] == len(skipped) and result.exit_code == 1
    held = [m for _, session, _, m in rows_of(db) if session == victim]
    assert "retry-prompt" in "".join(held)
    with duckdb.connect(str(db), read_only=True) as con:  # the application's write kept
        assert con.execute(f"SELECT count(*) FROM runs WHERE id = ? AND {kept}", [first]).fetchall() == [(1,)]
    monkeypatch.undo()
    again = api.convert(str(db), None, GROUPED, in_place=True)
    assert again.report.counts["changed"] == len(skipped) and again.exit_code == 0
    assert api.check(str(db), GROUPED).report.counts["changed"] == 0


def test_a_file_output_and_a_new_table_get_what_in_place_writes_in_the_table_s_row_order(tmp_path: Path) -> None:
    _, stored = stored_apart("per message")
    db = sessions_db(tmp_path / "runs.duckdb", stored)
    assert api.convert(str(db), str(tmp_path / "out.parquet"), GROUPED).exit_code == 0
    assert api.convert(str(db), None, replace(GROUPED, ignore=()), to_table="runs_v2").exit_code == 0
    assert api.convert(str(db), None, GROUPED, in_place=True).exit_code == 0
    in_place = rows_of(db)
    parquet_rows = pq.read_table(tmp_path / "out.parquet").to_pylist()
    assert [tuple(row.values()) for row in parquet_rows] == in_place  # the table's order: id, as inserted
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT id, session_id, seq, messages FROM runs_v2 ORDER BY id").fetchall() == in_place
    assert in_place != [
        (n, r["conversation_id"], r["seq"], orjson.dumps(r["messages"]).decode()) for n, r in enumerate(stored)
    ]


def test_equal_order_values_go_by_the_primary_key_and_a_null_key_is_a_conversation_of_its_own(tmp_path: Path) -> None:
    runs = run_pieces(orjson.loads((CORPUS / "v2.59.0" / "m_deferred_tool_model_retry.json").read_bytes()))
    alone = orjson.loads((CORPUS / "v2.59.0" / "h_empty_response.json").read_bytes())
    db = tmp_path / "runs.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, session_id VARCHAR, seq INTEGER, messages JSON)")
        rows = [(5, "s", 0, runs[1]), (7, None, 0, alone), (2, "s", 0, runs[0])]  # inserted out of key order
        con.executemany(
            "INSERT INTO runs VALUES (?, ?, ?, ?)", [(k, s, n, orjson.dumps(m).decode()) for k, s, n, m in rows]
        )
    result = api.audit(str(db), GROUPED)
    changes = sorted((row["location"], row["id"], row["rule"]) for row in result.report.changes)
    assert changes == [("row 0", "5", "HM101"), ("row 0", "5", "HM407"), ("row 1", "7", "HM102")]
    assert [(row["location"], row["warnings"]) for row in result.report.warnings] == [
        ("row 1", ["no conversation key (session_id null): a conversation of its own"])
    ]
    sizes = [len(orjson.dumps(messages)) for *_, messages in rows]
    limit = max(sizes) + 10
    assert sizes[0] + sizes[2] > limit  # the two rows of "s" together hold more
    refused = api.convert(str(db), None, replace(GROUPED, max_conversation_bytes=limit), in_place=True)
    assert refused.exit_code == 1 and {row["location"] for row in refused.report.errors} == {"row 0", "row 2"}
    with duckdb.connect(str(db), read_only=True) as con:
        held = dict(con.execute("SELECT id, messages FROM runs").fetchall())
    assert orjson.loads(held[5]) == runs[1] and orjson.loads(held[2]) == runs[0]  # nothing written for it
    assert orjson.loads(held[7]) != alone


def test_a_conversation_column_the_table_lacks_is_an_error_naming_it(tmp_path: Path) -> None:
    db = sessions_db(tmp_path / "runs.duckdb", [{"conversation_id": "s", "seq": 0, "messages": []}])
    done = invoke("audit", str(db), "--table", "runs", "--conversation", "sesion_id")
    assert done.exit_code == 2
    assert f"{db}:runs: no column 'sesion_id' (columns: id, session_id, seq, messages)" in done.stderr


@pytest.mark.parametrize(
    ("key", "order", "said"),
    [
        ("STRUCT(a INTEGER)", "INTEGER", "--conversation column 'session_id' is struct<a: int32>: a key"),
        ("MAP(VARCHAR, INTEGER)", "INTEGER", "--conversation column 'session_id' is map<string, int32>: a key"),
        ("VARCHAR", "INTERVAL", "--order column 'seq' is month_day_nano_interval: an order"),
    ],
)
def test_a_conversation_or_order_column_arrow_cannot_sort_is_an_error_naming_its_type(
    tmp_path: Path, key: str, order: str, said: str
) -> None:
    db = sessions_db(tmp_path / "runs.duckdb", [{"conversation_id": "s", "seq": 0, "messages": []}])
    with duckdb.connect(str(db)) as con:
        con.execute(f"ALTER TABLE runs ALTER session_id SET DATA TYPE {key} USING NULL")
        con.execute(f"ALTER TABLE runs ALTER seq SET DATA TYPE {order} USING NULL")
    done = invoke("convert", str(db), "--table", "runs", "--conversation", "session_id", "--order", "seq", "--in-place")
    must = "must be a string, a number, a boolean, a date, a time, a timestamp, a duration or binary"
    assert (done.exit_code, done.stderr) == (2, f"histmig: cannot read {db}:runs: {said} {must}\n")


@pytest.mark.parametrize(
    ("conversation", "write"),
    [
        ("*", "messages = CAST(messages AS VARCHAR) || ' '"),
        ("session_id", "messages = CAST(messages AS VARCHAR) || ' '"),
        ("session_id", "session_id = 'moved'"),
    ],
)
def test_a_row_an_application_changes_skips_the_whole_table_or_the_row_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, conversation: str, write: str
) -> None:
    """``--conversation '*'``: the whole table is one conversation, so a row the application
    writes meanwhile skips it all; a row whose conversation key is null is found again by its
    ``rowid``, and only it is skipped, its messages changed or a conversation key given it."""
    runs = run_pieces(orjson.loads((CORPUS / "v2.59.0" / "m_deferred_tool_model_retry.json").read_bytes()))
    alone = orjson.loads((CORPUS / "v2.59.0" / "h_empty_response.json").read_bytes())
    db = sessions_db(
        tmp_path / "runs.duckdb",
        [
            {"conversation_id": "s", "seq": 0, "messages": runs[0]},
            {"conversation_id": None, "seq": 1, "messages": alone},
            {"conversation_id": "s", "seq": 2, "messages": runs[1]},
        ],
    )
    real = DuckdbTable._replay

    def app_writes_first(table: DuckdbTable) -> None:
        with duckdb.connect(str(db)) as con:
            con.execute(f"UPDATE runs SET {write} WHERE id = 1")
        real(table)

    monkeypatch.setattr(DuckdbTable, "_replay", app_writes_first)
    options = replace(GROUPED, conversation=(conversation,))
    result = api.convert(str(db), None, options, in_place=True)
    skipped = sorted(row["location"] for row in result.report.errors if row["status"] == "skipped")
    assert skipped == (["row 1", "row 2"] if conversation == "*" else ["row 1"])
    held = {key: value for key, _, _, value in rows_of(db)}
    assert ("retry-prompt" in held[2]) == (conversation == "*")  # the other conversation written, or not
    monkeypatch.undo()
    assert api.convert(str(db), None, options, in_place=True).report.counts["changed"] == len(skipped)


@pytest.mark.parametrize(
    ("type_", "key"),
    [
        pytest.param("UUID", lambda n: str(uuid.UUID(int=n << 64 | n)), id="uuid"),
        pytest.param("DECIMAL(18,3)", lambda n: f"{n}.125", id="decimal"),
        pytest.param("DATE", lambda n: str(date(2000, 1, 1) + timedelta(days=n)), id="date"),
    ],
)
def test_in_place_finishes_whatever_the_conversation_key_s_type(tmp_path: Path, type_: str, key: Any) -> None:
    """The re-read of a write in place compares each key as the column's type (a UUID is no VARCHAR)."""
    _, stored = stored_apart("per message")
    numbers = {session: n for n, session in enumerate(dict.fromkeys(r["conversation_id"] for r in stored))}
    db = tmp_path / "runs.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(f"CREATE TABLE runs (id INTEGER PRIMARY KEY, session_id {type_}, seq INTEGER, messages JSON)")
        con.executemany(
            f"INSERT INTO runs VALUES (?, CAST(? AS {type_}), ?, ?)",
            [
                (n, key(numbers[r["conversation_id"]]), r["seq"], orjson.dumps(r["messages"]).decode())
                for n, r in enumerate(stored)
            ],
        )
        assert con.execute("SELECT count(DISTINCT session_id) FROM runs").fetchall() == [(len(numbers),)]
    first = api.convert(str(db), None, GROUPED, in_place=True)
    assert first.report.counts["skipped"] == 0 and first.report.counts["changed"] > 0 and first.exit_code == 0
    assert api.check(str(db), GROUPED).report.counts["changed"] == 0
