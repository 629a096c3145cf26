"""Throughput benchmark: histmig against the framework and against the JSON floor.

``make bench`` (or ``python scripts/bench.py [--records N] [--quick]``) builds, under
``--workdir`` (default ``/tmp/histmig-bench``), archives of ``--records`` conversations
(default 100,000, about 300 MB of JSONL) from ``fixtures/corpus/all.jsonl``, in three
variants where 1 %, 10 % and 100 % of the records hold a retry-prompt part, each as JSONL and
as Parquet (the envelope as columns, the messages as a JSON string column). Building is
deterministic (record ``i`` of a variant is always the same bytes) and skipped when the file
is already there.

Then, on the same files, in fresh subprocesses (start-up included, each reading the input
and writing an output file), it times:

- ``histmig``: ``python -m histmig convert IN OUT -q`` (the real CLI, default ``--jobs``);
- ``framework``: what users do today, pydantic-ai-slim 2.68.0 per record:
  ``ModelMessagesTypeAdapter.validate_python`` then ``dump_python(mode="json")``, orjson for
  the lines (a record the framework cannot load is written back unchanged and counted);
- ``floor``: orjson ``loads`` and ``dumps`` of every line and nothing else (Parquet: a pyarrow
  read and write, batch by batch).

and prints one table: MB/s (input MB, 10^6 bytes, per wall-clock second) and records/s of
each (Parquet too: MB of the same records as JSONL), the ratios histmig/framework and
histmig/floor, and histmig's peak RSS (MB, from ``wait4``; on Linux a child's figure starts
from its parent's RSS when spawned, so this process imports nothing heavy and builds the
archives in a child of its own). A second table gives the bounds, the least work any
migration of an archive needs, timed the same way: for the 100 % JSONL variant, parsing,
dumping and checking against 2.68's schema every migrated record on two cores with no rule
(:func:`bound_jsonl`); for Parquet, the floor's read and write with one substring search of
every cell (:func:`bound_parquet`); with their ratios to the framework and the floor. Last,
histmig's ``--jobs 1`` vs ``--jobs 2`` scaling on the 100 % variant.
histmig on Parquet is measured only when ``histmig convert x.parquet y.parquet`` works
(``n/a`` otherwise). Timings are the best of ``--repeat`` runs, the three commands of an
archive taking turns.

``--formats postgres,sqlite`` (or either) adds a third table: the 10 % variant loaded into a
PostgreSQL table (``jsonb`` messages, in the database of ``--postgres URL``, else in a
throwaway PostgreSQL 15 cluster started and removed as the tests do,
``tests/sources/conftest.py``) and a SQLite file (``TEXT`` messages), each restored from a
template before every run; it times ``histmig convert DB --table conversations --in-place
-q`` against the floor (:func:`floor_table`: read every row and write back, with plain SQL,
those holding a retry-prompt part, unchanged, as many transactions as histmig's; no
migration), with histmig's peak RSS.

``--formats spark`` (not in the default) times, on the Parquet archives, ``histmig convert IN
OUT --engine spark --jobs 2`` (a Spark ``local[2]`` session started by the command) against
histmig's own ``--jobs 2`` and against the Spark floor, a Spark job of the same session that
reads and writes the same files with no migration (:func:`spark_floor`); and, to say where
Spark's overhead goes, a session started and stopped with no job (:func:`spark_start`) and
the floor with every batch passed through a Python worker and back (``mapInArrow`` of the
identity, :func:`spark_arrow`): the time of each step is the difference between two of them.

``--formats cluster`` (:func:`print_cluster`) times, on the Parquet 10 % archive, histmig
through ``spark-submit`` on a standalone cluster of two workers the benchmark starts and
stops, against ``local[2]`` and ``--jobs 2``, with the rate per core; ``--formats s3``
(:func:`print_s3`) an S3 round trip of the JSONL 10 % archive on an S3 server on loopback
against local disk, and an object of ``--big-mib`` MiB (and a quarter of it) audited with
histmig's peak RSS. Both start their servers with the tests' helpers (``tests/servers.py``).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fixtures" / "corpus" / "all.jsonl"
SHARES = (("1%", 0.01), ("10%", 0.10), ("100%", 1.0))
PARQUET_BATCH = 4096


# ---------------------------------------------------------------- building the archives


def corpus_pools() -> tuple[list[dict], list[dict]]:
    """The corpus records as ``(with_retry, clean)``: those whose bytes hold a
    ``retry-prompt`` part (legacy releases), and those with nothing to migrate at all (no
    rule changes them: native 2.60/2.68 histories and the no-retry scenarios of releases
    that need no repair), each in corpus order. Records with no retry-prompt part that
    still need a repair (the 0.0.20 no-retry histories: null ids, args wrappers) are in
    neither pool."""
    from histmig.api import migrate

    with_retry, clean = [], []
    for line in CORPUS.read_bytes().splitlines():
        record = orjson.loads(line)
        if b'"retry-prompt"' in line:
            with_retry.append(record)
        elif not migrate(orjson.loads(line)["messages"]):
            clean.append(record)
    return with_retry, clean


def build_records(count: int, share: float, pools: tuple[list[dict], list[dict]]) -> list[dict]:
    """``count`` envelopes ``{"id", "version", "scenario", "messages"}``, of which exactly
    ``round(count * share)`` (spread evenly) hold a retry-prompt part, each with a distinct
    id ``b000042-v2.0.0/scenario``. Deterministic."""
    with_retry, without = pools
    records, taken_retry, taken_plain = [], 0, 0
    for i in range(count):
        holds_retry = int((i + 1) * share + 1e-9) > int(i * share + 1e-9)
        if holds_retry:
            source, taken_retry = with_retry[taken_retry % len(with_retry)], taken_retry + 1
        else:
            source, taken_plain = without[taken_plain % len(without)], taken_plain + 1
        records.append({**source, "id": f"b{i:06d}-{source['id'].replace('/', '-')}"})
    return records


def archive_paths(workdir: Path, count: int) -> dict[str, dict[str, Path]]:
    """``{variant: {"jsonl": path, "parquet": path}}``, where :func:`build` writes them."""
    return {
        name: {
            fmt: (workdir / f"retry{name.rstrip('%')}-{count}").with_suffix(f".{fmt}") for fmt in ("jsonl", "parquet")
        }
        for name, _ in SHARES
    }


def build(workdir: Path, count: int) -> None:
    """Write the JSONL and Parquet archives of every variant (:func:`archive_paths`),
    unless present."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    workdir.mkdir(parents=True, exist_ok=True)
    files, pools = archive_paths(workdir, count), None
    for name, share in SHARES:
        jsonl, parquet = files[name]["jsonl"], files[name]["parquet"]
        if jsonl.exists() and parquet.exists():
            continue
        pools = pools or corpus_pools()
        records = build_records(count, share, pools)
        tmp = jsonl.with_suffix(".tmp")
        with open(tmp, "wb") as out:
            for record in records:
                out.write(orjson.dumps(record) + b"\n")
        tmp.replace(jsonl)
        table = pa.table(
            {
                "id": [r["id"] for r in records],
                "version": [r["version"] for r in records],
                "scenario": [r["scenario"] for r in records],
                "messages": [orjson.dumps(r["messages"]).decode() for r in records],
            }
        )
        pq.write_table(table, tmp, row_group_size=PARQUET_BATCH)
        tmp.replace(parquet)
        print(f"built {jsonl.name} ({jsonl.stat().st_size / 1e6:.0f} MB) and {parquet.name}", file=sys.stderr)


