"""Running the pipeline over a stream of records on several cores, in input order.

:func:`outcomes` pairs each item a source yields with its :class:`~histmig.pipeline.Outcome`.
With ``jobs`` above 1, ``jobs`` worker processes are forked, each with its own pipe; the
records go to them in chunks of :data:`CHUNK`, as plain bytes, round-robin. A worker holds
one chunk at a time: before sending it the next one, the parent receives (and keeps) its
answer to the previous one, so neither side can block writing to a full pipe the other is
not reading. At most :data:`IN_FLIGHT` chunks per worker are sent and not yet yielded, so
memory stays bounded whatever the input size, and chunks are yielded in the order they were
sent, so the output order is the input order. The parent runs no helper thread: it reads,
sends, receives and yields. A worker sends back only what the parent cannot rebuild:
the envelope id (or ``None``) of a clean unchanged record, the full outcome (without the
input bytes, which the parent holds) of any other.
"""

from __future__ import annotations

import os
import pickle
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import replace
from multiprocessing import get_context
from multiprocessing.connection import Connection

from histmig.pipeline import Options, Outcome, process
from histmig.records import Record

CHUNK = 500
"""Records per chunk sent to a worker (about 1.4 MB of a typical archive)."""

IN_FLIGHT = 2
"""Chunks sent to one worker and not yet collected, at most."""

Item = Record | bytes
"""What a source yields: a record, or the bytes of a blank line to carry as it is."""

Result = str | None | Outcome
"""What a worker sends back for one record: the envelope id (or ``None``) of a clean
unchanged record, else its outcome without the input bytes."""


class WorkerDied(RuntimeError):
    """A worker process ended without answering a chunk (killed, out of memory)."""


def default_jobs() -> int:
    """The default ``--jobs``: the number of cores (1 when it cannot be told)."""
    return os.cpu_count() or 1


def outcomes(items: Iterable[Item], options: Options, jobs: int = 1) -> Iterator[tuple[Item, Outcome | None]]:
    """Yield ``(item, outcome)`` for every item of ``items`` in order; ``outcome`` is
    ``None`` for a carried blank line (``bytes``). ``jobs`` <= 1 runs in this process;
    otherwise ``jobs`` worker processes (forked, so the rules are the parent's) do the work.
    Outcomes are the same either way (:func:`~histmig.pipeline.process` never raises for bad
    input). An exception raised while reading ``items`` is raised again after the outcomes
    of every item read before it; :class:`WorkerDied` is raised when a worker is lost."""
    if jobs <= 1:
        for item in items:
            yield item, None if isinstance(item, bytes) else process(item, options)
        return
    context = get_context("fork")
    conns: list[Connection] = []
    workers = []
    try:
        for _ in range(jobs):
            parent_end, child_end = context.Pipe()
            worker = context.Process(target=_serve, args=(child_end, options), daemon=True)
            worker.start()
            child_end.close()
            conns.append(parent_end)
            workers.append(worker)
        source, error, turn = iter(items), None, 0
        pending: deque[tuple[list[Item], int]] = deque()
        received: dict[int, list[Result]] = {}
        holding: dict[int, int] = {}
        while True:
            chunk, error = _take(source)
            payload = pickle.dumps([(item.raw, item.source, item.location) for item in chunk if not isinstance(item, bytes)], pickle.HIGHEST_PROTOCOL)
            worker_index = turn % jobs
            if worker_index in holding:
                received[holding.pop(worker_index)] = _receive(conns[worker_index])
            conns[worker_index].send_bytes(payload)
            holding[worker_index] = turn
            pending.append((chunk, turn))
            turn += 1
            last = len(chunk) < CHUNK or error is not None
            while pending and (len(pending) >= IN_FLIGHT * jobs or last):
                chunk_done, number = pending.popleft()
                results = received.pop(number, None)
                if results is None:
                    del holding[number % jobs]
                    results = _receive(conns[number % jobs])
                yield from _collect(chunk_done, results)
            if last:
                break
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


def _take(source: Iterator[Item]) -> tuple[list[Item], Exception | None]:
    """Up to :data:`CHUNK` items, and the exception reading stopped on (a truncated input),
    so that what was read before it is still processed, then the error raised."""
    chunk: list[Item] = []
    try:
        for item in source:
            chunk.append(item)
            if len(chunk) == CHUNK:
                break
    except Exception as exc:  # re-raised by outcomes() once the records before it are out
        return chunk, exc
    return chunk, None


def _serve(conn: Connection, options: Options) -> None:
    """A worker's loop: answer each chunk (a pickled list of ``(raw, source, location)``)
    with the pickled list of its :data:`Result`; an empty message ends it."""
    while True:
        message = conn.recv_bytes()
        if not message:
            break
        results: list[Result] = []
        for raw, source, location in pickle.loads(message):
            outcome = process(Record(raw, source, location), options)
            if outcome.status == "unchanged" and not outcome.errors and not outcome.warnings:
                results.append(outcome.record.record_id)
            else:
                results.append(replace(outcome, record=replace(outcome.record, raw=b""), output=outcome.output if outcome.status == "changed" else None))
        conn.send_bytes(pickle.dumps(results, pickle.HIGHEST_PROTOCOL))
    conn.close()


def _receive(conn: Connection) -> list[Result]:
    try:
        return pickle.loads(conn.recv_bytes())
    except EOFError as exc:
        raise WorkerDied("a histmig worker process ended without answering") from exc


def _collect(chunk: list[Item], results: list[Result]) -> Iterator[tuple[Item, Outcome | None]]:
    done = iter(results)
    for item in chunk:
        if isinstance(item, bytes):
            yield item, None
            continue
        got = next(done)
        if isinstance(got, Outcome):
            record = Record(item.raw, item.source, item.location, got.record.record_id)
            output = item.raw if got.status == "unchanged" else got.output
            yield item, Outcome(record, got.status, output, got.changes, got.errors, got.warnings)
        else:
            yield item, Outcome(Record(item.raw, item.source, item.location, got), "unchanged", item.raw)
