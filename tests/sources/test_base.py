"""What every format shares (histmig.sources.base): a module imported when first used, where a
command writes."""

from __future__ import annotations

import subprocess
import sys

from histmig.sources.base import Target
from tests.conftest import ROOT


def test_a_lazy_module_is_imported_on_its_first_attribute() -> None:
    code = "import sys\nfrom histmig.sources.base import lazy\ncsv = lazy('csv')\nprint('csv' in sys.modules, csv.QUOTE_ALL, 'csv' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "1", "True"]


def test_finding_the_formats_imports_neither_pyarrow_nor_duckdb() -> None:
    code = "import sys, histmig.cli, histmig.sources as s\nprint(sorted(s.formats()), sorted(m for m in sys.modules if m.split('.')[0] in ('pyarrow', 'duckdb', 'pydantic')))"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "['duckdb', 'json', 'jsonl', 'parquet'] []"


def test_a_target_writes_when_it_has_a_destination() -> None:
    assert [Target().writes, Target("o").writes, Target(in_place=True).writes, Target(to_table="t").writes] == [False, True, True, True]
