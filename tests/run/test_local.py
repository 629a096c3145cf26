"""The local engine (histmig.run.local): a planned run's inputs through worker processes, in
order, each written to its own destination."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from histmig import api
from histmig.errors import UnwritableOutput
from histmig.options import Options
from histmig.run import local
from histmig.run.local import run_local
from histmig.run.plan import plan
from histmig.sources.base import Destination
from tests.conftest import CORPUS, LAKE_DAYS, make_lake

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


@pytest.mark.parametrize(
    ("kind", "levels"),
    [
        ("parquet", (LAKE_DAYS,)),
        ("jsonl", (LAKE_DAYS,)),
        ("parquet", (("region=eu", "region=us"), ("day=01", "day=02"))),
    ],
)
def test_a_partitioned_dataset_is_one_input_written_as_the_same_tree(
    tmp_path: Path, kind: str, levels: tuple[tuple[str, ...], ...]
) -> None:
    lake = tmp_path / "lake"
    files = make_lake(lake, kind, levels)
    (lake / levels[0][0] / "_SUCCESS").touch()
    out = tmp_path / "made" / "here" / "lake.v2"
    planning = plan("convert", str(lake), Destination(str(out)), Options(jobs=2))
    result = run_local(planning, Options(jobs=2), Options().plan(), None, strict=False)
    written = sorted(p for p in out.rglob("*") if p.is_file())
    assert [p.relative_to(out) for p in written] == [f.relative_to(lake) for f in files]
    assert result.report.counts["records_in"] == 212
    for source, output in zip(files, written):
        alone = tmp_path / "alone" / source.relative_to(lake)
        api.convert(str(source), str(alone))
        assert output.read_bytes() == alone.read_bytes(), source
        if kind == "parquet":
            assert pq.read_schema(output).names == ["id", "messages"]  # no partition column added
    assert [row["source"] for row in result.report.changes][:1] == [str(files[0])]


def test_an_output_file_s_missing_directories_are_created(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "out.jsonl"
    api.convert(str(ALL), str(out))
    api.convert(str(ALL), str(tmp_path / "plain.jsonl"))
    assert out.read_bytes() == (tmp_path / "plain.jsonl").read_bytes()
    (tmp_path / "file").touch()
    with pytest.raises(UnwritableOutput, match="is a file, not a directory"):
        plan("convert", str(ALL), Destination(str(tmp_path / "file" / "x" / "out.jsonl")), Options())


def _failing_on(monkeypatch: pytest.MonkeyPatch, module: object, name: str, failing: str) -> None:
    """``module.name`` (a context manager writing one output) raising a full disk for the
    output ``failing``."""
    real = getattr(module, name)

    def opened(path: str, *args: object, **kwargs: object) -> object:
        if str(path).endswith(failing):
            raise OSError(28, "No space left on device", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(module, name, opened)


def test_a_run_ended_by_an_output_says_which_outputs_it_wrote_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import histmig.sources.jsonl as jsonl

    lines = ALL.read_bytes().splitlines(keepends=True)
    inputs = [tmp_path / f"{name}.jsonl" for name in "abc"]
    for i, path in enumerate(inputs):
        path.write_bytes(b"".join(lines[i * 3 : i * 3 + 3]))
    out = tmp_path / "out"
    _failing_on(monkeypatch, jsonl, "atomic_output", "b.jsonl")
    planning = plan("convert", [str(p) for p in inputs], Destination(str(out)), Options(jobs=1))
    with pytest.raises(OSError) as raised:
        run_local(planning, Options(jobs=1), Options().plan(), None, strict=False)
    assert raised.value.strerror == (
        f"No space left on device; written before it: {out / 'a.jsonl'}; not written: {out / 'c.jsonl'}"
    )
    assert sorted(p.name for p in out.iterdir()) == ["a.jsonl"]


def test_a_grouped_directory_ended_by_an_output_says_which_files_it_wrote_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import histmig.sources.parquet as parquet

    lake = tmp_path / "lake"
    files = [path.relative_to(lake) for path in make_lake(lake)]
    out = tmp_path / "out"
    _failing_on(monkeypatch, parquet, "parquet_sink", str(files[1]))
    options = Options(jobs=1, conversation=("id",))
    with pytest.raises(OSError) as raised:
        run_local(
            plan("convert", [str(lake)], Destination(str(out)), options), options, options.plan(), None, strict=False
        )
    assert raised.value.strerror.startswith(
        f"No space left on device; written before it: {out / files[0]}; not written: "
    )
    assert [path.relative_to(out) for path in out.rglob("*.parquet")] == [files[0]]


def test_a_run_that_writes_nothing_ended_by_an_input_names_nothing_as_written(tmp_path: Path) -> None:
    """An audit's input gone when its turn comes: the error is the input's, with no list of
    what was written before it (the inputs read are not outputs)."""
    inputs = [tmp_path / f"{name}.jsonl" for name in "ab"]
    for path in inputs:
        path.write_bytes(ALL.read_bytes().splitlines(keepends=True)[0])
    planning = plan("audit", [str(p) for p in inputs], Destination(), Options(jobs=1))
    inputs[1].unlink()
    with pytest.raises(OSError) as raised:
        run_local(planning, Options(jobs=1), Options().plan(), None, strict=False)
    assert str(inputs[1]) in str(raised.value) and "written before it" not in str(raised.value)
