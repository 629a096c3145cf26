"""Spilled rows (histmig.report.rows): added in order, read back in order, by name."""

from __future__ import annotations

import pytest

from histmig.report import rows
from histmig.report.rows import ChangeRow, FindingRow, Spill


def _row(n: int) -> tuple:
    return (
        "in",
        f"line {n}",
        None,
        "HM201",
        n,
        0,
        "tool-call",
        "tool-call",
        None,
        "position",
        "derived",
        f"pyd_ai_{n}",
        None,
    )


@pytest.mark.parametrize("batch", [1, 3, 4096])
def test_rows_come_back_in_order_as_named_tuples(monkeypatch: pytest.MonkeyPatch, batch: int) -> None:
    monkeypatch.setattr(rows, "ROWS_PER_BATCH", batch)
    spill = Spill(ChangeRow)
    flushed = [spill.add([_row(n)]) for n in range(10)]
    assert sum(len(f) for f in flushed if f) == (10 // batch) * batch
    back = [row for batch_rows in spill.batches() for row in batch_rows]
    assert [row.location for row in back] == [f"line {n}" for n in range(10)]
    assert back[3] == ChangeRow(
        "in", "line 3", None, "HM201", 3, 0, "tool-call", "tool-call", None, "position", "derived", "pyd_ai_3", None
    )
    assert [row.message for batch_rows in spill.batches() for row in batch_rows] == list(range(10))  # read twice


def test_an_in_memory_spill_is_absorbed_after_the_rows_already_there() -> None:
    spill, other = Spill(FindingRow), Spill.in_memory(FindingRow)
    spill.add([("a", "line 1", None, "HM401", 0, 0, "t", "e", "exact", "error")])
    other.add([("b", "line 9", None, "HM402", 1, 2, "t", "e", "exact", "error")])
    other.flush()
    spill.absorb(other)
    assert [(row.source, row.rule) for batch in spill.batches() for row in batch] == [("a", "HM401"), ("b", "HM402")]
