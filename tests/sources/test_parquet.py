"""Parquet (histmig.sources.parquet): the same messages as the JSONL path, every other column,
the schema, its metadata and the row groups unchanged; worker processes that migrate row
groups, or slices of one, give the same Parquet table, the same JSONL bytes and the same
report as one process, and a worker's error reaches the caller."""

from __future__ import annotations

import itertools
import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import histmig.sources.parquet as parquet
from histmig import api
from histmig.cli import app
from histmig.engine import Stream
from histmig.options import Options
from histmig.sources.arrow import widened_type
from tests.conftest import CORPUS, run_pieces, without_run
from tests.sources.conftest import (
    CALL,
    FIELD_METADATA,
    METADATA,
    PROMPT,
    RETRY,
    ROW_GROUP,
    corpus_records,
    jsonl_path_output,
    legacy_nested_table,
    nested_records,
    table_of,
    without_place,
    write_parquet,
)

runner = CliRunner()
OTHER = ["id", "name", "created", "tags", "nothing", "score"]


def invoke(*args: str):
    return runner.invoke(app, list(args))


@pytest.fixture(scope="module")
def records():
    return corpus_records()


@pytest.fixture(scope="module")
def nested():
    return nested_records()


def assert_layout_kept(source: Path, out: Path, messages_type: pa.DataType | None = None) -> None:
    before, after = pq.ParquetFile(source), pq.ParquetFile(out)
    assert after.num_row_groups == before.num_row_groups > 1
    assert [after.metadata.row_group(i).num_rows for i in range(after.num_row_groups)] == [
        before.metadata.row_group(i).num_rows for i in range(before.num_row_groups)
    ]
    expected = before.schema_arrow
    if messages_type is not None:
        index = expected.get_field_index("messages")
        expected = expected.set(index, expected.field(index).with_type(messages_type))
    assert after.schema_arrow.equals(expected, check_metadata=True)
    assert after.schema_arrow.metadata[b"origin"] == METADATA[b"origin"]
    assert {name: after.schema_arrow.field(name).metadata for name in FIELD_METADATA} == FIELD_METADATA
    assert after.schema_arrow.names == before.schema_arrow.names
    assert after.metadata.row_group(0).column(0).compression == "ZSTD"
    old, new = pq.read_table(source), pq.read_table(out)
    for name in OTHER:
        assert new.column(name).equals(old.column(name)), name


def test_json_string_column_matches_the_jsonl_path(tmp_path: Path, records) -> None:
    source = write_parquet(tmp_path / "chats.parquet", table_of(records, nested=False))
    out = tmp_path / "chats.v2.parquet"
    report = tmp_path / "report.json"
    result = invoke("convert", str(source), str(out), "--report", str(report), "--report-format", "json")
    assert result.exit_code == 0, result.output
    assert_layout_kept(source, out)
    expected, jsonl_report = jsonl_path_output(records, tmp_path)
    cells = [cell.encode() for cell in pq.read_table(out).column("messages").to_pylist()]
    assert cells == expected
    inputs = [cell.encode() for cell in pq.read_table(source).column("messages").to_pylist()]
    assert sum(a == b for a, b in zip(inputs, cells)) == 74
    data = orjson.loads(report.read_bytes())
    assert data["summary"] == jsonl_report["summary"]
    assert without_place(data["changes"]) == without_place(jsonl_report["changes"])
    assert data["changes"][0]["source"] == str(source)
    assert data["changes"][0]["row"] == 0


@pytest.mark.parametrize("column", ["thread_id", "note"])
def test_without_conversation_a_row_beside_a_column_naming_conversations_keeps_its_last_calls_open(
    tmp_path: Path, column: str
) -> None:
    """As a database table's (``test_sqlite.py``): a file with a column naming conversations
    holds runs, whose last calls ``--unsafe-fixes`` leaves open without ``--conversation``."""
    path, out = tmp_path / "runs.parquet", tmp_path / "out.parquet"
    pq.write_table(pa.table({column: ["t"], "messages": [orjson.dumps([PROMPT, CALL]).decode()]}), path)
    result = api.convert(str(path), str(out), Options(unsafe_fixes=True))
    kept = column == "thread_id"
    assert [row["rule"] for row in result.report.changes] == ([] if kept else ["HM407"])
    assert (
        pq.read_table(out).column("messages").to_pylist() == pq.read_table(path).column("messages").to_pylist()
    ) == kept


@pytest.mark.parametrize("partition", ["sessionId=s1", "day=1"])
def test_without_conversation_a_partition_directory_naming_conversations_keeps_its_rows_last_calls_open(
    tmp_path: Path, partition: str
) -> None:
    """A partition directory's key is a column of its files' rows (as Spark reads them): a
    Hive-partitioned lake of sessions (``sessionId=s1/part-0.parquet``) holds runs, whose last
    calls ``--unsafe-fixes`` leaves open without ``--conversation``."""
    lake, out = tmp_path / "lake", tmp_path / "out"
    (lake / partition).mkdir(parents=True)
    pq.write_table(pa.table({"messages": [orjson.dumps([PROMPT, CALL]).decode()]}), lake / partition / "part-0.parquet")
    result = api.convert(str(lake), str(out), Options(unsafe_fixes=True))
    assert [row["rule"] for row in result.report.changes] == ([] if partition.startswith("session") else ["HM407"])


def test_check_and_audit_name_rows_by_id_column(tmp_path: Path, records) -> None:
    source = write_parquet(tmp_path / "chats.parquet", table_of(records, nested=False))
    out = tmp_path / "out.parquet"
    assert invoke("check", str(source), "-q").exit_code == 1
    assert invoke("convert", str(source), str(out), "-q").exit_code == 0
    assert invoke("check", str(out), "-q").exit_code == 0
    report = tmp_path / "audit.json"
    assert (
        invoke(
            "audit", str(source), "--id-column", "name", "--report", str(report), "--report-format", "json"
        ).exit_code
        == 0
    )
    rows = orjson.loads(report.read_bytes())["changes"]
    names = [r["id"] for r in records]
    for row in rows:
        assert row["id"] == names[row["row"]]


