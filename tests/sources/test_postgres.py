"""PostgreSQL (histmig.sources.postgres) against a real server (the postgres_server fixture):
the shared corpus in tables of each column type, with extra columns of several types;
in place, to a new table and to files; unchanged rows never rewritten (xmin); a run killed
mid-way, an application writing meanwhile, bad rows, keys, options and errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import orjson
import psycopg
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from histmig import api
from histmig.cli import app
from histmig.engine import Stream
from histmig.errors import UnreadableInput, UsageError
from histmig.options import Options
from histmig.report import SKIPPED
from histmig.sources import format_of, postgres, table
from histmig.sources.base import lazy
from histmig.sources.postgres import PostgresTable
from tests.conftest import CORPUS, ROOT, assert_reassembled, not_applicable, stored_apart
from tests.sources.conftest import ANSWER, CALL, PROMPT, RETRY, corpus_records, jsonl_path_output, without_place

TABLE = "conversations"
OTHER = "id, name, created, tags, nothing, score, amount, ref"
COLUMN_TYPES = ["jsonb", "json", "text", "varchar", "bytea"]
runner = CliRunner()


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    return corpus_records()


def stored(records: list[dict[str, Any]], messages_type: str) -> list[Any]:
    """Each record's messages as the column holds them (bytes for bytea)."""
    texts = [orjson.dumps(r["messages"]) for r in records]
    return texts if messages_type == "bytea" else [t.decode() for t in texts]


def make_table(
    url: str, records: list[dict[str, Any]], messages_type: str = "jsonb", table: str = TABLE, first_id: int = 1000
) -> None:
    """A table ``table`` of ``records``: ``id`` bigint primary key, ``name`` text,
    ``created`` timestamptz, ``tags`` text[], ``nothing`` integer (null), ``messages`` of
    ``messages_type``, ``score`` float8 (some null), ``amount`` numeric, ``ref`` uuid."""
    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    rows = [
        (
            first_id + i,
            r["id"],
            start + timedelta(minutes=i),
            [r["version"], r["scenario"]][: i % 3],
            None,
            value,
            None if i % 4 == 0 else i / 8,
            Decimal(i) / 7,
            uuid.UUID(int=i),
        )
        for i, (r, value) in enumerate(zip(records, stored(records, messages_type)))
    ]
    with psycopg.connect(url, autocommit=True) as con:
        con.execute(
            f"CREATE TABLE IF NOT EXISTS {table} (id bigint PRIMARY KEY, name text, created timestamptz, tags text[], nothing integer, "
            f"messages {messages_type}, score float8, amount numeric(20, 6), ref uuid)"
        )
        with con.cursor() as cursor:
            cursor.executemany(f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)", rows)


def query(url: str, statement: str, params: tuple = ()) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as con:
        cursor = con.execute(statement, params)
        return cursor.fetchall() if cursor.description is not None else []


def messages(url: str, table: str = TABLE) -> list[Any]:
    """The messages of each row in id order, as JSON values."""
    return [
        orjson.loads(text)
        for (text,) in query(
            url,
            f"SELECT convert_to(CASE WHEN pg_typeof(messages) = 'bytea'::regtype THEN convert_from(messages::text::bytea, 'UTF8') ELSE messages::text END, 'UTF8') FROM {table} ORDER BY id",
        )
    ]


def raw_messages(url: str, table: str = TABLE) -> list[bytes]:
    """The stored text of each row's messages in id order (bytea: its bytes)."""
    kind = query(
        url,
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'messages'",
        (table,),
    )[0][0]
    expression = "messages" if kind == "bytea" else "convert_to(messages::text, 'UTF8')"
    return [bytes(value) for (value,) in query(url, f"SELECT {expression} FROM {table} ORDER BY id")]


def xmins(url: str, table: str = TABLE) -> dict[int, str]:
    return dict(query(url, f"SELECT id, xmin::text FROM {table} ORDER BY id"))


def others(url: str, table: str = TABLE) -> list[tuple]:
    return query(url, f"SELECT {OTHER} FROM {table} ORDER BY id")


def column_types(url: str, table: str = TABLE) -> list[tuple]:
    return query(
        url,
        "SELECT attname, format_type(atttypid, atttypmod), attnotnull FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 ORDER BY attnum",
        (table,),
    )


@pytest.mark.parametrize("messages_type", COLUMN_TYPES)
def test_in_place_matches_the_jsonl_path_and_rewrites_only_changed_rows(
    postgres_db: str, records, tmp_path: Path, messages_type: str
) -> None:
    make_table(postgres_db, records, messages_type)
    before, xmin_before, values_before = others(postgres_db), xmins(postgres_db), messages(postgres_db)
    result = api.convert(postgres_db, None, Options(table=TABLE, messages_column="messages", jobs=2), in_place=True)
    assert result.exit_code == 0
    expected, jsonl_report = jsonl_path_output(records, tmp_path)
    after = messages(postgres_db)
    assert after == [orjson.loads(line) for line in expected]
    if messages_type != "jsonb":  # text keeps its bytes: unchanged rows as they were, migrated ones compact
        assert raw_messages(postgres_db) == expected
    assert others(postgres_db) == before
    changed = {1000 + i for i, (old, new) in enumerate(zip(values_before, after)) if old != new}
    xmin_after = xmins(postgres_db)
    assert {key for key in xmin_before if xmin_after[key] != xmin_before[key]} == changed
    assert len(changed) == result.report.counts["changed"] == 138
    report = result.report.to_json()
    assert report["summary"] == jsonl_report["summary"]
    assert without_place(report["changes"]) == without_place(jsonl_report["changes"])
    first = report["changes"][0]
    assert (first["source"], first["key"]) == (
        f"{postgres_db}:{TABLE}",
        f"id={1000 + jsonl_report['changes'][0]['line'] - 1}",
    )
    assert (
        result.verdict
        == f"histmig convert: 138 of 212 records migrated, 74 unchanged, 0 rejected; written to {postgres_db}:{TABLE} (in place)"
    )

    again = api.convert(postgres_db, None, Options(table=TABLE, jobs=1), in_place=True)
    assert again.report.counts["changed"] == 0 and again.report.counts["unchanged"] == 212
    assert xmins(postgres_db) == xmin_after
    assert api.check(postgres_db, Options(table=TABLE)).exit_code == 0


