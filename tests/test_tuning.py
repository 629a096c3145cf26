"""Process tuning (histmig.tuning): glibc keeps some freed heap; a command-line run on a
columnar input has Arrow use its jemalloc pool; the library and JSONL runs leave the pool
alone."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from histmig import tuning
from tests.conftest import CORPUS
from tests.sources.conftest import corpus_records, table_of, write_parquet

BUILT_WITH_JEMALLOC = (
    "#define ARROW_JEMALLOC\n"
    in (Path(__import__("pyarrow").__file__).parent / "include" / "arrow" / "util" / "config.h").read_text()
)


def backend_after(code: str, **env: str) -> str:
    """What ``code`` (run in a fresh interpreter, ``env`` added) leaves as pyarrow's default
    memory pool backend."""
    environment = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"} | env
    script = f"{code}\nimport pyarrow as pa\nprint(pa.default_memory_pool().backend_name)"
    return subprocess.run(
        [sys.executable, "-c", script], env=environment, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_jemalloc_is_chosen_before_pyarrow_is_imported() -> None:
    default = backend_after("pass")
    assert backend_after("from histmig.tuning import use_jemalloc; use_jemalloc()") == (
        "jemalloc" if BUILT_WITH_JEMALLOC else default
    )
    assert backend_after("import histmig.api, histmig.sources.parquet") == default


def test_a_pool_the_user_chose_is_kept() -> None:
    assert (
        backend_after("from histmig.tuning import use_jemalloc; use_jemalloc()", ARROW_DEFAULT_MEMORY_POOL="system")
        == "system"
    )


def test_nothing_is_set_once_pyarrow_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    assert "pyarrow" in sys.modules
    tuning.use_jemalloc()
    assert "ARROW_DEFAULT_MEMORY_POOL" not in os.environ


@pytest.mark.parametrize("config", ["#define ARROW_MIMALLOC\n", None])
def test_nothing_is_set_for_a_build_without_jemalloc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str | None
) -> None:
    if config is not None:
        (tmp_path / "include" / "arrow" / "util").mkdir(parents=True)
        (tmp_path / "include" / "arrow" / "util" / "config.h").write_text(config)
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    monkeypatch.delitem(sys.modules, "pyarrow")
    monkeypatch.setattr(
        tuning.importlib.util, "find_spec", lambda name: SimpleNamespace(submodule_search_locations=[str(tmp_path)])
    )
    tuning.use_jemalloc()
    assert "ARROW_DEFAULT_MEMORY_POOL" not in os.environ


def test_the_cli_chooses_it_for_parquet_only(tmp_path: Path) -> None:
    source = write_parquet(tmp_path / "chats.parquet", table_of(corpus_records(), nested=False))
    code = (
        "import sys, os\nfrom histmig.cli import app\n"
        "sys.argv = ['histmig', 'audit', sys.argv[1], '-q']\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        "print(os.environ.get('ARROW_DEFAULT_MEMORY_POOL'), 'pyarrow' in sys.modules)"
    )
    environment = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    run = lambda path: subprocess.run(
        [sys.executable, "-c", code, str(path)], env=environment, capture_output=True, text=True, check=True
    ).stdout.split()  # noqa: E731
    assert run(source) == (["jemalloc", "True"] if BUILT_WITH_JEMALLOC else ["None", "True"])
    assert run(CORPUS / "all.jsonl") == ["None", "False"]


class _Libc:
    """A C library stand-in recording the ``mallopt`` calls made to it."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return 1


def test_keep_heap_slack_asks_glibc_for_its_top_pad_and_mmap_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    libc = _Libc()
    monkeypatch.setattr(ctypes, "CDLL", lambda name: libc if name is None else None)
    tuning.keep_heap_slack()
    assert libc.calls == [(-2, 16 << 20), (-3, 4 << 20)]


@pytest.mark.parametrize("where", ["no mallopt (macOS, musl)", "no CDLL(None) (Windows)", "no ctypes"])
def test_keep_heap_slack_does_nothing_where_it_cannot(monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    asked: list[object] = []

    def cdll(name: object) -> object:
        asked.append(name)
        if where.startswith("no CDLL"):
            raise TypeError("expected str, got NoneType")  # what Windows' CDLL(None) raises
        return object()  # a C library without mallopt

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    if where == "no ctypes":
        monkeypatch.setitem(sys.modules, "ctypes", None)
    assert tuning.keep_heap_slack() is None
    assert asked == ([] if where == "no ctypes" else [None])


def test_tune_allocators_sets_what_the_environment_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MIMALLOC_PURGE_DELAY", raising=False)
    monkeypatch.setenv("MIMALLOC_ARENA_EAGER_COMMIT", "1")
    tuning.tune_allocators()
    assert (os.environ["MIMALLOC_PURGE_DELAY"], os.environ["MIMALLOC_ARENA_EAGER_COMMIT"]) == ("100", "1")
