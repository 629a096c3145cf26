"""Process tuning, in one place: how the command line sets up the C library's heap and
Arrow's memory pool before a run. The library (:mod:`histmig.api`) leaves a program's process
as it finds it; the command line and the workers it forks call these.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

HEAP_SLACK = 16 << 20
"""Bytes of freed heap a process keeps (glibc ``M_TOP_PAD``, :func:`keep_heap_slack`)."""

HEAP_BLOCK = 4 << 20
"""Blocks up to this size come from the heap, larger ones from ``mmap`` (glibc
``M_MMAP_THRESHOLD``, :func:`keep_heap_slack`)."""


def keep_heap_slack() -> None:
    """Have glibc's malloc keep :data:`HEAP_SLACK` bytes of freed heap
    (``mallopt(M_TOP_PAD)``, default 128 KB) and serve blocks up to :data:`HEAP_BLOCK` from
    the heap (``M_MMAP_THRESHOLD``). A record's objects and its output are freed after each
    record, and a chunk's 1 MB buffers after each chunk; by default the top of the heap is
    given back to the kernel and faulted in again at the next record, which on jsonl 100 %
    cost a worker 0.3-0.6 s of kernel time of a 3-4 s run (~0.1 s with 16 or 64 MB of
    slack, 0.3 s with 4 MB; wall time -7 %). Setting ``M_TOP_PAD`` turns off glibc's own
    raising of the mmap threshold, which would leave every 1 MB buffer to a fresh ``mmap``
    (the parent's kernel time on jsonl 1 % 0.2 -> 0.4 s), hence the threshold. Peak RSS
    grows by at most the slack actually used. Called by the CLI before a run and by each
    worker (a library caller's process is left as it is, but for the workers it forks); calling it again changes
    nothing. Does nothing where the C library has no ``mallopt`` (musl, macOS, Windows) or
    Python has no ``ctypes``."""
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (ImportError, OSError, AttributeError, TypeError):
        return
    mallopt(_M_TOP_PAD, HEAP_SLACK)
    mallopt(_M_MMAP_THRESHOLD, HEAP_BLOCK)


_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
"""glibc's ``mallopt`` parameter numbers (malloc.h)."""


ARROW_ALLOCATOR = {"MIMALLOC_PURGE_DELAY": "100", "MIMALLOC_ARENA_EAGER_COMMIT": "0"}
"""How :func:`tune_allocators` configures mimalloc, pyarrow's memory pool, unless the environment does:
freed memory goes back to the system after 0.1 s (not 1 s) and is committed only when
used. Measured on Parquet inputs: peak RSS 15-20 MB lower at the same speed (a delay of 0
saves 10 MB more but costs 5-10 % of the time)."""


def tune_allocators() -> None:
    """Set :data:`ARROW_ALLOCATOR` in the environment, unless it is set already; it takes
    effect when pyarrow is loaded (only a columnar input loads it). Called by the command
    line at start-up."""
    for name, value in ARROW_ALLOCATOR.items():
        os.environ.setdefault(name, value)


def use_jemalloc() -> None:
    """Have Arrow's jemalloc pool be the default memory pool of this process and of the
    workers it forks, for a command-line run on a columnar input: sets
    ``ARROW_DEFAULT_MEMORY_POOL=jemalloc``, which Arrow reads once, when pyarrow is imported;
    so it does nothing once pyarrow is imported, when the variable is set already, or when
    pyarrow's build has no jemalloc (its ``arrow/util/config.h`` says; Arrow would warn).
    pyarrow 26's default, mimalloc, gives freed pages back to the kernel and faults them in
    again: in a fresh install, the bench's Parquet 10 % archive took 1.20 s (0.5 s of it in
    the kernel), 1.00 s with jemalloc, and the 1.1 GB file 7.7 s against 7.2 s, at 139-142 MB
    peak RSS either way (set after the import, 150-154 MB: mimalloc has started by then).
    Not done by the library (:mod:`histmig.api`): the pool of a program that
    imports histmig is its own."""
    if "ARROW_DEFAULT_MEMORY_POOL" in os.environ or "pyarrow" in sys.modules:
        return
    spec = importlib.util.find_spec("pyarrow")
    if spec is None or not spec.submodule_search_locations:
        return
    config = Path(spec.submodule_search_locations[0], "include", "arrow", "util", "config.h")
    try:
        if "#define ARROW_JEMALLOC\n" in config.read_text(errors="replace"):
            os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "jemalloc"
    except OSError:
        return
