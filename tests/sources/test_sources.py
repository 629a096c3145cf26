"""The formats registry (histmig.sources): a path's format, what an output is written as, and a
format added as one module, picked up by every command with no other edit."""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

import histmig.sources
from histmig import api
from histmig.cli import app
from histmig.errors import UnreadableInput, UsageError
from histmig.sources import expands, format_of, formats, input_paths, output_format, output_paths
from tests.conftest import CORPUS


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("a.jsonl", "jsonl"),
        ("A.NDJSON.GZ", "jsonl"),
        ("h.json", "json"),
        ("h.json.gz", "json"),
        ("c.parquet", "parquet"),
        ("c.pq", "parquet"),
        ("c.duckdb", "duckdb"),
        ("c.db", "duckdb"),
        ("c.sqlite", "sqlite"),
    ],
)
def test_a_path_names_its_format(tmp_path: Path, path: str, name: str) -> None:
    (tmp_path / path).touch()
    assert format_of(str(tmp_path / path)).name == name
    assert format_of("-").name == "jsonl"


def test_a_missing_path_is_said_missing_and_an_explicit_format_wins(tmp_path: Path) -> None:
    (tmp_path / "x.txt").touch()
    assert format_of(str(tmp_path / "x.txt"), "json").name == "json"
    with pytest.raises(UnreadableInput, match="x.txt: cannot tell the format from the name"):
        format_of(str(tmp_path / "x.txt"))
    with pytest.raises(UnreadableInput, match="chast.jsonl: no such file or directory"):
        format_of(str(tmp_path / "chast.jsonl"))
    with pytest.raises(UsageError, match="unknown format 'yaml'"):
        format_of("x.txt", "yaml")


def test_a_directory_is_its_input_files_each_in_its_own_format(tmp_path: Path) -> None:
    for name in (
        "b.jsonl",
        "a.json",
        "c.parquet",
        "d.txt",
        ".e.jsonl.tmp",
        "f.jsonl.rejects.jsonl",
        "g.duckdb",
        ".hidden.json",
    ):
        (tmp_path / name).touch()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.jsonl").touch()
    found = [(Path(path).name, fmt.name) for path, fmt in input_paths([str(tmp_path)])]
    assert found == [("a.json", "json"), ("b.jsonl", "jsonl"), ("c.parquet", "parquet")]
    every = [Path(path).name for path, fmt in input_paths([str(tmp_path)], "jsonl")]
    assert every == ["a.json", "b.jsonl", "c.parquet", "d.txt", "g.duckdb"]
    globbed = [(Path(path).name, fmt.name) for path, fmt in input_paths([str(tmp_path / "*.json*"), "-"])]
    assert globbed == [("a.json", "json"), ("b.jsonl", "jsonl"), ("f.jsonl.rejects.jsonl", "jsonl"), ("-", "jsonl")]
    assert (
        expands(str(tmp_path))
        and expands(str(tmp_path / "*.json"))
        and not expands(str(tmp_path / "a.json"))
        and not expands("-")
    )


@pytest.mark.parametrize(
    ("name", "said"), [("empty", "no input in this directory (files ending in"), ("none-*.jsonl", "no file matches")]
)
def test_a_directory_or_glob_that_names_no_input_is_unreadable(tmp_path: Path, name: str, said: str) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").touch()
    with pytest.raises(UnreadableInput, match=re.escape(said)):
        input_paths([str(tmp_path / name)])


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


TOY = '''
"""A toy format: histories one a line, behind a ``.toy`` name, read and written in this process."""
from collections.abc import Iterator
from dataclasses import dataclass, field

from histmig.engine import run_records
from histmig.records import Record
from histmig.report import Report
from histmig.sources.atomic import atomic_output
from histmig.sources.base import Format, Input, Task, TaskResult


@dataclass
class ToyResult(TaskResult):
    outputs: list = field(default_factory=list)


@dataclass(frozen=True)
class ToyTask(Task):
    lines: tuple
    source: str

    def run(self, job, slot):
        result = ToyResult(Report.in_memory())
        outputs = {}
        def keep(n, outcome):
            outputs[n] = outcome.output if outcome.status == "changed" else None
            return outcome
        run_records(((line, n) for n, line in enumerate(self.lines, 1)), job.processor(), result.report, lambda raw, n: Record(raw, self.source, f"toy {n}"), keep)
        result.outputs = [outputs.get(n) or line for n, line in enumerate(self.lines, 1)]
        return result


class ToyInput(Input):
    in_process = True

    def __init__(self, path, target):
        self.name, self.size, self._output = path, None, target.output

    def tasks(self):
        with open(self.name, "rb") as stream:
            yield ToyTask(tuple(stream.read().splitlines()), self.name)

    def write(self, task, result, slot):
        if self._output is not None:
            with atomic_output(self._output) as out:
                out.write(b"".join(line + b"\\n" for line in result.outputs))


FORMAT = Format(name="toy", suffixes=(".toy",), open=lambda path, target, options, job: [ToyInput(path, target)], written_as=("toy",), description="toy")
'''


@pytest.fixture
def toy_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A format added as one module (``toyformat.py``) in a folder on the sources package's
    path; the registry is found again before and after."""
    folder = tmp_path / "formats"
    folder.mkdir()
    (folder / "toyformat.py").write_text(textwrap.dedent(TOY))
    monkeypatch.setattr(histmig.sources, "__path__", [*histmig.sources.__path__, str(folder)])
    formats.cache_clear()
    yield tmp_path
    formats.cache_clear()
    sys.modules.pop("histmig.sources.toyformat", None)


def test_a_format_added_as_one_module_serves_every_command(toy_format: Path) -> None:
    lines = (CORPUS / "all.jsonl").read_bytes().splitlines()[:20]
    source, out = toy_format / "chats.toy", toy_format / "chats.v2.toy"
    source.write_bytes(b"\n".join(lines) + b"\n")
    assert format_of(str(source)).name == "toy"
    converted = api.convert(str(source), str(out))
    assert converted.report.counts["changed"] > 0 and converted.exit_code == 0
    expected = api.convert(str(CORPUS / "all.jsonl"), str(toy_format / "all.jsonl")).report
    assert out.read_bytes().splitlines() == (toy_format / "all.jsonl").read_bytes().splitlines()[:20]
    assert api.check(str(out)).exit_code == 0 and expected.counts["records_in"] == 212
    runner = CliRunner()
    checked = runner.invoke(app, ["check", str(source), "--report", "-", "--report-format", "json"])
    assert checked.exit_code == 1
    assert orjson.loads(checked.stdout)["changes"][0]["key"] == "toy 1"
    assert (
        runner.invoke(app, ["convert", str(source), str(toy_format / "x.jsonl")]).exit_code == 2
    )  # a toy input is written as toy