def test_a_null_id_column_value_names_no_record_even_when_the_envelope_has_an_id(tmp_path: Path) -> None:
    legacy = next(
        line
        for line in (CORPUS / "all.jsonl").read_bytes().splitlines()
        if b"retry-prompt" in line and line.startswith(b'{"id"')
    )
    table = pa.table(
        {"conv": pa.array([None, "c-1"], pa.string()), "messages": pa.array([legacy.decode(), legacy.decode()])}
    )
    source = write_parquet(tmp_path / "t.parquet", table)
    report = api.audit(str(source), Options(id_column="conv")).report
    assert {(row["row"], row["id"]) for row in report.to_json()["changes"]} == {(0, None), (1, "c-1")}


def test_rejected_rows_are_written_unchanged_and_reported(tmp_path: Path, records) -> None:
    source = write_parquet(tmp_path / "chats.parquet", table_of(records, nested=False))
    out = tmp_path / "out.parquet"
    options = Options(select=("HM1",), ignore=("HM103",))
    report = api.convert(str(source), str(out), options).report
    expected, jsonl_report = jsonl_path_output(records, tmp_path, options)
    assert report.counts["rejected"] == jsonl_report["summary"]["rejected"] == 11
    assert [c.encode() for c in pq.read_table(out).column("messages").to_pylist()] == expected
    assert pq.read_table(out).num_rows == len(records)
    assert (
        invoke(
            "convert", str(source), str(tmp_path / "o2.parquet"), "--select", "HM1", "--ignore", "HM103", "-q"
        ).exit_code
        == 1
    )


def nulls_filled(want: object, got: object) -> bool:
    """Whether ``got`` is ``want`` but for some nulls of ``want`` holding a value."""
    if isinstance(want, dict) and isinstance(got, dict):
        return want.keys() == got.keys() and all(want[k] is None or nulls_filled(want[k], got[k]) for k in want)
    if isinstance(want, list) and isinstance(got, list):
        return len(want) == len(got) and all(nulls_filled(w, g) for w, g in zip(want, got))
    return want == got


def test_nested_column_is_widened_and_matches_the_jsonl_path(tmp_path: Path, nested) -> None:
    table = table_of(nested, nested=True)
    source = write_parquet(tmp_path / "nested.parquet", table)
    out = tmp_path / "nested.v2.parquet"
    report = api.convert(str(source), str(out)).report
    out_type = widened_type(pq.ParquetFile(source).schema_arrow.field("messages").type)
    assert_layout_kept(source, out, out_type)
    expected, _ = jsonl_path_output(nested, tmp_path)
    got = pq.read_table(out).column("messages").to_pylist()
    rejected = {int(row["location"].removeprefix("row ")) for row in report.errors if row["status"] == "rejected"}
    originals = pa.array([r["messages"] for r in nested], out_type).to_pylist()
    filled = 0
    for row, (cell, line) in enumerate(zip(got, expected)):
        if row in rejected:
            assert cell == originals[row]
            continue
        want = pa.array([orjson.loads(line)], out_type).to_pylist()[0]
        if cell != want:  # an older row: the nulls 2.68 refuses hold what an absent field is read as (test_arrow)
            filled += 1
            assert nulls_filled(want, cell), row
    assert filled > 20
    assert report.counts["changed"] > 50
    for row in report.errors:
        assert "cannot hold the migrated messages" in row["errors"][0]
    new_fields = {f.name for f in out_type.value_type.field("parts").type.value_type}
    assert {"outcome", "retry"} <= new_fields


