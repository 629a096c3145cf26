"""Issue 25: a conversation stored as many records. Every corpus and captured history, cut at
every run boundary and into one message a record, stored as JSONL rows shuffled in physical
order: with ``--conversation``/``--order`` each record gets back its own messages, which put
together are the whole history's conversion byte for byte (but for the fixes a layout cannot
take, named here), ``check`` finds what it finds in the whole history, and pydantic-ai 2.68
loads every conversation put together."""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import replace
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


def _written(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    """The records as JSONL, spaced as Python's json writes them (a record written back
    compact shows that histmig rewrote it)."""
    path = tmp_path / "apart.jsonl"
    path.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records), encoding="utf-8")
    return path


@pytest.mark.parametrize("fixes", ["safe", "unsafe", "attempts"])
@pytest.mark.parametrize("layout", ["per run", "per message"])
def test_each_record_gets_back_its_own_messages_as_the_whole_conversion_has_them(
    tmp_path: Path, layout: str, fixes: str
) -> None:
    """``attempts``: HM104 counts the retries of a conversation across its records, as in the
    whole history."""
    histories, records = stored_apart(layout)
    path = _written(tmp_path, records)
    unsafe = fixes == "unsafe"
    options = Options(
        unsafe_fixes=unsafe, attempts=fixes == "attempts", conversation=("conversation_id",), order="seq", jobs=2
    )
    result = api.convert(str(path), str(tmp_path / "out.jsonl"), options)
    lines = (tmp_path / "out.jsonl").read_bytes().splitlines()
    assert len(lines) == len(records)  # every record written, in the input's line order
    out = [orjson.loads(line) for line in lines]
    changed = {row["location"] for row in result.report.changes}
    assert (fixes == "attempts") == any(row["rule"] == "HM104" for row in result.report.changes)
    inputs = path.read_bytes().splitlines()
    for number, (line, before, record) in enumerate(zip(lines, inputs, records), 1):
        assert (record["conversation_id"], record["seq"]) == (
            out[number - 1]["conversation_id"],
            out[number - 1]["seq"],
        )
        if f"line {number}" not in changed:
            assert line == before  # a record no rule touched keeps its bytes
    warned: dict[str, set[str]] = {}
    for row in result.report.warnings:
        name = records[int(row["location"].split()[1]) - 1]["conversation_id"]
        for line in row["warnings"]:
            assert line.endswith("(not applicable to this layout)"), line
            warned.setdefault(name, set()).add(line.split()[0])
    expected = not_applicable(layout, unsafe)
    assert warned == expected
    assert_reassembled(histories, out, options, expected)


@pytest.mark.parametrize("layout", ["per run", "per message"])
def test_check_finds_in_the_records_what_it_finds_in_the_whole_history(tmp_path: Path, layout: str) -> None:
    histories, records = stored_apart(layout)
    path = _written(tmp_path, records)
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
    apart = api.check(str(path), Options(conversation=("conversation_id",), order="seq", jobs=2))
    whole = api.check(str(whole_path), Options(jobs=2))

    def in_apart(number: int) -> tuple[str, int]:
        record = records[number - 1]
        return record["conversation_id"], starts[record["conversation_id"], record["seq"]]

    mapped: Counter[tuple[Any, ...]] = Counter()
    for row in apart.report.findings:
        name, start = in_apart(int(row["location"].split()[1]))
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
    path = _written(tmp_path, records)
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
