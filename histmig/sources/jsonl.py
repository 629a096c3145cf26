"""JSONL: ``.jsonl``/``.ndjson`` files (maybe gzipped) and stdin, one record a line.

A record is a bare history array or an object whose messages field is auto-detected
(:mod:`histmig.records`). Blank lines are not records: they are carried to the output as they
are and not counted. A file keeps its own conventions: a UTF-8 byte-order mark at its start
is not part of the first record (and stays in the output), and a line's end, ``\r\n`` or
``\n``, is not part of its record (a migrated record keeps it; a line added at the end of a
file whose last line had none takes the convention of the line before). A task is a
:class:`Chunk`, the bytes of whole input lines (about :data:`CHUNK_BYTES`) and the number of its
first line; :meth:`Chunk.run` puts its lines through the engine's record loop and returns the
edits (each migrated or rejected record's place in the chunk and its new bytes) and the chunk's
report; :func:`write_chunk` writes the chunk with its edits applied, so a record that needs
nothing is never copied out of the chunk's bytes. A chunk of a regular file is sent to a worker
as a few bytes (the worker reads the file itself, by its path, checking it is still the same
file); of stdin or a ``.gz``, with its bytes.
A worker puts a chunk's migrated records in the chunk's slot of shared memory
(:class:`~histmig.parallel.Slots`) when they fit, and sends only where they are.
"""

from __future__ import annotations

import bisect
import gc
import gzip
import heapq
import io
import itertools
import operator
import os
import stat
import tempfile
import zlib
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO, NamedTuple

import msgspec

from histmig.engine import run_conversations, run_records
from histmig.errors import InputEnded, UnreadableInput
from histmig.records import Conversation, FieldReader, Grouping, Outcome, Record, dumps
from histmig.report import Report
from histmig.sources.atomic import Stamp, atomic_output, input_stream
from histmig.sources.base import Destination, Format, Input, Job, Task, TaskResult, Written
from histmig.sources.spill import worker_readable

CHUNK_BYTES = 1 << 20
"""Input bytes per chunk (whole lines; one long line makes a chunk of its own)."""

SLOT_BYTES = 2 * CHUNK_BYTES
"""Bytes of a chunk's shared-memory slot: a chunk's migrated records, a little longer than
the records they replace, fit unless one line makes a chunk longer than this (or migrating
doubles the records); what does not fit crosses the pipe."""

WINDOW = 4
"""Chunks per worker in flight at most (a chunk's result is at most about a chunk of bytes)."""

READ_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile, OSError)
"""What reading a truncated ``.gz`` or a failing disk raises."""


_DECODER = msgspec.json.Decoder()


class Placed(NamedTuple):
    """A replacement a worker put in its chunk's slot instead of sending it: ``length`` bytes
    from ``offset`` in the slot."""

    offset: int
    length: int


Edit = tuple[int, int, "bytes | memoryview | Placed | None"]
"""``(start, end, replacement)``: the record at ``data[start:end]`` of a chunk (without its
line end) is replaced by ``replacement`` (migrated records: their bytes, or, from a worker,
where in its slot it put them), or, when that is ``None``, was rejected. Migrated records on
consecutive lines make one edit, their outputs joined by ``\\n`` (:class:`_Edits`), so a
chunk where every record changes is one edit."""


@dataclass
class ChunkResult(TaskResult):
    """What one chunk came to: its ``report`` and ``last`` record's location, and the
    ``edits``, the records that were migrated or rejected, in order (every other byte of the
    chunk is written as it is)."""

    edits: list[Edit] = field(default_factory=list)


