"""Running the pipeline over a stream of records on several cores, in input order.

:func:`outcomes` pairs each item a source yields with its :class:`~histmig.pipeline.Outcome`.
With ``jobs`` above 1 the records go, in chunks of :data:`CHUNK` and as plain bytes, to a
pool of worker processes; at most ``2 * jobs`` chunks are in flight, so memory stays bounded
whatever the input size, and chunks are collected in the order they were sent, so the
output order is the input order. A worker sends back only what the parent cannot rebuild:
the envelope id of a clean unchanged record, the full outcome (without the input bytes,
which the parent holds) of any other.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import replace
from multiprocessing import get_context
from multiprocessing.pool import AsyncResult

from histmig.pipeline import Options, Outcome, process
from histmig.records import Record

CHUNK = 500
"""Records per task sent to a worker."""

Item = Record | bytes
"""What a source yields: a record, or the bytes of a blank line to carry as it is."""

_options = Options()


def default_jobs() -> int:
    """The default ``--jobs``: the number of cores (1 when it cannot be told)."""
    return os.cpu_count() or 1


def outcomes(items: Iterable[Item], options: Options, jobs: int = 1) -> Iterator[tuple[Item, Outcome | None]]:
    """Yield ``(item, outcome)`` for every item of ``items`` in order; ``outcome`` is
    ``None`` for a carried blank line (``bytes``). ``jobs`` <= 1 runs in this process;
    otherwise ``jobs`` worker processes (forked, so the rules are the parent's) do the work.
    Outcomes are the same either way (:func:`~histmig.pipeline.process` never raises for bad
    input). An exception raised while reading ``items`` is raised again after the outcomes
    of every item read before it."""
    if jobs <= 1:
        for item in items:
            yield item, None if isinstance(item, bytes) else process(item, options)
        return
    source, error = iter(items), None
    with get_context("fork").Pool(jobs, initializer=_init, initargs=(options,)) as pool:
        pending: deque[tuple[list[Item], AsyncResult]] = deque()
        while True:
            chunk, error = _take(source)
            payload = [(item.raw, item.source, item.location) for item in chunk if not isinstance(item, bytes)]
            pending.append((chunk, pool.apply_async(_work, (payload,))))
            while pending and (len(pending) >= 2 * jobs or len(chunk) < CHUNK or error is not None):
                yield from _collect(*pending.popleft())
            if len(chunk) < CHUNK or error is not None:
                break
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


def _init(options: Options) -> None:
    global _options
    _options = options


def _work(payload: list[tuple[bytes, str, str]]) -> list[str | None | Outcome]:
    results: list[str | None | Outcome] = []
    for raw, source, location in payload:
        outcome = process(Record(raw, source, location), _options)
        if outcome.status == "unchanged" and not outcome.errors and not outcome.warnings:
            results.append(outcome.record.record_id)
        else:
            results.append(replace(outcome, record=replace(outcome.record, raw=b""), output=None if outcome.status != "changed" else outcome.output))
    return results


def _collect(chunk: list[Item], result: AsyncResult) -> Iterator[tuple[Item, Outcome | None]]:
    done = iter(result.get())
    for item in chunk:
        if isinstance(item, bytes):
            yield item, None
            continue
        got = next(done)
        if isinstance(got, Outcome):
            record = Record(item.raw, item.source, item.location, got.record.record_id)
            output = item.raw if got.status == "unchanged" else got.output
            yield item, replace(got, record=record, output=output)
        else:
            yield item, Outcome(Record(item.raw, item.source, item.location, got), "unchanged", item.raw)
