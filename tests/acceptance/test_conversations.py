"""Issue 25: a conversation stored as many records. Every corpus and captured history, cut at
every run boundary and into one message a record, stored as JSONL lines, Parquet rows (spread
over row groups, and over the files of a partitioned directory) and DuckDB rows, shuffled in
physical order: with ``--conversation``/``--order`` each record gets back its own messages,
which put together are the whole history's conversion byte for byte (but for the fixes a layout
cannot take, named here), ``check`` finds what it finds in the whole history, and pydantic-ai
2.68 loads every conversation put together."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from histmig import api
from histmig.engine import process, process_conversation
from histmig.options import Options
from histmig.records import Conversation, Record
from tests.conftest import assert_reassembled, not_applicable, stored_apart
from tests.sources.conftest import without_place


def _spaced(value: Any) -> str:
    """JSON text as Python's json writes it (spaced: a value written back compact shows that
    histmig rewrote it)."""
    return json.dumps(value, ensure_ascii=False)


@dataclass
class Stored:
    """Records stored in one format: the ``input`` to convert (to ``output``, or in place when it
    is ``None``) with the format's ``options``; ``where(row)``, the record a report row names
    (its index in the records); ``read()``, every record as it is stored after the run, in the
    records' order: ``(conversation_id, seq, the stored bytes)``, the bytes a JSONL line or a
    messages cell."""

    input: str
    output: str | None
    options: dict[str, Any]
    where: Callable[[dict[str, Any]], int]
    read: Callable[[], list[tuple[str, int, bytes]]]


def _jsonl(tmp_path: Path, records: list[dict[str, Any]]) -> Stored:
    path, out = tmp_path / "apart.jsonl", tmp_path / "out.jsonl"
    path.write_text("".join(_spaced(record) + "\n" for record in records), encoding="utf-8")

    def read() -> list[tuple[str, int, bytes]]:
        written = (out if out.exists() else path).read_bytes().splitlines()
        return [(value["conversation_id"], value["seq"], line) for line in written for value in [orjson.loads(line)]]

    return Stored(str(path), str(out), {}, lambda row: int(row["location"].split()[1]) - 1, read)


def _parquet_files(tmp_path: Path, records: list[dict[str, Any]], files: int) -> Stored:
    """``records`` as Parquet rows of 23 a row group (so a conversation's rows lie in several),
    over ``files`` files of a partitioned directory (``day=N/part-0.parquet``; one file: not a
    directory), in order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    share = -(-len(records) // files)
    names = [Path(f"day={n}") / "part-0.parquet" for n in range(files)] if files > 1 else [Path("apart.parquet")]
    root, out = (tmp_path / "lake", tmp_path / "lake.v2") if files > 1 else (tmp_path, tmp_path / "out.parquet")
    starts: dict[str, int] = {}
    for n, name in enumerate(names):
        mine = records[n * share : (n + 1) * share]
        table = pa.table(
            {
                "conversation_id": [r["conversation_id"] for r in mine],
                "seq": pa.array([r["seq"] for r in mine], pa.int32()),
                "messages": [_spaced(r["messages"]) for r in mine],
            }
        )
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, root / name, row_group_size=23)
        starts[str(root / name)] = n * share

    def read() -> list[tuple[str, int, bytes]]:
        found = []
        for name in names:
            written = pq.ParquetFile((out / name if files > 1 else out) if out.exists() else root / name)
            source = pq.ParquetFile(root / name)
            assert written.schema_arrow == source.schema_arrow
            assert written.metadata.num_row_groups == source.metadata.num_row_groups  # its row groups kept
            found += [
                (row["conversation_id"], row["seq"], row["messages"].encode()) for row in written.read().to_pylist()
            ]
        return found

    def where(row: dict[str, Any]) -> int:
        return starts[row["source"]] + int(row["location"].split()[1])

    return Stored(str(root / names[0]) if files == 1 else str(root), str(out), {}, where, read)


def _duckdb(tmp_path: Path, records: list[dict[str, Any]]) -> Stored:
    import duckdb

    path = tmp_path / "apart.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE chats (id INTEGER PRIMARY KEY, conversation_id VARCHAR, seq INTEGER, messages JSON)")
        con.executemany(
            "INSERT INTO chats VALUES (?, ?, ?, ?)",
            [(n, r["conversation_id"], r["seq"], _spaced(r["messages"])) for n, r in enumerate(records)],
        )

    def read() -> list[tuple[str, int, bytes]]:
        with duckdb.connect(str(path), read_only=True) as con:
            rows = con.execute("SELECT conversation_id, seq, messages FROM chats ORDER BY id").fetchall()
        return [(name, seq, value.encode()) for name, seq, value in rows]

    return Stored(str(path), None, {"table": "chats"}, lambda row: int(row["location"].split()[1]), read)


