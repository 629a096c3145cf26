"""Where each input is written (histmig.run.outputs): the one rule of README "Outputs" and the
format each output is written as."""

from __future__ import annotations

from pathlib import Path

import pytest

from histmig.errors import UsageError
from histmig.run.outputs import output_format, output_paths
from histmig.sources import format_of, formats


def _inputs(tmp_path: Path, *names: str) -> list:
    for name in names:
        (tmp_path / name).touch()
    return [(str(tmp_path / name), format_of(str(tmp_path / name))) for name in names]


def test_one_input_is_written_to_the_file_output_names(tmp_path: Path) -> None:
    one = _inputs(tmp_path, "a.jsonl")
    assert output_paths(one, "o.jsonl.gz", False) == (["o.jsonl.gz"], None)
    assert output_paths(one, "-", False) == (["-"], None)
    (tmp_path / "out").mkdir()
    assert output_paths(one, str(tmp_path / "out"), False) == (
        [str(tmp_path / "out" / "a.jsonl")],
        str(tmp_path / "out"),
    )
    assert output_paths(one, "new/", False) == (["new/a.jsonl"], "new/")
    assert output_paths(_inputs(tmp_path, "c.duckdb"), "dir/", False) == (["dir/c.parquet"], "dir/")
    with pytest.raises(UsageError, match="choose an output name that says so"):
        output_paths(one, "o.parquet", False)


def test_several_inputs_are_written_into_a_directory_under_their_own_names(tmp_path: Path) -> None:
    several = _inputs(tmp_path, "a.jsonl", "b.json", "c.parquet")
    assert output_paths(several, "lake2", True) == (["lake2/a.jsonl", "lake2/b.json", "lake2/c.parquet"], "lake2")
    with pytest.raises(
        UsageError,
        match="lake.jsonl: several inputs are written into a directory, each under its own name; this name is a JSONL file's",
    ):
        output_paths(several, "lake.jsonl", True)
    (tmp_path / "file").touch()
    with pytest.raises(UsageError, match="and this is a file"):
        output_paths(several, str(tmp_path / "file"), True)
    with pytest.raises(UsageError, match="several inputs go to stdout only when every one is JSONL"):
        output_paths(several, "-", True)
    (tmp_path / "sub").mkdir()
    with pytest.raises(
        UsageError, match=r"a.jsonl is given twice \(by two INPUTs, a directory or a glob\): give it once"
    ):
        output_paths([*several[:1], *several[:1]], "lake2", True)
    clash = [*several[:1], *_inputs(tmp_path, "sub/a.jsonl")]
    with pytest.raises(UsageError, match=r"a.jsonl and .*sub/a.jsonl would both be written as a.jsonl"):
        output_paths(clash, "out", True)
    lines = _inputs(tmp_path, "x.jsonl", "y.ndjson")
    assert output_paths(lines, "-", True) == (["-", "-"], None)


@pytest.mark.parametrize(
    ("source", "output", "written_as"),
    [
        ("jsonl", "o.jsonl", "jsonl"),
        ("jsonl", "o.jsonl.gz", "jsonl"),
        ("jsonl", "o.txt", "jsonl"),
        ("jsonl", "-", "jsonl"),
        ("json", "o.json", "json"),
        ("json", "-", "json"),
        ("parquet", "o.parquet", "parquet"),
        ("parquet", "lake", "parquet"),
        ("parquet", "o.jsonl", "jsonl"),
        ("duckdb", "o.pq", "parquet"),
        ("jsonl", "o.json", UsageError),
        ("json", "o.jsonl", UsageError),
        ("jsonl", "o.parquet", UsageError),
        ("parquet", "o.json", UsageError),
        ("parquet", "o.txt", UsageError),
        ("parquet", "-", UsageError),
    ],
)
def test_what_an_output_is_written_as(source: str, output: str, written_as: object) -> None:
    if written_as is UsageError:
        with pytest.raises(UsageError):
            output_format(formats()[source], output)
    else:
        assert output_format(formats()[source], output) == written_as