def test_a_legacy_nested_column_widened_with_outcome_still_loads_in_2_68(tmp_path: Path) -> None:
    """A column written before 2.60 has no ``outcome``; widened with it, every tool-return
    would hold null, which 2.68 refuses: a return without one gets the default it means."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    source = tmp_path / "legacy.parquet"
    pq.write_table(legacy_nested_table(), source)
    out = tmp_path / "out.parquet"
    report = api.convert(str(source), str(out)).report
    assert (report.counts["changed"], report.counts["unchanged"]) == (1, 1)
    cells = pq.read_table(out).column("messages").to_pylist()
    assert [cell[2]["parts"][0]["outcome"] for cell in cells] == ["success", "retried"]
    for cell in cells:
        ModelMessagesTypeAdapter.validate_python(cell)
    assert api.check(str(out)).exit_code == 0


def test_directory_and_glob_inputs_go_to_an_output_directory(tmp_path: Path, records) -> None:
    lake = tmp_path / "lake"
    lake.mkdir()
    write_parquet(lake / "a.parquet", table_of(records[:100], nested=False))
    write_parquet(lake / "b.parquet", table_of(records[100:], nested=False))
    out = tmp_path / "out"
    report = api.convert(str(lake), str(out)).report
    assert report.counts["records_in"] == len(records)
    assert sorted(p.name for p in out.iterdir()) == ["a.parquet", "b.parquet"]
    glob_report = api.audit(str(lake / "*.parquet"), Options(messages_column="messages")).report
    assert glob_report.summary() == report.summary()
    assert pq.read_table(out / "b.parquet").num_rows == len(records) - 100


def test_jsonl_output_inlines_the_messages(tmp_path: Path, records) -> None:
    source = write_parquet(tmp_path / "chats.parquet", table_of(records, nested=False))
    out = tmp_path / "chats.jsonl"
    assert invoke("convert", str(source), str(out), "-q").exit_code == 0
    expected, _ = jsonl_path_output(records, tmp_path)
    rows = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert [orjson.dumps(row["messages"]) for row in rows] == [orjson.dumps(orjson.loads(e)) for e in expected]
    assert rows[1]["created"] == "2025-01-01T00:01:00+00:00"
    assert invoke("check", str(out), "--messages-field", "messages", "-q").exit_code == 0


@pytest.mark.parametrize(
    "args",
    [
        ("--messages-column", "missing"),
        ("--messages-column", "id"),
        ("--table", "conversations"),
        ("--id-column", "missing"),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, records, args: tuple[str, ...]) -> None:
    source = write_parquet(tmp_path / "chats.parquet", table_of(records[:5], nested=False))
    result = invoke("audit", str(source), *args)
    assert result.exit_code == 2, result.output


def test_stdout_is_refused_as_the_output_of_a_parquet_input(
    tmp_path: Path, records, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = write_parquet(tmp_path / "chats.parquet", table_of(records[:5], nested=False))
    monkeypatch.chdir(tmp_path)
    result = invoke("convert", str(source), "-")
    assert result.exit_code == 2
    assert "histmig: a Parquet input is written to a .parquet or .jsonl file, not to stdout" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chats.parquet"]


def test_the_verdict_says_rejected_rows_stay_in_the_output(tmp_path: Path, records) -> None:
    source = write_parquet(tmp_path / "chats.parquet", table_of(records, nested=False))
    result = invoke("convert", str(source), str(tmp_path / "out.parquet"), "--select", "HM1", "--ignore", "HM103")
    assert result.exit_code == 1
    assert f"11 rejected; written to {tmp_path / 'out.parquet'}, rejected rows unchanged" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chats.parquet", "out.parquet"]


def test_an_arrow_json_column_is_migrated_and_keeps_its_type(tmp_path: Path, records) -> None:
    cells = pa.ExtensionArray.from_storage(
        pa.json_(), pa.array([orjson.dumps(r["messages"]).decode() for r in records])
    )
    source = write_parquet(tmp_path / "json.parquet", pa.table({"id": range(len(records)), "messages": cells}))
    out = tmp_path / "out.parquet"
    assert invoke("convert", str(source), str(out), "-q").exit_code == 0
    expected, _ = jsonl_path_output(records, tmp_path)
    migrated = pq.read_table(out).column("messages")
    assert migrated.type == pa.json_()
    assert [cell.encode() for cell in migrated.combine_chunks().storage.to_pylist()] == expected
    assert invoke("check", str(out), "-q").exit_code == 0


def test_a_pq_output_name_gets_parquet(tmp_path: Path, records) -> None:
    source = write_parquet(tmp_path / "chats.parquet", table_of(records[:5], nested=False))
    out = tmp_path / "chats.v2.pq"
    assert invoke("convert", str(source), str(out), "-q").exit_code == 0
    assert pq.read_table(out).num_rows == 5


def test_a_directory_of_parquet_and_json_files_reads_each_in_its_own_format(tmp_path: Path, records) -> None:
    lake = tmp_path / "lake"
    lake.mkdir()
    write_parquet(lake / "a.parquet", table_of(records[:100], nested=False))
    (lake / "b.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records[100:]))
    (lake / "c.json").write_bytes((CORPUS / "v0.0.55" / "a_tool_model_retry.json").read_bytes())
    report = api.audit(str(lake), Options(messages_column="messages")).report
    assert [row["source"] for row in report.errors] == []
    assert report.counts["records_in"] == len(records) + 1
    assert {row["source"] for row in report.changes} == {
        str(lake / name) for name in ("a.parquet", "b.jsonl", "c.json")
    }


def test_table_options_need_a_columnar_input() -> None:
    assert invoke("audit", str(CORPUS / "all.jsonl"), "--messages-column", "messages").exit_code == 2
    assert invoke("convert", str(CORPUS / "all.jsonl")).exit_code == 2


def test_failed_run_leaves_no_output(tmp_path: Path, records, monkeypatch: pytest.MonkeyPatch) -> None:
    source = write_parquet(tmp_path / "chats.parquet", table_of(records, nested=False))
    calls = {"n": 0}
    real = Stream.screened

    def failing(stream: Stream, raw: bytes) -> bool:
        calls["n"] += 1
        if calls["n"] > 3 * ROW_GROUP:
            raise RuntimeError("interrupted")
        return real(stream, raw)

    monkeypatch.setattr(Stream, "screened", failing)
    with pytest.raises(RuntimeError):
        api.convert(str(source), str(tmp_path / "out.parquet"), Options(jobs=1))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chats.parquet"]


NOT_JSON = '{"kind": "request", "parts": ['
"""A cell the pipeline rejects (invalid JSON)."""


def mixed_table(records) -> pa.Table:
    """The corpus as a JSON-text table (212 rows, so 5 row groups of 50 rows), with every
    seventh messages cell null and every eleventh one not JSON."""
    table = table_of(records, nested=False)
    cells = table.column("messages").to_pylist()
    for i in range(len(cells)):
        if i % 11 == 5:
            cells[i] = NOT_JSON
        elif i % 7 == 3:
            cells[i] = None
    index = table.schema.get_field_index("messages")
    return table.set_column(index, table.schema.field(index), pa.array(cells, pa.string()))


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of 7 rows: several in each 50-row group, changed and unchanged cells mixed
    in each (the forked workers inherit it)."""
    monkeypatch.setattr(parquet, "BATCH_ROWS", 7)


def convert(source: Path, out: Path, jobs: int, options: Options = Options()) -> dict:
    return without_run(api.convert(str(source), str(out), replace(options, jobs=jobs)).report.to_json())