STORES = {
    "jsonl": _jsonl,
    "parquet": lambda tmp_path, records: _parquet_files(tmp_path, records, 1),
    "parquet-directory": lambda tmp_path, records: _parquet_files(tmp_path, records, 3),
    "duckdb": _duckdb,
}
"""How each format stores the records, by name (a test id)."""


def _messages(store: str, stored: bytes) -> Any:
    """The messages a record holds (a JSONL line's field; a cell's whole value)."""
    value = orjson.loads(stored)
    return value["messages"] if store == "jsonl" else value


@pytest.mark.parametrize("store", list(STORES))
@pytest.mark.parametrize("fixes", ["safe", "unsafe", "attempts"])
@pytest.mark.parametrize("layout", ["per run", "per message"])
def test_each_record_gets_back_its_own_messages_as_the_whole_conversion_has_them(
    tmp_path: Path, layout: str, fixes: str, store: str
) -> None:
    """``attempts``: HM104 counts the retries of a conversation across its records, as in the
    whole history."""
    histories, records = stored_apart(layout)
    stored = STORES[store](tmp_path, records)
    before = stored.read()
    unsafe = fixes == "unsafe"
    options = Options(
        unsafe_fixes=unsafe,
        attempts=fixes == "attempts",
        conversation=("conversation_id",),
        order="seq",
        jobs=2,
        **stored.options,
    )
    result = api.convert(stored.input, stored.output, options, in_place=stored.output is None)
    after = stored.read()
    assert len(after) == len(records)  # every record written, in the input's order
    changed = {stored.where(row) for row in result.report.changes}
    assert (fixes == "attempts") == any(row["rule"] == "HM104" for row in result.report.changes)
    for n, ((name, seq, new), (_, _, old), record) in enumerate(zip(after, before, records)):
        assert (name, seq) == (record["conversation_id"], record["seq"])
        if n not in changed:
            assert new == old  # a record no rule touched keeps its bytes
    warned: dict[str, set[str]] = {}
    for row in result.report.warnings:
        name = records[stored.where(row)]["conversation_id"]
        for line in row["warnings"]:
            assert line.endswith("(not applicable to this layout)"), line
            warned.setdefault(name, set()).add(line.split()[0])
    expected = not_applicable(layout, unsafe)
    assert warned == expected
    out = [{"conversation_id": name, "seq": seq, "messages": _messages(store, raw)} for name, seq, raw in after]
    assert_reassembled(histories, out, options, expected)


