"""The error types (histmig.errors): each a class a caller tells apart without reading its
message, at the ground floor, and grouped as the exit codes are."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import pytest

import histmig.errors as errors
from histmig.errors import (
    ColumnError,
    InputEnded,
    MigrationError,
    SamePath,
    UnreadableInput,
    UnwritableOutput,
    UsageError,
)


def test_the_errors_module_imports_nothing_of_histmig() -> None:
    tree = ast.parse(Path(errors.__file__).read_text())
    imported = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert [getattr(node, "module", None) for node in imported] == ["__future__"]


@pytest.mark.parametrize(
    ("error", "base"),
    [
        (ColumnError, UnreadableInput),
        (UnreadableInput, OSError),
        (UnwritableOutput, OSError),
        (InputEnded, OSError),
        (SamePath, UsageError),
        (UsageError, ValueError),
        (MigrationError, ValueError),
    ],
)
def test_each_error_is_its_own_type_under_what_a_caller_catches(error: type, base: type) -> None:
    assert issubclass(error, base)


def test_same_path_names_both_files_and_keeps_them_apart() -> None:
    same = SamePath("--report", "link.jsonl", "the input", "in.jsonl")
    assert str(same) == "--report link.jsonl is the input in.jsonl (the same file); name another file"
    assert (same.what, same.written, same.whose, same.other) == ("--report", "link.jsonl", "the input", "in.jsonl")
    assert (
        str(SamePath("--rejects", "o.jsonl", "OUTPUT", "o.jsonl"))
        == "--rejects o.jsonl is OUTPUT o.jsonl; name another file"
    )


def test_a_migration_error_keeps_each_problem_line() -> None:
    error = MigrationError(["messages[0]: bad", "messages[1]: worse"])
    assert (str(error), error.errors) == (
        "messages[0]: bad; messages[1]: worse",
        ["messages[0]: bad", "messages[1]: worse"],
    )
    assert pickle.loads(pickle.dumps(UsageError("x"))).args == ("x",)


def test_partly_written_names_the_outputs_written_before_an_error_and_those_not() -> None:
    error = UnwritableOutput("out/b.parquet: is a directory")
    assert errors.partly_written(error, [], ["out/c.parquet"]) is error
    told = errors.partly_written(error, ["out/a.parquet"], ["out/c.parquet"])
    assert type(told) is UnwritableOutput and told.__cause__ is error
    assert str(told) == "out/b.parquet: is a directory; written before it: out/a.parquet; not written: out/c.parquet"
    full = errors.partly_written(OSError(28, "No space left on device", "out/e"), list("abcde"), [])
    assert (type(full), full.errno, full.filename) == (OSError, 28, "out/e")
    assert full.strerror == "No space left on device; written before it: a, b, c and 2 more"
    gone = errors.partly_written(FileNotFoundError(2, "No such file or directory", "x"), ["w"], ["y"])
    assert (
        type(gone) is FileNotFoundError
        and gone.strerror == "No such file or directory; written before it: w; not written: y"
    )
