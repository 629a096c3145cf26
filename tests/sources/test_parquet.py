"""Parquet source and sink (histmig.sources.parquet): the same messages as the JSONL path,
every other column, the schema, its metadata and the row groups unchanged."""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from histmig.cli import app
from histmig.pipeline import Options, Stream, process, select_rules
from histmig.records import Record
from histmig.report import Report
from histmig.runner import run
from histmig.sources.arrow import ColumnMigrator, widened_type
from histmig.tabular import TableOptions
from tests.conftest import CORPUS
from tests.sources.conftest import (
    METADATA,
    ROW_GROUP,
    corpus_records,
    jsonl_path_output,
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
    assert data["changes"][0]["location"] == "row 0"


def test_a_batch_lists_only_the_cells_that_went_the_full_way(records) -> None:
    legacy = next(r for r in records if b"retry-prompt" in orjson.dumps(r))
    clean = next(r for r in records if Options().screen(orjson.dumps(r["messages"])))
    cells = [orjson.dumps(clean["messages"]), orjson.dumps(legacy["messages"]), None, b"[{", orjson.dumps(clean["messages"]), b'{"messages": 1}']
    batch = pa.record_batch({"messages": pa.array(cells, pa.binary())})
    migrator = ColumnMigrator(batch.schema, "messages", "t.parquet")
    changed, outcomes = migrator.migrate_cells(batch, range(10, 16))
    assert [(i, o.status, o.record.location) for i, o in outcomes.full] == [(1, "changed", "row 11"), (3, "rejected", "row 13"), (5, "rejected", "row 15")]
    assert outcomes.unchanged == 2
    assert outcomes.positions("changed") == changed.positions == [1]
    assert outcomes.positions("rejected") == [3, 5]
    report = Report.in_memory()
    outcomes.add_to(report)
    one_by_one = Report.in_memory()
    for row, cell in enumerate(cells, start=10):
        if cell is not None:
            one_by_one.add(process(Record(cell, "t.parquet", f"row {row}")))
    assert report.to_json() == one_by_one.to_json()
    assert report.counts["records_in"] == 5


def test_check_and_audit_name_rows_by_id_column(tmp_path: Path, records) -> None:
    source = write_parquet(tmp_path / "chats.parquet", table_of(records, nested=False))
    out = tmp_path / "out.parquet"
    assert invoke("check", str(source), "-q").exit_code == 1
    assert invoke("convert", str(source), str(out), "-q").exit_code == 0
    assert invoke("check", str(out), "-q").exit_code == 0
    report = tmp_path / "audit.json"
    assert invoke("audit", str(source), "--id-column", "name", "--report", str(report), "--report-format", "json").exit_code == 0
    rows = orjson.loads(report.read_bytes())["changes"]
    names = [r["id"] for r in records]
    for row in rows:
        assert row["id"] == names[int(row["location"].removeprefix("row "))]


def test_a_null_id_column_value_names_no_record_even_when_the_envelope_has_an_id(tmp_path: Path) -> None:
    legacy = next(line for line in (CORPUS / "all.jsonl").read_bytes().splitlines() if b"retry-prompt" in line and line.startswith(b'{"id"'))
    table = pa.table({"conv": pa.array([None, "c-1"], pa.string()), "messages": pa.array([legacy.decode(), legacy.decode()])})
    source = write_parquet(tmp_path / "t.parquet", table)
    report = run(str(source), None, Options(), table=TableOptions(id_column="conv"))
    assert {(row["location"], row["id"]) for row in report.to_json()["changes"]} == {("row 0", None), ("row 1", "c-1")}


def test_rejected_rows_are_written_unchanged_and_reported(tmp_path: Path, records) -> None:
    source = write_parquet(tmp_path / "chats.parquet", table_of(records, nested=False))
    out = tmp_path / "out.parquet"
    options = Options(rules=select_rules(["HM1"], ["HM103"]))
    report = run(str(source), str(out), options)
    expected, jsonl_report = jsonl_path_output(records, tmp_path, options)
    assert report.counts["rejected"] == jsonl_report["summary"]["rejected"] == 11
    assert [c.encode() for c in pq.read_table(out).column("messages").to_pylist()] == expected
    assert pq.read_table(out).num_rows == len(records)
    assert invoke("convert", str(source), str(tmp_path / "o2.parquet"), "--select", "HM1", "--ignore", "HM103", "-q").exit_code == 1


def test_nested_column_is_widened_and_matches_the_jsonl_path(tmp_path: Path, nested) -> None:
    table = table_of(nested, nested=True)
    source = write_parquet(tmp_path / "nested.parquet", table)
    out = tmp_path / "nested.v2.parquet"
    report = run(str(source), str(out), Options())
    out_type = widened_type(pq.ParquetFile(source).schema_arrow.field("messages").type)
    assert_layout_kept(source, out, out_type)
    expected, _ = jsonl_path_output(nested, tmp_path)
    got = pq.read_table(out).column("messages").to_pylist()
    rejected = {int(row["location"].removeprefix("row ")) for row in report.errors if row["status"] == "rejected"}
    originals = pa.array([r["messages"] for r in nested], out_type).to_pylist()
    for row, (cell, line) in enumerate(zip(got, expected)):
        if row in rejected:
            assert cell == originals[row]
        else:
            assert cell == pa.array([orjson.loads(line)], out_type).to_pylist()[0], row
    assert report.counts["changed"] > 50
    for row in report.errors:
        assert "cannot hold the migrated messages" in row["errors"][0]
    new_fields = {f.name for f in out_type.value_type.field("parts").type.value_type}
    assert {"outcome", "retry"} <= new_fields


def test_directory_and_glob_inputs_go_to_an_output_directory(tmp_path: Path, records) -> None:
    lake = tmp_path / "lake"
    lake.mkdir()
    write_parquet(lake / "a.parquet", table_of(records[:100], nested=False))
    write_parquet(lake / "b.parquet", table_of(records[100:], nested=False))
    out = tmp_path / "out"
    report = run(str(lake), str(out), Options())
    assert report.counts["records_in"] == len(records)
    assert sorted(p.name for p in out.iterdir()) == ["a.parquet", "b.parquet"]
    glob_report = run(str(lake / "*.parquet"), None, Options(), table=TableOptions(messages_column="messages"))
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


def test_stdout_is_refused_as_the_output_of_a_parquet_input(tmp_path: Path, records, monkeypatch: pytest.MonkeyPatch) -> None:
    source = write_parquet(tmp_path / "chats.parquet", table_of(records[:5], nested=False))
    monkeypatch.chdir(tmp_path)
    result = invoke("convert", str(source), "-")
    assert result.exit_code == 2
    assert "a Parquet or DuckDB input is written to a .parquet or .jsonl file, not to stdout" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chats.parquet"]


def test_the_verdict_says_rejected_rows_stay_in_the_output(tmp_path: Path, records) -> None:
    source = write_parquet(tmp_path / "chats.parquet", table_of(records, nested=False))
    result = invoke("convert", str(source), str(tmp_path / "out.parquet"), "--select", "HM1", "--ignore", "HM103")
    assert result.exit_code == 1
    assert f"11 rejected; written to {tmp_path / 'out.parquet'}, rejected rows unchanged" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chats.parquet", "out.parquet"]


def test_an_arrow_json_column_is_migrated_and_keeps_its_type(tmp_path: Path, records) -> None:
    cells = pa.ExtensionArray.from_storage(pa.json_(), pa.array([orjson.dumps(r["messages"]).decode() for r in records]))
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


def test_a_directory_without_parquet_files_is_named_as_such(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("[]")
    result = invoke("audit", str(tmp_path))
    assert result.exit_code == 2
    assert "a directory is read as a Parquet dataset, and this one holds no .parquet or .pq file" in result.output


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
        run(str(source), str(tmp_path / "out.parquet"), Options())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chats.parquet"]