@dataclass(frozen=True)
class Chunk(Task):
    """Whole input lines as read, joined (``data``; the last line maybe without its
    ``\\n``), the 1-based number of the first one, and the source name used in error lines.
    When the input is a regular file, ``file`` is its path and identity (device and inode)
    and ``offset`` where ``data`` starts in it, so a worker reads the bytes itself
    (:meth:`sent`, :meth:`load`) instead of receiving them through a pipe."""

    data: bytes
    first: int
    source: str
    file: tuple[str, int, int] | None = None
    offset: int = 0
    length: int = 0

    @property
    def size(self) -> int:  # type: ignore[override]  # a property for the field of Task
        return len(self.data) or self.length

    @property
    def depth(self) -> int:
        return 1 if self.file is None else 2

    def sent(self) -> Chunk:
        """This chunk as sent to a worker: without ``data`` when the worker can read it."""
        return self if self.file is None else replace(self, data=b"", length=len(self.data))

    def load(self) -> bytes:
        """The chunk's bytes: ``data``, or read from ``file`` at ``offset`` for a sent chunk.
        Raises ``OSError`` when the file at that path is no longer the one the chunk was cut
        from (replaced during the run)."""
        if self.file is None or self.data:
            return self.data
        return os.pread(_descriptor(self.file), self.length, self.offset)

    def run(self, job: Job, slot: memoryview | None) -> ChunkResult:
        """Put every non-blank line of the chunk (``location`` ``line N``) through ``job``'s
        processor (:func:`~histmig.engine.run_records`); the migrated records go into
        ``slot`` when they fit. Never raises for bad input."""
        data = self.load()
        edits = _Edits()
        result = ChunkResult(Report.in_memory())
        source = self.source

        def record(raw: bytes, where: tuple[int, int, int]) -> Record:
            return Record(raw, source, f"line {where[2]}")

        def accept(where: tuple[int, int, int], outcome: Any) -> Any:
            if outcome.status == "changed":
                edits.replace(where[0], where[1], outcome.output)
            elif outcome.status == "rejected":
                edits.reject(where[0], where[1])
            return outcome

        lines = _Lines(data, self.first)
        run_records(lines, job.processor(), result.report, record, accept)
        result.edits = edits.done(slot)
        result.last = None if lines.last is None else f"line {lines.last}"
        return result


BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte-order mark some Windows tools put at the start of a text file."""


class _Lines:
    """The non-blank lines of a chunk's ``data`` as ``(raw, (start, end, number))``, without
    their line ends (``\n`` or ``\r\n``) nor, on the file's first line, a byte-order mark;
    ``last`` is the number of the last one given."""

    def __init__(self, data: bytes, first: int) -> None:
        self.data = data
        self.first = first
        self.last: int | None = None

    def __iter__(self) -> Iterator[tuple[bytes, tuple[int, int, int]]]:
        data, find, size = self.data, self.data.find, len(self.data)
        start, number = 3 if self.first == 1 and data[:3] == BOM else 0, self.first
        while start < size:
            end = find(b"\n", start)
            if end < 0:
                end = size
            stop = end - 1 if end > start and data[end - 1] == 0x0D else end
            raw = data[start:stop]
            if raw and not raw.isspace():
                self.last = number
                yield raw, (start, stop, number)
            start = end + 1
            number += 1


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
        if slot is None or sum(len(output) + 1 for *_, run in self._items if run is not None for output in run) > len(
            slot
        ):
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


def placed(edits: list[Edit], slot: memoryview | None) -> list[Edit]:
    """``edits`` with every :class:`Placed` replacement read from ``slot`` (a view, valid
    until the next chunk is asked for: write it before)."""
    if slot is None:
        return edits
    return [
        (start, end, slot[new.offset : new.offset + new.length] if isinstance(new, Placed) else new)
        for start, end, new in edits
    ]


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


_OPEN: dict[tuple[str, int, int], int] = {}
"""The descriptor of the file a worker last read a chunk of (one at a time)."""


def _descriptor(file: tuple[str, int, int]) -> int:
    """A descriptor of ``file`` (path, device, inode), opened on first use and kept; raises
    ``OSError`` when the path now names another file."""
    fd = _OPEN.get(file)
    if fd is None:
        for old in _OPEN.values():
            os.close(old)
        _OPEN.clear()
        fd = os.open(file[0], os.O_RDONLY)
        found = os.fstat(fd)
        if (found.st_dev, found.st_ino) != file[1:]:
            os.close(fd)
            raise OSError(f"{file[0]}: the file was replaced while it was read")
        _OPEN[file] = fd
    return fd


def _is_regular_file(stream: BinaryIO) -> bool:
    """Whether ``stream`` is a regular file a worker can open by its name: stdin redirected
    from a file (``< in.jsonl``) is one, but named ``<stdin>``, so it is read as a stream."""
    try:
        found = os.fstat(stream.fileno())
        named = os.stat(stream.name)
    except (OSError, ValueError, TypeError, AttributeError):
        return False
    return (
        isinstance(stream, io.BufferedReader)
        and stat.S_ISREG(found.st_mode)
        and (named.st_dev, named.st_ino) == (found.st_dev, found.st_ino)
    )


def _read_blocks(stream: BinaryIO, source: str) -> Iterator[Chunk]:
    found = os.fstat(stream.fileno())
    file = (os.path.abspath(stream.name), found.st_dev, found.st_ino)
    first = 1
    for offset, data in _whole_lines(stream):
        yield Chunk(data, first, source, file, offset)
        first += count_lines(data)


def _whole_lines(stream: BinaryIO, end: int | None = None) -> Iterator[tuple[int, bytes]]:
    """The bytes of a regular file from where it stands to ``end`` (a line start; ``None``: to
    the end of the file), :data:`CHUNK_BYTES` at a time completed to the end of the last line,
    each block with its offset in the file."""
    offset = stream.tell()
    while data := stream.read(CHUNK_BYTES if end is None else min(CHUNK_BYTES, end - offset)):
        if not data.endswith(b"\n"):
            data += stream.readline()
        yield offset, data
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


def write_chunk(data: bytes, edits: list[Edit], out: BinaryIO, rejects: Callable[[], BinaryIO] | None) -> None:
    """Write a chunk's ``data`` with its ``edits`` applied to ``out``, every line ending in
    a line end: a migrated record replaced (its line end kept), a rejected one moved with its
    line end to ``rejects()`` (opened on first use) or, without it, kept in ``out`` as it
    is. A last line without a line end gets the one the line before it has."""
    view = memoryview(data)
    position = 0
    last_moved = False
    for start, end, replacement in edits:
        if replacement is not None:
            out.write(view[position:start])
            out.write(replacement)  # type: ignore[arg-type]  # no Placed: placed() read them from the slot
            position = end
        elif rejects is not None:
            out.write(view[position:start])
            line_end = data.find(b"\n", end)
            position = len(data) if line_end < 0 else line_end + 1
            rejects().write(data[start:position] if line_end >= 0 else data[start:end] + _line_end(data))
            last_moved = line_end < 0
    out.write(view[position:])
    if data and not data.endswith(b"\n") and not last_moved:
        out.write(_line_end(data))


def _line_end(data: bytes) -> bytes:
    """The line end of the last complete line of ``data``: ``\\r\\n`` or ``\\n``
    (``\\n`` when there is none)."""
    last = data.rfind(b"\n")
    return b"\r\n" if last > 0 and data[last - 1] == 0x0D else b"\n"


class Rejects:
    """Where rejected records go: ``path`` (``-``: stdout), opened on first use
    (:func:`~histmig.sources.atomic.atomic_output` with ``keep``: a rejects file an earlier
    run or input left, maybe the only copy of its records, is added to, never replaced), on
    ``stack``; ``used`` once a record was written."""

    def __init__(self, path: str, stack: ExitStack) -> None:
        self.path = path
        self.used = False
        self._stack = stack
        self._out: BinaryIO | None = None

    def __call__(self) -> BinaryIO:
        if self._out is None:
            self._out = self._stack.enter_context(atomic_output(self.path, keep=True))
            self.used = True
        return self._out


class _Discard(io.RawIOBase):
    """Where the rejected records of an export to stdout go: nowhere (the input still holds
    them, and each is named on stderr)."""

    def write(self, data: Any) -> int:
        return len(data)


def _discarded() -> BinaryIO:
    return _Discard()  # type: ignore[return-value]  # writes are all it is asked for


def written_to(rejects: Rejects | None, keep_rejected: bool, withheld: bool = False) -> Written:
    """What an input whose rejected records went to ``rejects`` (``None``: nowhere else; they
    stayed in the output unchanged, unless ``keep_rejected`` is off) wrote."""
    if rejects is None:
        return Written("in place" if keep_rejected else None, withheld)
    return Written("stdout" if rejects.path == "-" else rejects.path, withheld, rejects.used)


class LinesInput(Input):
    """A JSONL input (see the module docstring) opened for a run: ``path`` (``-``: stdin)
    written to ``destination`` (the input itself when ``in_place``), its rejected records to
    ``destination.rejects``."""

    window = WINDOW
    slot_bytes = SLOT_BYTES

    def __init__(self, path: str, destination: Destination, size: int | None) -> None:
        self.name = path
        self.size = size
        self._stack = ExitStack()
        self._output = path if destination.in_place else destination.output
        self._in_place = destination.in_place
        self._out: BinaryIO | None = None
        self._rejects: Rejects | None = None
        self._keep_rejected = destination.keep_rejected
        self._rejects_path = destination.rejects if self._output is not None else None

    def __enter__(self) -> LinesInput:
        try:
            read_as = Stamp.of(self.name) if self._in_place else None  # before it is opened
            self._stream = self._stack.enter_context(input_stream(self.name))
            if self._rejects_path is not None:
                self._rejects = Rejects(self._rejects_path, self._stack)
            if self._output is not None:
                self._out = self._stack.enter_context(atomic_output(self._output, read_as=read_as))
        except BaseException as failed:  # told the failure: nothing opened above is committed
            self._stack.__exit__(type(failed), failed, failed.__traceback__)
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: Any) -> None:
        self._stack.__exit__(kind, *rest)

    def tasks(self) -> Iterator[Chunk]:
        try:
            yield from read_chunks(self._stream, self.name)
        except READ_ERRORS as exc:
            raise InputEnded(f"input ends early or cannot be read further: {exc}") from exc

    def write(self, task: Task, result: TaskResult, slot: memoryview | None) -> None:
        assert isinstance(task, Chunk) and isinstance(result, ChunkResult)
        if self._out is not None:
            rejects = self._rejects if self._rejects is not None or self._keep_rejected else _discarded
            write_chunk(task.data, placed(result.edits, slot), self._out, rejects)

    def written(self) -> Written:
        return written_to(self._rejects, self._keep_rejected) if self._output is not None else Written()


def open_lines(path: str, destination: Destination, options: Any, job: Job) -> list[Input]:
    """The JSONL input ``path`` (``-``: stdin) for ``destination``."""
    from histmig.sources import input_size

    grouping = options.grouping
    if grouping is not None:
        return [GroupedLines(path, destination, input_size(path), grouping)]
    return [LinesInput(path, destination, input_size(path))]


FORMAT = Format(
    name="jsonl",
    suffixes=(".jsonl", ".ndjson", ".jsonl.gz", ".ndjson.gz"),
    open=open_lines,
    written_as=("jsonl",),
    description="JSONL",
    in_directories=True,
)


# ------------------------------------------------------------ records grouped into conversations


class Lines(NamedTuple):
    """Records of a file, as columns: each one's bytes' place (``starts``, ``lengths``) and
    its 1-based line (``numbers``)."""

    starts: array[int]
    lengths: array[int]
    numbers: array[int]

    def cut(self, begin: int, end: int) -> Lines:
        """The records ``begin`` to ``end`` (not included)."""
        return Lines(self.starts[begin:end], self.lengths[begin:end], self.numbers[begin:end])


@dataclass
class GroupResult(TaskResult):
    """What a task of conversations came to: its ``report`` and the ``edits``, ``(start,
    length, output)`` of each record migrated (its new bytes) or rejected (``None``), by its
    place in the file."""

    edits: list[tuple[int, int, bytes | None]] = field(default_factory=list)


@dataclass(frozen=True)
class Conversations(Task):
    """Conversations of a regular file as a task: their ``lines``, each conversation's in its
    order, one after the other, conversation ``n`` ending at ``ends[n]`` among them; each
    one's ``name`` and ``note`` (:class:`~histmig.records.Conversation`) and, past the limit,
    why it is ``refused``. A worker reads the lines itself, by position (``file``: path,
    device, inode, as :class:`Chunk`). Columns of machine integers: a task of 1 MB of records
    of one message pickles as a few arrays, not a tuple a line."""

    file: tuple[str, int, int]
    source: str
    lines: Lines
    ends: array[int]
    names: tuple[str, ...]
    notes: tuple[str | None, ...]
    refused: tuple[str | None, ...]
    size: int = 0

    def run(self, job: Job, slot: memoryview | None) -> GroupResult:
        """Read each conversation's lines and put it through ``job``'s processor
        (:func:`~histmig.engine.run_conversations`). Never raises for bad input."""
        fd = _descriptor(self.file)
        result = GroupResult(Report.in_memory())
        starts, lengths, numbers = self.lines
        source, pread = self.source, os.pread

        def record(raw: bytes, i: int) -> Record:
            return Record(raw, source, f"line {numbers[i]}")

        def conversations() -> Iterator[tuple[Conversation, range]]:
            begin = 0
            for end, name, note, refused in zip(self.ends, self.names, self.notes, self.refused):
                places = range(begin, end)
                raws = [b"" if refused else pread(fd, lengths[i], starts[i]) for i in places]
                yield Conversation.read(raws, record, places, name, note, refused), places
                begin = end

        def accept(i: int, outcome: Outcome) -> Outcome:
            if outcome.status != "unchanged":
                result.edits.append((starts[i], lengths[i], outcome.output))
            return outcome

        processor = job.processor()
        run_conversations(conversations(), processor, result.report, accept, quiet_too=False)  # type: ignore[arg-type]
        result.last = f"line {max(numbers)}" if numbers else None
        return result


def _indexed(chunk: Chunk, read: FieldReader) -> tuple[Sequence[Any], ...]:
    """The records of ``chunk`` as the index of :meth:`GroupedLines.tasks` takes them
    (:meth:`GroupIndex.add`), as columns: what ``read`` finds in each, its place in the file
    (start, length), its line number and its bytes. A chunk with no blank line, ``\\r`` nor
    byte-order mark, whose every line ``read`` decodes alone, is read in one go
    (:meth:`~histmig.records.FieldReader.lines`, no Python loop a line); any other a line at a
    time, as :class:`Chunk` reads it."""
    data = chunk.data
    if b"\r" not in data and not (chunk.first == 1 and data[:3] == BOM):
        pieces = data.split(b"\n")
        if pieces[-1] == b"":
            pieces.pop()
        found = read.lines(pieces)
        if found is not None:
            lengths = list(map(len, pieces))
            starts = list(itertools.accumulate(map(operator.add, lengths, itertools.repeat(1)), initial=chunk.offset))
            starts.pop()  # the end of the last line
            return found, starts, lengths, range(chunk.first, chunk.first + len(pieces)), pieces
    rows = [
        (read(raw), chunk.offset + start, stop - start, number, raw)
        for raw, (start, stop, number) in _Lines(data, chunk.first)
    ]
    return tuple(zip(*rows)) if rows else ((), (), (), (), ())


@contextmanager
def _cycles_not_collected(freeze: bool) -> Iterator[None]:
    """Python's cyclic garbage collector paused (as it was after): the index of a grouped
    file makes a few small objects a line and no cycle, and each of the collections their
    number sets off would walk every one made before (about a sixth of the index's time on
    100,000 lines, when the index held a tuple a line; :class:`GroupIndex` holds a key a
    conversation). Once the index is made, every object then tracked is set aside
    (:func:`gc.freeze`) before the collector runs again: the collections that the tasks'
    results set off in this process would otherwise walk the whole index, each time (about
    a tenth of a per-message file's run), when ``freeze`` (not when the program running
    histmig froze objects of its own, which an unfreeze would give back); the caller gives
    them back (:func:`gc.unfreeze`) when its tasks are handed out."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
        if freeze:
            gc.freeze()
    finally:
        if was:
            gc.enable()


