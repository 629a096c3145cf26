"""Running tasks on worker processes, results in task order. Knows nothing of formats.

:class:`Workers` forks ``jobs`` worker processes, each with its own pipe, and hands them the
tasks of :meth:`Workers.map`, each to the worker holding fewest. A task that carries its data
(``depth`` 1) is sent only to a worker with nothing in flight (the parent receives a worker's
answer before sending it the next), so neither side can block writing to a full pipe the
other is not reading; a task that only says where its data lies (a few bytes; the worker
reads it itself) may be queued behind another, so a worker never waits for the parent
between tasks. The parent receives each answer as soon as it is ready, whichever worker sent
it, and yields them in the order the tasks were sent; at most ``window * jobs`` tasks are in
flight, so memory stays bounded. A worker may put a large result in its task's slot of
shared memory (:class:`Slots`) and send only where it lies.
"""

from __future__ import annotations

import mmap
import pickle
import signal
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing import get_context
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, Generic, Protocol, TypeVar

from histmig.errors import WorkerDied
from histmig.interrupt import in_worker
from histmig.tuning import keep_heap_slack

WINDOW = 4
"""Tasks per worker that :meth:`Workers.map` has sent and not yet yielded, at most, unless
told otherwise."""

SLOTS_MAX_BYTES = 32 << 20
"""Shared memory :class:`Workers` gives :class:`Slots` at most: with more tasks in flight than
fit, results cross the pipes, so that memory does not grow with the number of cores."""

T = TypeVar("T")
R = TypeVar("R")

Work = Callable[[T, "memoryview | None"], R]
"""What a worker does: ``work(task, slot)`` returns the task's result; ``slot`` is the task's
:class:`Slots` slot (``None`` when there are none), where it may put bytes instead of
returning them."""


class Progress(Protocol):
    """Told how far a run is: ``start(total)`` once (input bytes, ``None`` when unknown), then
    ``advance(n)`` as each task's ``n`` input bytes are done (a progress bar; the run driver
    and the Spark engine tell it)."""

    def start(self, total: int | None) -> None: ...

    def advance(self, done: int) -> None: ...


class Slots:
    """Shared memory where workers put large results for the parent to read, instead of
    sending them through their pipe (which copies them four times on the way: into the
    pickle, into and out of the pipe, out of the pickle).

    An anonymous shared mapping of ``count`` slots of ``size`` bytes, made before the workers
    fork; the ``n``-th task sent uses slot ``n % count``. :meth:`Workers.map` has at most
    ``count`` tasks sent and not yet yielded, and its caller is done with the one yielded
    before it asks for the next, so no slot serves two tasks at once."""

    def __init__(self, count: int, size: int) -> None:
        self.count = count
        self.size = size
        self.memory = mmap.mmap(-1, count * size)

    def view(self, slot: int) -> memoryview:
        """The bytes of ``slot``."""
        return memoryview(self.memory)[slot * self.size : (slot + 1) * self.size]