def test_to_table_and_files_match_the_jsonl_path(postgres_db: str, records, tmp_path: Path) -> None:
    make_table(postgres_db, records, "jsonb")
    before = others(postgres_db)
    expected = [orjson.loads(line) for line in jsonl_path_output(records, tmp_path)[0]]
    invoke = lambda *args: runner.invoke(app, [args[0], postgres_db, *args[1:], "--table", TABLE, "-q"])  # noqa: E731

    assert invoke("convert", "--to-table", "converted").exit_code == 0
    assert messages(postgres_db, "converted") == expected
    assert others(postgres_db, "converted") == before
    assert column_types(postgres_db, "converted") == column_types(postgres_db)
    assert query(
        postgres_db,
        "SELECT indexdef LIKE '%%PRIMARY%%' OR indexdef LIKE '%%UNIQUE%%' FROM pg_indexes WHERE tablename = 'converted'",
    ) == [(True,)]
    refused = invoke("convert", "--to-table", "converted")  # it exists now
    assert (
        refused.exit_code,
        refused.stderr.endswith(": table 'converted' already exists (--overwrite replaces it)\n"),
    ) == (2, True)
    query(postgres_db, "UPDATE converted SET messages = '[]'")
    assert invoke("convert", "--to-table", "converted", "--overwrite").exit_code == 0
    assert messages(postgres_db, "converted") == expected
    same = invoke("convert", "--to-table", TABLE, "--overwrite")
    assert (
        same.exit_code,
        same.stderr.endswith(": --to-table names the table read; use --in-place to rewrite it\n"),
    ) == (2, True)

    assert invoke("convert", str(tmp_path / "out.jsonl")).exit_code == 0
    rows = [orjson.loads(line) for line in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert [r["messages"] for r in rows] == expected
    assert [(r["id"], r["name"], r["tags"], r["nothing"], r["score"], r["ref"]) for r in rows] == [
        (b[0], b[1], b[3], b[4], b[5], str(b[7])) for b in before
    ]
    assert rows[1]["created"] == "2025-01-01T00:01:00+00:00" and rows[1]["amount"] == "0.142857"

    assert invoke("convert", str(tmp_path / "out.parquet")).exit_code == 0
    table = pq.read_table(tmp_path / "out.parquet")
    assert [orjson.loads(cell) for cell in table.column("messages").to_pylist()] == expected
    assert [str(t) for t in table.schema.types] == [
        "int64",
        "string",
        "timestamp[us, tz=UTC]",
        "string",
        "int32",
        "string",
        "double",
        "string",
        "string",
    ]
    assert table.column("id").to_pylist() == [b[0] for b in before] and table.column("created").to_pylist() == [
        b[2] for b in before
    ]
    assert table.column("tags").to_pylist()[2] == "{" + ",".join(records[2][k] for k in ("version", "scenario")) + "}"
    assert table.column("amount").to_pylist()[1] == "0.142857" and table.column("ref").to_pylist()[1] == str(
        uuid.UUID(int=1)
    )
    assert others(postgres_db) == before and query(
        postgres_db, "SELECT count(*) FROM conversations WHERE messages::text LIKE '%%retry-prompt%%'"
    ) != [(0,)]


def test_bad_rows_are_named_by_key_and_left_as_they_were(postgres_db: str, records) -> None:
    with psycopg.connect(postgres_db, autocommit=True) as con:
        con.execute("CREATE TABLE conversations (id text PRIMARY KEY, messages text, j jsonb)")
        con.execute(
            "INSERT INTO conversations VALUES ('a', %s, null), ('b', '[{\"kind\": \"request\", \"parts\"', null), ('c', '{\"note\": 1}', null), ('d', '42', null), ('e', null, null), ('f', %s, null)",
            (orjson.dumps(records[0]["messages"]).decode(), orjson.dumps(records[5]["messages"]).decode()),
        )
    before, xmin_before = (
        query(postgres_db, "SELECT * FROM conversations ORDER BY id"),
        dict(query(postgres_db, "SELECT id, xmin::text FROM conversations")),
    )
    result = api.convert(postgres_db, None, Options(table=TABLE, messages_column="messages"), in_place=True)
    assert result.exit_code == 1
    assert {(row["location"], row["status"]) for row in result.report.errors} == {
        ("id=b", "rejected"),
        ("id=c", "rejected"),
        ("id=d", "rejected"),
    }
    errors = {row["location"]: row["errors"][0] for row in result.report.errors}
    assert (
        errors["id=b"].startswith("invalid JSON: unexpected end of data")
        and errors["id=d"] == "expected a JSON array or object, got a number"
    )
    assert "no messages field found" in errors["id=c"]
    after = query(postgres_db, "SELECT * FROM conversations ORDER BY id")
    xmin_after = dict(query(postgres_db, "SELECT id, xmin::text FROM conversations"))
    assert [row for row in after if row[0] in "bcde"] == [row for row in before if row[0] in "bcde"]
    assert {key for key in xmin_before if xmin_before[key] != xmin_after[key]} == (
        {"a"} if "retry-prompt" in before[0][1] else set()
    ) | ({"f"} if "retry-prompt" in before[5][1] else set())
    assert result.report.counts["records_in"] == 5 and result.verdict.endswith("rejected rows unchanged")
    checked = runner.invoke(app, ["check", postgres_db, "--table", TABLE, "--messages-column", "messages"])
    assert checked.exit_code == 1 and f"{postgres_db}:{TABLE}:id=b: rejected: invalid JSON" in checked.stderr


def test_an_application_update_between_read_and_write_is_kept_and_reported(
    postgres_db: str, records, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_table(postgres_db, records, "jsonb")
    legacy = [i for i, r in enumerate(records) if b"retry-prompt" in orjson.dumps(r["messages"])]
    victim, other_legacy = 1000 + legacy[0], records[legacy[-1]]["messages"]
    real = PostgresTable._page_transaction
    written: list[int] = []

    def app_writes_first(table: PostgresTable, page: Any, result: Any) -> None:
        if not written:  # the application rewrites a row histmig has read and migrated, not yet written
            query(
                postgres_db,
                "UPDATE conversations SET messages = %s WHERE id = %s",
                (orjson.dumps(other_legacy).decode(), victim),
            )
        written.append(len(page.rows))
        real(table, page, result)

    monkeypatch.setattr(PostgresTable, "_page_transaction", app_writes_first)
    result = api.convert(postgres_db, None, Options(table=TABLE, jobs=1), in_place=True)
    assert sum(written) == 212
    assert messages(postgres_db)[victim - 1000] == other_legacy  # the application's value, not overwritten
    counts = result.report.counts
    assert (counts["changed"], counts["skipped"], counts["records_in"]) == (137, 1, 212)
    assert result.report.errors == [
        {
            "source": f"{postgres_db}:{TABLE}",
            "location": f"id={victim}",
            "id": str(victim),  # the key column "id" is the id
            "status": "skipped",
            "errors": [SKIPPED],
        }
    ]
    assert (
        result.exit_code == 1
        and "1 skipped (another client wrote them after histmig read them; run again to migrate them)" in result.verdict
    )

    monkeypatch.undo()
    again = api.convert(postgres_db, None, Options(table=TABLE), in_place=True)
    assert (again.report.counts["changed"], again.exit_code) == (1, 0)
    assert api.check(postgres_db, Options(table=TABLE)).exit_code == 0


def _killed_run(url: str, single: bool) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "histmig",
        "convert",
        url,
        "--table",
        TABLE,
        "--in-place",
        "-q",
        "--jobs",
        "1",
        *(["--single-transaction"] if single else []),
    ]
    return subprocess.Popen(command, cwd=ROOT)


@pytest.mark.parametrize("single", [False, True], ids=["pages", "single-transaction"])
def test_a_run_killed_mid_way_leaves_rows_old_or_migrated_and_a_second_run_completes(
    postgres_db: str, records, tmp_path: Path, single: bool
) -> None:
    copies = 30
    for n in range(copies):
        make_table(postgres_db, records, "jsonb", first_id=1000 + n * 1000)
    original = messages(postgres_db)
    loaded = query(postgres_db, "SELECT max(xmin::text::bigint) FROM conversations")[0][0]
    expected = [orjson.loads(line) for line in jsonl_path_output(records, tmp_path)[0]] * copies
    process = _killed_run(postgres_db, single)
    # killed once it has written: with pages, once one is committed; in one transaction, once
    # it holds the lock its first UPDATE takes (nothing is committed before the end)
    written = (
        "SELECT count(*) FROM pg_locks WHERE relation = 'conversations'::regclass AND mode = 'RowExclusiveLock' AND pid <> pg_backend_pid()"
        if single
        else "SELECT count(*) FROM conversations WHERE xmin::text::bigint > %s"
    )
    deadline = time.monotonic() + 60
    while (
        time.monotonic() < deadline
        and process.poll() is None
        and not query(postgres_db, written, () if single else (loaded,))[0][0]
    ):
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL, "the run ended before it was killed: make the table larger"
    now = messages(postgres_db)
    assert all(value in (old, new) for value, old, new in zip(now, original, expected))
    migrated = sum(value != old for value, old in zip(now, original))
    changed = sum(old != new for old, new in zip(original, expected))
    if single:
        assert migrated == 0
    else:
        assert 0 < migrated < changed
    assert (
        subprocess.run(
            [sys.executable, "-m", "histmig", "convert", postgres_db, "--table", TABLE, "--in-place", "-q"], cwd=ROOT
        ).returncode
        == 0
    )
    assert messages(postgres_db) == expected


def fail_after(monkeypatch: pytest.MonkeyPatch, records: int) -> None:
    """Make the run raise ``RuntimeError("interrupted")`` at its record after ``records``."""
    real, calls = Stream.screened, [0]

    def failing(stream: Stream, raw: bytes) -> bool:
        calls[0] += 1
        if calls[0] > records:
            raise RuntimeError("interrupted")
        return real(stream, raw)

    monkeypatch.setattr(Stream, "screened", failing)


def test_single_transaction_is_all_or_nothing_and_pages_commit_one_by_one(
    postgres_db: str, records, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(4):
        make_table(postgres_db, records, "jsonb", first_id=1000 + n * 1000)
    original = messages(postgres_db)
    fail_after(monkeypatch, 600)
    with pytest.raises(RuntimeError, match="interrupted"):
        api.convert(postgres_db, None, Options(table=TABLE, jobs=1, single_transaction=True), in_place=True)
    assert messages(postgres_db) == original
    monkeypatch.undo()
    fail_after(monkeypatch, 600)
    with pytest.raises(RuntimeError, match="interrupted"):
        api.convert(postgres_db, None, Options(table=TABLE, jobs=1), in_place=True)
    now = messages(postgres_db)
    assert now != original and now[-212:] == original[-212:]  # the first pages committed, the last never read


def test_keys_schemas_views_and_environment(
    postgres_db: str, postgres_server: Path, records, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    expected = [orjson.loads(line) for line in jsonl_path_output(records[:40], tmp_path)[0]]
    with psycopg.connect(postgres_db, autocommit=True) as con:
        con.execute('CREATE SCHEMA "chat app"')
        con.execute(
            'CREATE TABLE "chat app"."by tenant" (tenant int, seq int, "the messages" jsonb, PRIMARY KEY (tenant, seq))'
        )
        with con.cursor() as cursor:
            cursor.executemany(
                'INSERT INTO "chat app"."by tenant" VALUES (%s, %s, %s)',
                [(i % 3, i, orjson.dumps(r["messages"]).decode()) for i, r in enumerate(records[:40])],
            )
    options = Options(table="by tenant", schema="chat app", messages_column="the messages", jobs=1)
    audit = api.audit(postgres_db, options)
    assert audit.report.counts["records_in"] == 40 and {row["location"] for row in audit.report.changes} <= {
        f"tenant={i % 3},seq={i}" for i in range(40)
    }
    assert api.convert(postgres_db, None, options, in_place=True).exit_code == 0
    rows = query(postgres_db, 'SELECT seq, "the messages" FROM "chat app"."by tenant" ORDER BY seq')
    assert [value for _, value in rows] == expected

    with psycopg.connect(postgres_db, autocommit=True) as con:
        con.execute(
            'CREATE VIEW recent AS SELECT seq, "the messages" AS messages FROM "chat app"."by tenant" WHERE seq < 10'
        )
        con.execute("CREATE VIEW doubled AS SELECT seq % 5 AS k, messages FROM recent")
    with pytest.raises(UnreadableInput, match="no primary key; name a unique column with --key-column"):
        api.audit(postgres_db, Options(table="recent"))
    assert api.check(postgres_db, Options(table="recent", key_column="seq")).report.counts["records_in"] == 10
    with pytest.raises(UnreadableInput, match="key k=0 is on two rows"):
        api.audit(postgres_db, Options(table="doubled", key_column="k"))
    with psycopg.connect(
        postgres_db, autocommit=True
    ) as con:  # PostgreSQL sorts nulls last: pages after the first never reach them
        con.execute("CREATE VIEW holed AS SELECT CASE WHEN seq = 3 THEN NULL ELSE seq END AS k, messages FROM recent")
    monkeypatch.setattr(table, "FIRST_PAGE_ROWS", 2)
    for run in (
        lambda: api.audit(postgres_db, Options(table="holed", key_column="k")),
        lambda: api.convert(postgres_db, str(tmp_path / "holed.jsonl"), Options(table="holed", key_column="k")),
    ):
        with pytest.raises(
            UnreadableInput,
            match=r"holed: a row has a null key \(k=None\); name a unique non-null column with --key-column",
        ):
            run()
    assert not (tmp_path / "holed.jsonl").exists()

    for name, value in (("PGHOST", str(postgres_server)), ("PGUSER", "postgres")):
        monkeypatch.setenv(name, value)
    database = postgres_db.split("@/")[1].split("?")[0]
    by_name = runner.invoke(
        app, ["check", database, "--format", "postgres", "--table", "recent", "--key-column", "seq", "-q"]
    )
    assert by_name.exit_code == 0, by_name.output
    monkeypatch.setenv("PGDATABASE", database)
    assert api.check("", Options(format="postgres", table="recent", key_column="seq")).report.counts["records_in"] == 10


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "a PostgreSQL input needs --table"),
        (("--table", "missing"), f"no table 'missing' (its tables: {TABLE})"),
        (("--table", TABLE, "--messages-column", "nothing"), "column 'nothing' is int4: expected JSON text or bytes"),
        (("--table", TABLE, "--messages-column", "absent"), "no column 'absent'"),
        (("--table", TABLE, "--key-column", "absent"), "no key column 'absent'"),
        (("--table", TABLE, "--id-column", "absent"), "no id column 'absent'"),
        (("--table", TABLE, "--single-transaction", "--to-table", "x"), "--single-transaction goes with --in-place"),
        (("--table", TABLE, "--in-place", "--to-table", "x"), "give one of OUTPUT, --to-table and --in-place"),
    ],
)
def test_usage_errors_exit_2_before_anything_is_written(
    postgres_db: str, records, args: tuple[str, ...], message: str
) -> None:
    make_table(postgres_db, records[:5])
    command = "convert" if "--in-place" in args or "--single-transaction" in args else "audit"
    xmin_before = xmins(postgres_db)
    result = runner.invoke(app, [command, postgres_db, *args])
    assert result.exit_code == 2 and message in result.stderr, result.stderr
    assert xmins(postgres_db) == xmin_before