def _sort_key(value: Any) -> tuple[int, Any]:
    """An ``--order`` value as records are sorted by it: numbers, then texts, then any other
    JSON (by its text), then none (a record without it)."""
    if value is None:
        return (3, b"")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value)
    if isinstance(value, str):
        return (1, value)
    return (2, dumps(value))


_UNREADABLE = (
    "cannot be read, so its conversation cannot be told: a conversation of its own (the conversation it may "
    "belong to is judged without it)"
)
"""The note of a grouped record whose key cannot be read: it is no JSON histmig reads."""


def _readable(raw: bytes) -> bool:
    """Whether ``raw`` is JSON msgspec reads (a grouped record without a key: missing, or unreadable)."""
    try:
        _DECODER.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return False
    return True


class GroupIndex:
    """The index of a JSONL file whose records make conversations (:class:`GroupedLines`), a
    few tens of bytes a line: each record's conversation, order value, place and line number
    in flat arrays, taken a chunk at a time (:meth:`add`), then sorted and given back a
    conversation at a time (:meth:`conversations`). A conversation's key is held once: its
    texts as they are (one text, or a tuple of them for a composite key), any other values
    as a 1-tuple of their JSON text (so they equal no text), a record without one (a value
    missing or null) its line number, a conversation of its own. A record's conversation is
    its key's first record's place among the records, so the conversations sort in their
    order of first appearance. The order values are an ``array('q')`` while every one is an
    int within 64 bits; past that, each is its :func:`_sort_key` until :meth:`conversations`
    ranks them (ints, floats, texts, other JSON, none, as :func:`_sort_key` orders them)."""

    def __init__(self, grouping: Grouping) -> None:
        self._grouping = grouping
        self._keys = len(grouping.paths)
        self._firsts: dict[Any, int] = {}
        self._names: dict[Any, str] = {}
        self.notes: dict[Any, str] = {}
        """The note of each conversation that has one, by key: a record without a key."""
        self._conversation: list[int] = []  # the firsts' own ints: a pointer a line, and sorted by without a copy
        self._order: array[int] | list[tuple[int, Any]] | None = array("q") if grouping.order is not None else None
        self._starts, self._lengths, self._numbers = array("q"), array("q"), array("q")
        self.lines = Lines(array("q"), array("q"), array("q"))
        """The records in conversation order, once :meth:`conversations` sorted them."""
        self.firsts = array("q")
        """Where each conversation's first line starts in the file, in conversation order (rising:
        the conversations are in their order of first appearance), once :meth:`conversations`
        sorted them."""
        self._keyed = False
        self.ordered = False
        """Whether a record holds the order value."""
        self.without_order = 0
        """The records without an order value (missing or null): each goes last in its conversation."""
        self._missing = f"no conversation key ({', '.join(grouping.keys)} missing or null): a conversation of its own"

    @property
    def keyless(self) -> bool:
        """Whether no record holds the conversation key (each one was a conversation of its own)."""
        return bool(self.notes) and not self._keyed

    def add(
        self,
        found: Sequence[tuple[Any, ...]],
        starts: Sequence[int],
        lengths: Sequence[int],
        numbers: Sequence[int],
        raws: Sequence[bytes],
    ) -> None:
        """One chunk's records, in line order, as columns: what the :class:`FieldReader` of
        the grouping's keys and then its order field found in each (``found``), its place in
        the file (``starts``, ``lengths``, bytes), its line number and its bytes (``raws``:
        only the first byte of a record without a key is read, to tell a JSON object or array,
        whose conversation is noted, from a record that is no JSON)."""
        if not found:
            return
        keys = self._keys
        columns = list(zip(*found))
        if all(set(map(type, column)) == {str} for column in columns[:keys]):  # texts as they are: no loop a line
            held: Iterable[Any] = columns[0] if keys == 1 else zip(*columns[:keys]) if keys else itertools.repeat(())
            self._keyed = True
        else:
            held = list(map(self._key, found, numbers, raws))
        base = len(self._conversation)
        self._conversation.extend(map(self._firsts.setdefault, held, range(base, base + len(found))))
        self._starts.extend(starts)
        self._lengths.extend(lengths)
        self._numbers.extend(numbers)
        if self._order is None:
            return
        values = columns[keys]
        if isinstance(self._order, array) and set(map(type, values)) == {int}:
            try:
                self._order.extend(array("q", values))
                self.ordered = True
                return
            except OverflowError:  # an int past 64 bits: sorted as Python compares it
                pass
        if isinstance(self._order, array):
            self._order = [(0, value) for value in self._order]
        self._order.extend((0, value) if type(value) is int else _sort_key(value) for value in values)
        missing = values.count(None)
        self.without_order += missing
        self.ordered = self.ordered or missing < len(values)

    def _key(self, found: tuple[Any, ...], number: int, raw: bytes) -> Any:
        """The key of a record whose key values are not all texts (:class:`GroupIndex`),
        noting its conversation's name (and a record without a key)."""
        values = found[: self._keys]
        if None in values:  # a conversation of its own; a record that is no JSON is rejected as such
            if raw[:1] in (b"{", b"["):  # an object without the key, or a bare history, which holds none
                self.notes[number] = self._missing if _readable(raw) else _UNREADABLE
            return number
        self._keyed = True
        if all(type(value) is str for value in values):
            return values[0] if self._keys == 1 else values
        key = (dumps(values).decode(),)  # a text (orjson's bytes would keep a 4 KB buffer each)
        if key not in self._names:
            self._names[key] = self._grouping.named(values)
        return key

    def conversations(self) -> Iterator[tuple[str, str | None, int, int]]:
        """Each conversation, in the order of first appearance, as its name, note, where its
        lines end among :attr:`lines` and their bytes; :attr:`lines`, the records sorted by
        conversation, each one's in its order (by order value, then line), and :attr:`firsts`
        are set on the first call, which sorts the index (two stable sorts of the records'
        places: by order value, then by conversation)."""
        ranked = self._order
        if isinstance(ranked, list):
            rank = {value: i for i, value in enumerate(sorted(set(ranked)))}  # equal values (1, 1.0) tie
            ranked = array("q", map(rank.__getitem__, ranked))
        self._order = None
        places: Iterable[int] = range(len(self._conversation))
        if ranked is not None:
            places = sorted(places, key=ranked.__getitem__)
        del ranked
        order = sorted(places, key=self._conversation.__getitem__)
        del places
        conversations = list(map(self._conversation.__getitem__, order))  # ascending: the sorted records' own
        self._conversation = []
        self.firsts = array("q", map(self._starts.__getitem__, self._firsts.values()))
        columns = [self._starts, self._lengths, self._numbers]
        self._starts = self._lengths = self._numbers = array("q")
        for i, column in enumerate(columns):  # one at a time, each unsorted one freed before the next is made
            columns[i] = array("q", [column[at] for at in order])  # from a list: a third of the time from a map
        del order, column
        self.lines = Lines(*columns)
        held = array("q", itertools.accumulate(self.lines.lengths, initial=0))  # bytes before each record
        begin = 0
        one = self._keys == 1
        for key, first in self._firsts.items():
            end = bisect.bisect_right(conversations, first, begin)
            name = self._names.get(key)
            if name is None:
                name = f"line {key}" if type(key) is int else self._grouping.named((key,) if one else key)
            yield name, self.notes.get(key), end, held[end] - held[begin]
            begin = end


