"""What every storage format offers: the one small interface behind which each module of
this package reads and writes histories, and the errors they raise.

A format module (``jsonl.py``, ``parquet.py``, ...) defines ``FORMAT``, a :class:`Format`:
its name, the suffixes that tell it, and ``open``, which turns a path (or URL) and a
:class:`Destination` into :class:`Input`\\ s. An :class:`Input` is one opened input (a file, a
table): it splits itself into :class:`Task`\\ s (``tasks``), which run on worker processes
(``Task.run``: read the task's records or cells with their locations, put them through the
engine's record loop, return a :class:`TaskResult`), and takes each result back, in order
(``write``), to the output; leaving its ``with`` block commits what it wrote (a temporary
file renamed, a transaction committed), or, on an error, rolls it back.
"""

from __future__ import annotations

import importlib
import itertools
import os
import stat
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from histmig.engine import Processor
    from histmig.report import Report


class Job(Protocol):
    """What a task's records go through, the same in every worker: a
    :class:`~histmig.engine.Plan` (migration), or an OpenTelemetry export
    (:mod:`histmig.otel.jobs`)."""

    def processor(self) -> Processor:
        """A fresh record processor (:class:`~histmig.engine.Processor`) for one task."""
        ...


@dataclass
class TaskResult:
    """What a task came to, sent back from its worker: its ``report`` (an in-memory
    :class:`~histmig.report.Report`, merged in task order), ``last``, where its last record
    was (``line 12``), and what the format needs to write it back (in subclasses)."""

    report: Report
    last: str | None = None


class Task(ABC):
    """A piece of an input that one worker handles: small and picklable (it says where its
    records lie, or carries them when no worker could read them itself)."""

    size: int = 0
    """Input bytes it covers, for a progress bar."""

    @abstractmethod
    def run(self, job: Job, slot: memoryview | None) -> TaskResult:
        """In a worker (or this process): read the task's records, put them through
        ``job``'s processor with :func:`~histmig.engine.run_records`, and return the result;
        ``slot`` is shared memory the result may put bytes in (see
        :class:`~histmig.parallel.Slots`)."""

    def sent(self) -> Task:
        """The task as a worker is sent it (without data a worker reads itself)."""
        return self

    @property
    def depth(self) -> int:
        """Tasks like it a worker may hold at once: 1 for one carrying its data (see
        :class:`~histmig.parallel.Workers`), else 2."""
        return 2


@dataclass
class Destination:
    """Where a command writes: ``output`` (a path, ``-`` for stdout, or ``None`` for
    ``audit``/``check``), ``rejects`` (where rejected records go: a path, ``-`` for stdout,
    or ``None``: nowhere else, they stay in the output unchanged), ``in_place`` (over the
    input itself), ``to_table`` (a new table of a database input; an existing one is
    replaced only with ``overwrite``), and whether rejected records with nowhere else to go
    stay in the output unchanged (``keep_rejected``; an export leaves them out). The run
    plan (:mod:`histmig.run.plan`) gives each input its own destination, its paths and the
    format its output file is ``written_as`` (a format's name) decided by the one rule of
    :mod:`histmig.run.outputs`; a source writes what its destination says."""

    output: str | None = None
    rejects: str | None = None
    in_place: bool = False
    to_table: str | None = None
    keep_rejected: bool = True
    overwrite: bool = False
    written_as: str | None = None

    @property
    def writes(self) -> bool:
        """Whether anything is written."""
        return self.output is not None or self.in_place or self.to_table is not None


@dataclass(frozen=True)
class Skipped:
    """A row a database input did not write because another client wrote it after histmig
    read it (the UPDATE is conditional on the value read), or wrote a row of its
    ``conversation`` (``--conversation``: written whole or not at all): the row's ``source``
    (the table), ``location`` (its key, ``id=42``) and ``id`` (``--id-column``), as in a
    report row."""

    source: str
    location: str
    id: str | None = None
    conversation: bool = False


@dataclass
class Written:
    """What an input wrote, for the verdict line: where ``rejected`` records went (a path,
    ``stdout``, ``"in place"``: unchanged among the output's records, ``"rows"``: unchanged in
    their rows, or ``None``: nowhere), whether the output was ``withheld`` (a ``.json``
    document whose one record was rejected), whether a record was written to the rejects
    file (``rejects_used``), the rows ``skipped`` (:class:`Skipped`; added to the report)
    and, for a table written in place, how the verdict names it (``named``: without the
    password a database URL may hold), and ``notes`` for the user (how a table's rows were
    told apart; a table read in conversation order without an index that gives it); for an input
    that changed while it was read in place (:class:`~histmig.errors.InputChanged`), where its
    migrated copy was left instead (``kept``); for a ``--to-table`` table, what of the table read
    it does not have (``not_copied``: ``2 foreign keys``, ``1 trigger``)."""

    rejected: str | None = None
    withheld: bool = False
    rejects_used: bool = False
    skipped: list[Skipped] = field(default_factory=list)
    named: str | None = None
    notes: list[str] = field(default_factory=list)
    kept: str | None = None
    not_copied: tuple[str, ...] = ()