# ---------------------------------------------------------------- a conversation over many records


def run_pieces(messages: list[dict]) -> list[list[dict]]:
    """A history cut at every run boundary, as a per-run store holds it: before each request
    holding a ``user-prompt`` part (a new prompt) and each message whose ``run_id`` differs
    from the message before's (a resumed run: a deferred tool's result)."""
    pieces: list[list[dict]] = []
    for index, message in enumerate(messages):
        prompt = message.get("kind") == "request" and any(
            isinstance(part, dict) and part.get("part_kind") == "user-prompt" for part in message.get("parts", [])
        )
        previous = messages[index - 1].get("run_id") if index else None
        resumed = previous is not None and message.get("run_id") not in (None, previous)
        if not pieces or prompt or resumed:
            pieces.append([])
        pieces[-1].append(message)
    return pieces


LAYOUTS = {"per run": run_pieces, "per message": lambda messages: [[m] for m in messages]}
"""How the stores users keep cut a conversation into records (docs/layouts.md)."""


def layout_records(records: list[dict], layout: str, seed: int = 25) -> list[dict]:
    """``records`` (whole histories) cut into ``layout``'s records, ``{"id", "seq", "version",
    "scenario", "messages"}`` each (``id`` the conversation's), shuffled in physical order
    (deterministic): a conversation's records far apart, as a store written by many sessions
    at once has them."""
    import random

    cut = [
        {**{k: v for k, v in record.items() if k != "messages"}, "seq": seq, "messages": piece}
        for record in records
        for seq, piece in enumerate(LAYOUTS[layout](record["messages"]))
    ]
    random.Random(seed).shuffle(cut)
    return cut


def layout_paths(workdir: Path, count: int) -> dict[str, Path]:
    """Where :func:`build_layouts` writes the 10 % variant in each layout (JSONL)."""
    return {layout: workdir / f"retry10-{count}-{layout.replace(' ', '-')}.jsonl" for layout in LAYOUTS}


def build_layouts(workdir: Path, count: int, url: str | None) -> None:
    """The 10 % variant's histories in each layout (:func:`layout_records`) as JSONL and,
    with ``url``, as PostgreSQL tables ``layout_per_run`` and ``layout_per_message`` (``id``
    text, ``seq`` integer, ``messages`` jsonb, a serial key, an index on ``(id, seq)``), unless
    present."""
    records = None
    for layout, path in layout_paths(workdir, count).items():
        if path.exists():
            continue
        records = records or build_records(count, SHARES[1][1], corpus_pools())
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in layout_records(records, layout)))
        tmp.replace(path)
    if url is None:
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        for layout in LAYOUTS:
            table = f"template_layout_{layout.replace(' ', '_')}_{count}"
            if con.execute("SELECT to_regclass(%s)", [table]).fetchone()[0] is not None:
                continue
            records = records or build_records(count, SHARES[1][1], corpus_pools())
            with con.transaction():
                con.execute(
                    f"CREATE TABLE {table} (key bigserial PRIMARY KEY, id text, seq integer, version text, "
                    "scenario text, messages jsonb)"
                )
                con.execute(f"CREATE INDEX ON {table} (id, seq)")
                with con.cursor().copy(f"COPY {table} (id, seq, version, scenario, messages) FROM STDIN") as copy:
                    for r in layout_records(records, layout):
                        copy.write_row(
                            (r["id"], r["seq"], r["version"], r["scenario"], orjson.dumps(r["messages"]).decode())
                        )
            con.execute(f"VACUUM ANALYZE {table}")


def measure_layouts(workdir: Path, count: int, url: str | None, repeat: int) -> None:
    """Time histmig on the 10 % variant stored per run and per message (:func:`build_layouts`;
    ``--conversation id --order seq``) against the same histories stored whole, the commands
    taking turns: JSONL files, and with ``url`` PostgreSQL tables converted ``--in-place``
    (each restored before every run). Prints the throughput of each layout as a share of the
    whole one's (``x whole``: 1.00 is as fast), and histmig's peak RSS."""
    run = [sys.executable, __file__]
    subprocess.run([*run, "--build-layouts", str(workdir), str(count), url or ""], check=True)
    whole = archive_paths(workdir, count)["10%"]["jsonl"]
    out = workdir / "out"
    out.mkdir(exist_ok=True)
    print(f"\nlayouts: the {count} conversations of the 10% variant, a conversation's records shuffled far apart\n")
    header = f"| {'layout':<26} | {'records':>8} | {'histmig s':>9} | {'whole s':>7} | {'x whole':>7} | {'histmig RSS MB':>14} |"
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    grouped = ("--conversation", "id", "--order", "seq")
    for layout, path in layout_paths(workdir, count).items():
        ours, theirs = best(
            [histmig_argv(path, out / "layout.jsonl", None, *grouped), histmig_argv(whole, out / "whole.jsonl")], repeat
        )
        lines = path.read_bytes().count(b"\n")
        print(_layout_row(f"JSONL {layout}", lines, ours, theirs), flush=True)
    if url is None:
        return
    for layout in LAYOUTS:
        table = f"layout_{layout.replace(' ', '_')}"
        template = f"template_{table}_{count}"
        ours, theirs, lines = _table_runs(url, workdir, (table, template), count, repeat, grouped)
        print(_layout_row(f"PostgreSQL {layout}", lines, ours, theirs), flush=True)