@pytest.mark.parametrize("store", list(STORES))
@pytest.mark.parametrize("layout", ["per run", "per message"])
def test_check_finds_in_the_records_what_it_finds_in_the_whole_history(tmp_path: Path, layout: str, store: str) -> None:
    histories, records = stored_apart(layout)
    stored = STORES[store](tmp_path, records)
    whole_path = tmp_path / "whole.jsonl"
    names = list(histories)
    whole_path.write_bytes(b"".join(orjson.dumps(histories[name]) + b"\n" for name in names))
    offsets = {}
    for record in records:
        offsets[record["conversation_id"], record["seq"]] = len(record["messages"])
    starts: dict[tuple[str, int], int] = {}
    for name in names:
        at = 0
        seq = 0
        while (name, seq) in offsets:
            starts[name, seq] = at
            at += offsets[name, seq]
            seq += 1
    apart = api.check(stored.input, Options(conversation=("conversation_id",), order="seq", jobs=2, **stored.options))
    whole = api.check(str(whole_path), Options(jobs=2))

    def in_apart(row: dict[str, Any]) -> tuple[str, int]:
        record = records[stored.where(row)]
        return record["conversation_id"], starts[record["conversation_id"], record["seq"]]

    mapped: Counter[tuple[Any, ...]] = Counter()
    for row in apart.report.findings:
        name, start = in_apart(row)
        mapped[name, start + row["message"], row["rule"], row["part"], row["severity"], row["text"]] += 1
    expected = Counter(
        (
            names[int(row["location"].split()[1]) - 1],
            row["message"],
            row["rule"],
            row["part"],
            row["severity"],
            row["text"],
        )
        for row in whole.report.findings
    )
    assert mapped == expected
    assert sum(expected.values()) > 0
    assert apart.report.counts["invalid"] == whole.report.counts["invalid"]


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_any_cut_of_any_history_gives_back_the_whole_conversion(unsafe: bool) -> None:
    """Not only at run boundaries: each history cut at random places (seeded), some records
    bare arrays and some envelopes, some empty, goes through the engine as one conversation and
    comes back as the whole conversion, but for the fixes its records say do not apply."""
    rng = random.Random(25)
    plan = Options(unsafe_fixes=unsafe, conversation=("s",)).plan()
    for name, messages in stored_apart("per run")[0].items():
        cuts = sorted(rng.sample(range(1, len(messages)), min(3, len(messages) - 1)))
        pieces = [messages[a:b] for a, b in zip([0, *cuts], [*cuts, len(messages)])]
        pieces.insert(rng.randrange(len(pieces) + 1), [])
        records = tuple(
            Record(orjson.dumps({"s": 1, "messages": piece} if i % 2 else piece), "x", f"line {i + 1}")
            for i, piece in enumerate(pieces)
        )
        outcomes = process_conversation(Conversation(records, "s=1"), plan)
        withheld = {line.split()[0] for o in outcomes for line in o.warnings if line.endswith("to this layout)")}
        whole = process(Record(orjson.dumps(messages), "whole", "line 1"), replace(plan, withheld=frozenset(withheld)))
        if whole.status == "rejected":
            assert {o.status for o in outcomes} == {"rejected"}, name
            continue
        held = [orjson.loads(o.output) for o in outcomes]
        together = [m for value in held for m in (value["messages"] if isinstance(value, dict) else value)]
        assert together == orjson.loads(whole.output), name


def _entries(rows: list[Any], column: str) -> dict[tuple[str, int], dict[str, Any]]:
    """Each Spark row's report entry (``histmig_changes``; nothing to say: empty) by its record."""
    empty = {"changes": [], "findings": [], "errors": [], "warnings": []}
    return {(row["conversation_id"], row["seq"]): orjson.loads(row[column]) if row[column] else empty for row in rows}


