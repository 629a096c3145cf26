"""What every format shares (histmig.sources.base): a module imported when first used, where a
command writes."""

from __future__ import annotations

import os
import subprocess
import sys

from histmig.sources.base import Destination, starts_with
from tests.conftest import ROOT


def test_a_lazy_module_is_imported_on_its_first_attribute() -> None:
    code = "import sys\nfrom histmig.sources.base import lazy\ncsv = lazy('csv')\nprint('csv' in sys.modules, csv.QUOTE_ALL, 'csv' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "1", "True"]


def test_finding_the_formats_imports_no_heavy_library() -> None:
    heavy = ("pyarrow", "duckdb", "psycopg", "psycopg_binary", "pyspark", "pydantic")
    code = f"import sys, histmig.cli, histmig.sources as s\nprint(sorted(s.formats()), sorted(m for m in sys.modules if m.split('.')[0] in {heavy}))"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "['duckdb', 'json', 'jsonl', 'parquet', 'postgres', 'sqlite'] []"


def test_a_file_is_claimed_by_its_first_bytes(tmp_path) -> None:
    (tmp_path / "f").write_bytes(b"0123456789DUCK")
    assert [
        starts_with(str(tmp_path / "f"), b"0123"),
        starts_with(str(tmp_path / "f"), b"89DU", 8),
        starts_with(str(tmp_path / "f"), b"1234"),
    ] == [True, True, False]
    assert not starts_with(str(tmp_path), b"") and not starts_with(str(tmp_path / "none"), b"")


def test_a_fifo_is_never_read_to_be_claimed(tmp_path) -> None:
    fifo = tmp_path / "chats.jsonl"
    os.mkfifo(fifo)
    writer = subprocess.Popen([sys.executable, "-c", f"open({str(fifo)!r}, 'wb').write(b'SQLite format 3\\0x')"])
    try:  # with no reader, the writer waits: a claim that opened the FIFO would take its bytes
        assert not starts_with(str(fifo), b"SQLite format 3\0")
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the writer's open returns, it writes and ends
        writer.wait(timeout=10)
        assert os.read(reader, 100) == b"SQLite format 3\0x"
        os.close(reader)
    finally:
        writer.kill()
        writer.wait()


def test_a_target_writes_when_it_has_a_destination() -> None:
    assert [
        Destination().writes,
        Destination("o").writes,
        Destination(in_place=True).writes,
        Destination(to_table="t").writes,
    ] == [
        False,
        True,
        True,
        True,
    ]
