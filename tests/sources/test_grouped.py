"""The index of a grouped columnar input (histmig.sources.grouped): rows of any batch and part put
in conversation order (key, order with its nulls last, the ties, then storage order), a null key a
conversation of its own, a conversation's records read back from the spill as they were; and the
migrated records kept by place, read back a batch at a time."""

from __future__ import annotations

import os
import re
from datetime import date, datetime, time, timedelta
from decimal import Decimal

import pyarrow as pa
import pytest

from histmig.errors import ColumnError
from histmig.records import Grouping
from histmig.report import Report
from histmig.sources.grouped import ConversationsResult, Index, Migrated, Part, check_columns


def _batch(keys: list, order: list, cells: list, **more: list) -> pa.RecordBatch:
    return pa.record_batch(
        {"s": pa.array(keys, pa.string()), "n": pa.array(order, pa.int64()), "m": pa.array(cells, pa.binary()), **more}
    )


def _conversations(index: Index) -> list[tuple[str, str | None, list[tuple[int, int, bytes]]]]:
    """Each conversation of ``index``'s tasks: its name, note and records as ``(part, row, bytes)``."""
    fd = os.open(index.spill[0], os.O_RDONLY)
    try:
        return [
            (name, note, [(part, row, os.pread(fd, length, offset)) for part, _, row, offset, length in members])
            for task in index.tasks()
            for members, name, note in zip(task.groups, task.names, task.notes)
        ]
    finally:
        os.close(fd)


def test_rows_of_any_batch_and_file_are_put_in_conversation_order() -> None:
    parts = [Part("a.parquet", "m", "binary"), Part("b.parquet", "m", "binary")]
    index = Index(Grouping(("s",), "n"), parts)
    index.add(0, _batch(["x", "y", None, "x"], [2, 0, 0, None], [b"x2", b"y0", b"alone", b"x-"]), range(4))
    index.add(1, _batch(["x", "y"], [2, 1], [b"x2b", b"y1"]), range(2))
    assert _conversations(index) == [
        ("s='x'", None, [(0, 0, b"x2"), (1, 0, b"x2b"), (0, 3, b"x-")]),  # equal order: storage order; null last
        ("s='y'", None, [(0, 1, b"y0"), (1, 1, b"y1")]),
        ("a.parquet:row 2", "no conversation key (s null): a conversation of its own", [(0, 2, b"alone")]),
    ]
    index.close()


def test_ties_come_before_storage_order_and_a_null_cell_is_no_record() -> None:
    index = Index(Grouping(("s",), "n"), [Part("t", "m", "binary")], ties=("id",))
    batch = _batch(["x"] * 3, [0, 0, 0], [b"c", None, b"a"], id=pa.array([3, 2, 1]))
    index.add(0, batch, range(3))
    ((name, note, records),) = _conversations(index)
    assert (name, note, records) == ("s='x'", None, [(0, 2, b"a"), (0, 0, b"c")])
    index.close()


def test_the_whole_input_is_one_conversation_and_a_dictionary_key_sorts_by_its_values() -> None:
    whole = Index(Grouping(("*",)), [Part("t", "m", "binary")])
    whole.add(0, _batch(["b", "a"], [0, 0], [b"1", b"2"]), range(2))
    assert _conversations(whole) == [("the whole input", None, [(0, 0, b"1"), (0, 1, b"2")])]
    whole.close()
    keyed = Index(Grouping(("s",)), [Part("t", "m", "binary")])
    batch = pa.record_batch({"s": pa.array(["b", "a", "b"]).dictionary_encode(), "m": pa.array([b"1", b"2", b"3"])})
    keyed.add(0, batch, range(3))
    assert [(name, [row for _, row, _ in records]) for name, _, records in _conversations(keyed)] == [
        ("s='a'", [1]),
        ("s='b'", [0, 2]),
    ]
    keyed.close()