def test_a_name_postgresql_would_cut_short_is_refused_and_the_table_read_is_kept(postgres_db: str, records) -> None:
    table = "t" * 30 + "é" * 16 + "x"  # 63 bytes of UTF-8: the longest PostgreSQL keeps
    make_table(postgres_db, records[:5], table=table)
    before = raw_messages(postgres_db, table)
    for args in (("--table", table, "--to-table", table + "2", "--overwrite"), ("--table", table + "2")):
        result = runner.invoke(app, ["convert" if "--to-table" in args else "audit", postgres_db, *args])
        assert result.exit_code == 2, result.stderr
        assert "is 64 bytes long; PostgreSQL names are at most 63 bytes" in result.stderr
    assert raw_messages(postgres_db, table) == before
    assert runner.invoke(app, ["convert", postgres_db, "--table", table, "--to-table", "t" * 63, "-q"]).exit_code == 0
    assert raw_messages(postgres_db, "t" * 63) != before


def test_an_output_file_already_there_is_replaced_for_a_url_input(postgres_db: str, records, tmp_path: Path) -> None:
    make_table(postgres_db, records[:5])
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"old\n")  # the URL is no file: it was compared with this one as a path (No such file)
    done = runner.invoke(app, ["convert", postgres_db, "--table", TABLE, str(out), "-q"])
    assert (done.exit_code, done.stderr) == (0, "") and len(out.read_bytes().splitlines()) == 5


