"""One messages column of Arrow batches through the engine (histmig.sources.arrow): the
cells a batch changes are put in place for every column type; a nested column is widened; a
batch's report is the one record by record."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pyarrow as pa
import pytest

from histmig.engine import Plan, process
from histmig.errors import ColumnError
from histmig.records import Record
from histmig.report import Report
from histmig.rules import select
from histmig.screen import Screen
from histmig.sources.arrow import (
    Cells,
    ColumnMigrator,
    bytes_array,
    find_id_column,
    find_messages_column,
    holds_history,
    indices,
    widened_type,
)
from tests.sources.conftest import corpus_records


@pytest.fixture(scope="module")
def records():
    return corpus_records()


def test_a_batch_reports_every_cell_as_record_by_record_and_lists_what_changed(records) -> None:
    legacy = next(r for r in records if b"retry-prompt" in orjson.dumps(r))
    clean = next(r for r in records if Screen(select())(orjson.dumps(r["messages"])) == ())
    cells = [
        orjson.dumps(clean["messages"]),
        orjson.dumps(legacy["messages"]),
        None,
        b"[{",
        orjson.dumps(clean["messages"]),
        b'{"messages": 1}',
    ]
    batch = pa.record_batch({"messages": pa.array(cells, pa.binary())})
    migrator = ColumnMigrator(batch.schema, "messages", "t.parquet", Plan())
    report = Report.in_memory()
    changed = migrator.migrate_cells(batch, range(10, 16), report)
    assert (changed.positions, changed.changed, changed.rejected, changed.length) == ([1], [1], [3, 5], 6)
    assert changed.values.to_pylist() == [process(Record(cells[1], "t", "row 11")).output]
    one_by_one = Report.in_memory()
    for row, cell in enumerate(cells, start=10):
        if cell is not None:
            one_by_one.add(process(Record(cell, "t.parquet", f"row {row}")))
    assert report.to_json() == one_by_one.to_json()
    assert report.counts["records_in"] == 5


def test_a_null_id_names_no_record_and_an_id_column_names_the_others() -> None:
    cell = b'{"id":"env","messages":[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"x"}]}]}'
    batch = pa.record_batch({"messages": pa.array([cell, cell], pa.binary()), "conv": pa.array([None, 7])})
    report = Report.in_memory()
    ColumnMigrator(batch.schema, "messages", "t.parquet", Plan(), "conv").migrate_cells(batch, range(2), report)
    assert [row["id"] for row in report.changes] == [None, "7"]


def test_a_nested_column_is_widened_with_the_fields_the_rules_write() -> None:
    part = pa.struct([("part_kind", pa.string()), ("content", pa.string())])
    message = pa.struct([("kind", pa.string()), ("parts", pa.list_(part))])
    widened = widened_type(pa.list_(message))
    parts = widened.value_type.field("parts").type.value_type
    assert [f.name for f in widened.value_type] == ["kind", "parts", "instructions"]
    assert [f.name for f in parts] == ["part_kind", "content", "outcome", "retry"]
    assert parts.field("retry").type == pa.struct(
        [("cause", pa.string()), ("attempt", pa.int64()), ("max_retries", pa.int64())]
    )


def test_the_messages_column_is_named_or_found_else_refused() -> None:
    schema = pa.schema(
        [
            ("id", pa.int64()),
            (
                "chat",
                pa.list_(
                    pa.struct([("kind", pa.string()), ("parts", pa.list_(pa.struct([("part_kind", pa.string())])))])
                ),
            ),
        ]
    )
    assert find_messages_column(schema) == "chat"
    assert find_messages_column(schema, "chat") == "chat"
    with pytest.raises(
        ColumnError, match="x.parquet: column 'id' is int64: expected JSON text, binary or list<struct>"
    ):
        find_messages_column(schema, "id", where="x.parquet")
    with pytest.raises(ColumnError, match="no column 'nope'"):
        find_messages_column(schema, "nope")
    with pytest.raises(ColumnError, match="cannot tell the messages column"):
        find_messages_column(pa.schema([("id", pa.int64())]))


@pytest.mark.parametrize("cell", ['{"kind": "request", "parts": []}', b'{"parts": [], "kind": "response"}'])
def test_a_column_of_one_message_a_row_is_found_only_for_rows_put_together(cell: str | bytes) -> None:
    """A store of one message a row (``--conversation`` puts them together) holds no history
    in any cell: its column is found by the message it holds, and only then (alone, a row of
    one message is no history to migrate)."""
    schema = pa.schema([("conversation_id", pa.string()), ("msg", pa.string())])
    first = {"conversation_id": "c1", "msg": cell}.__getitem__
    assert find_messages_column(schema, first=first, one=True) == "msg"
    with pytest.raises(ColumnError, match="cannot tell the messages column"):
        find_messages_column(schema, first=first)
    assert not holds_history('{"kind": "request", "parts": 3}', True)


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
    [
        pa.string(),
        pa.large_string(),
        pa.binary(),
        pa.large_binary(),
        pa.string_view(),
        pa.binary_view(),
        JsonText(),
        pa.json_(),
    ],
    ids=str,
)
@pytest.mark.parametrize(
    "positions", [[], [0], [5], [1, 2], [0, 2, 4], [3, 4, 5], [0, 1, 3, 4], [0, 1, 2, 3, 4, 5]], ids=str
)
def test_apply_puts_the_new_cells_in_place(type_: pa.DataType, positions: list[int]) -> None:
    migrator = ColumnMigrator(pa.schema([("messages", type_)]), "messages", "t.parquet", Plan())
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
    migrator = ColumnMigrator(pa.schema([("messages", pa.string())]), "messages", "t.parquet", Plan())
    with pytest.raises(ValueError, match="6-row batch given for 5 rows"):
        migrator.apply(pa.array(OLD[:5]), Cells([1], pa.array(["x"]), 6))


HISTORY = '[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi"}]}]'


def test_a_column_holding_histories_is_found_whatever_its_name() -> None:
    schema = pa.schema(
        [("id", pa.int64()), ("chat-history", pa.string()), ("note", pa.string()), ("blob", pa.binary())]
    )
    cells = {"chat-history": HISTORY, "note": "not json", "blob": None}
    assert find_messages_column(schema, first=cells.get) == "chat-history"
    cells["blob"] = b'{"id": 1, "history": ' + HISTORY.encode() + b"}"
    with pytest.raises(
        ColumnError, match=r"several columns hold histories \(chat-history, blob\): name one with --messages-column"
    ):
        find_messages_column(schema, first=cells.get)
    with pytest.raises(ColumnError, match="cannot tell the messages column .*columns: id, chat-history, note, blob"):
        find_messages_column(schema)


def test_an_id_like_column_names_the_rows() -> None:
    schema = pa.schema(
        [
            ("record_id", pa.string()),
            ("conversation_id", pa.int32()),
            ("messages", pa.string()),
            ("pk", pa.string()),
            ("id", pa.list_(pa.int8())),
        ]
    )
    assert find_id_column(schema) == "conversation_id"
    assert find_id_column(schema, key="pk") == "pk"
    assert find_id_column(schema, "record_id", key="pk") == "record_id"
    assert find_id_column(pa.schema([("messages", pa.string()), ("id", pa.float64())])) is None
    with pytest.raises(ColumnError, match="t.parquet: no id column 'conv'"):
        find_id_column(schema, "conv", where="t.parquet")


@pytest.mark.parametrize("type_", [pa.binary(), pa.large_binary(), pa.binary_view()], ids=str)
@pytest.mark.parametrize(
    "values", [[], [b""], [b'[{"kind":"request"}]', b"", "\u00e9t\u00e9".encode()]], ids=["none", "empty", "three"]
)
def test_bytes_array_is_pa_array(values: list[bytes], type_: pa.DataType) -> None:
    built = bytes_array(values, type_)
    assert (built.type, built.to_pylist()) == (type_, values)
    built.validate(full=True)


def test_indices_are_int64_positions() -> None:
    taken = pa.array([b"a", b"b", b"c", b"d"]).take(indices([3, 0, 2]))
    assert taken.to_pylist() == [b"d", b"a", b"c"]


def test_converting_parquet_and_duckdb_never_imports_pandas(tmp_path: Path) -> None:
    """pandas is installed here (pyspark needs it) and ``pa.array`` of a list would import it:
    0.9 s in each process (see :func:`histmig.sources.arrow.bytes_array`)."""
    import duckdb
    import pandas  # noqa: F401 (installed with the test extras: without it the test proves nothing)
    import pyarrow.parquet as pq

    from tests.conftest import CORPUS

    records = [orjson.loads(line) for line in (CORPUS / "all.jsonl").read_bytes().splitlines()]
    pq.write_table(
        pa.table({"messages": [orjson.dumps(r["messages"]).decode() for r in records]}), tmp_path / "in.parquet"
    )
    with duckdb.connect(str(tmp_path / "in.duckdb")) as con:
        con.execute(
            f"CREATE TABLE chats AS SELECT * FROM read_json('{CORPUS / 'all.jsonl'}', columns={{'id': 'VARCHAR', 'messages': 'JSON'}})"
        )
    script = (
        "import runpy, sys\n"
        "sys.argv = ['histmig', *sys.argv[1:]]\n"
        "try:\n    runpy.run_module('histmig', run_name='__main__')\n"
        "except SystemExit as exit:\n    print(exit.code, 'pandas' in sys.modules)\n"
    )
    for args in (["in.parquet", "out.parquet"], ["in.duckdb", "--table", "chats", "--in-place"]):
        done = subprocess.run(
            [sys.executable, "-c", script, "convert", *args, "-q", "--jobs", "1"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        )
        assert done.stdout == "0 False\n", (args, done.stderr)


def test_a_messages_column_of_another_type_is_named_with_its_type() -> None:
    schema = pa.schema([("id", pa.string()), ("messages", pa.int64())])
    with pytest.raises(
        ColumnError, match=r"^x.parquet: column 'messages' is int64: expected JSON text, binary or list<struct>$"
    ):
        find_messages_column(schema, where="x.parquet", first=lambda name: None)
    other = pa.schema(
        [
            ("id", pa.string()),
            ("messages", pa.int64()),
            ("chat", pa.list_(pa.struct([("kind", pa.string()), ("parts", pa.string())]))),
        ]
    )
    assert find_messages_column(other) == "chat"  # a column that holds histories comes first


def _mixed_era_parquet(path: Path) -> list[str]:
    """A Parquet file whose nested messages column was written from real 2.68 histories and
    older ones (1.0.18: no ``outcome``, ``state``, ``scope``, nor the newer usage counts; 0.4.11:
    ``request_tokens`` for ``input_tokens``; 0.0.55: no usage), so the older rows hold null in
    those fields; returns the row ids."""
    import pyarrow.parquet as pq

    from tests.conftest import CORPUS, load
    from tests.sources.conftest import _without_empty_objects

    names = [
        "v2.68.0/l_no_retry",
        "v2.68.0/a_tool_model_retry",
        "v1.0.18/l_no_retry",
        "v0.4.11/l_no_retry",
        "v0.0.55/l_no_retry",
    ]
    rows = [_without_empty_objects(load(CORPUS / f"{name}.json")) for name in names]
    pq.write_table(pa.table({"id": names, "messages": pa.array(rows)}), path)
    return names


def _refusals(path: Path, column: str = "messages") -> dict[int, list[str]]:
    """What pydantic-ai 2.68 refuses in each row of the nested column, as read (the oracle)."""
    import pyarrow.parquet as pq
    from pydantic import ValidationError
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    refused: dict[int, list[str]] = {}
    for row, cell in enumerate(pq.read_table(path).column(column).to_pylist()):
        try:
            ModelMessagesTypeAdapter.validate_python(cell)
        except ValidationError as exc:
            refused[row] = [str(error["loc"][-1]) for error in exc.errors()]
    return refused


def test_a_mixed_era_nested_column_check_refuses_what_2_68_refuses_and_convert_repairs(tmp_path: Path) -> None:
    """A nested column holds every struct field in every row: the older rows hold null where
    their release wrote nothing (``outcome``, ``state``, ``scope``, usage counts), which 2.68
    refuses, though it reads each field absent as its default. ``check`` names those rows, as
    the oracle does; ``convert`` writes the defaults (and a legacy count's value under its new
    name), after which 2.68 loads every row and ``check`` passes; the 2.68 rows are unchanged."""
    import pyarrow.parquet as pq
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    from histmig import api
    from tests.conftest import CORPUS, load

    source, out, again = tmp_path / "mixed.parquet", tmp_path / "out.parquet", tmp_path / "again.parquet"
    _mixed_era_parquet(source)
    refused = _refusals(source)
    assert set(refused) == {2, 3, 4}
    assert {"outcome", "state", "scope", "cache_write_1h_tokens"} <= set(refused[2])
    assert "input_tokens" in refused[3]  # null under its new name; 0.4.11 wrote request_tokens
    assert "usage" in refused[4]  # 0.0.55 wrote none
    checked = api.check(str(source))
    assert checked.exit_code == 1
    errors = {int(row["location"].removeprefix("row ")): row["errors"] for row in checked.report.errors}
    assert set(errors) == set(refused)
    (line,) = errors[2]
    assert line.startswith("messages[0].state, messages[0].parts[0].scope, messages[1].state, ")
    assert line.endswith(
        ": null, which pydantic-ai 2.68 refuses (a field of the column's struct that this row's "
        "release did not write); convert writes the value an absent one is read as"
    )
    assert api.convert(str(source), str(out)).exit_code == 0
    assert _refusals(out) == {}
    assert api.check(str(out)).exit_code == 0
    before, after = pq.read_table(source).column("messages"), pq.read_table(out).column("messages")
    assert after.to_pylist()[:2] == before.to_pylist()[:2]
    loaded = ModelMessagesTypeAdapter.validate_python(after.to_pylist()[3])
    stored = ModelMessagesTypeAdapter.validate_python(load(CORPUS / "v0.4.11" / "l_no_retry.json"))
    assert [m.usage.input_tokens for m in loaded if m.kind == "response"] == [
        m.usage.input_tokens for m in stored if m.kind == "response"
    ]
    assert all(m.usage.input_tokens > 0 for m in loaded if m.kind == "response")
    tool_return = next(p for m in after.to_pylist()[2] for p in m["parts"] if p["part_kind"] == "tool-return")
    assert tool_return["outcome"] == "success"
    assert api.convert(str(out), str(again)).exit_code == 0
    assert pq.read_table(again).column("messages").to_pylist() == after.to_pylist()


def test_a_column_without_the_newer_fields_is_valid_as_it_is_and_widened_gets_outcome() -> None:
    """Where the struct has no such field (every row of one older release) the rows lack it,
    which 2.68 reads as the default: nothing for ``check`` to report. Written widened with
    ``outcome``, the tool-return would hold null there: that one is filled."""
    from histmig.sources.arrow import null_places, struct_fields
    from tests.conftest import CORPUS, load

    history = load(CORPUS / "v1.0.18" / "l_no_retry.json")
    column = pa.array([history])
    value = column.to_pylist()[0]
    assert null_places(value, struct_fields(column.type)) == []
    assert [p[1:] for p in null_places(value, struct_fields(widened_type(column.type)))] == [
        ("outcome", "success", "messages[2].parts[0].outcome")
    ]
