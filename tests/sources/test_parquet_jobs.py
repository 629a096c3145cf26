"""``--jobs`` on Parquet inputs (issue: throughput): worker processes that migrate row
groups give the same Parquet table, the same JSONL bytes and the same report as one
process, and a worker's error reaches the caller; the cells a batch changes are put in
place for every column type."""

from __future__ import annotations

import itertools
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import histmig.sources.parquet as parquet
from histmig.pipeline import Options, Stream, select_rules
from histmig.runner import run
from histmig.sources.arrow import Cells, ColumnMigrator
from histmig.tabular import TableOptions
from tests.sources.conftest import ROW_GROUP, corpus_records, nested_records, table_of, write_parquet

NOT_JSON = '{"kind": "request", "parts": ['
"""A cell the pipeline rejects (invalid JSON)."""


@pytest.fixture(scope="module")
def records():
    return corpus_records()


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


def convert(source: Path, out: Path, jobs: int, options: Options = Options(), table: TableOptions | None = None) -> dict:
    return run(str(source), str(out), options, jobs=jobs, table=table).to_json()


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
    rejected = sorted(int(row["location"].removeprefix("row ")) for row in two["errors"] if row["status"] == "rejected")
    assert rejected == [i for i in range(len(records)) if i % 11 == 5]
    assert all(outputs[i] == NOT_JSON for i in rejected)
    assert sum(a != b for a, b in zip(inputs, outputs)) == summary["changed"]


@pytest.mark.usefixtures("small_batches")
def test_two_jobs_write_the_same_jsonl_bytes_and_report_as_one(tmp_path: Path, records) -> None:
    source = write_parquet(tmp_path / "mixed.parquet", mixed_table(records))
    table = TableOptions(id_column="name")
    one = convert(source, tmp_path / "one.jsonl", 1, table=table)
    two = convert(source, tmp_path / "two.jsonl", 2, table=table)
    assert two == one
    assert (tmp_path / "two.jsonl").read_bytes() == (tmp_path / "one.jsonl").read_bytes()
    rows = [orjson.loads(line) for line in (tmp_path / "two.jsonl").read_bytes().splitlines()]
    assert len(rows) == len(records)
    assert rows[3]["messages"] is None
    assert rows[5]["messages"] == NOT_JSON
    assert {row["id"] for row in two["changes"]} <= {r["id"] for r in records}


@pytest.mark.usefixtures("small_batches")
def test_two_jobs_with_rejecting_rules_and_a_nested_column(tmp_path: Path, records) -> None:
    options = Options(rules=select_rules(["HM1"], ["HM103"]))
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
        assert pq.read_table(tmp_path / "two" / name).equals(pq.read_table(tmp_path / "one" / name), check_metadata=True)
    assert run(str(lake), None, jobs=2).to_json() == run(str(lake), None, jobs=1).to_json() == two
    assert two["summary"]["records_in"] == len(records) - sum(1 for i in range(120) if i % 7 == 3 and i % 11 != 5)


def test_an_error_in_a_worker_reaches_the_caller_and_leaves_no_output(tmp_path: Path, records, monkeypatch: pytest.MonkeyPatch) -> None:
    source = write_parquet(tmp_path / "chats.parquet", table_of(records, nested=False))
    real = Stream.screened
    poisoned = orjson.dumps(records[3 * ROW_GROUP + 1]["messages"])

    def failing(stream: Stream, raw: bytes) -> bool:
        if raw == poisoned:
            raise RuntimeError("interrupted")
        return real(stream, raw)

    monkeypatch.setattr(Stream, "screened", failing)
    with pytest.raises(RuntimeError, match="interrupted"):
        run(str(source), str(tmp_path / "out.parquet"), jobs=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chats.parquet"]


class JsonText(pa.ExtensionType):
    """A string column tagged as JSON, to check that an extension type is kept."""

    def __init__(self) -> None:
        super().__init__(pa.string(), "histmig.test.json")

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):
        return cls()


OLD = ["a", "b", None, "d", "e", "f"]


@pytest.mark.parametrize(
    "type_",
    [pa.string(), pa.large_string(), pa.binary(), pa.large_binary(), pa.string_view(), pa.binary_view(), JsonText(), pa.json_()],
    ids=str,
)
@pytest.mark.parametrize("positions", [[], [0], [5], [1, 2], [0, 2, 4], [3, 4, 5], [0, 1, 3, 4], [0, 1, 2, 3, 4, 5]], ids=str)
def test_apply_puts_the_new_cells_in_place(type_: pa.DataType, positions: list[int]) -> None:
    migrator = ColumnMigrator(pa.schema([("messages", type_)]), "messages", "t.parquet")
    storage = type_.storage_type if isinstance(type_, pa.ExtensionType) else type_
    column = pa.array(OLD, storage)
    if isinstance(type_, pa.ExtensionType):
        column = pa.ExtensionArray.from_storage(type_, column)
    cells = Cells(positions, migrator._array([f"new{p}".encode() for p in positions]), len(OLD))
    result = migrator.apply(column, cells)
    assert result.type == type_
    storage_result = result.storage if isinstance(result, pa.ExtensionArray) else result
    got = [cell if cell is None or isinstance(cell, str) else cell.decode() for cell in storage_result.to_pylist()]
    assert got == [f"new{i}" if i in positions else old for i, old in enumerate(OLD)]