def test_a_messages_column_of_another_type_is_named_with_its_type(postgres_db: str) -> None:
    with psycopg.connect(postgres_db, autocommit=True) as con:
        con.execute("CREATE TABLE numbers (id int PRIMARY KEY, messages int8)")
    result = runner.invoke(app, ["audit", postgres_db, "--table", "numbers"])
    assert (result.exit_code, result.stderr.strip()) == (
        2,
        f"histmig: cannot read {PostgresTable.display(postgres_db)}:numbers: column 'messages' is int8: expected JSON text or bytes",
    )


def test_unreachable_server_and_options_of_other_inputs(postgres_server: Path, tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["audit", "postgresql://postgres:hunter2@/nowhere?host=" + str(postgres_server), "--table", "t"]
    )
    assert result.exit_code == 2 and "cannot connect" in result.stderr and "hunter2" not in result.stderr
    source = tmp_path / "a.jsonl"
    source.write_bytes(b"[]\n")
    assert (
        runner.invoke(app, ["audit", str(source), "--schema", "x"]).stderr.strip()
        == f"histmig: {source}: --schema does not apply to a JSONL input (only to a PostgreSQL one)"
    )
    with duckdb.connect(str(tmp_path / "x.duckdb")) as con:
        con.execute("CREATE TABLE t (messages VARCHAR)")
    with pytest.raises(
        UsageError, match="--key-column does not apply to a DuckDB input \\(only to a PostgreSQL or SQLite one\\)"
    ):
        api.audit(str(tmp_path / "x.duckdb"), Options(table="t", key_column="k"))


def test_a_url_is_postgres_and_its_password_is_never_shown() -> None:
    assert format_of("postgresql://u@h/db").name == format_of("postgres://h/db").name == "postgres"
    assert (
        PostgresTable.display("postgresql://app:s3cr%40t@db.example:5432/app?sslmode=require")
        == "postgresql://app@db.example:5432/app?sslmode=require"
    )
    assert (
        PostgresTable.display("host=/tmp dbname=app password='a b' user=x")
        == "host=/tmp dbname=app password=*** user=x"
    )
    assert PostgresTable.display("postgresql:///app?password=x&host=/tmp") == "postgresql:///app?password=***&host=/tmp"


SECRET_PIECES = ("Zq7", "Wx9", "Vb8")
"""The pieces of every password below: none may reach stderr, stdout or a report."""


def _database(url: str) -> tuple[str, str]:
    """The socket folder and the database name of a :func:`postgres_url` URL."""
    return url.split("?host=")[1], url.split("?")[0].rsplit("/", 1)[1]


@pytest.mark.parametrize(
    "form",
    [
        "postgresql://postgres:Zq7%2FWx9%40Vb8@/{db}?host={folder}",
        "postgresql://postgres:Zq7?Wx9*Vb8[@/{db}?host={folder}",
        "postgresql:///{db}?host={folder}&user=postgres&password=Zq7%20Wx9%26Vb8",
        "host={folder} dbname={db} user=postgres password=Zq7*Wx9?Vb8[",
        "host={folder} dbname={db} user=postgres password='Zq7 Wx9\\'Vb8'",
    ],
    ids=["url-encoded", "url-glob-characters", "url-query", "conninfo-glob-characters", "conninfo-quoted-space"],
)
def test_a_password_reaches_no_output_however_it_is_written(
    postgres_db: str, records, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    folder, db = _database(postgres_db)
    make_table(postgres_db, records[:40])
    location = form.format(folder=folder, db=db)
    monkeypatch.chdir(tmp_path)
    shown = []
    for fmt in ("text", "json", "markdown"):
        report = tmp_path / f"report.{fmt}"
        result = runner.invoke(
            app, ["audit", location, "--table", TABLE, "--report", str(report), "--report-format", fmt]
        )
        assert result.exit_code == 0 and "37 of 40 records would be migrated" in result.stderr, result.output
        shown += [result.stdout, result.stderr, report.read_text()]
    assert orjson.loads(shown[5])["run"]["inputs"] == [f"{postgres.redact.location(location)}:{TABLE}"]
    assert not [piece for piece in SECRET_PIECES for text in shown if piece in text]


@pytest.mark.parametrize(
    ("form", "said"),
    [
        ("postgresql://postgres:Zq7/Wx9@/{db}?host={folder}", "libpq would not read the password as written"),
        ("postgresql://postgres:Zq7@Wx9@/{db}?host={folder}", "libpq would not read the password as written"),
        ("postgresql://postgres:Zq7 Wx9@/{db}?host={folder}", 'unexpected spaces found in "***"'),
        ("host={folder} dbname={db} password=Zq7 Wx9", 'missing "=" after "***"'),
        ("host={folder} dbname={db} password=Zq7*Wx9 port=1", "cannot connect"),
        ("host={folder}/no-such-dir dbname={db} password=Zq7[Wx9", "cannot connect"),
    ],
    ids=["url-slash", "url-at", "url-space", "conninfo-space", "conninfo-no-server", "conninfo-no-socket"],
)
def test_a_location_libpq_cannot_use_is_refused_without_its_password(
    postgres_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str, said: str
) -> None:
    folder, db = _database(postgres_db)
    location = form.format(folder=folder, db=db)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["convert", location, "--table", TABLE, "--in-place"])
    assert result.exit_code == 2 and said in result.stderr, result.stderr
    assert "no such file" not in result.stderr and "no file matches" not in result.stderr
    assert result.stderr.startswith(f"histmig: {'cannot read ' if said == 'cannot connect' else ''}")
    assert not [piece for piece in SECRET_PIECES[:2] if piece in result.stderr + result.stdout], result.stderr


def test_a_crash_traceback_shows_no_local_value() -> None:
    assert app.pretty_exceptions_show_locals is False  # a location's password is a local of many frames