@pytest.mark.usefixtures("small_batches")
def test_two_jobs_write_the_same_parquet_table_and_report_as_one(tmp_path: Path, records) -> None:
    source = write_parquet(tmp_path / "mixed.parquet", mixed_table(records))
    one = convert(source, tmp_path / "one.parquet", 1)
    two = convert(source, tmp_path / "two.parquet", 2)
    assert two == one
    first, second = pq.read_table(tmp_path / "one.parquet"), pq.read_table(tmp_path / "two.parquet")
    assert second.equals(first, check_metadata=True)
    layout = pq.ParquetFile(tmp_path / "two.parquet").metadata
    assert [layout.row_group(i).num_rows for i in range(layout.num_row_groups)] == [50, 50, 50, 50, 12]
    summary = two["summary"]
    nulls = sum(1 for i in range(len(records)) if i % 7 == 3 and i % 11 != 5)
    assert summary["records_in"] == len(records) - nulls == 185
    assert summary["rejected"] == 19
    assert summary["changed"] > 0 and summary["unchanged"] > 0
    assert summary["records_in"] == summary["changed"] + summary["unchanged"] + summary["rejected"]
    inputs, outputs = pq.read_table(source).column("messages").to_pylist(), second.column("messages").to_pylist()
    assert [i for i, cell in enumerate(outputs) if cell is None] == [i for i, cell in enumerate(inputs) if cell is None]
    rejected = sorted(row["row"] for row in two["errors"] if row["status"] == "rejected")
    assert rejected == [i for i in range(len(records)) if i % 11 == 5]
    assert all(outputs[i] == NOT_JSON for i in rejected)
    assert sum(a != b for a, b in zip(inputs, outputs)) == summary["changed"]