def _table_runs(
    url: str, workdir: Path, tables: tuple[str, str], count: int, repeat: int, grouped: tuple[str, ...]
) -> tuple[Timing, Timing, int]:
    """Best timings of ``convert --in-place`` of the layout table (grouped) and of the whole
    table (:func:`build_tables`), each restored from its template before every run."""
    import psycopg

    def restore(name: str, source: str) -> None:
        with psycopg.connect(url, autocommit=True) as con:
            con.execute(f"DROP TABLE IF EXISTS {name}")
            con.execute(f"CREATE TABLE {name} (LIKE {source} INCLUDING ALL)")
            con.execute(f"INSERT INTO {name} SELECT * FROM {source}")
            con.execute(f"VACUUM ANALYZE {name}")

    table, template = tables
    subprocess.run([sys.executable, __file__, "--build-tables", str(workdir), str(count), url], check=True)
    commands = [
        (
            [sys.executable, "-m", "histmig", "convert", url, "--table", table, "--in-place", "-q", *grouped],
            table,
            template,
        ),
        (
            [sys.executable, "-m", "histmig", "convert", url, "--table", TABLE, "--in-place", "-q"],
            TABLE,
            table_paths(workdir, count)["postgres-template"],
        ),
    ]
    runs: list[list[Timing]] = [[], []]
    for _ in range(repeat):
        for (argv, name, source), seen in zip(commands, runs):
            restore(name, source)
            seen.append(timed(argv))
    with psycopg.connect(url) as con:
        lines = con.execute(f"SELECT count(*) FROM {template}").fetchone()[0]
    ours, theirs = (
        Timing(min(t.seconds for t in seen), max(t.peak_rss_mb for t in seen), all(t.ok for t in seen)) for seen in runs
    )
    return ours, theirs, lines


def _layout_row(name: str, records: int, ours: Timing, whole: Timing) -> str:
    ratio = f"{whole.seconds / ours.seconds:.2f}" if ours.ok and whole.ok else "n/a"
    rss = f"{ours.peak_rss_mb:.0f}" if ours.ok else "n/a"
    return f"| {name:<26} | {records:>8} | {ours.seconds:>9.2f} | {whole.seconds:>7.2f} | {ratio:>7} | {rss:>14} |"


# ---------------------------------------------------------------- the baselines (run in a child)


def floor_jsonl(src: str, dst: str) -> None:
    """orjson loads and dumps of every line, nothing else."""
    loads, dumps = orjson.loads, orjson.dumps
    with open(src, "rb") as inp, open(dst, "wb") as out:
        for line in inp:
            out.write(dumps(loads(line)) + b"\n")


def framework_jsonl(src: str, dst: str) -> None:
    """pydantic-ai 2.68 load and dump of every record's messages, orjson for the lines."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter as adapter

    failed = 0
    with open(src, "rb") as inp, open(dst, "wb") as out:
        for line in inp:
            record = orjson.loads(line)
            try:
                record["messages"] = adapter.dump_python(adapter.validate_python(record["messages"]), mode="json")
            except ValueError:
                failed += 1
            out.write(orjson.dumps(record) + b"\n")
    print(f"framework could not load {failed} records", file=sys.stderr)


def floor_parquet(src: str, dst: str) -> None:
    """A pyarrow read and write, record batch by record batch."""
    import pyarrow.parquet as pq

    reader = pq.ParquetFile(src)
    with pq.ParquetWriter(dst, reader.schema_arrow) as writer:
        for batch in reader.iter_batches(batch_size=PARQUET_BATCH):
            writer.write_batch(batch)


def framework_parquet(src: str, dst: str) -> None:
    """The pyarrow read and write of :func:`floor_parquet`, with each ``messages`` cell
    loaded and dumped by pydantic-ai 2.68 (orjson for the JSON text)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pydantic_ai.messages import ModelMessagesTypeAdapter as adapter

    reader = pq.ParquetFile(src)
    column = reader.schema_arrow.get_field_index("messages")
    failed = 0
    with pq.ParquetWriter(dst, reader.schema_arrow) as writer:
        for batch in reader.iter_batches(batch_size=PARQUET_BATCH):
            cells = []
            for text in batch.column(column).to_pylist():
                try:
                    text = orjson.dumps(
                        adapter.dump_python(adapter.validate_python(orjson.loads(text)), mode="json")
                    ).decode()
                except ValueError:
                    failed += 1
                cells.append(text)
            writer.write_batch(batch.set_column(column, "messages", pa.array(cells, pa.string())))
    print(f"framework could not load {failed} records", file=sys.stderr)


def bound_jsonl(src: str, dst: str) -> None:
    """The least work that migrating and validating every record takes, whatever the rules
    cost: each record of ``src`` (a migrated archive: histmig's output) parsed (msgspec),
    dumped (orjson) and checked against 2.68's schema (histmig's settled check, the msgspec
    decode that stands for "it loads, a second pass changes nothing"), the lines split
    between two forked processes as ``--jobs 2`` does; no rule, no report."""
    import msgspec

    from histmig.rules import select
    from histmig.screen import settled_for

    size = os.path.getsize(src)
    children = []
    for half in range(2):
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                decode, dumps, settled = msgspec.json.Decoder().decode, orjson.dumps, settled_for(select(), "messages")
                start, end = half * size // 2, (half + 1) * size // 2
                with open(src, "rb") as inp, open(f"{dst}.{half}", "wb") as out:
                    inp.seek(start)
                    if start:
                        inp.readline()
                    while inp.tell() <= end and (line := inp.readline()):
                        output = dumps(decode(line))
                        settled(output)
                        out.write(output + b"\n")
                status = 0
            finally:
                os._exit(status)
        children.append(pid)
    if any(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children):
        raise RuntimeError(f"bound_jsonl: a process failed on {src}")


