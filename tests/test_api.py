"""The Python API (histmig.api): one function per command, each returning the result the
verdict line and the exit code are made from; usage errors raised before any record is read;
the run driver hands workers tasks without the bytes they read themselves."""

from __future__ import annotations

import pickle
from pathlib import Path

import orjson
import pytest

from histmig import api, parallel
from histmig.options import Options
from histmig.sources.base import UnreadableInput, UnwritableOutput, UsageError
from tests.conftest import CORPUS

ALL = CORPUS / "all.jsonl"
LEGACY = next(line for line in ALL.read_bytes().splitlines() if b"retry-prompt" in line)


def test_convert_audit_and_check_report_the_same_counts(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    converted, audited, checked = api.convert(str(ALL), str(out)), api.audit(str(ALL)), api.check(str(ALL))
    assert [r.report.summary() == converted.report.summary() for r in (audited, checked)] == [True, True]
    assert (converted.exit_code, audited.exit_code, checked.exit_code) == (0, 0, 1)
    assert converted.verdict == f"histmig convert: 138 of 212 records migrated, 74 unchanged, 0 rejected; written to {out}"
    assert audited.verdict == "histmig audit: 138 of 212 records would be migrated, 74 need nothing, 0 would be rejected; nothing was written"
    assert checked.verdict == "histmig check: 138 of 212 records to migrate, 0 invalid, 0 rejected"
    clean = api.check(str(out))
    assert (clean.exit_code, clean.verdict) == (0, "histmig check: all 212 records are current and valid")


def test_a_rejected_record_fails_convert_and_says_where_it_went(tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(LEGACY + b"\n{oops\n")
    result = api.convert(str(source), str(out))
    assert result.exit_code == 1
    assert result.verdict.endswith(f"1 rejected; written to {out}, rejected records to {out}.rejects.jsonl")
    assert result.rejected == [(f"{source}:line 2", "invalid JSON: unexpected character, expected a string key at character 2 of the record")]
    assert (tmp_path / "out.jsonl.rejects.jsonl").read_bytes() == b"{oops\n"
    again = api.convert(str(source), str(out))
    assert again.notes == [f"{out}.rejects.jsonl already held rejected records of an earlier run; this run's rejected records were added after them"]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda tmp: api.convert(str(ALL)), UsageError, "give OUTPUT, or --in-place"),
        (lambda tmp: api.convert(str(ALL), str(tmp / "o.jsonl"), in_place=True), UsageError, "give OUTPUT, or --in-place"),
        (lambda tmp: api.convert("-", in_place=True), UsageError, "give OUTPUT, or --in-place"),
        (lambda tmp: api.convert(str(ALL), str(ALL)), UsageError, "is the input; use --in-place"),
        (lambda tmp: api.convert(str(ALL), str(tmp / "o.parquet")), UsageError, "choose an output name that says so"),
        (lambda tmp: api.convert(str(ALL), str(tmp / "none" / "o.jsonl")), UnwritableOutput, "no such directory"),
        (lambda tmp: api.convert(str(ALL), "-", rejects="-"), UsageError, "OUTPUT and --rejects cannot both go to stdout"),
        (lambda tmp: api.audit(str(tmp / "chats.txt")), UnreadableInput, "cannot tell the format from the name"),
        (lambda tmp: api.audit(str(ALL), Options(select=("HM9",))), UsageError, "unknown rule code 'HM9'"),
        (lambda tmp: api.audit(str(ALL), Options(table="t")), UsageError, "need a Parquet or DuckDB input"),
        (lambda tmp: api.otel(str(ALL), str(tmp / "o.jsonl"), version=4), UsageError, "--version must be one of 5, 6"),
    ],
)
def test_usage_errors_are_raised_before_anything_is_written(tmp_path: Path, call, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_rules_and_migrate() -> None:
    assert [rule.code for rule in api.rules("hm1")] == ["HM101", "HM102", "HM103", "HM104"]
    with pytest.raises(UsageError, match="unknown rule code 'HM7'"):
        api.rules("HM7")
    history = orjson.loads(LEGACY)["messages"]
    changes = api.migrate(history, Options(select=("HM1",)))
    assert {change.rule for change in changes} <= {"HM101", "HM102", "HM103"} and changes
    assert {change.rule for change in api.migrate(history)} == {"HM201", "HM301"}  # the 0.0.20 history's null ids and args wrappers
    assert api.migrate(history) == []


def test_workers_are_sent_where_a_file_chunk_lies_not_its_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    real = parallel._send

    def measured(conn, obj) -> None:
        if isinstance(obj, tuple):
            sizes.append(len(pickle.dumps(obj)))
        real(conn, obj)

    monkeypatch.setattr(parallel, "_send", measured)
    result = api.convert(str(ALL), str(tmp_path / "out.jsonl"), Options(jobs=2))
    assert result.report.counts["changed"] == 138 and sizes
    assert max(sizes) < 512 < ALL.stat().st_size


def test_a_progress_is_told_the_total_and_every_byte(tmp_path: Path) -> None:
    seen: list[tuple[str, int | None]] = []

    class Recorder:
        def start(self, total: int | None) -> None:
            seen.append(("start", total))

        def advance(self, done: int) -> None:
            seen.append(("advance", done))

    api.audit(str(ALL), Options(jobs=1), progress=Recorder())
    assert seen[0] == ("start", ALL.stat().st_size)
    assert sum(n for what, n in seen[1:] if what == "advance") == ALL.stat().st_size
