"""Every error histmig raises, each a type: a caller (the command line, a program) tells them
apart by their class, never by their message (design.md "The package").

At the ground floor: any module may raise them, and none of them imports anything. The
command line's exit code follows the class (README "Exit codes"): :class:`UsageError`,
:class:`UnreadableInput` (and :class:`ColumnError`) and :class:`UnwritableOutput` end a run with
exit code 2 before any record is read; the others are about one record or one history and
never end a run (the record is rejected and reported), but for the Python API's one-history
functions, which raise them to their caller.
"""

from __future__ import annotations


class UsageError(ValueError):
    """Options or outputs that do not fit the input, or each other (exit code 2)."""


class SamePath(UsageError):
    """A path a run writes is a file it reads or writes besides (the same file through a
    link, ``..`` or a hard link; README "Outputs"): ``written`` is what ``what`` names
    (``--report``), ``other`` what ``whose`` names (``the input``). Exit code 2, before
    anything is read."""

    def __init__(self, what: str, written: str, whose: str, other: str) -> None:
        same = "" if written == other else " (the same file)"
        super().__init__(f"{what} {written} is {whose} {other}{same}; name another file")
        self.what, self.written, self.whose, self.other = what, written, whose, other


class UnreadableInput(OSError):
    """The input cannot be opened or read, its format cannot be told, or a column or table it
    should hold is missing or unusable (exit code 2)."""


class ColumnError(UnreadableInput):
    """The messages column (or ``--id-column``) is missing or of a type histmig cannot
    migrate (exit code 2)."""


class UnwritableOutput(OSError):
    """An output cannot be created where it was asked for (exit code 2)."""


def partly_written(error: OSError, written: list[str], left: list[str]) -> OSError:
    """``error``, met while a run wrote its outputs one after another, told which were written
    before it (each whole, and kept) and which were not: an error of the same class, its message
    ending ``; written before it: a.parquet; not written: c.parquet`` (each list up to three
    names and how many more). ``error`` itself when none was written before it."""
    if not written:
        return error

    def names(paths: list[str]) -> str:
        more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
        return ", ".join(paths[:3]) + more

    said = f"written before it: {names(written)}" + (f"; not written: {names(left)}" if left else "")
    told = (
        type(error)(f"{error}; {said}")
        if error.errno is None
        else type(error)(error.errno, f"{error.strerror}; {said}", error.filename)
    )
    told.__cause__ = error
    return told


class InputEnded(OSError):
    """An input could not be read to its end (a truncated ``.gz``, an I/O error): raised by
    :meth:`histmig.sources.base.Input.tasks` after every task read before; the run reports it
    and writes what was read (exit code 1)."""


class InputChanged(OSError):
    """An input written in place (``--in-place``) changed while the run read it (an
    application appended to it): it is kept as it is, and the migrated copy of what was read
    is left beside it, at ``kept`` (exit code 1; the run goes on with its other inputs)."""

    def __init__(self, message: str, kept: str) -> None:
        super().__init__(message)
        self.kept = kept


class WorkerDied(RuntimeError):
    """A worker process ended without answering a task (killed, out of memory)."""


class MigrationError(ValueError):
    """A record or history histmig cannot give in a form pydantic-ai 2.68 loads: ``errors``
    holds one line per problem (``path: message``; README "Bad input"). The Python API's
    one-history functions (:func:`histmig.api.migrate`, :func:`~histmig.api.migrate_json`,
    :func:`~histmig.api.validate`) raise it, or a subclass, for every bad input. Built from
    the lines, or from one line (its one argument then, as the subclasses raise it)."""

    def __init__(self, errors: list[str] | str) -> None:
        if isinstance(errors, str):
            super().__init__(errors)
            self.errors = [errors]
        else:
            super().__init__("; ".join(errors))
            self.errors = list(errors)


class NotAHistory(MigrationError):
    """The record holds no message list: neither a JSON array nor an object with a
    messages field (named, or found among
    :data:`~histmig.records.MESSAGE_FIELD_CANDIDATES`)."""


class BadFieldPath(ValueError):
    """A ``--messages-field`` path that names no key (empty, an empty key, a lone ``\\``)."""


class UnknownRule(ValueError):
    """A ``--select``/``--ignore`` code or prefix that no rule has."""


class Malformed(MigrationError):
    """A part a rule targets has a shape no release wrote, so it cannot be migrated; its one
    argument is the :class:`~histmig.problems.Problem` (the path inside the record,
    ``messages[2].parts[0].content``, and what is wrong). The engine rejects the record,
    unchanged."""


class OtelExportError(ValueError):
    """A history holds something the export cannot render as the framework would: a legacy
    ``retry-prompt`` part (migrate first), an unknown ``kind``/``part_kind``/content item, a
    tool part without ``tool_call_id``, or a media URL whose type cannot be told. The message
    names the place, e.g. ``messages[2].parts[0]: ...``."""


class SpanError(ValueError):
    """A line or span of an OpenTelemetry span export that cannot be read (truncated JSON, not an
    OTLP export request, a span without ids); the message names the line, and the span's place
    in it."""


class RebuildError(ValueError):
    """An agent run's spans from which no history can be rebuilt: no messages recorded, messages
    recorded without content, a part of a type the stored format has no place for. The message
    names the span."""


class ExportRejected(ValueError):
    """One record an OpenTelemetry export (``histmig otel``, ``otel-upgrade``) could not
    convert; the message says why. The record is rejected and reported, the run goes on."""
