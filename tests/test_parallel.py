"""``--jobs``: several worker processes give the same bytes, in the same order, and the same
report as one (issue: throughput)."""

from __future__ import annotations

import gzip
from pathlib import Path

from typer.testing import CliRunner

from histmig.cli import app
from histmig.runner import run
from tests.conftest import CORPUS

runner = CliRunner()


def _convert(tmp_path: Path, source: Path, jobs: int) -> tuple[bytes, str]:
    out, report = tmp_path / f"out{jobs}.jsonl", tmp_path / f"report{jobs}.json"
    result = runner.invoke(app, ["convert", str(source), str(out), "--jobs", str(jobs), "--report", str(report), "--report-format", "json"])
    assert result.exit_code == 0, result.output
    return out.read_bytes(), report.read_text()


def test_two_jobs_give_the_same_output_and_report_as_one(tmp_path: Path) -> None:
    source = CORPUS / "all.jsonl"
    assert _convert(tmp_path, source, 2) == _convert(tmp_path, source, 1)


def test_two_jobs_keep_order_across_many_chunks_and_blank_lines(tmp_path: Path) -> None:
    lines = (CORPUS / "all.jsonl").read_bytes().splitlines()
    source = tmp_path / "big.jsonl"
    source.write_bytes(b"\n".join([*lines, b"", b"not json", *lines] * 3) + b"\n")
    one, two = run(str(source), str(tmp_path / "a.jsonl")), run(str(source), str(tmp_path / "b.jsonl"), jobs=2)
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert (tmp_path / "a.jsonl.rejects.jsonl").read_bytes() == (tmp_path / "b.jsonl.rejects.jsonl").read_bytes()
    assert one.to_json() == two.to_json()


def test_two_jobs_on_a_truncated_gz_keep_every_record_read(tmp_path: Path) -> None:
    whole = gzip.compress((CORPUS / "all.jsonl").read_bytes() * 4)
    source = tmp_path / "cut.jsonl.gz"
    source.write_bytes(whole[: len(whole) // 2])
    one, two = run(str(source), str(tmp_path / "a.jsonl")), run(str(source), str(tmp_path / "b.jsonl"), jobs=2)
    assert two.counts["read_errors"] == 1
    assert one.to_json() == two.to_json()
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