def test_a_conversation_column_a_batch_lacks_is_an_error_naming_it() -> None:
    index = Index(Grouping(("session",)), [Part("chats.parquet", "m", "binary")])
    with pytest.raises(ColumnError, match=re.escape("chats.parquet: no column 'session' (columns: s, n, m)")):
        index.add(0, _batch(["x"], [0], [b"1"]), range(1))
    index.close()


SORTED = [  # each type's two values, the second sorting first
    pa.array([2, 1], pa.int8()),
    pa.array([2.5, 1.5], pa.float64()),
    pa.array([Decimal("2.1"), Decimal("1.1")], pa.decimal128(4, 2)),
    pa.array([True, False]),
    pa.array(["b", "a"], pa.large_string()),
    pa.array([b"b", b"a"], pa.binary(1)),
    pa.array([b"b", b"a"], pa.large_binary()),
    pa.array([date(2024, 1, 2), date(2024, 1, 1)]),
    pa.array([time(2), time(1)]),
    pa.array([datetime(2024, 1, 2), datetime(2024, 1, 1)], pa.timestamp("us", "UTC")),
    pa.array([timedelta(2), timedelta(1)]),
    pa.array([2, 1], pa.int16()).dictionary_encode(),
]
REFUSED = [
    pa.array([{"a": 2}, {"a": 1}]),
    pa.array([[2], [1]]),
    pa.array([[("a", 2)], [("a", 1)]], pa.map_(pa.string(), pa.int64())),
    pa.array([(0, 2, 0), (0, 1, 0)], pa.month_day_nano_interval()),
    pa.array(["b", "a"], pa.string_view()),
    pa.array([2, 1], pa.int64()).cast(pa.float16()),
]


@pytest.mark.parametrize("values", SORTED + REFUSED, ids=lambda values: str(values.type))
def test_a_key_or_order_column_is_taken_of_each_type_arrow_sorts_and_compares_and_refused_of_another(
    values: pa.Array,
) -> None:
    """What :func:`check_columns` takes is what the index sorts: each taken type as a key and as an
    order puts the rows in its order; each other type is refused by name before a row is read."""
    for grouping in (Grouping(("k",)), Grouping(("s",), "k")):
        batch = pa.record_batch({"k": values, "s": ["x", "x"], "m": [b"1", b"2"]})
        if any(values is refused for refused in REFUSED):
            with pytest.raises(
                ColumnError,
                match=re.escape(
                    f"t: {'--order' if grouping.order else '--conversation'} column 'k' is {values.type}: "
                ),
            ):
                check_columns("t", batch.schema, grouping)
            continue
        check_columns("t", batch.schema, grouping)
        index = Index(grouping, [Part("t", "m", "binary")])
        index.add(0, batch, range(2))
        assert [row for _, _, records in _conversations(index) for _, row, _ in records] == [1, 0]
        index.close()


def test_a_conversation_past_the_limit_is_refused_unread() -> None:
    index = Index(Grouping(("s",), limit=5), [Part("t", "m", "binary")])
    index.add(0, _batch(["x", "x", "y"], [0, 1, 0], [b"abc", b"def", b"gh"]), range(3))
    (task,) = index.tasks()
    assert task.refused == (
        "conversation s='x' holds 6 bytes in 2 records, past --max-conversation-bytes 5: rejected whole, nothing "
        "written for it",
        None,
    )
    index.close()


def test_migrated_records_are_read_back_by_place_a_batch_at_a_time() -> None:
    migrated = Migrated()
    migrated.add(
        ConversationsResult(Report.in_memory(), edits=[(0, 7, b"seven"), (0, 3, None), (1, 7, b"other")], touched=[4])
    )
    assert migrated.of(0, range(2, 9)) == ({5: b"seven"}, [1])
    assert migrated.of(0, [9, 7]) == ({1: b"seven"}, [])  # rows in any order (a table's rowids)
    assert migrated.drop(0, [3, 7, 8]) == [7]  # the places that held a migrated record
    assert migrated.of(0, range(10)) == ({}, []) and migrated.of(1, [7]) == ({0: b"other"}, [])
    assert migrated.touched == {4}
    migrated.close()
