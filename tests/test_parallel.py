"""Workers (histmig.parallel): tasks run on forked processes, results in task order, Arrow
buffers and shared-memory slots, failures raised in their turn."""

from __future__ import annotations

import os
import signal
import time

import pyarrow as pa
import pytest

from histmig.errors import WorkerDied
from histmig.parallel import SLOTS_MAX_BYTES, WINDOW, Workers


def _cells(n: int, slot: memoryview | None) -> tuple[int, pa.Array]:
    if n == 4:
        raise ValueError("no 4")
    return os.getpid(), pa.array(["x" * i if i % 3 else None for i in range(n * 1000)])


def test_workers_send_arrow_arrays_back_in_order_from_other_processes() -> None:
    with Workers(_cells, 2) as workers:
        results = list(workers.map([1, 2, 3, 5, 6]))
    assert [task for task, _, _ in results] == [1, 2, 3, 5, 6]
    for task, (_, array), slot in results:
        assert array.to_pylist() == ["x" * i if i % 3 else None for i in range(task * 1000)]
        assert slot is None
    pids = {pid for _, (pid, _), _ in results}
    assert len(pids) == 2 and os.getpid() not in pids


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_exception_raised_by_work_is_raised_by_map(jobs: int) -> None:
    done = []
    with pytest.raises(ValueError, match="no 4"), Workers(_cells, jobs) as workers:
        for task, _, _ in workers.map([1, 2, 3, 4, 5]):
            done.append(task)
    assert done == [1, 2, 3]


def _slow_first(task: int, slot: memoryview | None) -> int:
    if task == 0:
        time.sleep(0.5)
    return task * 10


def test_a_slow_task_does_not_hold_up_the_other_worker_and_order_is_kept() -> None:
    pulled: list[int] = []

    def tasks():
        for task in range(40):
            pulled.append(task)
            yield task

    with Workers(_slow_first, 2) as workers:
        results = workers.map(tasks())
        first = next(results)
        pulled_when_first_came = len(pulled)
        rest = list(results)
    assert [first, *rest] == [(task, task * 10, None) for task in range(40)]
    # while task 0 sleeps, the other worker answers every task the window lets through
    assert pulled_when_first_came == WINDOW * 2 + 1


def _die_on_3(task: int, slot: memoryview | None) -> int:
    if task == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return task


def test_a_lost_worker_is_raised_in_its_turn() -> None:
    done = []
    with pytest.raises(WorkerDied), Workers(_die_on_3, 2) as workers:
        for task, _, _ in workers.map(range(8)):
            done.append(task)
    assert done == [0, 1, 2]


def _fill(task: int, slot: memoryview | None) -> int:
    assert slot is not None
    slot[:8] = task.to_bytes(8, "little")
    return os.getpid()


def test_each_task_in_flight_has_a_slot_of_its_own() -> None:
    with Workers(_fill, 2, slot_bytes=64) as workers:
        seen = [(task, int.from_bytes(slot[:8], "little")) for task, _, slot in workers.map(range(50))]
        assert workers.slots is not None and workers.slots.count == WINDOW * 2
    assert seen == [(task, task) for task in range(50)]


@pytest.mark.parametrize(
    ("jobs", "slot_bytes", "slotted"),
    [
        (1, 64, False),
        (2, 0, False),
        (2, SLOTS_MAX_BYTES // (WINDOW * 2), True),
        (3, SLOTS_MAX_BYTES // (WINDOW * 2), False),
    ],
)
def test_slots_only_with_workers_and_within_the_bound(jobs: int, slot_bytes: int, slotted: bool) -> None:
    assert (Workers(_fill, jobs, slot_bytes=slot_bytes).slots is not None) is slotted