def bound_parquet(src: str, dst: str) -> None:
    """The least work that looking at every cell takes: the pyarrow read and write of
    :func:`floor_parquet` with one C++ substring search (``retry-prompt``) of each batch's
    messages column, far less than telling whether a rule applies."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    reader = pq.ParquetFile(src)
    column = reader.schema_arrow.get_field_index("messages")
    with pq.ParquetWriter(dst, reader.schema_arrow) as writer:
        for batch in reader.iter_batches(batch_size=PARQUET_BATCH):
            pc.match_substring(batch.column(column), "retry-prompt")
            writer.write_batch(batch)


# ---------------------------------------------------------------- database tables (run in a child)

TABLE = "conversations"
TABLE_SHARE = "10%"


def table_paths(workdir: Path, count: int) -> dict[str, str]:
    """Where :func:`build_tables` puts the SQLite template and the working copy each run
    migrates (``sqlite-template``, ``sqlite``), and the PostgreSQL tables' names."""
    base = workdir / f"retry10-{count}"
    return {
        "sqlite-template": f"{base}.template.sqlite",
        "sqlite": f"{base}.sqlite",
        "postgres-template": f"template_{count}",
    }


def build_tables(workdir: Path, count: int, url: str | None) -> None:
    """The 10 % variant's records as the template SQLite file and, with ``url``, the
    template PostgreSQL table (``id`` text primary key, ``version``, ``scenario``,
    ``messages`` jsonb), unless present."""
    import sqlite3

    paths = table_paths(workdir, count)
    records = None
    if not os.path.exists(paths["sqlite-template"]):
        records = build_records(count, SHARES[1][1], corpus_pools())
        tmp = paths["sqlite-template"] + ".tmp"
        Path(tmp).unlink(missing_ok=True)
        with sqlite3.connect(tmp) as con:
            con.execute(f"CREATE TABLE {TABLE} (id TEXT PRIMARY KEY, version TEXT, scenario TEXT, messages TEXT)")
            con.executemany(
                f"INSERT INTO {TABLE} VALUES (?, ?, ?, ?)",
                ((r["id"], r["version"], r["scenario"], orjson.dumps(r["messages"]).decode()) for r in records),
            )
        con.close()
        os.replace(tmp, paths["sqlite-template"])
    if url is None:
        return
    import psycopg

    template = paths["postgres-template"]
    with psycopg.connect(url, autocommit=True) as con:
        if con.execute("SELECT to_regclass(%s)", [template]).fetchone()[0] is not None:
            return
        records = records or build_records(count, SHARES[1][1], corpus_pools())
        with con.transaction():
            con.execute(f"CREATE TABLE {template} (id text PRIMARY KEY, version text, scenario text, messages jsonb)")
            with con.cursor().copy(f"COPY {template} FROM STDIN") as copy:
                for r in records:
                    copy.write_row((r["id"], r["version"], r["scenario"], orjson.dumps(r["messages"]).decode()))
        con.execute(f"VACUUM ANALYZE {template}")


def reset_table(fmt: str, workdir: Path, count: int, url: str | None) -> None:
    """The working table restored from the template: the SQLite file copied; the PostgreSQL
    table created again as a copy (then vacuumed, as a table at rest is)."""
    paths = table_paths(workdir, count)
    if fmt == "sqlite":
        import shutil

        shutil.copyfile(paths["sqlite-template"], paths["sqlite"])
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        con.execute(f"DROP TABLE IF EXISTS {TABLE}")
        con.execute(f"CREATE TABLE {TABLE} (LIKE {paths['postgres-template']} INCLUDING ALL)")
        con.execute(f"INSERT INTO {TABLE} SELECT * FROM {paths['postgres-template']}")
        con.execute(f"VACUUM ANALYZE {TABLE}")


FLOOR_BATCH = 2000
"""Rows the floor reads between two commits of its UPDATEs."""


def floor_table(fmt: str, location: str) -> None:
    """The least work an in-place migration of the table needs, with no migration: read
    every row's messages (PostgreSQL: a server-side cursor, the text of each ``jsonb``), and
    write back, with plain SQL (``UPDATE ... SET messages = %s WHERE id = %s``), the rows whose
    text holds a retry-prompt part, as they were; a transaction every :data:`FLOOR_BATCH`
    rows read (SQLite: one at the end, as histmig's)."""
    if fmt == "sqlite":
        import sqlite3

        con = sqlite3.connect(location, isolation_level=None)
        changed = [
            (text, key) for key, text in con.execute(f"SELECT id, messages FROM {TABLE}") if "retry-prompt" in text
        ]
        con.execute("BEGIN IMMEDIATE")
        con.executemany(f"UPDATE {TABLE} SET messages = ? WHERE id = ?", changed)
        con.execute("COMMIT")
        con.close()
        return
    import psycopg

    with psycopg.connect(location) as reader, psycopg.connect(location) as writer:
        with reader.cursor(name="floor") as cursor:
            cursor.itersize = FLOOR_BATCH
            cursor.execute(f"SELECT id, messages::text FROM {TABLE}")
            while rows := cursor.fetchmany(FLOOR_BATCH):
                changed = [(text, key) for key, text in rows if "retry-prompt" in text]
                with writer.cursor() as update:
                    update.executemany(f"UPDATE {TABLE} SET messages = %s WHERE id = %s", changed)
                writer.commit()


