"""Running the pipeline over a JSONL stream, chunk by chunk, on several cores, in order.

A chunk is the bytes of whole input lines (about :data:`CHUNK_BYTES` of them) and the
number of its first line. :func:`process_chunk` turns one into a :class:`ChunkResult`: the
edits (each migrated or rejected record's place in the chunk and its new bytes) and the
chunk's own report; :func:`write_chunk` writes the chunk with its edits applied, so a
record that needs nothing is never copied out of the chunk's bytes. With ``jobs``
above 1, :func:`map_chunks` hands the chunks to :class:`Workers`: ``jobs`` forked worker
processes, each with its own pipe, each task sent to the worker holding fewest. A chunk
that carries its bytes is sent only to a worker with nothing in flight (the parent receives
a worker's answer before sending it the next), so neither side can block writing to a full
pipe the other is not reading; a chunk of a regular file is a few bytes (the worker reads
the file itself), so each worker gets a second one queued and never waits for the parent
between chunks. The parent receives each answer as soon as it is ready, whichever worker
sent it (a worker whose answer fills its pipe would otherwise wait), and yields them in the
order the tasks were sent, so the output order is the input order; at most
``WINDOW * jobs`` chunks are in flight, so memory stays bounded. Up to 4 jobs, a worker
puts a chunk's migrated records in the chunk's slot of shared memory (:class:`Slots`) and
sends only where they are; records that do not fit, or more jobs, use the pipe. The parent does no per-record work: it reads lines, writes the chunk's
bytes and the edits, and merges the chunk reports. :class:`Workers` also runs the row
groups of a Parquet input (histmig.sources.parquet).
"""

from __future__ import annotations

import io
import mmap
import os
import pickle
import stat
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from multiprocessing import get_context
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, BinaryIO, Generic, NamedTuple, TypeVar

from histmig.pipeline import Options, Stream
from histmig.records import Record
from histmig.report import Report

CHUNK_BYTES = 1 << 20
"""Input bytes per chunk (whole lines; one long line makes a chunk of its own)."""

SLOT_BYTES = 2 * CHUNK_BYTES
"""Bytes of a :class:`Slots` slot: a chunk's migrated records, a little longer than the
records they replace, fit unless one line makes a chunk longer than this (or migrating
doubles the records); what does not fit crosses the pipe."""

SLOTS_MAX_BYTES = 32 << 20
"""Shared memory :func:`map_chunks` gives :class:`Slots` at most: with more than
``SLOTS_MAX_BYTES / (WINDOW * SLOT_BYTES)`` jobs (4) the results cross the pipes, so that
memory does not grow with the number of cores."""

WINDOW = 4
"""Tasks per worker that :meth:`Workers.map` has sent and not yet yielded, at most, unless
told otherwise (a JSONL chunk's result is at most about a chunk of bytes)."""

HEAP_SLACK = 16 << 20
"""Bytes of freed heap a process keeps (glibc ``M_TOP_PAD``, :func:`keep_heap_slack`)."""

HEAP_BLOCK = 4 << 20
"""Blocks up to this size come from the heap, larger ones from ``mmap`` (glibc
``M_MMAP_THRESHOLD``, :func:`keep_heap_slack`)."""

T = TypeVar("T")
R = TypeVar("R")


class WorkerDied(RuntimeError):
    """A worker process ended without answering a task (killed, out of memory)."""


@dataclass(frozen=True)
class Chunk:
    """Whole input lines as read, joined (``data``; the last line maybe without its
    ``\\n``), the 1-based number of the first one, and the source name used in error lines.
    When the input is a regular file, ``fd`` is its descriptor and ``offset`` where ``data``
    starts in it, so a worker reads the bytes itself (:meth:`bare`, :meth:`load`) instead of
    receiving them through a pipe; ``slot``, the :class:`Slots` slot a worker puts its
    migrated records in."""

    data: bytes
    first: int
    source: str
    fd: int | None = None
    offset: int = 0
    length: int = 0
    slot: int | None = None

    def bare(self) -> Chunk:
        """This chunk as sent to a worker: without ``data`` when the worker can read it."""
        return self if self.fd is None else replace(self, data=b"", length=len(self.data))

    def load(self) -> bytes:
        """The chunk's bytes: ``data``, or read from ``fd`` at ``offset`` for a bare chunk."""
        return self.data if self.fd is None or self.data else os.pread(self.fd, self.length, self.offset)