class Workers(Generic[T, R]):
    """Run ``work`` on tasks in ``jobs`` forked worker processes, results in task order.

    Used as a context manager: with ``jobs`` above 1 the workers are forked on entry (so
    ``work`` and what it holds are inherited, never pickled), one pipe each, and stopped on
    exit; with ``jobs`` <= 1 :meth:`map` calls ``work`` in this process. With ``slot_bytes``
    and up to :data:`SLOTS_MAX_BYTES` of them in flight, each task gets a :class:`Slots` slot
    of that size. Tasks and results cross the pipes pickled with protocol 5, buffers out of
    band: a buffer that supports it (an Arrow array's, a :class:`pyarrow.Buffer`) is written
    to the pipe from where it lies and read back as its own ``bytes``, never copied into the
    pickle. An exception that ``work`` raises in a worker is raised again by :meth:`map` in
    the caller.
    """

    def __init__(self, work: Work[T, R], jobs: int, *, slot_bytes: int = 0, window: int = WINDOW) -> None:
        self.work = work
        self.jobs = jobs
        self.window = window
        in_flight = window * jobs
        self.slots = (
            Slots(in_flight, slot_bytes)
            if jobs > 1 and slot_bytes and in_flight * slot_bytes <= SLOTS_MAX_BYTES
            else None
        )
        self._conns: list[Connection] = []
        self._processes: list[BaseProcess] = []

    def __enter__(self) -> Workers[T, R]:
        if self.jobs > 1:
            context = get_context("fork")
            # SIGINT held while forking: a worker ignores it before it can be raised there, and
            # the parent gets one that came meanwhile once the workers are forked
            held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            try:
                for _ in range(self.jobs):
                    parent_end, child_end = context.Pipe()
                    process = context.Process(
                        target=_serve, args=(child_end, self.work, self.slots, [*self._conns, parent_end]), daemon=True
                    )
                    process.start()
                    child_end.close()
                    self._conns.append(parent_end)
                    self._processes.append(process)
            except BaseException:
                self._stop(clean=False)
                raise
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
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
        message: Callable[[T], Any] = lambda task: task,
        depth: Callable[[T], int] = lambda task: 2,
        window: int | None = None,
    ) -> Iterator[tuple[T, R, memoryview | None]]:
        """Yield every task of ``tasks`` with ``work``'s result for it and its slot (``None``
        without slots), in order; the caller is done with a slot before it asks for the next.

        A worker is sent ``message(task)`` (the task as a worker needs it, for instance
        without bytes it can read itself) and holds at most ``depth(task)`` tasks at a time;
        each task goes to the worker holding fewest. Results are received from whichever
        worker has one ready (so a worker never waits, its result unread, while the parent
        waits on another) and yielded in task order; at most ``window`` (default: the
        workers' own) tasks per worker are sent and not yet yielded (their results are held
        here until their turn), so memory stays bounded when one task is slow. ``depth`` 1
        for a task that carries its data means a worker gets it only with nothing in flight,
        so neither side can block writing to a full pipe the other is not reading. An
        exception raised while reading ``tasks`` is raised again after the results of every
        task read before it; :class:`WorkerDied` is raised when a worker is lost."""
        window = min(window or self.window, self.window)
        if not self._conns:
            for task in tasks:
                yield task, self.work(task, None), None
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
                    yield self._unpack(done, ready.pop(done))
                    done += 1
                worker = min(range(self.jobs), key=lambda w: len(held[w]))
                if len(held[worker]) < depth(task) and sent - done < window * self.jobs:
                    break
                self._collect(held, ready)
            slot = sent % self.slots.count if self.slots is not None else None
            try:
                _send(self._conns[worker], (slot, message(task)))
            except OSError:  # the worker is gone: raised in this task's turn
                ready[sent] = task, _Failure(WorkerDied("a histmig worker process ended before taking a task"))
            else:
                held[worker].append((sent, task))
            sent += 1
        while done < sent:
            while done in ready:
                yield self._unpack(done, ready.pop(done))
                done += 1
            if done < sent:
                self._collect(held, ready)
        if error is not None:
            raise error

    def _unpack(self, number: int, answer: tuple[T, Any]) -> tuple[T, R, memoryview | None]:
        """Task ``number`` with its result and slot, or the exception its worker met raised."""
        task, result = answer
        if isinstance(result, _Failure):
            raise result.error
        return task, result, self.slots.view(number % self.slots.count) if self.slots is not None else None

    def _collect(self, held: list[deque[tuple[int, T]]], ready: dict[int, tuple[T, Any]]) -> None:
        """Wait until a worker holding tasks has a result, and receive every result ready
        (a :class:`_Failure` for a task whose worker raised or ended, raised in its turn)."""
        busy = [conn for conn, tasks in zip(self._conns, held) if tasks]
        for conn in wait(busy):
            worker = self._conns.index(conn)  # type: ignore[arg-type]  # wait gives back the ones given
            number, task = held[worker].popleft()
            try:
                ready[number] = task, _recv(self._conns[worker])
            except (EOFError, OSError):
                ready[number] = task, _Failure(WorkerDied("a histmig worker process ended without answering"))


@dataclass(frozen=True)
class _Failure:
    """What a worker sends back when ``work`` raised: the exception, raised again by the caller."""

    error: BaseException


def _serve(conn: Connection, work: Work[Any, Any], slots: Slots | None, parent_ends: list[Connection]) -> None:
    """A worker's loop: answer each task (:func:`_answer`); an empty message ends it. The
    parent's ends of the pipes, inherited at fork, are closed first, so that when the
    parent is gone (killed) the worker reads the end of its pipe, or fails to write to it,
    and ends too. SIGINT is ignored (:func:`histmig.interrupt.in_worker`): the parent stops
    the workers of an interrupted run."""
    in_worker()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    for end in parent_ends:
        end.close()
    keep_heap_slack()
    try:
        while (message := _recv(conn)) is not None:
            slot, task = message
            _answer(conn, work, task, None if slot is None or slots is None else slots.view(slot))
    except (EOFError, OSError):  # the parent is gone: nothing to answer
        pass
    conn.close()


def _answer(conn: Connection, work: Work[Any, Any], task: Any, slot: memoryview | None) -> None:
    """Send ``work(task, slot)``, or a :class:`_Failure` when it raises or cannot be sent
    (the result is dropped on return, before the worker reads its next task)."""
    try:
        result = work(task, slot)
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
