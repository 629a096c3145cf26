"""The local engine (histmig.run.local): a planned run's inputs through worker processes, in
order, each written to its own destination."""

from __future__ import annotations

from pathlib import Path

import pytest

from histmig.options import Options
from histmig.run import local
from histmig.run.local import run_local
from histmig.run.plan import plan
from histmig.sources.base import Destination
from tests.conftest import CORPUS

ALL = CORPUS / "all.jsonl"


def test_a_planned_run_writes_each_input_to_its_destination_in_order(tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    lines = ALL.read_bytes().splitlines(keepends=True)
    first.write_bytes(b"".join(lines[:5]))
    second.write_bytes(b"".join(lines[5:9]) + b"{oops\n")
    out = tmp_path / "out"
    planning = plan("convert", [str(first), str(second)], Destination(str(out)), Options(jobs=2))
    result = run_local(planning, Options(jobs=2), Options().plan(), None, strict=False)
    assert sorted(p.name for p in out.iterdir()) == ["a.jsonl", "b.jsonl"]
    assert (tmp_path / "out.rejects.jsonl").read_bytes() == b"{oops\n"
    assert (result.inputs, result.input, result.output, result.earlier_rejects) == (
        [str(first), str(second)],
        [str(first), str(second)],
        str(out),
        [],
    )
    assert result.report.counts["records_in"] == 10 and result.report.counts["rejected"] == 1
    assert [row["location"] for row in result.report.errors] == ["line 5"]


def test_an_input_that_cannot_go_to_workers_runs_in_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts: list[int] = []
    real = local.Workers

    def counted(work, count, **kwargs):
        counts.append(count)
        return real(work, count, **kwargs)

    monkeypatch.setattr(local, "Workers", counted)
    history = next((CORPUS / "v0.0.20").glob("*.json"))
    run_local(
        plan("audit", str(history), Destination(), Options(jobs=3)),
        Options(jobs=3),
        Options().plan(),
        None,
        strict=False,
    )
    run_local(
        plan("audit", str(ALL), Destination(), Options(jobs=3)), Options(jobs=3), Options().plan(), None, strict=False
    )
    assert counts == [1, 3]
