"""JSON: a ``.json`` file holding one history (as ``all_messages_json()`` writes it), or one
object whose messages field holds it. The whole file is one record, run in this process.

A rejected document goes to the rejects file and no output is written (with stdout as the
output and no rejects file, it is written there unchanged); a migrated document keeps the
file's conventions: a UTF-8 byte-order mark at its start (not part of the record), and the
line end (``\\n`` or ``\\r\\n``) it ended with, if any.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from histmig.engine import run_records
from histmig.errors import InputEnded
from histmig.records import Outcome, Record
from histmig.report import Report
from histmig.sources.atomic import Stamp, atomic_output, input_stream
from histmig.sources.base import Destination, Format, Input, Job, Task, TaskResult, Written
from histmig.sources.jsonl import BOM, READ_ERRORS, Rejects, written_to


@dataclass
class DocumentResult(TaskResult):
    """What the document came to: its ``report`` and the :class:`~histmig.engine.Outcome`
    of its one record (``None`` when the screen passed it: unchanged)."""

    outcome: Outcome | None = None


@dataclass(frozen=True)
class Document(Task):
    """The whole file's bytes (``data``) and its name."""

    data: bytes
    source: str

    @property
    def size(self) -> int:  # type: ignore[override]  # a property for the field of Task
        return len(self.data)

    @property
    def depth(self) -> int:
        return 1

    def run(self, job: Job, slot: memoryview | None) -> DocumentResult:
        """Put the document (``location`` ``file``) through ``job``'s processor."""
        result = DocumentResult(Report.in_memory(), last="file")

        def keep(key: None, outcome: Outcome) -> Outcome:
            result.outcome = outcome
            return outcome

        record = self.data[len(BOM) :] if self.data.startswith(BOM) else self.data
        run_records(
            [(record, None)], job.processor(), result.report, lambda raw, key: Record(raw, self.source, "file"), keep
        )
        return result


class DocumentInput(Input):
    """A ``.json`` input (see the module docstring) opened for a run."""

    in_process = True

    def __init__(self, path: str, destination: Destination, size: int | None) -> None:
        self.name = path
        self.size = size
        self._path = path
        self._stack = ExitStack()
        self._output = path if destination.in_place else destination.output
        self._in_place = destination.in_place
        self._keep_rejected = destination.keep_rejected
        self._rejects = (
            Rejects(destination.rejects, self._stack)
            if self._output is not None and destination.rejects is not None
            else None
        )
        self._withheld = False
        self._read_as: Stamp | None = None

    def __exit__(self, kind: type[BaseException] | None, *rest: Any) -> None:
        self._stack.__exit__(kind, *rest)

    def tasks(self) -> Iterator[Document]:
        if self._in_place:
            self._read_as = Stamp.of(self._path)  # before it is opened
        try:
            with input_stream(self._path) as stream:
                data = stream.read()
        except READ_ERRORS as exc:
            raise InputEnded(f"input ends early or cannot be read further: {exc}") from exc
        yield Document(data, self.name)

    def write(self, task: Task, result: TaskResult, slot: memoryview | None) -> None:
        assert isinstance(task, Document) and isinstance(result, DocumentResult)
        if self._output is None:
            return
        outcome = result.outcome
        if outcome is not None and outcome.status == "rejected":
            if self._rejects is not None:
                self._rejects().write(task.data + b"\n")
                self._withheld = True
                return
            if not self._keep_rejected:
                return
        if outcome is None or outcome.status != "changed" or outcome.output is None:
            output = task.data
        else:
            data = task.data
            ending = b"\r\n" if data.endswith(b"\r\n") else b"\n" if data.endswith(b"\n") else b""
            output = (BOM if data.startswith(BOM) else b"") + outcome.output + ending
        self._stack.enter_context(atomic_output(self._output, read_as=self._read_as)).write(output)

    def written(self) -> Written:
        return written_to(self._rejects, self._keep_rejected, self._withheld) if self._output is not None else Written()


def open_document(path: str, destination: Destination, options: Any, job: Job) -> list[Input]:
    """The ``.json`` input ``path`` (``-``: stdin, with ``--format json``) for ``destination``."""
    from histmig.sources import input_size

    return [DocumentInput(path, destination, input_size(path))]


FORMAT = Format(
    name="json",
    suffixes=(".json", ".json.gz"),
    open=open_document,
    written_as=("json",),
    description="JSON",
    in_directories=True,
)