def test_without_psycopg_the_error_says_what_to_install(postgres_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres, "psycopg", lazy("psycopg_not_installed"))
    with pytest.raises(
        UnreadableInput, match=r"reading PostgreSQL needs psycopg 3 and libpq: pip install 'psycopg\[binary\]'"
    ):
        api.audit(postgres_db, Options(table=TABLE))


def test_jobs_give_the_same_table_and_report(postgres_db: str, records) -> None:
    for n in range(3):
        make_table(postgres_db, records, "text", table=f"t{n}")
    one = api.convert(postgres_db, None, Options(table="t0", jobs=1), in_place=True).report.to_json()
    two = api.convert(postgres_db, None, Options(table="t1", jobs=2), in_place=True).report.to_json()
    assert raw_messages(postgres_db, "t0") == raw_messages(postgres_db, "t1") != raw_messages(postgres_db, "t2")
    assert one["summary"] == two["summary"] and without_place(one["changes"]) == without_place(two["changes"])
    assert os.cpu_count() and one["summary"]["changed"] == 138


def test_a_new_table_is_all_or_nothing(postgres_db: str, records, monkeypatch: pytest.MonkeyPatch) -> None:
    make_table(postgres_db, records[:50])
    real = PostgresTable._begin

    def fails_after_the_copy(table: PostgresTable) -> None:
        real(table)
        raise RuntimeError("interrupted after the copy")

    monkeypatch.setattr(PostgresTable, "_begin", fails_after_the_copy)
    with pytest.raises(RuntimeError, match="after the copy"):
        api.convert(postgres_db, None, Options(table=TABLE), to_table="converted")
    monkeypatch.undo()
    assert query(postgres_db, "SELECT to_regclass('converted')") == [(None,)]
    fail_after(monkeypatch, 25)
    with pytest.raises(RuntimeError, match="interrupted"):
        api.convert(postgres_db, None, Options(table=TABLE, jobs=1), to_table="converted")
    assert query(postgres_db, "SELECT to_regclass('converted')") == [(None,)]


def test_the_messages_column_is_found_by_what_it_holds(postgres_db: str, records) -> None:
    """The chat-app layout on PostgreSQL: each run's messages as bytes in ``message_list`` (a
    ``bytea``), found without --messages-column; a ``jsonb`` column of another name too."""
    histories = [orjson.dumps(r["messages"]) for r in records[:6]]
    with psycopg.connect(postgres_db, autocommit=True) as con:
        con.execute("CREATE TABLE chat (id serial PRIMARY KEY, title text, message_list bytea)")
        con.execute("CREATE TABLE log (id serial PRIMARY KEY, turns jsonb)")
        with con.cursor() as cursor:
            cursor.executemany("INSERT INTO chat (title, message_list) VALUES ('t', %s)", [(h,) for h in histories])
            cursor.executemany("INSERT INTO log (turns) VALUES (%s)", [(h.decode(),) for h in histories])
    for table_name in ("chat", "log"):
        audited = api.audit(postgres_db, Options(table=table_name, jobs=1))
        assert audited.report.counts["records_in"] == 6, table_name
        assert {row["location"] for row in audited.report.changes} <= {f"id={i}" for i in range(1, 7)}
    assert (
        api.audit(postgres_db, Options(table="chat", jobs=1)).report.summary()
        == api.audit(postgres_db, Options(table="log", jobs=1)).report.summary()
    )


# ------------------------------------------------------------ conversations over many rows (issue 25)


def messages_table(url: str, records: list[dict[str, Any]]) -> None:
    """A store of one message a row: ``chat_messages (id bigserial PRIMARY KEY,
    conversation_id text, seq integer, message jsonb)``, ``records``
    (:func:`~tests.conftest.stored_apart`, one message each) inserted in their shuffled order."""
    with psycopg.connect(url, autocommit=True) as con:
        con.execute(
            "CREATE TABLE chat_messages (id bigserial PRIMARY KEY, conversation_id text, seq integer, message jsonb)"
        )
        with con.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO chat_messages (conversation_id, seq, message) VALUES (%s, %s, %s)",
                [(r["conversation_id"], r["seq"], orjson.dumps(r["messages"][0]).decode()) for r in records],
            )


def messages_of(url: str) -> list[tuple[int, str, int, Any]]:
    with psycopg.connect(url) as con:
        return con.execute("SELECT id, conversation_id, seq, message::text FROM chat_messages ORDER BY id").fetchall()


CONVERSATIONS = Options(
    table="chat_messages", messages_column="message", conversation=("conversation_id",), order="seq", jobs=2
)


def test_a_table_of_one_message_a_row_converts_as_the_whole_histories_do(postgres_db: str) -> None:
    """Its ``message`` column found by the message it holds (no ``--messages-column``)."""
    histories, records = stored_apart("per message")
    messages_table(postgres_db, records)
    before = messages_of(postgres_db)
    options = replace(CONVERSATIONS, unsafe_fixes=True, messages_column=None)
    result = api.convert(postgres_db, None, options, in_place=True)
    assert result.report.counts["rejected"] == 0
    changed = {row["location"] for row in result.report.changes}
    after = messages_of(postgres_db)
    assert [row[:3] for row in after] == [row[:3] for row in before]
    for old, new in zip(before, after):
        if f"id={old[0]}" not in changed:
            assert new == old  # a row no rule touched is not written
    out = [{"conversation_id": name, "seq": seq, "messages": orjson.loads(text)} for _, name, seq, text in after]
    assert_reassembled(histories, out, options, not_applicable("per message", True), exact=False)
    assert api.check(postgres_db, CONVERSATIONS).report.counts["changed"] == 0


@pytest.mark.parametrize(
    ("write", "row"),
    [
        pytest.param('message = message || \'{"metadata": {"seen": true}}\'', "victim", id="messages"),
        pytest.param("seq = -1", "victim", id="order"),  # it stays first
        pytest.param("conversation_id = 'moved'", "alone", id="key-of-a-row-read-without-one"),
    ],
)
def test_a_conversation_an_application_changes_mid_run_is_skipped_whole_and_a_rerun_completes_it(
    postgres_db: str, monkeypatch: pytest.MonkeyPatch, write: str, row: str
) -> None:
    _, records = stored_apart("per message")
    alone = orjson.loads((CORPUS / "v2.59.0" / "a_tool_model_retry.json").read_bytes())
    messages_table(postgres_db, [*records, {"conversation_id": None, "seq": 0, "messages": [alone]}])  # a whole history
    victim = "v2.59.0/m_deferred_tool_model_retry"
    where = ("conversation_id = %s AND seq = 0", [victim]) if row == "victim" else ("conversation_id IS NULL", [])
    real = PostgresTable._page_transaction

    def app_writes_first(self: PostgresTable, page: Any, result: Any) -> None:
        with psycopg.connect(postgres_db, autocommit=True) as con:  # a row histmig read, rewritten
            con.execute(f"UPDATE chat_messages SET {write} WHERE {where[0]}", where[1])
        real(self, page, result)

    monkeypatch.setattr(PostgresTable, "_page_transaction", app_writes_first)
    result = api.convert(postgres_db, None, CONVERSATIONS, in_place=True)
    skipped = {row["location"] for row in result.report.errors if row["status"] == "skipped"}
    names = {f"id={key}": name for key, name, _, _ in messages_of(postgres_db)}
    expected = victim if row == "victim" else "moved"
    assert skipped and {names[location] for location in skipped} == {expected}
    assert result.report.counts["skipped"] == len(skipped) and result.exit_code == 1
    assert any("retry-prompt" in text for _, name, _, text in messages_of(postgres_db) if name == expected)
    monkeypatch.undo()
    again = api.convert(postgres_db, None, CONVERSATIONS, in_place=True)
    assert again.report.counts["changed"] == len(skipped) and again.exit_code == 0
    assert api.check(postgres_db, CONVERSATIONS).report.counts["changed"] == 0