def _local_entries(report: dict[str, Any], records: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    """The local engine's JSON report of the records (JSONL lines) as :func:`_entries` has it."""
    entries: dict[tuple[str, int], dict[str, Any]] = {}
    for kind in ("changes", "findings", "errors", "warnings"):
        for row in report[kind]:
            record = records[int(row["line"]) - 1]
            entry = entries.setdefault(
                (record["conversation_id"], record["seq"]),
                {"changes": [], "findings": [], "errors": [], "warnings": []},
            )
            if kind in ("errors", "warnings"):  # {"path", "message"} objects, as the entry's "path: message" lines
                entry[kind] += [
                    f"{line['path']}: {line['message']}" if line["path"] else line["message"] for line in row[kind]
                ]
            else:
                entry[kind].append(without_place([row])[0])
    return entries


@pytest.mark.parametrize("layout", ["per run", "per message"])
def test_on_spark_each_row_is_the_local_engines_whatever_the_partitioning(
    spark: Any, tmp_path: Path, layout: str
) -> None:
    """The records as a DataFrame of ``conversation_id``, ``seq`` and the messages as JSON
    text, in 1 and in 5 partitions (3 after the shuffle, Arrow batches of 5 rows, so that
    conversations go on from one batch to the next): ``histmig.spark.migrate(conversation=, order=)`` gives each
    row the cell, status and report entry of the local engine's JSONL run (``--unsafe-fixes``
    too), their conversations reassembled are the whole conversions, and ``check`` finds what
    the local ``check`` finds, row for row; the summary is the local report's."""
    import histmig.spark as hs

    histories, records = stored_apart(layout)
    path = Path(_jsonl(tmp_path, records).input)
    rows = [(r["conversation_id"], r["seq"], orjson.dumps(r["messages"]).decode()) for r in records]
    df = spark.createDataFrame(rows, "conversation_id string, seq long, messages string")
    grouped = {"conversation": "conversation_id", "order": "seq"}
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "5")  # conversations go on across batches
    try:
        for unsafe in (False, True):
            options = Options(unsafe_fixes=unsafe, conversation=("conversation_id",), order="seq")
            local = api.convert(str(path), str(tmp_path / f"out-{unsafe}.jsonl"), options).report.to_json()
            out_lines = (tmp_path / f"out-{unsafe}.jsonl").read_bytes().splitlines()
            local_cells = {(r["conversation_id"], r["seq"]): r["messages"] for r in map(orjson.loads, out_lines)}
            seen = []
            for partitions in (1, 5):
                migrated = hs.migrate(df.repartition(partitions), report=True, unsafe_fixes=unsafe, **grouped)
                got = migrated.collect()
                assert len(got) == len(records)
                assert {(row["conversation_id"], row["seq"]): orjson.loads(row["messages"]) for row in got} == (
                    local_cells
                )
                seen.append(
                    sorted((row["conversation_id"], row["seq"], row["messages"], row[hs.CHANGES]) for row in got)
                )
            assert seen[0] == seen[1]
            assert _entries(got, hs.CHANGES) == {
                key: _local_entries(local, records).get(
                    key, {"changes": [], "findings": [], "errors": [], "warnings": []}
                )
                for key in local_cells
            }
            statuses = Counter(row[hs.STATUS] for row in got)
            assert (statuses["changed"], statuses["rejected"]) == (
                local["summary"]["changed"],
                local["summary"]["rejected"],
            )
            assert statuses["changed"] > 0
            assert hs.summarize(migrated.persist()) == local["summary"]
            out = [
                {
                    "conversation_id": row["conversation_id"],
                    "seq": row["seq"],
                    "messages": orjson.loads(row["messages"]),
                }
                for row in got
            ]
            assert_reassembled(histories, out, options, not_applicable(layout, unsafe))
        failing = hs.check(df.repartition(5), **grouped).collect()
        local_check = api.check(str(path), Options(conversation=("conversation_id",), order="seq")).report.to_json()
        expected = _local_entries(local_check, records)
        assert {key: entry["findings"] for key, entry in _entries(failing, hs.CHANGES).items()} == {
            key: entry["findings"]
            for key, entry in expected.items()
            if entry["changes"] or entry["errors"] or any(f["severity"] == "error" for f in entry["findings"])
        }  # the rows check fails on: those a rule changes, invalid, or with an error finding
        assert sum(len(entry["findings"]) for entry in expected.values()) > 0
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "2")
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