def test_apply_refuses_cells_of_another_batch() -> None:
    migrator = ColumnMigrator(pa.schema([("messages", pa.string())]), "messages", "t.parquet")
    with pytest.raises(ValueError, match="6-row batch given for 5 rows"):
        migrator.apply(pa.array(OLD[:5]), Cells([1], pa.array(["x"]), 6))


def one_group(records, path: Path) -> Path:
    """``mixed_table`` as one row group (as pyarrow and pandas write up to a million rows)."""
    pq.write_table(mixed_table(records), path, row_group_size=len(records), compression="zstd")
    return path


@pytest.mark.usefixtures("small_batches")
@pytest.mark.parametrize("output", ["parquet", "jsonl"])
def test_a_row_group_larger_than_a_task_is_migrated_in_slices(tmp_path: Path, records, monkeypatch: pytest.MonkeyPatch, output: str) -> None:
    source = one_group(records, tmp_path / "one.parquet")
    whole = convert(source, tmp_path / f"whole.{output}", 1)
    monkeypatch.setattr(parquet, "TASK_BYTES", 40_000)
    sliced_one, sliced_two = convert(source, tmp_path / f"s1.{output}", 1), convert(source, tmp_path / f"s2.{output}", 2)
    assert sliced_one == sliced_two == whole
    assert whole["summary"]["records_in"] == 185 and whole["summary"]["rejected"] == 19
    if output == "jsonl":
        assert (tmp_path / "s2.jsonl").read_bytes() == (tmp_path / "s1.jsonl").read_bytes() == (tmp_path / "whole.jsonl").read_bytes()
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
    assert [(s.offset, s.row_count, s.first_row) for s in slices] == [(0, 43, 1000), (43, 43, 1043), (86, 43, 1086), (129, 43, 1129), (172, 40, 1172)]
    assert compressed - 5 <= sum(s.size for s in slices) <= compressed


def test_the_messages_column_is_found_among_leaf_columns_by_the_schema(tmp_path: Path) -> None:
    cell = '[{"kind":"request","parts":[]}]'
    opaque = pa.ExtensionArray.from_storage(pa.opaque(pa.struct([("x", pa.int64()), ("y", pa.string())]), "t", "v"), pa.array([{"x": 1, "y": "z"}] * 3))
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
    small, big = '[{"kind":"request","parts":[]}]', '[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"' + "y" * 4000 + '"}]}]'
    cells = [small + " " * (i % 3) for i in range(40)] + [big + " " * (i % 5) for i in range(1960)]
    pq.write_table(pa.table({"messages": cells}), tmp_path / "d.parquet", use_dictionary=True)
    file = pq.ParquetFile(tmp_path / "d.parquet")
    task = parquet.RowGroup(str(tmp_path / "d.parquet"), 0, 0, "messages", None, "parquet")
    first_rows = cells[: parquet.BATCH_ROWS]
    assert parquet._bytes_per_row(file, task, file.metadata.row_group(0)) >= sum(map(len, first_rows)) / len(first_rows)


def test_the_batch_cursor_reads_slices_on_and_starts_again_when_it_must(tmp_path: Path, records, monkeypatch: pytest.MonkeyPatch) -> None:
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
def test_slices_keep_every_row_however_pyarrow_cuts_the_batches(tmp_path: Path, records, monkeypatch: pytest.MonkeyPatch, jobs: int) -> None:
    source = one_group(records, tmp_path / "one.parquet")
    whole = convert(source, tmp_path / "whole.parquet", 1)
    monkeypatch.setattr(parquet, "_batches", ragged(parquet._batches))
    monkeypatch.setattr(parquet, "TASK_BYTES", 40_000)
    sliced = convert(source, tmp_path / "sliced.parquet", jobs)
    assert sliced == whole
    assert pq.read_table(tmp_path / "sliced.parquet").equals(pq.read_table(tmp_path / "whole.parquet"), check_metadata=True)
    assert pq.ParquetFile(tmp_path / "sliced.parquet").metadata.num_row_groups > 3
    lines = convert(source, tmp_path / "sliced.jsonl", jobs)
    assert lines == whole
    assert len((tmp_path / "sliced.jsonl").read_bytes().splitlines()) == len(records)