def test_a_uuid_primary_key_named_id_is_the_records_id(postgres_db: str, records) -> None:
    legacy = next(r for r in records if b"retry-prompt" in orjson.dumps(r["messages"]))
    key = uuid.UUID(int=7)
    with psycopg.connect(postgres_db, autocommit=True) as con:
        con.execute("CREATE TABLE by_uuid (id uuid PRIMARY KEY, messages jsonb)")
        con.execute("INSERT INTO by_uuid VALUES (%s, %s)", (key, orjson.dumps(legacy["messages"]).decode()))
    report = api.audit(postgres_db, Options(table="by_uuid")).report
    assert {(row["location"], row["id"]) for row in report.changes} == {(f"id={key}", str(key))}


def test_to_table_says_which_foreign_keys_and_triggers_it_left_out(postgres_db: str, records) -> None:
    legacy = next(r for r in records if b"retry-prompt" in orjson.dumps(r["messages"]))
    with psycopg.connect(postgres_db, autocommit=True) as con:
        con.execute("CREATE TABLE owners (id int PRIMARY KEY)")
        con.execute("INSERT INTO owners VALUES (1)")
        con.execute("CREATE TABLE owned (id int PRIMARY KEY, owner int REFERENCES owners (id), messages jsonb)")
        con.execute("CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$")
        con.execute("CREATE TRIGGER touched BEFORE UPDATE ON owned FOR EACH ROW EXECUTE FUNCTION touch()")
        con.execute("INSERT INTO owned VALUES (1, 1, %s)", (orjson.dumps(legacy["messages"]).decode(),))
    result = api.convert(postgres_db, None, Options(table="owned"), to_table="owned_v2")
    assert result.exit_code == 0 and result.verdict.endswith(
        "written to owned_v2 (without the 1 foreign key and 1 trigger of the table read: --to-table does not copy them)"
    )
    assert query(
        postgres_db, "SELECT count(*) FROM pg_constraint WHERE conrelid = 'owned_v2'::regclass AND contype = 'f'"
    ) == [(0,)]


def test_the_index_the_verdict_suggests_runs_as_printed_and_ends_the_note(postgres_db: str) -> None:
    _, records = stored_apart("per message")
    messages_table(postgres_db, records[:20])
    notes = api.audit(postgres_db, CONVERSATIONS).notes
    statement = 'CREATE INDEX "chat_messages_conversation_id_seq_idx" ON "chat_messages" ("conversation_id", "seq")'
    assert [note.split("; ")[1] for note in notes] == [f"{statement} would let it be read in that order"]
    with psycopg.connect(postgres_db, autocommit=True) as con:
        con.execute(statement)
    assert api.audit(postgres_db, CONVERSATIONS).notes == []


