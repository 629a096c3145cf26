"""The formats registry (histmig.sources): a path's format, and a format added as one module,
picked up by every command with no other edit."""

from __future__ import annotations

import os
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
from histmig.run.outputs import output_paths
from histmig.sources import expands, format_of, formats, input_paths, partition_of, partitions, root, unread_folders
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


def test_a_directory_or_a_glob_names_the_root_its_files_keep_their_folders_under(tmp_path: Path) -> None:
    (tmp_path / "a.json").touch()
    assert root(str(tmp_path)) == str(tmp_path)
    assert root(str(tmp_path / "v*" / "*.json")) == str(tmp_path)
    assert root(str(tmp_path / "c" / "d*" / "e" / "*.json")) == str(tmp_path / "c")
    assert (root("*.jsonl"), root("/*.jsonl")) == (".", "/")
    assert (root(str(tmp_path / "a.json")), root("-")) == (None, None)


def test_the_subdirectories_a_directory_input_does_not_read_are_told_with_the_glob_that_reads_them(
    tmp_path: Path,
) -> None:
    """Folders of input files that are no partition directories (the tree a glob's convert
    writes), within partition directories too; not hidden ones, nor folders of other files."""
    for name in ("top.jsonl", "v1/a.json", "k=1/v2/b.jsonl.gz", ".git/c.json", "_tmp/d.json", "docs/e.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).touch()
    assert unread_folders(str(tmp_path)) == (
        [str(tmp_path / "k=1" / "v2"), str(tmp_path / "v1")],
        f"'{tmp_path}/*/*/*.jsonl.gz'",
    )
    assert unread_folders(str(tmp_path / "v1")) == ([], "")
    (tmp_path / "top.jsonl").unlink()
    (tmp_path / "k=1" / "v2" / "b.jsonl.gz").unlink()
    with pytest.raises(UnreadableInput, match=re.escape(f"a quoted glob, '{tmp_path}/*/*.json';")):
        input_paths([str(tmp_path)])  # no input of its own: the error names the glob


def test_a_fifo_a_directory_or_glob_names_as_an_input_is_refused_not_left_out(tmp_path: Path) -> None:
    """A FIFO named as an input file of a directory or a glob is said, not skipped unsaid (its
    reader would wait for a writer); one of another name is no input, and a broken link is none."""
    (tmp_path / "a.jsonl").touch()
    os.mkfifo(tmp_path / "notes")
    (tmp_path / "gone.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    assert [Path(path).name for path, _ in input_paths([str(tmp_path)])] == ["a.jsonl"]
    assert [Path(path).name for path, _ in input_paths([str(tmp_path / "*.jsonl")])] == ["a.jsonl"]
    os.mkfifo(tmp_path / "b.jsonl")
    said = f"{tmp_path / 'b.jsonl'}: not a regular file (a FIFO, a socket or a device): give it as an INPUT"
    for given in (str(tmp_path), str(tmp_path / "*.jsonl")):
        with pytest.raises(UnreadableInput, match=re.escape(said)):
            input_paths([given])


@pytest.mark.parametrize(
    ("name", "said"), [("empty", "no input in this directory (files ending in"), ("none-*.jsonl", "no file matches")]
)
def test_a_directory_or_glob_that_names_no_input_is_unreadable(tmp_path: Path, name: str, said: str) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").touch()
    with pytest.raises(UnreadableInput, match=re.escape(said)):
        input_paths([str(tmp_path / name)])


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


def test_a_partitioned_directory_is_every_file_of_its_partition_directories(tmp_path: Path) -> None:
    for name in ("region=eu/day=01/b.parquet", "region=eu/day=01/a.jsonl", "region=us/day=1/c.parquet", "top.jsonl"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).touch()
    for hidden in ("region=eu/_SUCCESS", "region=eu/.c.crc", "plain/x.jsonl", "region=eu/day=01/x.jsonl.rejects.jsonl"):
        (tmp_path / hidden).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / hidden).touch()
    found = input_paths([str(tmp_path)])
    names = [str(Path(path).relative_to(tmp_path)) for path, _ in found]
    assert names == ["region=eu/day=01/a.jsonl", "region=eu/day=01/b.parquet", "region=us/day=1/c.parquet", "top.jsonl"]
    outputs, directory = output_paths(found, "out", True, [str(tmp_path)])
    assert (outputs, directory) == (["out/" + name for name in names], "out")
    assert partitions(found[2][0], str(tmp_path)) == [("region", "us"), ("day", "1")]
    assert partitions(found[3][0], str(tmp_path)) == []
    assert [partition_of(name) for name in ("day=01", "k=", "=v", "_k=v", "plain", "a=b=c")] == [
        ("day", "01"),
        ("k", ""),
        None,
        None,
        None,
        ("a", "b=c"),
    ]
