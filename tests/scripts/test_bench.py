"""The benchmark's bound baselines do the work they claim, on every record once."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from histmig.api import convert
from tests.conftest import CORPUS, ROOT

_SPEC = importlib.util.spec_from_file_location("bench", ROOT / "scripts" / "bench.py")
bench = sys.modules["bench"] = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)


@pytest.mark.parametrize("copies", [1, 2, 7])
def test_bound_jsonl_dumps_every_migrated_record_once_in_order(tmp_path: Path, copies: int) -> None:
    migrated = tmp_path / "migrated.jsonl"
    source = tmp_path / "all.jsonl"
    source.write_bytes((CORPUS / "all.jsonl").read_bytes() * copies)
    convert(str(source), str(migrated))
    bench.bound_jsonl(str(migrated), str(tmp_path / "bound"))
    written = (tmp_path / "bound.0").read_bytes() + (tmp_path / "bound.1").read_bytes()
    assert written.splitlines() == [orjson.dumps(orjson.loads(line)) for line in migrated.read_bytes().splitlines()]
    assert len(written.splitlines()) == 212 * copies


def test_bound_parquet_writes_the_table_back(tmp_path: Path) -> None:
    table = pa.table({"id": list(range(5000)), "messages": ['[{"kind":"request","parts":[]}]'] * 5000})
    pq.write_table(table, tmp_path / "in.parquet")
    bench.bound_parquet(str(tmp_path / "in.parquet"), str(tmp_path / "out.parquet"))
    assert pq.read_table(tmp_path / "out.parquet").equals(table)


def test_bound_jsonl_fails_when_a_process_fails(tmp_path: Path) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_bytes(b"not json\n" * 10)
    with pytest.raises(RuntimeError, match="a process failed"):
        bench.bound_jsonl(str(source), str(tmp_path / "bound"))