class Input(ABC):
    """One opened input of one format; used as a context manager around the run, which
    commits what :meth:`write` wrote when the block ends without an exception and rolls it
    back otherwise.

    ``name`` names it in every report row; ``size`` is its bytes for a progress bar (``None``
    when unknown); ``window`` the tasks per worker in flight at most; ``slot_bytes`` the
    shared memory a task's result may use; ``in_process``: its tasks cannot go to workers (a
    database connection)."""

    name: str
    size: int | None = None
    window: int = 4
    slot_bytes: int = 0
    in_process: bool = False

    def __enter__(self) -> Input:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        self.close(ok=kind is None)

    @abstractmethod
    def tasks(self) -> Iterator[Task]:
        """The input's tasks, in order. Raises :class:`InputEnded` after yielding every task
        read before, when the input cannot be read to its end."""

    # not abstract: audit and check write nothing
    def write(self, task: Task, result: TaskResult, slot: memoryview | None) -> None:  # noqa: B027
        """Write ``task``'s ``result`` (in task order) to the output, if there is one;
        ``slot`` is the task's shared memory."""

    def close(self, ok: bool) -> None:  # noqa: B027 (an input that writes nothing has nothing to close)
        """Commit what was written (``ok``) or roll it back."""

    def written(self) -> Written:
        """What was written, once closed."""
        return Written()


Opener = Callable[[str, Destination, Any, Job], list[Input]]
"""``open(path, destination, options, job)``: the :class:`Input`\\ s of a path (a Parquet
directory holds several files) for a run whose records go through ``job``, ``options`` being
the command's :class:`~histmig.options.Options` (the format's own options: a table, a column).
Raises :class:`UnreadableInput`, :class:`UnwritableOutput` or :class:`UsageError`."""


@dataclass(frozen=True)
class Format:
    """A storage format, as its module declares it: ``name`` (``--format``), the
    ``suffixes`` that tell it from a path's name, ``claims`` (a path that is this format
    whatever its name: a URL, a file's first bytes), the output formats an input of it can
    be ``written_as`` (the first when an output's name says none), ``open``
    (:data:`Opener`), whether it is a ``columnar`` format (a column of histories among
    other columns, named with ``--messages-column``), and whether the files of a
    directory given as INPUT are read as this format when their names tell it
    (``in_directories``: files, not databases that need ``--table``). A database format
    says how two of its table names compare (``same_table``: exactly, or as
    :func:`same_folded`) and how a location is named in an error line (``display``: a URL
    without its password; ``None``: as it is). ``open_together`` opens the files of a run,
    each with its destination, as one input, for ``--conversation`` (a conversation's records
    may be in any of them: a Parquet directory); a format without it groups within one file.
    A database file's ``companions`` are the suffixes of the files beside it that hold its
    data too (SQLite's ``-wal``, ``-journal``): a run writes none of them. The options a format
    takes are declared with them, on :class:`~histmig.options.Options` (each flag's
    ``formats`` names the formats it applies to); a format's ``open`` reads them from the
    ``options`` it is given."""

    name: str
    suffixes: tuple[str, ...]
    open: Opener
    written_as: tuple[str, ...]
    claims: Callable[[str], bool] | None = None
    columnar: bool = False
    description: str = ""
    in_directories: bool = False
    same_table: Callable[[str, str], bool] | None = None
    display: Callable[[str], str] | None = None
    open_together: Callable[[list[tuple[str, Destination]], Any, Job], list[Input]] | None = None
    companions: tuple[str, ...] = ()

    def named(self, path: str) -> bool:
        """Whether ``path``'s name ends in one of the suffixes (any case)."""
        return path.lower().endswith(self.suffixes)

    def suffix_of(self, path: str) -> str:
        """The first of the suffixes ``path``'s name ends in (any case), ``''`` for none."""
        return next((suffix for suffix in self.suffixes if path.lower().endswith(suffix)), "")


def folded(name: str) -> bytes:
    """A table name as SQLite and DuckDB compare names: ASCII letters in either case alike,
    every other character as it is (``"Chats"`` and ``"chats"`` are one table there,
    ``"Äb"`` and ``"äb"`` two)."""
    return name.encode().lower()


def free_name(name: str, taken: Iterable[str | None]) -> str:
    """``name``, or ``name_2``, ``name_3``...: the first none of ``taken`` names, as SQLite
    and DuckDB compare names (:func:`folded`). histmig's own tables, views and columns take
    such a name, ``taken`` being the database's names and the run's, so that one never
    stands for a user's, nor a user's for one of them (``--to-table __histmig_changes``)."""
    used = {folded(other) for other in taken if other is not None}
    return next(c for n in itertools.count(1) if folded(c := name if n == 1 else f"{name}_{n}") not in used)


def same_folded(one: str, other: str) -> bool:
    """Whether two table names are one table as SQLite and DuckDB compare them
    (:func:`folded`), quoted or not."""
    return folded(one) == folded(other)


def starts_with(path: str, magic: bytes, offset: int = 0) -> bool:
    """Whether ``path`` is a regular file holding ``magic`` at byte ``offset`` (a format's
    :attr:`Format.claims` by its first bytes: a SQLite or DuckDB file, whatever its name)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False  # a FIFO (``<(zcat chats.gz)``) read here would lose its first bytes to the real read
        with open(path, "rb") as stream:
            return stream.read(offset + len(magic))[offset:] == magic
    except OSError:
        return False


def lazy(name: str) -> ModuleType:
    """Module ``name``, imported when one of its attributes is first used: a format module
    keeps its heavy libraries (pyarrow, duckdb) out of a run that never needs them, and is
    still found by the registry at start-up."""
    return _Lazy(name)  # type: ignore[return-value]  # stands in for the module


class _Lazy:
    """A stand-in for a module, imported on first attribute access (see :func:`lazy`)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        value = getattr(importlib.import_module(self._name), attribute)
        setattr(self, attribute, value)
        return value