class GroupedLines(LinesInput):
    """A JSONL input whose records make conversations (``--conversation``, ``--order``;
    :class:`~histmig.records.Grouping`). The records of one conversation may lie anywhere
    in the file, so the file is read three times: once to index it (each line's conversation
    key and order value decoded, its place kept: :class:`GroupIndex`, about 40 bytes a line and
    a key a conversation, some 55 MB for 490,000 lines of 100,000 conversations), then each
    conversation's lines read by position (``pread``) and migrated as one
    (:class:`Conversations`), the migrated records spilled to a temporary file, and once more
    to write the output in the input's line order, each migrated record taken from the spill
    at its place. The output is written as the tasks' results come, as far as it is known:
    the conversations go in their order of first appearance, so once the first ``n`` are
    migrated, every line before the first line of the next belongs to one of them (a store
    of one record a run is written nearly as it is migrated; a conversation's records far
    apart hold back more of it). stdin and a ``.gz`` are first copied, as read, to a
    temporary file. Memory holds the index and the conversations in flight, not the
    archive."""

    window = 2
    slot_bytes = 0

    def __init__(self, path: str, destination: Destination, size: int | None, grouping: Grouping) -> None:
        super().__init__(path, destination, size)
        self._grouping = grouping
        self._pending: list[tuple[int, int, tuple[int, int] | None]] = []  # a heap, by place in the input
        self._frontiers: deque[int | None] = deque()
        self._copied = 0
        self._keyless = False
        self._unordered = False
        self._without_order = 0
        self._read_as: Stamp | None = None

    def __enter__(self) -> GroupedLines:
        read_as = None if self._in_place else Stamp.of(self.name)  # before it is opened (in place: the output's)
        super().__enter__()
        try:
            if _is_regular_file(self._stream):
                self._read_as = read_as
            else:
                spool, where = worker_readable(".jsonl")  # no name: a killed run leaves no copy of stdin behind
                self._stack.callback(spool.close)
                try:
                    while block := self._stream.read(CHUNK_BYTES):
                        spool.write(block)
                except READ_ERRORS as exc:
                    raise InputEnded(f"input ends early or cannot be read further: {exc}") from exc
                spool.flush()
                self._stream = open(where[0], "rb")
                self._stack.callback(self._stream.close)
            self._spill = self._stack.enter_context(tempfile.TemporaryFile(prefix="histmig-"))
        except BaseException as failed:  # told the failure: the output opened above is discarded, never committed
            self._stack.__exit__(type(failed), failed, failed.__traceback__)
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: Any) -> None:
        if kind is None and self._out is not None:
            try:
                self._write_out()
            except BaseException as failed:
                self._stack.__exit__(type(failed), failed, failed.__traceback__)
                raise
        super().__exit__(kind, *rest)

    def tasks(self) -> Iterator[Conversations]:  # type: ignore[override]  # its own tasks, which its write takes
        grouping = self._grouping
        read = FieldReader(grouping.fields)
        index = GroupIndex(grouping)
        file = None
        freeze = gc.get_freeze_count() == 0
        with _cycles_not_collected(freeze):  # no yield within: the collector runs again before the first task goes
            for chunk in _read_blocks(self._stream, self.name):
                file = chunk.file
                index.add(*_indexed(chunk, read))
        try:
            if file is not None:
                self._keyless = index.keyless
                self._unordered = grouping.order is not None and not index.ordered
                self._without_order = index.without_order if index.ordered else 0
                yield from self._tasks(file, index)
        finally:
            if freeze:
                gc.unfreeze()

    def _tasks(self, file: tuple[str, int, int], index: GroupIndex) -> Iterator[Conversations]:
        """The tasks of :meth:`tasks` from its index: each conversation's lines in order,
        batched to about :data:`CHUNK_BYTES` of records a task."""
        batch: list[tuple[str, str | None, int, int]] = []
        size = begin = made = 0
        for conversation in index.conversations():
            batch.append(conversation)
            size += conversation[3]
            if size >= CHUNK_BYTES:
                made += len(batch)
                self._frontiers.append(index.firsts[made] if made < len(index.firsts) else None)
                yield self._task(file, index.lines, begin, batch, size)
                begin, batch, size = conversation[2], [], 0
        if batch:
            self._frontiers.append(None)
            yield self._task(file, index.lines, begin, batch, size)

    def written(self) -> Written:
        """:meth:`LinesInput.written`, and a note when no record holds the conversation key
        (a misspelt ``--conversation`` makes every record a conversation of its own) or the
        order field (a misspelt ``--order`` leaves each conversation in line order), or when
        some records hold no order value (each went last in its conversation)."""
        done = super().written()
        if self._keyless:
            keys = ", ".join(self._grouping.keys)
            done.notes.append(
                f"{self.name}: no record holds the conversation key ({keys}), so each was a conversation of its own: "
                "is --conversation spelt as the records' field?"
            )
        if self._unordered:
            done.notes.append(
                f"{self.name}: no record holds the order field ({self._grouping.order}), so each conversation's "
                "records were taken in line order: is --order spelt as the records' field?"
            )
        if self._without_order:
            done.notes.append(
                f"{self.name}: {self._without_order} record(s) hold no order value ({self._grouping.order} missing or "
                "null): each was taken after the records of its conversation that hold one"
            )
        return done

    def _task(
        self,
        file: tuple[str, int, int],
        lines: Lines,
        begin: int,
        batch: list[tuple[str, str | None, int, int]],
        size: int,
    ) -> Conversations:
        """The task of the conversations of ``batch`` (each one's name, note, end among
        ``lines`` and bytes), whose lines start at ``begin``."""
        ends = [end for _, _, end, _ in batch]
        refusal = self._grouping.refusal
        return Conversations(
            file,
            self.name,
            lines.cut(begin, ends[-1]),
            array("q", [end - begin for end in ends]),
            tuple(name for name, _, _, _ in batch),
            tuple(note for _, note, _, _ in batch),
            tuple(
                refusal(name, held, end - start)
                for (name, _, end, held), start in zip(batch, itertools.chain([begin], ends))
            ),
            size,
        )

    def write(self, task: Task, result: TaskResult, slot: memoryview | None) -> None:
        """Keep the task's edits (each migrated record spilled), then write the output as far
        as it is known: up to the first line of the first conversation no task has migrated yet
        (every line before it belongs to a conversation migrated already)."""
        assert isinstance(result, GroupResult)
        frontier = self._frontiers.popleft()
        if self._out is None:
            return
        for start, length, output in result.edits:
            if output is None:
                heapq.heappush(self._pending, (start, length, None))
            else:
                heapq.heappush(self._pending, (start, length, (self._spill.tell(), len(output))))
                self._spill.write(output)
        if frontier is not None:
            self._copy(frontier)

    def _copy(self, end: int | None) -> None:
        """Write the output from where it stands to the input's byte ``end`` (a line start;
        ``None``: the end of the input), in the input's line order: every record as it is, but
        those migrated (from the spill) and rejected (moved to the rejects, or kept)."""
        if end is not None and end <= self._copied:
            return
        if self._pending:
            self._spill.flush()
        spill = self._spill.fileno()
        pending = self._pending
        rejects = self._rejects if self._rejects is not None or self._keep_rejected else _discarded
        self._stream.seek(self._copied)
        for offset, data in _whole_lines(self._stream, end):  # its lines not counted: no line is named
            stop = offset + len(data)
            mine: list[Edit] = []
            while pending and pending[0][0] < stop:
                start, length, place = heapq.heappop(pending)
                new = None if place is None else os.pread(spill, place[1], place[0])
                mine.append((start - offset, start - offset + length, new))
            write_chunk(data, mine, self._out, rejects)  # type: ignore[arg-type]
        self._copied = self._stream.tell()

    def _write_out(self) -> None:
        """Write the rest of the output (:meth:`_copy`). Raises
        :class:`~histmig.errors.UnreadableInput` when the input file is no longer what the
        index read (appended to, rewritten, replaced): its lines would no longer be those
        migrated, so the output is not committed (in place, the output's own check keeps the
        input)."""
        self._check_unchanged()
        self._copy(None)
        self._check_unchanged()  # nor while it was copied

    def _check_unchanged(self) -> None:
        """Raise :class:`~histmig.errors.UnreadableInput` when the input file (not in place) is
        no longer what was read (:class:`~histmig.sources.atomic.Stamp`)."""
        changed = self._read_as.change(Stamp.of(self.name)) if self._read_as is not None else None
        if changed is not None:
            raise UnreadableInput(f"{self.name}: changed while it was read ({changed}): nothing written; run again")