@pytest.mark.usefixtures("small_batches")
def test_two_jobs_write_the_same_jsonl_bytes_and_report_as_one(tmp_path: Path, records) -> None:
    source = write_parquet(tmp_path / "mixed.parquet", mixed_table(records))
    options = Options(id_column="name")
    one = convert(source, tmp_path / "one.jsonl", 1, options)
    two = convert(source, tmp_path / "two.jsonl", 2, options)
    assert two == one
    assert (tmp_path / "two.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()
    rows = [orjson.loads(line) for line in (tmp_path / "two.jsonl").read_bytes().splitlines()]
    assert len(rows) == len(records)
    assert rows[3]["messages"] is None
    assert rows[5]["messages"] == NOT_JSON
    assert {row["id"] for row in two["changes"]} <= {r["id"] for r in records}


@pytest.mark.usefixtures("small_batches")
def test_two_jobs_with_rejecting_rules_and_a_nested_column(tmp_path: Path, records) -> None:
    options = Options(select=("HM1",), ignore=("HM103",))
    text = write_parquet(tmp_path / "text.parquet", table_of(records, nested=False))
    one, two = convert(text, tmp_path / "t1.parquet", 1, options), convert(text, tmp_path / "t2.parquet", 2, options)
    assert two == one
    assert two["summary"]["rejected"] == 11
    assert pq.read_table(tmp_path / "t2.parquet").equals(pq.read_table(tmp_path / "t1.parquet"), check_metadata=True)
    nested = write_parquet(tmp_path / "nested.parquet", table_of(nested_records(), nested=True))
    one, two = convert(nested, tmp_path / "n1.parquet", 1), convert(nested, tmp_path / "n2.parquet", 2)
    assert two == one
    assert two["summary"]["changed"] > 50
    assert pq.read_table(tmp_path / "n2.parquet").equals(pq.read_table(tmp_path / "n1.parquet"), check_metadata=True)


def test_two_jobs_over_a_directory_and_without_output(tmp_path: Path, records) -> None:
    lake = tmp_path / "lake"
    lake.mkdir()
    write_parquet(lake / "a.parquet", mixed_table(records[:120]))
    write_parquet(lake / "b.parquet", table_of(records[120:], nested=False))
    one, two = convert(lake, tmp_path / "one", 1), convert(lake, tmp_path / "two", 2)
    assert two == one
    for name in ("a.parquet", "b.parquet"):
        assert pq.read_table(tmp_path / "two" / name).equals(
            pq.read_table(tmp_path / "one" / name), check_metadata=True
        )
    assert (
        without_run(api.audit(str(lake), Options(jobs=2)).report.to_json())
        == without_run(api.audit(str(lake), Options(jobs=1)).report.to_json())
        == two
    )
    assert two["summary"]["records_in"] == len(records) - sum(1 for i in range(120) if i % 7 == 3 and i % 11 != 5)


def test_an_error_in_a_worker_reaches_the_caller_and_leaves_no_output(
    tmp_path: Path, records, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = write_parquet(tmp_path / "chats.parquet", table_of(records, nested=False))
    real = Stream.screened
    poisoned = orjson.dumps(records[3 * ROW_GROUP + 1]["messages"])

    def failing(stream: Stream, raw: bytes) -> bool:
        if raw == poisoned:
            raise RuntimeError("interrupted")
        return real(stream, raw)

    monkeypatch.setattr(Stream, "screened", failing)
    with pytest.raises(RuntimeError, match="interrupted"):
        api.convert(str(source), str(tmp_path / "out.parquet"), Options(jobs=2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chats.parquet"]


def one_group(records, path: Path) -> Path:
    """``mixed_table`` as one row group (as pyarrow and pandas write up to a million rows)."""
    pq.write_table(mixed_table(records), path, row_group_size=len(records), compression="zstd")
    return path


@pytest.mark.usefixtures("small_batches")
@pytest.mark.parametrize("output", ["parquet", "jsonl"])
def test_a_row_group_larger_than_a_task_is_migrated_in_slices(
    tmp_path: Path, records, monkeypatch: pytest.MonkeyPatch, output: str
) -> None:
    source = one_group(records, tmp_path / "one.parquet")
    whole = convert(source, tmp_path / f"whole.{output}", 1)
    monkeypatch.setattr(parquet, "TASK_BYTES", 40_000)
    sliced_one, sliced_two = (
        convert(source, tmp_path / f"s1.{output}", 1),
        convert(source, tmp_path / f"s2.{output}", 2),
    )
    assert sliced_one == sliced_two == whole
    assert whole["summary"]["records_in"] == 185 and whole["summary"]["rejected"] == 19
    if output == "jsonl":
        assert (
            (tmp_path / "s2.jsonl").read_bytes()
            == (tmp_path / "s1.jsonl").read_bytes()
            == (tmp_path / "whole.jsonl").read_bytes()
        )
        return
    expected = pq.read_table(tmp_path / "whole.parquet")
    for name in ("s1.parquet", "s2.parquet"):
        assert pq.read_table(tmp_path / name).equals(expected, check_metadata=True)
    layout = pq.ParquetFile(tmp_path / "s2.parquet").metadata
    sizes = [layout.row_group(i).num_rows for i in range(layout.num_row_groups)]
    assert sum(sizes) == len(records) and len(sizes) > 3
    assert all(size == sizes[0] for size in sizes[:-1]) and sizes[-1] <= sizes[0]
    assert pq.ParquetFile(tmp_path / "whole.parquet").metadata.num_row_groups == 1


def test_slices_cover_the_row_group_evenly(tmp_path: Path, records, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parquet, "BATCH_ROWS", 10)
    source = one_group(records, tmp_path / "one.parquet")
    file = pq.ParquetFile(source)
    meta = file.metadata.row_group(0)
    compressed = sum(meta.column(i).total_compressed_size for i in range(meta.num_columns))
    task = parquet.RowGroup(str(source), 0, 1000, "messages", None, "parquet")
    assert parquet._slices(file, task) == [parquet.replace(task, size=compressed)]
    per_row = parquet._bytes_per_row(file, task, meta)
    monkeypatch.setattr(parquet, "TASK_BYTES", int(per_row * 50) + 1)
    slices = parquet._slices(file, task)
    assert [(s.offset, s.row_count, s.first_row) for s in slices] == [
        (0, 43, 1000),
        (43, 43, 1043),
        (86, 43, 1086),
        (129, 43, 1129),
        (172, 40, 1172),
    ]
    assert compressed - 5 <= sum(s.size for s in slices) <= compressed


def test_the_messages_column_is_found_among_leaf_columns_by_the_schema(tmp_path: Path) -> None:
    cell = '[{"kind":"request","parts":[]}]'
    opaque = pa.ExtensionArray.from_storage(
        pa.opaque(pa.struct([("x", pa.int64()), ("y", pa.string())]), "t", "v"), pa.array([{"x": 1, "y": "z"}] * 3)
    )
    table = pa.table({"a.b": opaque, "chat.messages": [cell] * 3, "messages.x": ["q" * 1000] * 3})
    pq.write_table(table, tmp_path / "d.parquet", use_dictionary=False)
    file = pq.ParquetFile(tmp_path / "d.parquet")
    meta = file.metadata.row_group(0)
    task = parquet.RowGroup(str(tmp_path / "d.parquet"), 0, 0, "chat.messages", None, "parquet")
    assert parquet._bytes_per_row(file, task, meta) == meta.column(2).total_uncompressed_size / 3


def test_a_dictionary_encoded_column_is_sized_as_read(tmp_path: Path) -> None:
    cell = '[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"' + "x" * 5000 + '"}]}]'
    pq.write_table(pa.table({"messages": [cell] * 2000}), tmp_path / "d.parquet", use_dictionary=True)
    file = pq.ParquetFile(tmp_path / "d.parquet")
    meta = file.metadata.row_group(0)
    assert meta.column(0).total_uncompressed_size < 100_000
    task = parquet.RowGroup(str(tmp_path / "d.parquet"), 0, 0, "messages", None, "parquet")
    assert parquet._bytes_per_row(file, task, meta) >= len(cell)


def test_a_dictionary_encoded_column_is_sized_over_a_batch_of_rows_not_its_first_few(tmp_path: Path) -> None:
    small, big = (
        '[{"kind":"request","parts":[]}]',
        '[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"' + "y" * 4000 + '"}]}]',
    )
    cells = [small + " " * (i % 3) for i in range(40)] + [big + " " * (i % 5) for i in range(1960)]
    pq.write_table(pa.table({"messages": cells}), tmp_path / "d.parquet", use_dictionary=True)
    file = pq.ParquetFile(tmp_path / "d.parquet")
    task = parquet.RowGroup(str(tmp_path / "d.parquet"), 0, 0, "messages", None, "parquet")
    first_rows = cells[: parquet.BATCH_ROWS]
    assert parquet._bytes_per_row(file, task, file.metadata.row_group(0)) >= sum(map(len, first_rows)) / len(first_rows)


def test_the_batch_cursor_reads_slices_on_and_starts_again_when_it_must(
    tmp_path: Path, records, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parquet, "BATCH_ROWS", 10)
    file = pq.ParquetFile(one_group(records, tmp_path / "one.parquet"))
    ids = pq.read_table(tmp_path / "one.parquet").column("id").to_pylist()
    cursor = parquet.BatchCursor(file)
    take = lambda offset, count: [i for b in cursor.take(0, offset, count) for i in b.column("id").to_pylist()]  # noqa: E731
    assert take(0, 15) == ids[0:15]
    assert take(15, 3) == ids[15:18]
    assert take(40, 25) == ids[40:65]
    assert take(5, 1) == ids[5:6]
    assert take(200, None) == ids[200:]
    with pytest.raises(ValueError, match="row group 0 has no row 212"):
        take(205, 10)


def ragged(batches):
    """``parquet._batches`` cutting every batch into pieces of 1 to 9 rows, cut otherwise
    for every set of columns (as pyarrow may, for cells of more than 2 GB a batch)."""

    def cut(parquet_file, group, columns=None):
        sizes = itertools.cycle([3, 1, 9, 4] if columns is None else [2, 7, 5])
        for batch in batches(parquet_file, group, columns):
            start = 0
            while start < batch.num_rows:
                size = next(sizes)
                yield batch.slice(start, size)
                start += size

    return cut


@pytest.mark.usefixtures("small_batches")
@pytest.mark.parametrize("jobs", [1, 2])
def test_slices_keep_every_row_however_pyarrow_cuts_the_batches(
    tmp_path: Path, records, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    source = one_group(records, tmp_path / "one.parquet")
    whole = convert(source, tmp_path / "whole.parquet", 1)
    monkeypatch.setattr(parquet, "_batches", ragged(parquet._batches))
    monkeypatch.setattr(parquet, "TASK_BYTES", 40_000)
    sliced = convert(source, tmp_path / "sliced.parquet", jobs)
    assert sliced == whole
    assert pq.read_table(tmp_path / "sliced.parquet").equals(
        pq.read_table(tmp_path / "whole.parquet"), check_metadata=True
    )
    assert pq.ParquetFile(tmp_path / "sliced.parquet").metadata.num_row_groups > 3
    lines = convert(source, tmp_path / "sliced.jsonl", jobs)
    assert lines == whole
    assert len((tmp_path / "sliced.jsonl").read_bytes().splitlines()) == len(records)


def test_rows_are_named_by_an_id_like_column_and_an_odd_messages_column_is_found(tmp_path: Path, records) -> None:
    legacy = [r for r in records if b"retry-prompt" in orjson.dumps(r)][:3]
    table = pa.table(
        {
            "conversation_id": [f"c-{n}" for n in range(3)],
            "chat-history": [orjson.dumps(r["messages"]).decode() for r in legacy],
        }
    )
    source = write_parquet(tmp_path / "t.parquet", table)
    result = invoke("audit", str(source), "--report", "-", "--report-format", "json")
    assert result.exit_code == 0, result.output
    rows = orjson.loads(result.stdout)["changes"]
    assert {(row["row"], row["id"]) for row in rows} == {(0, "c-0"), (1, "c-1"), (2, "c-2")}


def test_a_parquet_output_that_is_a_fifo_or_a_link_gets_the_bytes_of_a_file_output(tmp_path: Path, records) -> None:
    source = write_parquet(tmp_path / "in.parquet", table_of(records, nested=False))
    expected = tmp_path / "expected.parquet"
    api.convert(str(source), str(expected), Options(jobs=1))
    fifo = tmp_path / "fifo.parquet"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert api.convert(str(source), str(fifo), Options(jobs=1)).exit_code == 0
    reader.join(60)
    assert got == [expected.read_bytes()]
    (tmp_path / "store").mkdir()
    link = tmp_path / "link.parquet"
    link.symlink_to("store/out.parquet")
    assert api.convert(str(source), str(link), Options(jobs=1)).exit_code == 0
    assert link.is_symlink() and (tmp_path / "store" / "out.parquet").read_bytes() == expected.read_bytes()
    assert os.listdir(tmp_path / "store") == ["out.parquet"]


# ------------------------------------------------------------ rows grouped into conversations (issue 25)

DEFERRED = CORPUS / "v2.59.0" / "m_deferred_tool_model_retry.json"
"""A history of two runs: the first stops for a deferred tool, the second starts with its retry."""


def runs_table(rows: list[tuple[str | None, int, list]]) -> pa.Table:
    """Rows of ``(session_id, seq, messages)``, the messages as JSON text, and a ``note`` column."""
    return pa.table(
        {
            "session_id": pa.array([s for s, _, _ in rows], pa.string()),
            "seq": pa.array([n for _, n, _ in rows], pa.int64()),
            "messages": [orjson.dumps(m).decode() for _, _, m in rows],
            "note": [f"kept {i}" for i in range(len(rows))],
        }
    )


def test_a_conversation_over_two_files_of_a_directory_is_one_and_each_file_keeps_its_rows(tmp_path: Path) -> None:
    from tests.conftest import run_pieces, whole_conversion

    history = orjson.loads(DEFERRED.read_bytes())
    runs = run_pieces(history)
    alone = orjson.loads((CORPUS / "v2.59.0" / "h_empty_response.json").read_bytes())
    lake = tmp_path / "lake"
    (lake / "day=1").mkdir(parents=True)
    (lake / "day=2").mkdir()
    first = runs_table([("other", 0, alone), ("s", 1, runs[1])])  # the second run sorts first, by its file
    second = runs_table([("s", 0, runs[0])]).replace_schema_metadata({"kept": "yes"})
    pq.write_table(first, lake / "day=1" / "part-0.parquet", row_group_size=1)
    pq.write_table(second, lake / "day=2" / "part-0.parquet", compression="zstd")
    options = Options(unsafe_fixes=True, conversation=("session_id",), order="seq")
    result = api.convert(str(lake), str(tmp_path / "out"), options)
    assert result.exit_code == 0
    day1, day2 = (pq.ParquetFile(tmp_path / "out" / day / "part-0.parquet") for day in ("day=1", "day=2"))
    assert day1.metadata.num_row_groups == 2 and day2.schema_arrow.metadata == {b"kept": b"yes"}
    assert day2.metadata.row_group(0).column(0).compression == "ZSTD"
    assert day1.read().column("note").to_pylist() == ["kept 0", "kept 1"]  # its own rows, in its own order
    changes = {(Path(row["source"]).parent.name, row["location"], row["rule"]) for row in result.report.changes}
    assert ("day=1", "row 1", "HM101") in changes  # the second run's retry, answering the first run's call
    assert not {change for change in changes if change[0] == "day=2"}  # nothing invented in the first run
    together = orjson.loads(day2.read().column("messages")[0].as_py()) + orjson.loads(
        day1.read().column("messages")[1].as_py()
    )
    assert together == orjson.loads(orjson.dumps(whole_conversion(history, options, set())[1]))
    out = tmp_path / "one.jsonl"  # a file written as JSONL: the same cells
    assert api.convert(str(lake / "day=1" / "part-0.parquet"), str(out), options).exit_code == 0
    lines = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert [(line["session_id"], line["note"]) for line in lines] == [("other", "kept 0"), ("s", "kept 1")]


def test_without_order_a_conversation_is_in_row_order_and_a_null_key_is_a_conversation_of_its_own(
    tmp_path: Path,
) -> None:
    runs = run_pieces(orjson.loads(DEFERRED.read_bytes()))
    alone = orjson.loads((CORPUS / "v2.59.0" / "h_empty_response.json").read_bytes())
    source = tmp_path / "runs.parquet"
    pq.write_table(runs_table([("s", 9, runs[0]), (None, 0, alone), ("s", 0, runs[1])]), source, row_group_size=2)
    result = api.audit(str(source), Options(unsafe_fixes=True, conversation=("session_id",)))
    changes = sorted((row["location"], row["rule"]) for row in result.report.changes)
    assert changes == [("row 1", "HM102"), ("row 2", "HM101"), ("row 2", "HM407")]  # as the whole history
    assert result.report.findings == []
    assert [(row["location"], row["warnings"]) for row in result.report.warnings] == [
        ("row 1", ["no conversation key (session_id null): a conversation of its own"])
    ]
    by_seq = api.audit(str(source), Options(unsafe_fixes=True, conversation=("session_id",), order="seq"))
    assert sorted((row["location"], row["rule"]) for row in by_seq.report.findings) == [
        ("row 0", "HM407"),  # row 2 first: its retry comes before the call it answers
        ("row 2", "HM402"),
        ("row 2", "HM406"),
    ]


def test_a_conversation_past_the_limit_is_rejected_whole_and_nothing_is_written_for_it(tmp_path: Path) -> None:
    runs = run_pieces(orjson.loads(DEFERRED.read_bytes()))
    alone = orjson.loads((CORPUS / "v2.59.0" / "h_empty_response.json").read_bytes())
    source, out = tmp_path / "runs.parquet", tmp_path / "out.parquet"
    pq.write_table(runs_table([("big", 0, runs[0]), ("alone", 0, alone), ("big", 1, runs[1])]), source)
    cells = pq.read_table(source).column("messages").to_pylist()
    sizes = [len(cell.encode()) for cell in cells]
    limit = max(sizes) + 10
    options = Options(conversation=("session_id",), order="seq", max_conversation_bytes=limit)
    result = api.convert(str(source), str(out), options)
    after = pq.read_table(out).column("messages").to_pylist()
    assert [after[0], after[2]] == [cells[0], cells[2]] and after[1] != cells[1]
    said = (
        f"conversation session_id='big' holds {sizes[0] + sizes[2]} bytes in 2 records, past "
        f"--max-conversation-bytes {limit}: rejected whole, nothing written for it"
    )
    assert {row["location"]: row["errors"] for row in result.report.errors} == {"row 0": [said], "row 2": [said]}
    assert result.exit_code == 1


def test_a_conversation_column_that_is_not_there_is_a_usage_error(tmp_path: Path) -> None:
    source = tmp_path / "runs.parquet"
    pq.write_table(runs_table([("s", 0, [])]), source)
    done = invoke("audit", str(source), "--conversation", "sesion_id")
    assert done.exit_code == 2
    assert f"{source}: no column 'sesion_id' (columns: session_id, seq, messages, note)" in done.stderr


MUST = "must be a string, a number, a boolean, a date, a time, a timestamp, a duration or binary"


@pytest.mark.parametrize(
    ("sid", "seq", "said"),
    [
        pytest.param(
            [{"a": 1}] * 2, [0, 1], f"--conversation column 'sid' is struct<a: int64>: a key {MUST}", id="struct"
        ),
        pytest.param(
            [[1]] * 2, [0, 1], f"--conversation column 'sid' is list<element: int64>: a key {MUST}", id="list"
        ),
        pytest.param(
            ["s1"] * 2, [[0], [1]], f"--order column 'seq' is list<element: int64>: an order {MUST}", id="order"
        ),
    ],
)
def test_a_conversation_or_order_column_arrow_cannot_sort_is_a_usage_error_naming_its_type(
    tmp_path: Path, sid: Any, seq: Any, said: str
) -> None:
    history = orjson.loads(DEFERRED.read_bytes())
    source = tmp_path / "k.parquet"
    pq.write_table(pa.table({"sid": sid, "seq": seq, "messages": [orjson.dumps(history[:2]).decode()] * 2}), source)
    for command in ("audit", "convert"):
        args = [command, str(source), *([str(tmp_path / "o.parquet")] if command == "convert" else [])]
        done = invoke(*args, "--conversation", "sid", "--order", "seq")
        assert (done.exit_code, done.stderr) == (2, f"histmig: cannot read {source}: {said}\n")
    assert not (tmp_path / "o.parquet").exists()


def test_a_key_column_of_nulls_only_makes_each_row_a_conversation_of_its_own(tmp_path: Path) -> None:
    source = tmp_path / "k.parquet"
    history = orjson.loads(DEFERRED.read_bytes())
    cells = [orjson.dumps(history[:2]).decode(), orjson.dumps(history[2:]).decode()]
    pq.write_table(pa.table({"sid": pa.nulls(2), "seq": [0, 1], "messages": cells}), source)
    result = api.audit(str(source), Options(conversation=("sid",), order="seq"))
    said = ["no conversation key (sid null): a conversation of its own"]
    assert [(row["location"], row["warnings"]) for row in result.report.warnings] == [("row 0", said), ("row 1", said)]
    assert ("row 1", "HM101") in {(row["location"], row["rule"]) for row in result.report.changes}  # the retry alone


def test_a_nested_column_grouped_gives_the_whole_histories_conversion_piece_by_piece(tmp_path: Path, nested) -> None:
    """Each nested (``list<struct>``) history cut into its runs, the rows shuffled over row groups:
    the runs of each conversation put together are the whole history's converted cell."""
    import random

    pieces = [(r["id"], seq, piece) for r in nested for seq, piece in enumerate(run_pieces(r["messages"]))]
    random.Random(25).shuffle(pieces)
    whole = pa.table(
        {
            "name": [r["id"] for r in nested],
            "seq": [0] * len(nested),
            "messages": pa.array([r["messages"] for r in nested]),
        }
    )
    apart = pa.table(
        {
            "name": [name for name, _, _ in pieces],
            "seq": [seq for _, seq, _ in pieces],
            "messages": pa.array([piece for *_, piece in pieces], whole.schema.field("messages").type),
        }
    )
    pq.write_table(whole, tmp_path / "whole.parquet")
    pq.write_table(apart, tmp_path / "apart.parquet", row_group_size=7)
    grouped = Options(unsafe_fixes=True, jobs=2, conversation=("name",), order="seq")
    api.convert(str(tmp_path / "whole.parquet"), str(tmp_path / "whole.v2.parquet"), grouped)  # each row whole
    result = api.convert(str(tmp_path / "apart.parquet"), str(tmp_path / "apart.v2.parquet"), grouped)
    assert result.report.counts["changed"] > 0
    out = pq.read_table(tmp_path / "apart.v2.parquet")
    assert out.schema.field("messages") == pq.read_table(tmp_path / "whole.v2.parquet").schema.field("messages")
    together: dict[str, list] = {}
    for row in sorted(out.to_pylist(), key=lambda row: (row["name"], row["seq"])):
        together.setdefault(row["name"], []).extend(row["messages"])
    expected = {row["name"]: row["messages"] for row in pq.read_table(tmp_path / "whole.v2.parquet").to_pylist()}
    assert together == expected


def test_a_nested_conversation_whose_one_record_its_column_cannot_hold_is_rejected_whole(tmp_path: Path) -> None:
    """HM407 answers the open call of run 2 with a part whose ``metadata`` the column has no field
    for: run 2 cannot be held, so run 1's migrated retry is not written either."""

    def part(**fields: str) -> dict[str, str | None]:
        return {"part_kind": None, "content": None, "tool_name": None, "tool_call_id": None, **fields}

    runs = [
        [
            {"kind": "request", "parts": [part(part_kind="user-prompt", content="Weather?")]},
            {"kind": "response", "parts": [part(part_kind="tool-call", tool_name="w", tool_call_id="c1")]},
        ],
        [
            {
                "kind": "request",
                "parts": [part(part_kind="retry-prompt", tool_name="w", tool_call_id="c1", content="No.")],
            },
            {"kind": "response", "parts": [part(part_kind="text", content="Sorry.")]},
        ],
        [
            {"kind": "request", "parts": [part(part_kind="user-prompt", content="Again?")]},
            {"kind": "response", "parts": [part(part_kind="tool-call", tool_name="w", tool_call_id="c2")]},
        ],
    ]
    source, out = tmp_path / "runs.parquet", tmp_path / "out.parquet"
    pq.write_table(pa.table({"s": ["a"] * 3, "n": [0, 1, 2], "messages": runs}), source)
    options = Options(unsafe_fixes=True, conversation=("s",), order="n")
    result = api.convert(str(source), str(out), options)
    errors = {row["location"]: row["errors"] for row in result.report.errors}
    assert set(errors) == {"row 0", "row 1", "row 2"} and errors["row 2"][0].startswith(
        "column 'messages' cannot hold the migrated messages"
    )
    said = [f"rejected with its conversation (s='a'): {source}:row 2 cannot be held by its column"]
    assert errors["row 0"] == errors["row 1"] == said
    assert pq.read_table(out).column("messages").to_pylist()[1][0]["parts"][0]["part_kind"] == "retry-prompt"
    safe = api.convert(str(source), str(out), replace(options, unsafe_fixes=False))
    assert (
        safe.exit_code == 0
        and pq.read_table(out).column("messages").to_pylist()[1][0]["parts"][0]["outcome"] == "retried"
    )


def test_a_null_messages_cell_in_a_conversation_is_no_record_and_is_kept(tmp_path: Path) -> None:
    runs = run_pieces(orjson.loads(DEFERRED.read_bytes()))
    table = runs_table([("s", 0, runs[0]), ("s", 1, []), ("s", 2, runs[1])])
    table = table.set_column(
        2, "messages", pa.array([table.column("messages")[0].as_py(), None, table.column("messages")[2].as_py()])
    )
    source, out = tmp_path / "runs.parquet", tmp_path / "out.parquet"
    pq.write_table(table, source)
    result = api.convert(str(source), str(out), Options(unsafe_fixes=True, conversation=("session_id",), order="seq"))
    assert result.report.counts["records_in"] == 2 and result.exit_code == 0
    cells = pq.read_table(out).column("messages").to_pylist()
    assert cells[1] is None and cells[0] == table.column("messages")[0].as_py()
    assert orjson.loads(cells[2])[0]["parts"][0]["part_kind"] == "tool-return"  # the retry, answering row 0's call


def test_a_mixed_era_nested_column_grouped_is_checked_and_repaired_as_ungrouped(tmp_path: Path) -> None:
    """The nulls 2.68 refuses in older rows of a nested column: ``check`` with ``--conversation``
    names the same rows with the same lines, ``convert`` writes the same defaults."""
    from tests.sources.test_arrow import _mixed_era_parquet

    source = tmp_path / "mixed.parquet"
    _mixed_era_parquet(source)
    grouped = Options(conversation=("id",))
    alone, together = api.check(str(source)), api.check(str(source), grouped)
    assert together.exit_code == alone.exit_code == 1
    assert sorted((r["location"], r["errors"]) for r in together.report.errors) == sorted(
        (r["location"], r["errors"]) for r in alone.report.errors
    )  # in conversation order: by id
    assert api.convert(str(source), str(tmp_path / "alone.parquet")).exit_code == 0
    assert api.convert(str(source), str(tmp_path / "together.parquet"), grouped).exit_code == 0
    assert pq.read_table(tmp_path / "together.parquet").equals(pq.read_table(tmp_path / "alone.parquet"))


def test_a_file_of_one_message_a_row_finds_its_column_by_the_message_it_holds(tmp_path: Path) -> None:
    """Under ``--conversation`` a ``message`` column of one message a row is found as a
    history's would be (no ``--messages-column``)."""
    source, out = tmp_path / "messages.parquet", tmp_path / "out.parquet"
    pq.write_table(
        pa.table(
            {
                "conversation_id": ["c", "c", "c"],
                "seq": [0, 1, 2],
                "message": [orjson.dumps(m).decode() for m in (PROMPT, CALL, RETRY)],
            }
        ),
        source,
    )
    result = api.convert(str(source), str(out), Options(conversation=("conversation_id",), order="seq"))
    assert [(row["location"], row["rule"]) for row in result.report.changes] == [("row 2", "HM101")]
    assert "retry-prompt" not in pq.read_table(out).column("message").to_pylist()[2]
