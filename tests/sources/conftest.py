"""Columnar inputs built from the shared corpus: the same 212 records as all.jsonl, as a
Parquet file or a DuckDB table, with the messages as JSON text or as a nested list<struct>
column, plus extra columns of several types, in row groups of 50 rows; and a throwaway
PostgreSQL server (a session fixture, also started by the benchmark) with a new database for
each test."""

from __future__ import annotations

import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from histmig import api
from histmig.options import Options
from tests.conftest import CORPUS

ROW_GROUP = 50
METADATA = {b"origin": b"histmig tests", b"note": b"kept as is"}
FIELD_METADATA = {"messages": {b"content": b"pydantic-ai history"}, "score": {b"unit": b"points"}}


PROMPT = {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "weather?"}]}
CALL = {
    "kind": "response",
    "parts": [{"part_kind": "tool-call", "tool_name": "w", "args": "{}", "tool_call_id": "c1"}],
}
RETRY = {
    "kind": "request",
    "parts": [{"part_kind": "retry-prompt", "tool_name": "w", "content": "bad args", "tool_call_id": "c1"}],
}
ANSWER = {"kind": "response", "parts": [{"part_kind": "text", "content": "Sunny."}]}
"""A conversation in four messages, to cut into records: a prompt, a call, the legacy retry
answering it (HM101 migrates it) and the answer."""


def corpus_records() -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (CORPUS / "all.jsonl").read_bytes().splitlines()]


def _without_empty_objects(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_empty_objects(v) for k, v in value.items() if v != {}}
    if isinstance(value, list):
        return [_without_empty_objects(v) for v in value]
    return value


def nested_records() -> list[dict[str, Any]]:
    """The corpus records whose histories Arrow can hold in one inferred list<struct> type
    (a field that is a string in one record and a list in another cannot share a column),
    without empty-object fields (Parquet cannot store a struct without fields)."""
    selected: list[dict[str, Any]] = []
    for record in map(_without_empty_objects, corpus_records()):
        try:
            pa.array([r["messages"] for r in selected] + [record["messages"]])
        except (pa.ArrowException, TypeError):
            continue
        selected.append(record)
    return selected


def legacy_nested_table() -> pa.Table:
    """A nested (``list<struct>``) messages column as a release before 2.60 left it, no
    ``outcome`` field: row ``ok``'s call answered by a ``tool-return``, row ``retried``'s by a
    ``retry-prompt``; ``id`` names each."""

    def part(**fields: str) -> dict[str, str | None]:
        return {"part_kind": None, "content": None, "tool_name": None, "tool_call_id": None, **fields}

    def history(answer: str) -> list[dict[str, Any]]:
        return [
            {"kind": "request", "parts": [part(part_kind="user-prompt", content="Weather?")]},
            {"kind": "response", "parts": [part(part_kind="tool-call", tool_name="w", tool_call_id="c1")]},
            {"kind": "request", "parts": [part(part_kind=answer, tool_name="w", tool_call_id="c1", content="Rain.")]},
            {"kind": "response", "parts": [part(part_kind="text", content="It rains.")]},
        ]

    return pa.table({"id": ["ok", "retried"], "messages": [history("tool-return"), history("retry-prompt")]})


def table_of(records: list[dict[str, Any]], nested: bool) -> pa.Table:
    """A table of ``records``: ``id`` int64, ``name`` string, ``created`` timestamp,
    ``tags`` list<string>, ``nothing`` null, ``messages`` JSON text or nested, ``score``
    float64 with nulls; schema metadata :data:`METADATA`, field metadata
    :data:`FIELD_METADATA` on the messages and score columns."""
    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    messages = (
        pa.array([r["messages"] for r in records])
        if nested
        else pa.array([orjson.dumps(r["messages"]).decode() for r in records], pa.string())
    )
    table = pa.table(
        {
            "id": pa.array(range(1000, 1000 + len(records)), pa.int64()),
            "name": pa.array([r["id"] for r in records], pa.string()),
            "created": pa.array(
                [start + timedelta(minutes=i) for i in range(len(records))], pa.timestamp("us", tz="UTC")
            ),
            "tags": pa.array(
                [[r["version"], r["scenario"]][: i % 3] for i, r in enumerate(records)], pa.list_(pa.string())
            ),
            "nothing": pa.nulls(len(records)),
            "messages": messages,
            "score": pa.array([None if i % 4 == 0 else i / 8 for i in range(len(records))], pa.float64()),
        }
    )
    fields = [f.with_metadata(FIELD_METADATA[f.name]) if f.name in FIELD_METADATA else f for f in table.schema]
    return pa.Table.from_arrays(table.columns, schema=pa.schema(fields, metadata=METADATA))