def test_with_the_index_rows_are_read_in_its_order_not_sorted_again_and_a_null_order_comes_last(
    postgres_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under ``--conversation`` with ``--order``, the query an index on (conversation,
    order) serves is planned to read it in that order (only ties sorted by the key), and a
    row without an order value still ends its conversation."""
    _, records = stored_apart("per message")
    messages_table(postgres_db, records)
    with psycopg.connect(postgres_db, autocommit=True) as con:
        con.execute('CREATE INDEX ON chat_messages ("conversation_id", "seq")')
        first, name = con.execute(  # the first message of a conversation of three or more loses its seq
            "UPDATE chat_messages SET seq = NULL WHERE id = (SELECT min(id) FROM chat_messages WHERE seq = 0 AND "
            "conversation_id IN (SELECT conversation_id FROM chat_messages GROUP BY 1 HAVING count(*) > 2)) "
            "RETURNING id, conversation_id"
        ).fetchone()
        con.execute("ANALYZE chat_messages")
    statements: list[str] = []
    real = PostgresTable._ordered

    def ordered(self: PostgresTable, statement: str) -> Any:
        statements.append(statement)
        return real(self, statement)

    monkeypatch.setattr(PostgresTable, "_ordered", ordered)
    result = api.audit(postgres_db, replace(CONVERSATIONS, jobs=1))
    assert result.notes == [] and len(statements) == 1
    with psycopg.connect(postgres_db) as con:
        con.execute("SET enable_seqscan = off")  # a table this small: the plan an archive gets
        plan = [row[0] for row in con.execute(f"EXPLAIN DECLARE c CURSOR WITH HOLD FOR {statements[0]}")]
        rows = con.execute(statements[0]).fetchall()
    assert any("Index Scan using chat_messages_conversation_id_seq_idx" in line for line in plan)
    assert "Presorted Key: conversation_id, seq" in "\n".join(plan)
    of = {
        key: (conversation, seq)
        for key, conversation, seq in query(postgres_db, "SELECT id, conversation_id, seq FROM chat_messages")
    }
    keys = [row[0] for row in rows if of[row[0]][0] == name]  # a row read starts with its key
    assert keys[-1] == first and len(keys) > 2
    seqs = {key: seq for key, (_, seq) in of.items()}
    assert [seqs[key] for key in keys[:-1]] == sorted(seqs[key] for key in keys[:-1])


NONDETERMINISTIC = "CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)"
"""A collation under which ``'A'`` and ``'a'`` are equal (their bytes differ)."""


@pytest.mark.parametrize(
    ("column", "setup", "flagged"),
    [
        ("text", "", False),
        ("varchar(9)", "", False),
        ("bigint", "", False),
        ("uuid", "", False),
        ('text COLLATE "C"', "", False),
        ("text COLLATE ci", NONDETERMINISTIC, True),
        ("char(5)", "", True),
        ("double precision", "", True),
        ("numeric", "", True),
        ("mood", "CREATE TYPE mood AS ENUM ('a', 'b')", True),
        ("word", "CREATE DOMAIN word AS text", True),
    ],
)
def test_the_read_flags_where_a_conversation_starts_unless_python_compares_its_key_as_postgresql(
    postgres_db: str, monkeypatch: pytest.MonkeyPatch, column: str, setup: str, flagged: bool
) -> None:
    """The ordered read asks PostgreSQL where each conversation starts (a window over every
    row) unless the key column's values read compare in Python as PostgreSQL compares them:
    integers, uuids, text and varchar under a deterministic collation."""
    with psycopg.connect(postgres_db, autocommit=True) as con:
        if setup:
            con.execute(setup)
        con.execute(f"CREATE TABLE runs (id bigserial PRIMARY KEY, conv {column}, seq integer, messages jsonb)")
    statements: list[str] = []
    real = PostgresTable._ordered
    monkeypatch.setattr(PostgresTable, "_ordered", lambda self, sql: statements.append(sql) or real(self, sql))
    api.audit(postgres_db, Options(table="runs", conversation=("conv",), order="seq", jobs=1))
    assert [" OVER (" in statement for statement in statements] == [flagged]


@pytest.mark.parametrize("column", ["json", "xml", "point"])
@pytest.mark.parametrize("option", ["--conversation", "--order"])
def test_a_conversation_or_order_column_postgresql_cannot_sort_is_refused_before_a_row_is_read(
    postgres_db: str, column: str, option: str
) -> None:
    """A ``json``, ``xml`` or ``point`` column has no ordering or equality operator: named by
    ``--conversation`` or ``--order``, it is refused with its type (not PostgreSQL's own
    error about an operator, halfway through the read)."""
    with psycopg.connect(postgres_db, autocommit=True) as con:
        con.execute(f"CREATE TABLE runs (id bigserial PRIMARY KEY, odd {column}, seq integer, messages jsonb)")
    grouping = (
        {"conversation": ("odd",), "order": "seq"}
        if option == "--conversation"
        else {"conversation": ("seq",), "order": "odd"}
    )
    with pytest.raises(UnreadableInput) as refused:
        api.audit(postgres_db, Options(table="runs", **grouping))  # type: ignore[arg-type]
    assert str(refused.value).endswith(
        f"runs: {option} column 'odd' is {column}, whose values the database can neither sort nor compare: name a "
        "column of another type, or read the table through a view that casts it to text"
    )


def _runs_of_two_conversations(url: str) -> None:
    """``runs``: conversations ``a`` and ``b``, each a call, its retry (migrated) and an answer."""
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("CREATE TABLE runs (id bigserial PRIMARY KEY, conv text, seq integer, messages jsonb)")
        for conv in ("a", "b"):
            for seq, piece in enumerate(([PROMPT, CALL], [RETRY], [ANSWER])):
                con.execute(
                    "INSERT INTO runs (conv, seq, messages) VALUES (%s, %s, %s)",
                    [conv, seq, orjson.dumps(piece).decode()],
                )


def test_a_row_moved_away_and_back_while_the_rows_are_locked_skips_its_conversation(
    postgres_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row of a conversation the application moves to another conversation just before
    histmig locks the conversation's rows, and back just after, is not locked, though it reads
    as it was: the application may still change it before the commit, so the conversation is
    skipped whole, not written beside it (the other is written)."""
    _runs_of_two_conversations(postgres_db)
    real = PostgresTable._query
    moved: list[str] = []

    def query_(self: PostgresTable, statement: str, params: Any = ()) -> Any:
        locking = statement.endswith(" FOR UPDATE") and not moved
        if locking:
            moved.append(statement)
            query(postgres_db, "UPDATE runs SET conv = 'elsewhere' WHERE id = 3")
        try:
            return real(self, statement, params)
        finally:
            if locking:
                query(postgres_db, "UPDATE runs SET conv = 'a' WHERE id = 3")

    monkeypatch.setattr(PostgresTable, "_query", query_)
    options = Options(table="runs", conversation=("conv",), order="seq")
    result = api.convert(postgres_db, None, options, in_place=True)
    assert moved and [(row["location"], row["status"]) for row in result.report.errors] == [("id=2", "skipped")]
    held = query(postgres_db, "SELECT id, messages::text FROM runs WHERE seq = 1 ORDER BY id")
    assert ["retry-prompt" in text for _, text in held] == [True, False]


def test_a_conversation_a_trigger_leaves_a_row_of_unwritten_is_skipped_whole(postgres_db: str) -> None:
    """A BEFORE UPDATE trigger returning NULL for one row (archived rows kept as they are)
    skips that row's whole conversation, rolled back to the batch's savepoint, not written
    beside it; the other conversation is written."""
    _runs_of_two_conversations(postgres_db)
    with psycopg.connect(postgres_db, autocommit=True) as con:
        con.execute("ALTER TABLE runs ADD COLUMN frozen boolean NOT NULL DEFAULT false")
        con.execute(
            "INSERT INTO runs (conv, seq, messages, frozen) VALUES ('a', 3, %s, true), ('a', 4, %s, true)",
            [orjson.dumps([CALL]).decode().replace("c1", "c2"), orjson.dumps([RETRY]).decode().replace("c1", "c2")],
        )
        con.execute(
            "CREATE FUNCTION keep_frozen() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN IF old.frozen THEN RETURN NULL; END IF; RETURN new; END $$"
        )
        con.execute("CREATE TRIGGER keep_frozen BEFORE UPDATE ON runs FOR EACH ROW EXECUTE FUNCTION keep_frozen()")
    options = Options(table="runs", conversation=("conv",), order="seq")
    result = api.convert(postgres_db, None, options, in_place=True)
    assert sorted(row["location"] for row in result.report.errors) == ["id=2", "id=8"]
    held = query(postgres_db, "SELECT conv, messages::text FROM runs WHERE id IN (2, 5, 8) ORDER BY id")
    assert [(conv, "retry-prompt" in text) for conv, text in held] == [("a", True), ("b", False), ("a", True)]


def test_in_place_each_check_sees_what_others_committed_whatever_the_servers_isolation_default(
    postgres_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``--single-transaction`` on a server whose default is REPEATABLE READ, a row the
    application adds to a later conversation while histmig writes an earlier one still skips
    it: the run's transaction is READ COMMITTED, each check a statement of its own."""
    _runs_of_two_conversations(postgres_db)
    [(name,)] = query(postgres_db, "SELECT current_database()")
    query(postgres_db, f"ALTER DATABASE \"{name}\" SET default_transaction_isolation = 'repeatable read'")
    monkeypatch.setattr(table, "PAGE_BYTES", 1)  # a page a conversation
    real = PostgresTable._apply_page
    seen: list[str] = []

    def apply_page(self: PostgresTable, *args: Any) -> None:
        seen.append(self._query("SHOW transaction_isolation")[0][0])
        if len(seen) == 1:
            query(postgres_db, "INSERT INTO runs (conv, seq, messages) VALUES ('b', 3, '[]')")
        real(self, *args)

    monkeypatch.setattr(PostgresTable, "_apply_page", apply_page)
    options = Options(table="runs", conversation=("conv",), order="seq", single_transaction=True)
    result = api.convert(postgres_db, None, options, in_place=True)
    assert seen == ["read committed", "read committed"]
    assert [(row["location"], row["status"]) for row in result.report.errors] == [("id=5", "skipped")]


def test_a_key_under_a_nondeterministic_collation_groups_as_postgresql_compares_it(postgres_db: str) -> None:
    """``'A'`` and ``'a'``, equal under the key column's collation, are one conversation: the
    retry of the second row answers the call of the first."""
    with psycopg.connect(postgres_db, autocommit=True) as con:
        con.execute(NONDETERMINISTIC)
        con.execute("CREATE TABLE runs (id bigserial PRIMARY KEY, conv text COLLATE ci, seq integer, messages jsonb)")
        for conv, seq, piece in (("A", 0, [PROMPT, CALL]), ("a", 1, [RETRY])):
            con.execute(
                "INSERT INTO runs (conv, seq, messages) VALUES (%s, %s, %s)", [conv, seq, orjson.dumps(piece).decode()]
            )
    result = api.audit(postgres_db, Options(table="runs", conversation=("conv",), order="seq"))
    assert result.report.fragments == 0
    assert [(row["location"], row["rule"]) for row in result.report.changes] == [("id=2", "HM101")]


@pytest.mark.parametrize(
    ("column", "setup", "keys"),
    [
        pytest.param("char(8)", "", ["'a'", "'b'"], id="char-n"),  # blank-padded: read back as 'a       '
        pytest.param("mood", "CREATE TYPE mood AS ENUM ('sad', 'ok')", ["'sad'", "'ok'"], id="enum"),
        pytest.param("jsonb", "", ["'{\"u\": 1}'", "'{\"u\": 2}'"], id="jsonb"),
        pytest.param("text[]", "", ["'{a,b}'", "'{c}'"], id="array"),
        pytest.param("double precision", "", ["'NaN'", "1.5"], id="nan"),
        pytest.param("money", "", ["'1.00'", "'2.00'"], id="money"),
    ],
)
def test_a_conversation_key_of_any_type_groups_by_the_databases_equality_and_is_written(
    postgres_db: str, column: str, setup: str, keys: list[str]
) -> None:
    """Conversations are told apart by PostgreSQL's equality (NaN equal to NaN) and found again
    by their first row's key, not by a value sent back (an enum, money or jsonb value read is no
    parameter PostgreSQL compares with the column; a char(n) one pads): each is migrated, none
    skipped, and a row added to one meanwhile skips that one alone."""
    with psycopg.connect(postgres_db, autocommit=True) as con:
        if setup:
            con.execute(setup)
        con.execute(f"CREATE TABLE runs (id bigserial PRIMARY KEY, conv {column}, seq integer, messages jsonb)")
        for key in keys:
            for seq, piece in enumerate(([PROMPT, CALL], [RETRY])):
                con.execute(
                    f"INSERT INTO runs (conv, seq, messages) VALUES ({key}, %s, %s)",
                    [seq, orjson.dumps(piece).decode()],
                )
    options = Options(table="runs", conversation=("conv",), order="seq")
    result = api.convert(postgres_db, None, options, in_place=True)
    assert (result.exit_code, result.report.counts["skipped"], result.report.fragments) == (0, 0, 0)
    assert sorted((row["location"], row["rule"]) for row in result.report.changes) == [
        ("id=2", "HM101"),
        ("id=4", "HM101"),
    ]
    with psycopg.connect(postgres_db, autocommit=True) as con:
        con.execute("UPDATE runs SET messages = %s WHERE seq = 1", [orjson.dumps([RETRY]).decode()])
    real = PostgresTable._page_transaction

    def app_adds_a_row_first(self: PostgresTable, page: Any, result: Any) -> None:
        with psycopg.connect(postgres_db, autocommit=True) as con:
            con.execute(f"INSERT INTO runs (conv, seq, messages) VALUES ({keys[0]}, 2, '[]')")
        real(self, page, result)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PostgresTable, "_page_transaction", app_adds_a_row_first)
        again = api.convert(postgres_db, None, options, in_place=True)
    assert [(row["location"], row["status"]) for row in again.report.errors] == [("id=2", "skipped")]
    with psycopg.connect(postgres_db) as con:
        held = con.execute("SELECT id, messages::text FROM runs WHERE seq = 1 ORDER BY id").fetchall()
    assert ["retry-prompt" in text for _, text in held] == [True, False]


def test_a_char_n_primary_key_is_found_again_and_a_row_moved_meanwhile_skips_both_its_conversations(
    postgres_db: str,
) -> None:
    """A ``char(5)`` key read back padded finds its rows again (each conversation migrated); a
    row the application moves from one conversation to another while histmig works skips the
    conversation it left and the one it joined, and leaves the third written."""
    with psycopg.connect(postgres_db, autocommit=True) as con:
        con.execute("CREATE TABLE runs (id char(5) PRIMARY KEY, conv text, seq integer, messages jsonb)")
        for conv in "abc":
            for seq, piece in enumerate(([PROMPT, CALL], [RETRY])):
                con.execute(
                    "INSERT INTO runs VALUES (%s, %s, %s, %s)",
                    [f"{conv}{seq}", conv, seq, orjson.dumps(piece).decode()],
                )
    options = Options(table="runs", conversation=("conv",), order="seq")
    result = api.convert(postgres_db, None, options, in_place=True)
    assert (result.exit_code, sorted(row["location"] for row in result.report.changes)) == (
        0,
        ["id=a1   ", "id=b1   ", "id=c1   "],
    )
    with psycopg.connect(postgres_db, autocommit=True) as con:
        con.execute("UPDATE runs SET messages = %s WHERE seq = 1", [orjson.dumps([RETRY]).decode()])
    real = PostgresTable._page_transaction

    def app_moves_a_row_first(self: PostgresTable, page: Any, result: Any) -> None:
        with psycopg.connect(postgres_db, autocommit=True) as con:
            con.execute("UPDATE runs SET conv = 'b', seq = 10 WHERE id = 'a0'")
        real(self, page, result)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PostgresTable, "_page_transaction", app_moves_a_row_first)
        again = api.convert(postgres_db, None, options, in_place=True)
    assert sorted((row["location"], row["status"]) for row in again.report.errors) == [
        ("id=a1   ", "skipped"),
        ("id=b1   ", "skipped"),
    ]
    with psycopg.connect(postgres_db) as con:
        held = dict(con.execute("SELECT conv, messages::text FROM runs WHERE seq = 1").fetchall())
    assert {conv: "retry-prompt" in text for conv, text in held.items()} == {"a": True, "b": True, "c": False}


