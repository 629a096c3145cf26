"""Running the pipeline over a JSONL stream, chunk by chunk, on several cores, in order.

A chunk is a list of input lines (about :data:`CHUNK_BYTES` of them) and the number of its
first line. :func:`process_chunk` turns one into a :class:`ChunkResult`: the bytes to write
(kept, migrated and carried blank lines, joined), the rejected lines, the outcomes the
report needs in detail, and how many records were clean and unchanged. With ``jobs``
above 1, :func:`map_chunks` forks ``jobs`` worker processes, each with its own pipe, and
sends them chunks round-robin; a worker holds one chunk at a time and the parent receives
its answer before sending it the next, so neither side can block writing to a full pipe the
other is not reading. Chunks come back in the order they were sent, so the output order is
the input order, and at most ``jobs`` chunks are in flight, so memory stays bounded. The
parent does no per-record work: it reads lines, writes joined bytes and feeds the report.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from multiprocessing import get_context
from multiprocessing.connection import Connection

from histmig.pipeline import Options, Outcome, process
from histmig.records import Record

CHUNK_BYTES = 1 << 20
"""Input bytes per chunk (whole lines; one long line makes a chunk of its own)."""


class WorkerDied(RuntimeError):
    """A worker process ended without answering a chunk (killed, out of memory)."""


@dataclass(frozen=True)
class Chunk:
    """Input lines as read (each with its ``\\n``, the last maybe without), the 1-based
    number of the first one, and the source name used in error lines."""

    lines: list[bytes]
    first: int
    source: str


@dataclass
class ChunkResult:
    """What one chunk came to: ``output``, the bytes to write (each kept, migrated or blank
    line followed by ``\\n``; rejected records too when there is no rejects file);
    ``rejected``, the rejected records' lines for the rejects file; ``outcomes``, every
    outcome the report needs in detail (changed, rejected, or with errors or warnings), in
    input order and without their bytes; ``unchanged``, the clean unchanged records;
    ``consumed``, input bytes; ``last``, the location of the last record."""

    output: bytes = b""
    rejected: bytes = b""
    outcomes: list[Outcome] = field(default_factory=list)
    unchanged: int = 0
    consumed: int = 0
    last: str | None = None


def default_jobs() -> int:
    """The default ``--jobs``: the number of cores (1 when it cannot be told)."""
    return os.cpu_count() or 1


def read_chunks(stream: Iterable[bytes], source: str) -> Iterator[Chunk]:
    """Group the lines of ``stream`` into chunks of about :data:`CHUNK_BYTES`. When reading
    fails (a truncated ``.gz``), the lines read before are yielded, then the error raised."""
    lines: list[bytes] = []
    size, first = 0, 1
    try:
        for number, line in enumerate(stream, start=1):
            lines.append(line)
            size += len(line)
            if size >= CHUNK_BYTES:
                yield Chunk(lines, first, source)
                lines, size, first = [], 0, number + 1
    except Exception:
        if lines:
            yield Chunk(lines, first, source)
        raise
    if lines:
        yield Chunk(lines, first, source)


def process_chunk(chunk: Chunk, options: Options, split_rejects: bool) -> ChunkResult:
    """Run :func:`~histmig.pipeline.process` over every non-blank line of ``chunk``
    (``location`` ``line N``). ``split_rejects``: rejected lines go to ``rejected`` rather
    than ``output``. Never raises for bad input."""
    result = ChunkResult(consumed=sum(map(len, chunk.lines)))
    written: list[bytes] = []
    rejected: list[bytes] = []
    for number, line in enumerate(chunk.lines, start=chunk.first):
        raw = line[:-1] if line.endswith(b"\n") else line
        if not raw.strip():
            written.append(raw)
            continue
        result.last = f"line {number}"
        outcome = process(Record(raw, chunk.source, result.last), options)
        if outcome.status == "rejected":
            (rejected if split_rejects else written).append(raw)
        else:
            written.append(outcome.output)
        if outcome.status == "unchanged" and not outcome.errors and not outcome.warnings:
            result.unchanged += 1
        else:
            result.outcomes.append(replace(outcome, record=replace(outcome.record, raw=b""), output=None))
    result.output = b"\n".join(written) + b"\n" if written else b""
    result.rejected = b"\n".join(rejected) + b"\n" if rejected else b""
    return result


def map_chunks(chunks: Iterable[Chunk], options: Options, split_rejects: bool, jobs: int = 1) -> Iterator[ChunkResult]:
    """Yield :func:`process_chunk` of every chunk, in order. ``jobs`` <= 1 runs in this
    process; otherwise in ``jobs`` forked workers (see the module docstring). An exception
    raised while reading ``chunks`` (a truncated input) is raised again after the results
    of every chunk read before it; :class:`WorkerDied` is raised when a worker is lost."""
    if jobs <= 1:
        for chunk in chunks:
            yield process_chunk(chunk, options, split_rejects)
        return
    context = get_context("fork")
    conns: list[Connection] = []
    workers = []
    try:
        for _ in range(jobs):
            parent_end, child_end = context.Pipe()
            worker = context.Process(target=_serve, args=(child_end, options, split_rejects), daemon=True)
            worker.start()
            child_end.close()
            conns.append(parent_end)
            workers.append(worker)
        busy: list[int] = []
        source, error, turn = iter(chunks), None, 0
        while True:
            try:
                chunk = next(source)
            except StopIteration:
                break
            except Exception as exc:  # raised again below, once the chunks read before are out
                error = exc
                break
            if len(busy) == jobs:
                yield _receive(conns[busy.pop(0)])
            conns[turn % jobs].send_bytes(pickle.dumps(chunk, pickle.HIGHEST_PROTOCOL))
            busy.append(turn % jobs)
            turn += 1
        while busy:
            yield _receive(conns[busy.pop(0)])
        for conn in conns:
            conn.send_bytes(b"")
        for worker in workers:
            worker.join()
    finally:
        for conn in conns:
            conn.close()
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
                worker.join()
    if error is not None:
        raise error


def _serve(conn: Connection, options: Options, split_rejects: bool) -> None:
    """A worker's loop: answer each pickled :class:`Chunk` with its pickled
    :class:`ChunkResult`; an empty message ends it."""
    while message := conn.recv_bytes():
        conn.send_bytes(pickle.dumps(process_chunk(pickle.loads(message), options, split_rejects), pickle.HIGHEST_PROTOCOL))
    conn.close()


def _receive(conn: Connection) -> ChunkResult:
    try:
        return pickle.loads(conn.recv_bytes())
    except EOFError as exc:
        raise WorkerDied("a histmig worker process ended without answering") from exc