def measure_tables(formats: list[str], workdir: Path, count: int, url: str | None, repeat: int) -> None:
    """Build the tables (:func:`build_tables`), then time histmig ``--in-place`` and the
    floor on each of ``formats`` (postgres, sqlite), each run on a table restored from the
    template, and print the table: rows/s of each, the ratio, histmig's peak RSS."""
    run = [sys.executable, __file__]
    subprocess.run([*run, "--build-tables", str(workdir), str(count), url or ""], check=True)
    paths = table_paths(workdir, count)
    print(
        f"\ntables: {count} conversations, {TABLE_SHARE} holding a retry-prompt part, convert --in-place (floor: read every row, write back the changed ones with plain SQL, no migration)\n"
    )
    header = f"| {'table':<20} | {'histmig s':>9} | {'rec/s':>8} | {'floor s':>7} | {'rec/s':>8} | {'x floor':>7} | {'histmig RSS MB':>14} |"
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    for fmt in formats:
        location = paths["sqlite"] if fmt == "sqlite" else url
        reset = [*run, "--reset-table", fmt, str(workdir), str(count), url or ""]
        commands = [
            [sys.executable, "-m", "histmig", "convert", location, "--table", TABLE, "--in-place", "-q"],
            [*run, "--floor-table", fmt, location],
        ]
        runs: list[list[Timing]] = [[], []]
        for _ in range(repeat):
            for argv, seen in zip(commands, runs):
                subprocess.run(reset, check=True)
                seen.append(timed(argv))
        ours, floor = (
            Timing(min(t.seconds for t in seen), max(t.peak_rss_mb for t in seen), all(t.ok for t in seen))
            for seen in runs
        )
        ratio = f"{floor.seconds / ours.seconds:.2f}" if ours.ok and floor.ok else "n/a"
        name = f"{'PostgreSQL jsonb' if fmt == 'postgres' else 'SQLite TEXT'} {TABLE_SHARE}"
        print(
            f"| {name:<20} | {ours.seconds:>9.2f} | {rate(0, count, ours)[1]:>8} | {floor.seconds:>7.2f} | {rate(0, count, floor)[1]:>8} "
            f"| {ratio:>7} | {f'{ours.peak_rss_mb:.0f}' if ours.ok else 'n/a':>14} |",
            flush=True,
        )


def with_postgres(url: str | None, body: Callable[[str | None], None], wanted: bool) -> None:
    """``body(url)``: with ``url``, or when PostgreSQL is ``wanted`` and no URL is given,
    with that of a throwaway cluster, started and removed by a child process each (the
    helpers of ``tests/sources/conftest.py``; nothing heavy is imported here)."""
    if url is not None or not wanted:
        body(url)
        return
    folder = tempfile.mkdtemp(prefix="histmig-pg-")
    started = subprocess.run(
        [sys.executable, __file__, "--postgres-start", folder], check=True, capture_output=True, text=True
    )
    try:
        body(started.stdout.strip())
    finally:
        subprocess.run([sys.executable, __file__, "--postgres-stop", folder], check=True)


def spark_start(src: str, dst: str) -> None:
    """A Spark ``local[2]`` session made as ``histmig convert --engine spark`` makes it,
    started and stopped, no job."""
    from histmig.spark import session

    spark, log = session(None, 2)
    _stopped(spark, log)


def spark_floor(src: str, dst: str) -> None:
    """The Spark floor: ``src`` read and written to the directory ``dst`` by a Spark job of
    the same session, with the same compression, no migration (all in the JVM)."""
    from histmig.sources.parquet import compression, open_parquet
    from histmig.spark import session

    spark, log = session(None, 2)
    spark.read.parquet(src).write.mode("overwrite").option(
        "compression", compression(open_parquet(src).metadata)
    ).parquet(dst)
    _stopped(spark, log)


def spark_arrow(src: str, dst: str) -> None:
    """The Spark floor with every record batch sent to a Python worker and back unchanged
    (``mapInArrow`` of the identity): what histmig's Spark job costs besides migrating."""
    from histmig.sources.parquet import compression, open_parquet
    from histmig.spark import session

    spark, log = session(None, 2)
    df = spark.read.parquet(src)
    df.mapInArrow(_identity, df.schema).write.mode("overwrite").option(
        "compression", compression(open_parquet(src).metadata)
    ).parquet(dst)
    _stopped(spark, log)


def _identity(batches):
    yield from batches


def _stopped(spark, log: str | None) -> None:
    """Stop a session this baseline started (``log`` its file), not one it was given."""
    if log is not None:
        spark.stop()
        os.unlink(log)


BASELINES = {
    ("floor", "jsonl"): floor_jsonl,
    ("framework", "jsonl"): framework_jsonl,
    ("bound", "jsonl"): bound_jsonl,
    ("floor", "parquet"): floor_parquet,
    ("framework", "parquet"): framework_parquet,
    ("bound", "parquet"): bound_parquet,
    ("spark-start", "parquet"): spark_start,
    ("spark-floor", "parquet"): spark_floor,
    ("spark-arrow", "parquet"): spark_arrow,
}


# ---------------------------------------------------------------- measuring


@dataclass
class Timing:
    seconds: float
    peak_rss_mb: float
    ok: bool


def timed(argv: list[str], env: dict[str, str] | None = None) -> Timing:
    """Run ``argv`` to its end (in ``env``, else this environment with histmig on the path);
    wall-clock seconds and the child's own peak RSS (MB). ``ok`` is false when it exited with
    2 or more (histmig exits 1 when records were rejected, which is a result, not a failure)."""
    if env is None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    start = time.perf_counter()
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = child.stderr.read() if child.stderr else b""
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode >= 2 and stderr:
        print(stderr.decode(errors="replace")[-400:], file=sys.stderr)
    return Timing(seconds, usage.ru_maxrss / 1024, child.returncode < 2)


def best(argvs: list[list[str]], repeat: int, envs: list[dict[str, str] | None] | None = None) -> list[Timing]:
    """For each command of ``argvs``, the fastest of ``repeat`` runs (peak RSS: the largest
    seen). The commands take turns (A B C A B C ...), so that a slow spell of the machine
    (this virtual machine's speed drifts by tens of percent over minutes) falls on all of
    them alike rather than on one. ``envs``: the environment of each command (:func:`timed`)."""
    runs: list[list[Timing]] = [[] for _ in argvs]
    for _ in range(repeat):
        for argv, env, seen in zip(argvs, envs or [None] * len(argvs), runs):
            seen.append(timed(argv, env))
    return [
        Timing(min(t.seconds for t in seen), max(t.peak_rss_mb for t in seen), all(t.ok for t in seen)) for seen in runs
    ]


def histmig_argv(src: Path, dst: Path, jobs: int | None = None, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "histmig",
        "convert",
        str(src),
        str(dst),
        "-q",
        *([] if jobs is None else ["--jobs", str(jobs)]),
        *extra,
    ]


def baseline_argv(kind: str, src: Path, dst: Path) -> list[str]:
    return [sys.executable, __file__, "--baseline", kind, str(src), str(dst)]