def test_a_row_added_by_a_transaction_histmig_waited_for_skips_its_conversation(postgres_db: str) -> None:
    """The application holds a conversation's rows locked, adds one and commits while histmig
    waits for the locks to write it: READ COMMITTED would let the waiting read see the rows as
    they were, so the conversation is read again once locked, and skipped."""
    with psycopg.connect(postgres_db, autocommit=True) as con:
        con.execute("CREATE TABLE runs (id bigserial PRIMARY KEY, conv text, seq integer, messages jsonb)")
        for seq, piece in enumerate(([PROMPT, CALL], [RETRY])):
            con.execute(
                "INSERT INTO runs (conv, seq, messages) VALUES ('a', %s, %s)", [seq, orjson.dumps(piece).decode()]
            )
    locked, done = threading.Event(), threading.Event()

    def application() -> None:
        with psycopg.connect(postgres_db) as con:  # one transaction
            con.execute("SELECT id FROM runs WHERE conv = 'a' FOR UPDATE")
            con.execute("INSERT INTO runs (conv, seq, messages) VALUES ('a', 2, '[]')")
            locked.set()
            time.sleep(1)  # histmig is waiting for the locks meanwhile
        done.set()

    real = PostgresTable._page_transaction

    def app_locks_first(self: PostgresTable, page: Any, result: Any) -> None:
        writer = threading.Thread(target=application)
        writer.start()
        assert locked.wait(30)
        real(self, page, result)
        writer.join()

    options = Options(table="runs", conversation=("conv",), order="seq")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(PostgresTable, "_page_transaction", app_locks_first)
        result = api.convert(postgres_db, None, options, in_place=True)
    assert done.is_set() and [(row["location"], row["status"]) for row in result.report.errors] == [("id=2", "skipped")]
    with psycopg.connect(postgres_db) as con:
        assert "retry-prompt" in con.execute("SELECT messages::text FROM runs WHERE id = 2").fetchone()[0]