def write_parquet(path: Path, table: pa.Table) -> Path:
    pq.write_table(table, path, row_group_size=ROW_GROUP, compression="zstd")
    return path


def jsonl_path_output(
    records: list[dict[str, Any]], tmp: Path, options: Options = Options()
) -> tuple[list[bytes], dict]:
    """What the JSONL path makes of the same histories (one bare array a line): the output
    lines (rejected ones replaced by their input line) and the JSON report."""
    source, out = tmp / "same.jsonl", tmp / "same.out.jsonl"
    lines = [orjson.dumps(r["messages"]) for r in records]
    source.write_bytes(b"\n".join(lines) + b"\n")
    report = api.convert(str(source), str(out), options).report
    migrated = iter(out.read_bytes().splitlines())
    rejected = {row["location"] for row in report.errors if row["status"] == "rejected"}
    merged = [line if f"line {n}" in rejected else next(migrated) for n, line in enumerate(lines, start=1)]
    return merged, report.to_json()


def without_place(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if k not in ("source", "line", "row", "key", "id")} for row in rows]


PG_BIN = Path("/usr/lib/postgresql/15/bin")
"""Where Debian's PostgreSQL 15 server programs are."""


def _as_postgres(argv: list[str]) -> list[str]:
    """``argv`` run as the ``postgres`` user when this is root (PostgreSQL refuses root)."""
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def start_postgres(folder: Path) -> str:
    """Start a throwaway PostgreSQL 15 cluster in ``folder`` (its data, log and Unix socket:
    no TCP port to collide with another run), as the ``postgres`` user when root; returns
    the URL of its ``postgres`` database. Raises :class:`RuntimeError` saying what is
    missing, or :class:`subprocess.CalledProcessError`."""
    initdb, pg_ctl = PG_BIN / "initdb", PG_BIN / "pg_ctl"
    if not initdb.exists() or not pg_ctl.exists():
        raise RuntimeError(
            f"PostgreSQL 15 is not installed ({initdb} is missing); the PostgreSQL tests need a real server: apt-get install postgresql-15"
        )
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            raise RuntimeError(
                "there is no postgres user to run PostgreSQL as (the tests run as root, which PostgreSQL refuses)"
            ) from None
        shutil.chown(folder, "postgres", "postgres")
    data = folder / "data"
    subprocess.run(
        _as_postgres(
            [str(initdb), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"]
        ),
        check=True,
        capture_output=True,
    )
    settings = f"-k {folder} -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    subprocess.run(
        _as_postgres([str(pg_ctl), "-D", str(data), "-l", str(folder / "log"), "-w", "-o", settings, "start"]),
        check=True,
        capture_output=True,
    )
    return postgres_url(folder, "postgres")


def stop_postgres(folder: Path) -> None:
    """Stop the cluster of :func:`start_postgres` and remove ``folder``."""
    try:
        subprocess.run(
            _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(folder / "data"), "-m", "immediate", "stop"]),
            capture_output=True,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def postgres_url(folder: Path | str, database: str) -> str:
    """The URL of ``database`` on the cluster whose socket is in ``folder``."""
    return f"postgresql://postgres@/{database}?host={folder}"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Path]:
    """A throwaway PostgreSQL 15 cluster for the session (:func:`start_postgres`): the
    folder of its socket. Fails the tests that need it, loudly, when it cannot start."""
    folder = Path(tempfile.mkdtemp(prefix="histmig-pg-"))  # short: a socket path has at most 107 bytes
    try:
        start_postgres(folder)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        log = (
            (folder / "log").read_text()
            if (folder / "log").exists()
            else getattr(exc, "stderr", b"").decode(errors="replace")
        )
        shutil.rmtree(folder, ignore_errors=True)
        pytest.fail(f"cannot start the PostgreSQL server the tests need: {exc}\n{log}", pytrace=False)
    yield folder
    stop_postgres(folder)


_DATABASES = itertools.count()


@pytest.fixture
def postgres_db(postgres_server: Path) -> Iterator[str]:
    """The URL of a new, empty database of :func:`postgres_server`, dropped afterwards."""
    import psycopg

    name = f"histmig_{os.getpid()}_{next(_DATABASES)}"
    with psycopg.connect(postgres_url(postgres_server, "postgres"), autocommit=True) as con:
        con.execute(f'CREATE DATABASE "{name}"')
    yield postgres_url(postgres_server, name)
    with psycopg.connect(postgres_url(postgres_server, "postgres"), autocommit=True) as con:
        con.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