def main(argv: list[str] | None = None) -> int:
    """Build the archives, measure, print the table. Returns the exit code (0)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="conversations per archive (default 100000)")
    parser.add_argument("--quick", action="store_true", help="a small run: 5000 records")
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement, the best is kept")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/histmig-bench"))
    parser.add_argument(
        "--formats",
        default="jsonl,parquet",
        help="comma-separated: jsonl, parquet, postgres, sqlite, spark (Parquet through Spark local[2]), "
        "cluster (Parquet 10%% on a Spark standalone cluster of 2 workers), s3 (JSONL 10%% on an S3 server, "
        "and a --big-mib object streamed), "
        "layouts (the 10%% variant per run and per message against whole: JSONL, and PostgreSQL with postgres)",
    )
    parser.add_argument(
        "--postgres", metavar="URL", help="database for the postgres table (default: a throwaway PostgreSQL 15 cluster)"
    )
    parser.add_argument(
        "--big-mib", type=int, default=1024, help="MiB of the object --formats s3 streams (and a quarter of it)"
    )
    args = parser.parse_args(argv)
    count = 5000 if args.quick else args.records
    # built in a child, and nothing heavy imported here: on Linux a child's peak RSS
    # (wait4's ru_maxrss) starts from this process's RSS when it is spawned
    subprocess.run([sys.executable, __file__, "--build", str(args.workdir), str(count)], check=True)
    files = archive_paths(args.workdir, count)
    formats = [f for f in args.formats.split(",") if f]
    tabled = [f for f in formats if f in ("jsonl", "parquet")]
    tables = [f for f in formats if f in ("postgres", "sqlite")]

    print(
        f"machine: {os.cpu_count()} cores, {cpu_model()}, Python {platform.python_version()}, {count} records per archive\n"
    )
    header = f"| {'archive':<14} | {'MB':>5} | {'histmig MB/s':>12} | {'rec/s':>8} | {'framework MB/s':>14} | {'rec/s':>7} | {'floor MB/s':>10} | {'rec/s':>8} | {'x framework':>11} | {'x floor':>7} | {'histmig RSS MB':>14} |"
    if tabled:
        print(header)
        print("|" + "|".join("-" * (len(cell)) for cell in header.split("|")[1:-1]) + "|")
    out = args.workdir / "out"
    out.mkdir(exist_ok=True)
    bounds: list[tuple[str, int, Timing, Timing, Timing]] = []
    for fmt in tabled:
        for name, _ in SHARES:
            src = files[name][fmt]
            size, label = files[name]["jsonl"].stat().st_size, f"{fmt} {name}"  # MB of JSON, for both formats
            commands = [
                histmig_argv(src, out / f"histmig.{fmt}"),
                [sys.executable, __file__, "--baseline", "framework", str(src), str(out / f"framework.{fmt}")],
                [sys.executable, __file__, "--baseline", "floor", str(src), str(out / f"floor.{fmt}")],
            ]
            # the bound of a JSONL archive reads histmig's output, written just before in each turn
            bounded = fmt == "parquet" or name == "100%"
            bound_input = src if fmt == "parquet" else out / f"histmig.{fmt}"
            if bounded:
                commands.append(
                    [sys.executable, __file__, "--baseline", "bound", str(bound_input), str(out / f"bound.{fmt}")]
                )
            ours, theirs, floor, *bound = best(commands, args.repeat)
            if bound:
                bounds.append((label, size, bound[0], theirs, floor))
            cells = [rate(size, count, t) for t in (ours, theirs, floor)]
            ratio = lambda other: f"{other.seconds / ours.seconds:.2f}" if ours.ok and other.ok else "n/a"  # noqa: E731
            print(
                f"| {label:<14} | {size / 1e6:>5.0f} | {cells[0][0]:>12} | {cells[0][1]:>8} | {cells[1][0]:>14} | {cells[1][1]:>7} "
                f"| {cells[2][0]:>10} | {cells[2][1]:>8} | {ratio(theirs):>11} | {ratio(floor):>7} | {f'{ours.peak_rss_mb:.0f}' if ours.ok else 'n/a':>14} |",
                flush=True,
            )
    print_bounds(bounds, count)
    if "spark" in formats:
        print_spark(files, count, out, args.repeat)
    if "cluster" in formats:
        print_cluster(files, count, out, args.repeat)
    if "s3" in formats:
        print_s3(files, count, out, args.repeat, args.big_mib)
    if "jsonl" in formats:
        src = files["100%"]["jsonl"]
        one, two = best(
            [histmig_argv(src, out / "jobs1.jsonl", jobs=1), histmig_argv(src, out / "jobs2.jsonl", jobs=2)],
            args.repeat,
        )
        if one.ok and two.ok:
            same = (out / "jobs1.jsonl").read_bytes() == (out / "jobs2.jsonl").read_bytes()
            print(
                f"\nhistmig --jobs scaling on jsonl 100%: 1 worker {one.seconds:.2f} s, 2 workers {two.seconds:.2f} s, "
                f"x{one.seconds / two.seconds:.2f}; outputs identical: {same}"
            )
        else:
            print("\nhistmig --jobs scaling: n/a (histmig convert --jobs failed)")
    if tables:
        with_postgres(
            args.postgres,
            lambda url: measure_tables(tables, args.workdir, count, url, args.repeat),
            "postgres" in tables,
        )
    if "layouts" in formats:
        with_postgres(
            args.postgres, lambda url: measure_layouts(args.workdir, count, url, args.repeat), "postgres" in formats
        )
    return 0


def print_bounds(bounds: list[tuple[str, int, Timing, Timing, Timing]], count: int) -> None:
    """The second table: for each ``(label, size, bound, framework, floor)``, the bound's
    MB/s and its ratios to the framework and to the floor of the same run: what histmig
    could reach at best (see :func:`bound_jsonl`, :func:`bound_parquet`)."""
    if not bounds:
        return
    print(
        "\nbounds: the least work any migration needs (jsonl: parse, dump and 2.68-schema check of every migrated record on 2 cores, no rule; parquet: read, one substring search of every cell, write)\n"
    )
    header = f"| {'archive':<14} | {'bound MB/s':>10} | {'rec/s':>8} | {'x framework':>11} | {'x floor':>7} |"
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    for label, size, bound, theirs, floor in bounds:
        mbs, recs = rate(size, count, bound)
        ratio = lambda other: f"{other.seconds / bound.seconds:.2f}" if bound.ok and other.ok else "n/a"  # noqa: E731
        print(f"| {label:<14} | {mbs:>10} | {recs:>8} | {ratio(theirs):>11} | {ratio(floor):>7} |", flush=True)


def print_spark(files: dict[str, dict[str, Path]], count: int, out: Path, repeat: int) -> None:
    """The Spark table: for each Parquet archive, ``histmig convert --engine spark --jobs 2``
    (Spark ``local[2]``), histmig's own ``--jobs 2``, the Spark floor and the floor through
    Python workers, timed as the others (MB of the JSONL archive per second); then where
    Spark's time goes: starting the session, reading and writing in the JVM (floor less
    start), the batches to the Python workers and back (arrow less floor), migrating
    (histmig less arrow)."""
    print(
        "\nspark: histmig convert --engine spark --jobs 2 (local[2]) against histmig --jobs 2 and the Spark floor (read and write, no migration)\n"
    )
    header = f"| {'archive':<14} | {'spark MB/s':>10} | {'rec/s':>8} | {'--jobs 2 MB/s':>13} | {'floor MB/s':>10} | {'x --jobs 2':>10} | {'x floor':>7} | {'start s':>7} | {'jvm s':>6} | {'python s':>8} | {'migrate s':>9} |"
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    for name, _ in SHARES:
        src, size = files[name]["parquet"], files[name]["jsonl"].stat().st_size
        ours, local, floor, start, arrow = best(
            [
                histmig_argv(src, out / "spark-histmig", 2, "--engine", "spark"),
                histmig_argv(src, out / "jobs2.parquet", 2),
                baseline_argv("spark-floor", src, out / "spark-floor"),
                baseline_argv("spark-start", src, out / "spark-start"),
                baseline_argv("spark-arrow", src, out / "spark-arrow"),
            ],
            repeat,
        )
        cells = [rate(size, count, t) for t in (ours, local, floor)]
        ratio = lambda other: f"{other.seconds / ours.seconds:.2f}" if ours.ok and other.ok else "n/a"  # noqa: E731
        steps = [
            start.seconds,
            floor.seconds - start.seconds,
            arrow.seconds - floor.seconds,
            ours.seconds - arrow.seconds,
        ]
        shown = [f"{step:.2f}" if all(t.ok for t in (ours, floor, start, arrow)) else "n/a" for step in steps]
        print(
            f"| {'spark ' + name:<14} | {cells[0][0]:>10} | {cells[0][1]:>8} | {cells[1][0]:>13} | {cells[2][0]:>10} | {ratio(local):>10} | {ratio(floor):>7} "
            f"| {shown[0]:>7} | {shown[1]:>6} | {shown[2]:>8} | {shown[3]:>9} |",
            flush=True,
        )


def print_cluster(files: dict[str, dict[str, Path]], count: int, out: Path, repeat: int) -> None:
    """The cluster table: on the Parquet 10 % archive, histmig through ``spark-submit`` on a
    standalone cluster of two workers (one core, 1 GB each; started and stopped here as the
    tests start theirs, :func:`tests.servers.standalone_cluster`, histmig shipped as a wheel)
    against ``--engine spark --jobs 2`` (``local[2]``) and histmig's own ``--jobs 2``, timed
    as the others in one run; then the cluster's records per second per core and the
    core-hours a billion conversations would take at that rate."""
    sys.path.insert(0, str(ROOT))
    from tests.servers import standalone_cluster

    src, size = files["10%"]["parquet"], files["10%"]["jsonl"].stat().st_size
    print(
        "\ncluster: histmig convert --engine spark through spark-submit on a standalone cluster (2 workers, 1 core "
        "and 1 GB each) against local[2] and histmig --jobs 2\n"
    )
    header = (
        f"| {'archive':<14} | {'cluster MB/s':>12} | {'rec/s':>8} | {'local[2] MB/s':>13} | {'--jobs 2 MB/s':>13} "
        f"| {'x local[2]':>10} | {'x --jobs 2':>10} | {'rec/s/core':>10} | {'core-h per 1e9':>14} |"
    )
    print(header)
    print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
    with standalone_cluster(Path(tempfile.mkdtemp(prefix="cluster-", dir=out))) as cluster:
        ours, local, jobs = best(
            [
                cluster.argv("convert", str(src), str(out / "cluster-histmig"), "--engine", "spark", "-q"),
                histmig_argv(src, out / "spark-histmig", 2, "--engine", "spark"),
                histmig_argv(src, out / "jobs2.parquet", 2),
            ],
            repeat,
            [cluster.env(), None, None],
        )
    cells = [rate(size, count, t) for t in (ours, local, jobs)]
    ratio = lambda other: f"{other.seconds / ours.seconds:.2f}" if ours.ok and other.ok else "n/a"  # noqa: E731
    per_core = count / ours.seconds / 2 if ours.ok else None
    print(
        f"| {'parquet 10%':<14} | {cells[0][0]:>12} | {cells[0][1]:>8} | {cells[1][0]:>13} | {cells[2][0]:>13} "
        f"| {ratio(local):>10} | {ratio(jobs):>10} | {f'{per_core:,.0f}' if per_core else 'n/a':>10} "
        f"| {f'{1e9 / per_core / 3600:,.0f}' if per_core else 'n/a':>14} |",
        flush=True,
    )


def print_s3(files: dict[str, dict[str, Path]], count: int, out: Path, repeat: int, big_mib: int) -> None:
    """The object-storage tables, against an S3 API server on loopback started and stopped
    here (moto's server mode, :func:`tests.servers.moto_server`, in a child: nothing heavy in
    this process): the JSONL 10 % archive uploaded (:func:`s3_upload`) and converted
    ``s3://.../in.jsonl s3://.../out.jsonl`` against the same convert on local disk, in one
    run; then ``histmig audit`` of an object of ``big_mib`` MiB and of a quarter of it (the
    archive's lines repeated, :func:`s3_big`) with histmig's peak RSS: flat when streamed."""
    src, size = files["10%"]["jsonl"], files["10%"]["jsonl"].stat().st_size
    server = subprocess.Popen(
        [sys.executable, __file__, "--s3-serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        endpoint = server.stdout.readline().strip()
        if not endpoint.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the S3 server did not start (it said {endpoint!r})")
        sys.path.insert(0, str(ROOT))
        from tests.servers import S3_ENV

        env = {
            **os.environ,
            **S3_ENV,
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "PYTHONPATH": str(ROOT),
        }
        print("\ns3: the jsonl 10% archive on an S3 API server on loopback (moto) against local disk\n")
        header = (
            f"| {'archive':<14} | {'MB':>5} | {'upload s':>8} | {'s3 convert s':>12} | {'MB/s':>6} | {'local s':>7} "
            f"| {'MB/s':>6} | {'x local':>7} | {'round trip x local':>18} |"
        )
        print(header)
        print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
        bucket = "s3://histmig-bench"
        upload, remote, local = best(
            [
                [sys.executable, __file__, "--s3-upload", str(src), f"{bucket}/in.jsonl"],
                [sys.executable, "-m", "histmig", "convert", f"{bucket}/in.jsonl", f"{bucket}/out.jsonl", "-q"],
                histmig_argv(src, out / "local.jsonl"),
            ],
            repeat,
            [env, env, env],
        )
        ok = upload.ok and remote.ok and local.ok
        show = lambda value: f"{value:.2f}" if ok else "n/a"  # noqa: E731
        print(
            f"| {'jsonl 10%':<14} | {size / 1e6:>5.0f} | {show(upload.seconds):>8} | {show(remote.seconds):>12} "
            f"| {rate(size, count, remote)[0]:>6} | {show(local.seconds):>7} | {rate(size, count, local)[0]:>6} "
            f"| {show(local.seconds / remote.seconds):>7} "
            f"| {show(local.seconds / (upload.seconds + remote.seconds)):>18} |",
            flush=True,
        )
        sizes = {f"{mib} MiB": mib * 2**20 for mib in (big_mib // 4, big_mib)}
        for label, length in sizes.items():
            made = subprocess.run(
                [sys.executable, __file__, "--s3-big", str(src), f"{bucket}/big-{length}.jsonl", str(length)], env=env
            )
            if made.returncode:
                raise RuntimeError(f"the {label} object was not written")
        timings = best(
            [[sys.executable, "-m", "histmig", "audit", f"{bucket}/big-{n}.jsonl", "-q"] for n in sizes.values()],
            repeat,
            [env] * len(sizes),
        )
        print("\ns3: histmig audit of one object streamed (the archive's lines repeated)\n")
        header = f"| {'object':<14} | {'audit s':>7} | {'MB/s':>6} | {'histmig RSS MB':>14} |"
        print(header)
        print("|" + "|".join("-" * len(cell) for cell in header.split("|")[1:-1]) + "|")
        for (label, length), timing in zip(sizes.items(), timings):
            print(
                f"| {label:<14} | {f'{timing.seconds:.2f}' if timing.ok else 'n/a':>7} "
                f"| {rate(length, 1, timing)[0]:>6} "
                f"| {f'{timing.peak_rss_mb:.0f}' if timing.ok else 'n/a':>14} |",
                flush=True,
            )
    finally:
        server.stdin.close()
        server.wait(60)


def s3_serve() -> None:
    """Serve S3 on loopback (:func:`tests.servers.moto_server`): print the endpoint, stop when
    stdin is closed."""
    sys.path.insert(0, str(ROOT))
    from tests.servers import moto_server

    with moto_server() as endpoint:
        print(endpoint, flush=True)
        sys.stdin.read()


def s3_upload(src: str, url: str) -> None:
    """Upload the local file ``src`` to the object ``url`` (its bucket made when missing)
    through histmig's object-storage layer (a multipart upload completed at the end)."""
    import shutil

    from histmig.sources import fs

    store, path = fs.filesystem(url)
    if not store.exists(path.split("/", 1)[0]):
        store.mkdir(path.split("/", 1)[0])
    with open(src, "rb") as source, fs.remote_output(url) as sink:
        shutil.copyfileobj(source, sink, 8 << 20)


def s3_big(src: str, url: str, length: int) -> None:
    """Write the object ``url`` of at least ``length`` bytes: the whole lines of ``src``
    repeated (streamed, never held whole)."""
    from histmig.sources import fs

    chunk, written = Path(src).read_bytes(), 0
    with fs.remote_output(url) as sink:
        while written < length:
            sink.write(chunk)
            written += len(chunk)


def rate(size: int, count: int, timing: Timing) -> tuple[str, str]:
    """``(MB/s, records/s)`` cells, ``n/a`` for a run that failed."""
    if not timing.ok:
        return "n/a", "n/a"
    return f"{size / 1e6 / timing.seconds:.1f}", f"{count / timing.seconds:,.0f}"


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (as ``lscpu`` shows it), or the platform's."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--build":
        build(Path(sys.argv[2]), int(sys.argv[3]))
        sys.exit(0)
    if len(sys.argv) == 5 and sys.argv[1] == "--build-tables":
        build_tables(Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4] or None)
        sys.exit(0)
    if len(sys.argv) == 5 and sys.argv[1] == "--build-layouts":
        build_layouts(Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4] or None)
        sys.exit(0)
    if len(sys.argv) == 6 and sys.argv[1] == "--reset-table":
        reset_table(sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]), sys.argv[5] or None)
        sys.exit(0)
    if len(sys.argv) == 4 and sys.argv[1] == "--floor-table":
        floor_table(sys.argv[2], sys.argv[3])
        sys.exit(0)
    if len(sys.argv) == 3 and sys.argv[1] in ("--postgres-start", "--postgres-stop"):
        sys.path.insert(0, str(ROOT))
        from tests.sources.conftest import start_postgres, stop_postgres

        print(
            start_postgres(Path(sys.argv[2]))
            if sys.argv[1] == "--postgres-start"
            else stop_postgres(Path(sys.argv[2])) or ""
        )
        sys.exit(0)
    if sys.argv[1:] == ["--s3-serve"]:
        s3_serve()
        sys.exit(0)
    if len(sys.argv) == 4 and sys.argv[1] == "--s3-upload":
        s3_upload(sys.argv[2], sys.argv[3])
        sys.exit(0)
    if len(sys.argv) == 5 and sys.argv[1] == "--s3-big":
        s3_big(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        sys.exit(0)
    if len(sys.argv) == 5 and sys.argv[1] == "--baseline":
        kind, src, dst = sys.argv[2:]
        BASELINES[(kind, "parquet" if src.endswith(".parquet") else "jsonl")](src, dst)
        sys.exit(0)
    sys.exit(main())