Edit = tuple[int, int, "bytes | memoryview | Placed | None"]
"""``(start, end, replacement)``: the record at ``data[start:end]`` of a chunk (without its
line end) is replaced by ``replacement`` (migrated records: their bytes, or, from a worker,
where in its :class:`Slots` slot it put them), or, when that is ``None``, was rejected.
Migrated records on consecutive lines make one edit, their outputs joined by ``\\n``
(:class:`_Edits`), so a chunk where every record changes is one edit."""


class Placed(NamedTuple):
    """A replacement a worker put in its chunk's :class:`Slots` slot instead of sending it:
    ``length`` bytes from ``offset`` in the slot."""

    offset: int
    length: int


class Slots:
    """Shared memory where workers put the migrated records of a chunk for the parent to
    write, instead of sending them through their pipe (which copies them four times on the
    way: into the pickle, into and out of the pipe, out of the pickle).

    An anonymous shared mapping of ``count`` slots of :data:`SLOT_BYTES`, made before the
    workers fork; the ``n``-th chunk uses slot ``n % count``. :meth:`Workers.map` has at
    most ``window * jobs`` chunks sent and not yet yielded, and the one it yields is written
    before it sends another, so ``window * jobs`` slots never serve two chunks at once; a
    chunk whose replacements do not fit sends them through the pipe."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.memory = mmap.mmap(-1, count * SLOT_BYTES)

    def view(self, slot: int) -> memoryview:
        """The bytes of ``slot``."""
        return memoryview(self.memory)[slot * SLOT_BYTES : (slot + 1) * SLOT_BYTES]


class _Edits:
    """The edits of one chunk, built in line order: :meth:`replace` and :meth:`reject` a
    record, :meth:`done` returns the list. A migrated record on the line right after the
    previous migrated one joins its run instead of starting a new one, so the parent
    writes, and the pipe or the slot carries, a few large buffers rather than one small one
    a record."""

    def __init__(self) -> None:
        self._items: list[tuple[int, int, list[bytes] | None]] = []
        self._end = -2

    def replace(self, start: int, end: int, output: bytes) -> None:
        """The record at ``data[start:end]`` is migrated to ``output``."""
        last = self._items[-1] if self._items else None
        if last is not None and last[2] is not None and self._end + 1 == start:
            last[2].append(output)
            self._items[-1] = (last[0], end, last[2])
        else:
            self._items.append((start, end, [output]))
        self._end = end

    def reject(self, start: int, end: int) -> None:
        """The record at ``data[start:end]`` was rejected."""
        self._items.append((start, end, None))

    def done(self, slot: memoryview | None = None) -> list[Edit]:
        """Every edit, in order, a run of migrated records as its outputs joined by ``\\n``;
        when ``slot`` is given and every run fits in it, the runs are written there one
        after another and given as :class:`Placed`."""
        if slot is None or sum(len(output) + 1 for *_, run in self._items if run is not None for output in run) > len(slot):
            return [(start, end, None if run is None else b"\n".join(run)) for start, end, run in self._items]
        edits: list[Edit] = []
        offset = 0
        for start, end, run in self._items:
            if run is None:
                edits.append((start, end, None))
                continue
            first = offset
            for output in run:
                if offset > first:
                    slot[offset] = 0x0A
                    offset += 1
                slot[offset : offset + len(output)] = output
                offset += len(output)
            edits.append((start, end, Placed(first, offset - first)))
        return edits


@dataclass
class ChunkResult:
    """What one chunk came to: ``edits``, the records that were migrated or rejected, in
    order (every other byte of the chunk is written as it is); ``report``, the chunk's
    :class:`~histmig.report.Report` (counts, change rows, error lines), merged by the
    caller in chunk order; ``consumed``, input bytes; ``last``, the location of the last
    record."""

    edits: list[Edit] = field(default_factory=list)
    report: Report = field(default_factory=Report.in_memory)
    consumed: int = 0
    last: str | None = None


def default_jobs() -> int:
    """The default ``--jobs``: the number of cores (1 when it cannot be told)."""
    return os.cpu_count() or 1


def read_chunks(stream: BinaryIO, source: str) -> Iterator[Chunk]:
    """Group the lines of ``stream`` into chunks of about :data:`CHUNK_BYTES`. A regular
    file is read a block at a time (completed to the end of its last line); any other
    stream (stdin, a ``.gz``) as its bytes come (``read1``), cut after a line end. When
    reading fails (a truncated ``.gz``), every byte read before is yielded, a last line cut
    short included (it is then rejected, not lost), then the error raised."""
    if _is_regular_file(stream):
        yield from _read_blocks(stream, source)
        return
    read = getattr(stream, "read1", stream.read)
    blocks: list[bytes] = []
    size, first = 0, 1
    try:
        while block := read(CHUNK_BYTES):
            blocks.append(block)
            size += len(block)
            if size < CHUNK_BYTES or b"\n" not in block:
                continue
            data = b"".join(blocks)
            cut = data.rfind(b"\n") + 1
            chunk, blocks, size = data[:cut], [data[cut:]], len(data) - cut
            yield Chunk(chunk, first, source)
            first += count_lines(chunk)
    except Exception:
        if size:
            yield Chunk(b"".join(blocks), first, source)
        raise
    if size:
        yield Chunk(b"".join(blocks), first, source)


def _is_regular_file(stream: BinaryIO) -> bool:
    try:
        return isinstance(stream, io.BufferedReader) and stat.S_ISREG(os.fstat(stream.fileno()).st_mode)
    except (OSError, ValueError):
        return False


def _read_blocks(stream: BinaryIO, source: str) -> Iterator[Chunk]:
    first, offset = 1, stream.tell()
    while data := stream.read(CHUNK_BYTES):
        if not data.endswith(b"\n"):
            data += stream.readline()
        yield Chunk(data, first, source, stream.fileno(), offset)
        first += count_lines(data)
        offset += len(data)


FIND_LINES = 1024
"""Line ends :func:`count_lines` finds one by one before counting the rest."""


def count_lines(data: bytes) -> int:
    """``data.count(b"\\n")``, about five times faster on lines of a few hundred bytes or
    more (a 1 MB chunk of 3 KB records: 0.05 ms instead of 0.26 ms): ``bytes.count`` tests
    every byte, ``find`` jumps to the next line end (``memchr``). After :data:`FIND_LINES`
    line ends (short lines) the rest is counted by ``count``."""
    lines = 0
    position = data.find(b"\n")
    while position >= 0:
        lines += 1
        if lines == FIND_LINES:
            return lines + data.count(b"\n", position + 1)
        position = data.find(b"\n", position + 1)
    return lines


def process_chunk(chunk: Chunk, options: Options, slots: Slots | None = None) -> ChunkResult:
    """Run the pipeline over every non-blank line of ``chunk`` (``location`` ``line N``): a
    line the screen passes (:class:`~histmig.screen.Screen`) is only counted, any other
    goes through :func:`~histmig.pipeline.process_full` (a :class:`~histmig.pipeline.Stream`,
    which stops asking the screen while records keep changing). Never raises for bad
    input. With ``slots`` and a ``chunk.slot``, the migrated records go into that slot when
    they fit (see :class:`Slots`)."""
    data = chunk.load()
    result = ChunkResult(consumed=len(data))
    report = result.report
    stream = Stream(options)
    edits = _Edits()
    unchanged = 0
    last = None
    start = 0
    number = chunk.first
    size = len(data)
    while start < size:
        end = data.find(b"\n", start)
        if end < 0:
            end = size
        raw = data[start:end]
        if raw and not raw.isspace():
            last = number
            if stream.screened(raw):
                unchanged += 1
            else:
                outcome = stream.full(Record(raw, chunk.source, f"line {number}"))
                if outcome.status == "changed":
                    edits.replace(start, end, outcome.output)
                elif outcome.status == "rejected":
                    edits.reject(start, end)
                if outcome.status == "unchanged" and not outcome.errors and not outcome.warnings:
                    unchanged += 1
                else:
                    report.add(outcome)
        start = end + 1
        number += 1
    report.add_unchanged(unchanged)
    result.edits = edits.done(None if slots is None or chunk.slot is None else slots.view(chunk.slot))
    result.last = None if last is None else f"line {last}"
    return result


def write_chunk(data: bytes, edits: list[Edit], out: BinaryIO, rejects: Callable[[], BinaryIO] | None) -> None:
    """Write a chunk's ``data`` with its ``edits`` applied to ``out``, every line ending in
    ``\\n``: a migrated record replaced, a rejected one moved to ``rejects()`` (opened on
    first use) or, without it, kept in ``out`` as it is."""
    view = memoryview(data)
    position = 0
    last_moved = False
    for start, end, replacement in edits:
        if replacement is not None:
            out.write(view[position:start])
            out.write(replacement)
            position = end
        elif rejects is not None:
            out.write(view[position:start])
            rejects().write(data[start:end] + b"\n")
            position = min(end + 1, len(data))
            last_moved = end == len(data)
    out.write(view[position:])
    if data and not data.endswith(b"\n") and not last_moved:
        out.write(b"\n")


def map_chunks(chunks: Iterable[Chunk], options: Options, jobs: int = 1) -> Iterator[tuple[Chunk, ChunkResult]]:
    """Yield every chunk with its :func:`process_chunk` result, in order. ``jobs`` <= 1 runs in this
    process; otherwise in ``jobs`` forked :class:`Workers` (see the module docstring). An
    exception raised while reading ``chunks`` (a truncated input) is raised again after the
    results of every chunk read before it; :class:`WorkerDied` is raised when a worker is lost.
    A result's migrated records may be views of shared memory (:class:`Slots`), valid until
    the next chunk is asked for: write them before."""
    in_flight = WINDOW * jobs
    slots = Slots(in_flight) if jobs > 1 and in_flight * SLOT_BYTES <= SLOTS_MAX_BYTES else None
    if slots is not None:
        chunks = (replace(chunk, slot=number % slots.count) for number, chunk in enumerate(chunks))
    with Workers(partial(process_chunk, options=options, slots=slots), jobs) as workers:
        for chunk, result in workers.map(chunks, message=Chunk.bare, depth=lambda chunk: 2 if chunk.fd is not None else 1, window=WINDOW):
            if slots is not None and chunk.slot is not None:
                view = slots.view(chunk.slot)
                result.edits = [
                    (start, end, view[new.offset : new.offset + new.length] if isinstance(new, Placed) else new) for start, end, new in result.edits
                ]
            yield chunk, result


class Workers(Generic[T, R]):
    """Run ``work`` on tasks in ``jobs`` forked worker processes, results in task order.

    Used as a context manager: with ``jobs`` above 1 the workers are forked on entry (so
    ``work`` and what it holds are inherited, never pickled), one pipe each, and stopped on
    exit; with ``jobs`` <= 1 :meth:`map` calls ``work`` in this process. Tasks and results
    cross the pipes pickled with protocol 5, buffers out of band: a buffer that supports it
    (an Arrow array's, a :class:`pyarrow.Buffer`) is written to the pipe from where it lies
    and read back as its own ``bytes``, never copied into the pickle. An exception that
    ``work`` raises in a worker is raised again by :meth:`map` in the caller.
    """

    def __init__(self, work: Callable[[T], R], jobs: int) -> None:
        self.work = work
        self.jobs = jobs
        self._conns: list[Connection] = []
        self._processes: list[BaseProcess] = []

    def __enter__(self) -> Workers[T, R]:
        if self.jobs > 1:
            context = get_context("fork")
            try:
                for _ in range(self.jobs):
                    parent_end, child_end = context.Pipe()
                    process = context.Process(target=_serve, args=(child_end, self.work, [*self._conns, parent_end]), daemon=True)
                    process.start()
                    child_end.close()
                    self._conns.append(parent_end)
                    self._processes.append(process)
            except BaseException:
                self._stop(clean=False)
                raise
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        self._stop(clean=kind is None)

    def _stop(self, clean: bool) -> None:
        """Stop the workers: when ``clean``, tell each to end and wait for it; then close the
        pipes and terminate any worker still running (after an error, at once)."""
        try:
            if clean:
                for conn in self._conns:
                    conn.send_bytes(b"")
                for process in self._processes:
                    process.join()
        finally:
            for conn in self._conns:
                conn.close()
            for process in self._processes:
                if process.is_alive():
                    process.terminate()
                    process.join()
            self._conns, self._processes = [], []

    def map(
        self,
        tasks: Iterable[T],
        *,
        message: Callable[[T], T] = lambda task: task,
        depth: Callable[[T], int] = lambda task: 2,
        window: int = WINDOW,
    ) -> Iterator[tuple[T, R]]:
        """Yield every task of ``tasks`` with ``work``'s result for it, in order.

        A worker is sent ``message(task)`` (the task as a worker needs it, for instance
        without bytes it can read itself) and holds at most ``depth(task)`` tasks at a time;
        each task goes to the worker holding fewest. Results are received from whichever
        worker has one ready (so a worker never waits, its result unread, while the parent
        waits on another) and yielded in task order; at most ``window`` tasks per worker are
        sent and not yet yielded (their results are held here until their turn), so memory
        stays bounded when one task is slow.
        ``depth`` 1 for a task that carries its data means a worker gets it only with
        nothing in flight, so neither side can block writing to a full pipe the other is not
        reading. An exception raised while reading ``tasks`` is raised again after the
        results of every task read before it; :class:`WorkerDied` is raised when a worker is
        lost."""
        if not self._conns:
            for task in tasks:
                yield task, self.work(task)
            return
        held: list[deque[tuple[int, T]]] = [deque() for _ in self._conns]
        ready: dict[int, tuple[T, Any]] = {}
        source, error, sent, done = iter(tasks), None, 0, 0
        while True:
            try:
                task = next(source)
            except StopIteration:
                break
            except Exception as exc:  # raised again below, once the tasks read before are out
                error = exc
                break
            while True:
                while done in ready:
                    yield _unpack(ready.pop(done))
                    done += 1
                worker = min(range(self.jobs), key=lambda w: len(held[w]))
                if len(held[worker]) < depth(task) and sent - done < window * self.jobs:
                    break
                self._collect(held, ready)
            try:
                _send(self._conns[worker], message(task))
            except OSError:  # the worker is gone: raised in this task's turn
                ready[sent] = task, _Failure(WorkerDied("a histmig worker process ended before taking a task"))
            else:
                held[worker].append((sent, task))
            sent += 1
        while done < sent:
            while done in ready:
                yield _unpack(ready.pop(done))
                done += 1
            if done < sent:
                self._collect(held, ready)
        if error is not None:
            raise error

    def _collect(self, held: list[deque[tuple[int, T]]], ready: dict[int, tuple[T, Any]]) -> None:
        """Wait until a worker holding tasks has a result, and receive every result ready
        (a :class:`_Failure` for a task whose worker raised or ended, raised in its turn)."""
        busy = [conn for conn, tasks in zip(self._conns, held) if tasks]
        for conn in wait(busy):
            worker = self._conns.index(conn)  # type: ignore[arg-type]
            number, task = held[worker].popleft()
            try:
                ready[number] = task, _recv(self._conns[worker])
            except (EOFError, OSError):
                ready[number] = task, _Failure(WorkerDied("a histmig worker process ended without answering"))


@dataclass(frozen=True)
class _Failure:
    """What a worker sends back when ``work`` raised: the exception, raised again by the caller."""

    error: BaseException


def _unpack(answer: tuple[T, Any]) -> tuple[T, Any]:
    """A task and its result, or the exception its worker met raised."""
    if isinstance(answer[1], _Failure):
        raise answer[1].error
    return answer


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
    worker (a library caller's process is left as it is); calling it again changes
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


def _serve(conn: Connection, work: Callable[[Any], Any], parent_ends: list[Connection]) -> None:
    """A worker's loop: answer each task (:func:`_answer`); an empty message ends it. The
    parent's ends of the pipes, inherited at fork, are closed first, so that when the
    parent is gone (killed) the worker reads the end of its pipe, or fails to write to it,
    and ends too."""
    for end in parent_ends:
        end.close()
    keep_heap_slack()
    try:
        while (task := _recv(conn)) is not None:
            _answer(conn, work, task)
    except (EOFError, OSError):  # the parent is gone: nothing to answer
        pass
    conn.close()


def _answer(conn: Connection, work: Callable[[Any], Any], task: Any) -> None:
    """Send ``work(task)``, or a :class:`_Failure` when it raises or cannot be sent (the
    result is dropped on return, before the worker reads its next task)."""
    try:
        result = work(task)
    except Exception as exc:  # raised again in the caller by Workers.map
        result = _Failure(exc)
    try:
        _send(conn, result)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        what = repr(result.error) if isinstance(result, _Failure) else type(result).__name__
        _send(conn, _Failure(RuntimeError(f"a histmig worker could not send back {what}: {exc}")))


def _send(conn: Connection, obj: object) -> None:
    """Send ``obj`` as one message (the number of out-of-band buffers, then the pickle),
    followed by each out-of-band buffer as a message of its own."""
    buffers: list[pickle.PickleBuffer] = []
    head = pickle.dumps(obj, 5, buffer_callback=buffers.append)
    conn.send_bytes(len(buffers).to_bytes(4, "little") + head)
    for buffer in buffers:
        conn.send_bytes(buffer)


def _recv(conn: Connection) -> Any:
    """The object :func:`_send` sent; ``None`` for the empty message that ends a worker."""
    message = conn.recv_bytes()
    if not message:
        return None
    buffers = [conn.recv_bytes() for _ in range(int.from_bytes(message[:4], "little"))]
    return pickle.loads(memoryview(message)[4:], buffers=buffers)
