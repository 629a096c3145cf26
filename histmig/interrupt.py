"""Ctrl-C (SIGINT): a run it stops says so in one line and exits 130, nothing else; a run
whose write was committed is not stopped any more, and ends as a finished run.

A terminal sends SIGINT to the whole process group: the workers (:mod:`histmig.parallel`)
ignore it (:func:`in_worker`) and are stopped by the parent, which is interrupted once
(``KeyboardInterrupt``, raised where it is, so that every transaction is rolled back and
every temporary file removed on the way out). From the moment an input's commit begins
(:func:`commit_begins`: a database's ``COMMIT``) to the end of the run (:func:`run`), SIGINT
is ignored: the commit is not cut half-way, and the report, verdict and exit code of a run
that wrote its table are those of the run, not 130.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

EXIT_INTERRUPTED = 130
"""The exit code of an interrupted run (128 + SIGINT, as a shell sets it)."""

SAID = "histmig: interrupted"
"""The line an interrupt is said in on stderr (with what it left, when an input says)."""


class Interrupted(KeyboardInterrupt):
    """An interrupt, said with what the input it stopped left (``x.duckdb:t is as it was``)."""


_runs = 0
"""How many :func:`run` blocks this process is in."""

_received = False
"""Whether SIGINT came during the outermost :func:`run` (:func:`received`)."""


def in_worker() -> None:
    """In a worker process: ignore SIGINT (the parent, interrupted as well, stops the worker)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def received() -> bool:
    """Whether SIGINT came during this run: a driver interrupted by it reports an error of
    its own (DuckDB's ``RuntimeError('Query interrupted')``, then a ``TransactionException``
    for each statement of the transaction it aborted), which :func:`reraise` then says as
    the interrupt it is."""
    return _received


def reraise(error: BaseException) -> None:
    """Raise ``KeyboardInterrupt`` (from ``error``) when SIGINT came during this run: the
    error a driver raised is then that interrupt."""
    if _received:
        raise KeyboardInterrupt from error


def before_run(signum: int, frame: object) -> None:
    """The SIGINT handler while the command line is imported and built, nothing begun: say
    the interrupt (:data:`SAID`) and exit 130 at once (a ``KeyboardInterrupt`` there would
    end in a traceback). :func:`run` replaces it."""
    os.write(2, f"{SAID}\n".encode())
    os._exit(EXIT_INTERRUPTED)


def _interrupt(signum: int, frame: object) -> None:
    global _received
    _received = True
    raise KeyboardInterrupt


def commit_begins() -> None:
    """An input's commit begins: from here to the end of the outermost :func:`run`, SIGINT
    is ignored (in the main thread, the one Python gives signals to; elsewhere nothing
    changes)."""
    if _runs and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def run() -> Iterator[None]:
    """A run: SIGINT raises ``KeyboardInterrupt`` and is remembered (:func:`received`), when
    it would raise it anyway (Python's own handler, or :func:`before_run`; a program's own
    handler is left alone);
    the handler it begins with is the one it ends with, once the outermost of nested runs
    ends (:func:`commit_begins` changes it). Only in the main thread, the one signals go to."""
    global _runs, _received
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main else None
    if main and not _runs:
        _received = False
        if previous in (signal.default_int_handler, before_run):
            signal.signal(signal.SIGINT, _interrupt)
    _runs += main
    try:
        yield
    finally:
        _runs -= main
        if main and not _runs and signal.getsignal(signal.SIGINT) is not previous:
            signal.signal(signal.SIGINT, previous)
