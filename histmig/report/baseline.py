"""Baselines: what ``check`` found today, recorded, so that it fails only on what is new.

An archive rarely comes clean at once: HM403 and HM405 have no fix, HM401 only an unsafe one.
``check --write-baseline FILE`` records each thing the run has to say of a record as an
:class:`Entry`; ``check --baseline FILE`` then fails only on entries the file does not hold
(:func:`judge`), and says how many known ones it passed over and which of the file's entries
no longer occur (fixed, or the record is gone).

An entry names its record by what stays when the archive moves: its id (an id column's, or
the envelope's ``id``), a database row's key (``id=42``), else the digest of its messages
(:func:`~histmig.records.messages_digest`), never its file, line or row number; its
``rule`` (a rule code, or ``invalid``, ``rejected``, ``unknown-part`` for the error and
warning lines); and a ``fingerprint``, the digest of the rule, the place inside the record
and what was said there. Entries are counted, so a record with two equal findings needs two.
A read error (an input that could not be read to its end) is never an entry: it always fails.

The file is JSON: ``{"histmig_baseline": 1, "entries": [{"record", "rule", "fingerprint",
"what"}, ...]}``, sorted, so the same findings give the same bytes.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from typing import Any, NamedTuple

import orjson

from histmig.errors import UnreadableInput
from histmig.problems import parts_of
from histmig.report import UNKNOWN_PART, Report, warning_rule
from histmig.report.rows import ChangeRow, FindingRow

VERSION = 1


class Entry(NamedTuple):
    """One thing ``check`` says of one record (see the module docstring): the ``record``
    (``id:…``, ``key:…`` or ``messages:…``), the ``rule``, the ``fingerprint`` (16 hex
    digits) and ``what``, in words, for whoever reads the file."""

    record: str
    rule: str
    fingerprint: str
    what: str

    @property
    def key(self) -> tuple[str, str, str]:
        """What two entries are compared by (``what`` is for reading only)."""
        return self.record, self.rule, self.fingerprint


def _entry(record: str, rule: str, path: str | None, what: str) -> Entry:
    said = f"{path}: {what}" if path else what
    digest = hashlib.sha256(f"{rule}\0{said}".encode(errors="surrogatepass")).hexdigest()[:16]
    return Entry(record, rule, digest, said)


def record_key(report: Report, source: str, location: str, record_id: str | None) -> str:
    """How an entry names the record at ``location`` of ``source``: ``id:ID``, else
    ``key:K=V`` for a database row (its location is its key), else ``messages:DIGEST``
    (the digest :attr:`Report.digests` holds; the location itself when the run kept none)."""
    if record_id:
        return f"id:{record_id}"
    if "=" in location:
        return f"key:{location}"
    return f"messages:{report.digests.get((source, location), location)}"


def row_entry(report: Report, row: ChangeRow | FindingRow) -> Entry:
    """The entry of a change row (a record that needs a rule) or a finding row."""
    path = f"messages[{row.message}]" + ("" if row.part is None else f".parts[{row.part}]")
    what = f"{row.before} -> {row.after}" if isinstance(row, ChangeRow) else row.text
    return _entry(record_key(report, row.source, row.location, row.id), row.rule, path, what)


def line_entry(report: Report, row: dict[str, Any], rule: str, line: str) -> Entry:
    """The entry of an error or warning line of ``row`` (a report's ``errors`` or
    ``warnings`` entry)."""
    path, message = parts_of(line)
    return _entry(record_key(report, row["source"], row["location"], row.get("id")), rule, path, message)


def entries(report: Report) -> Iterator[Entry]:
    """Every entry of ``report``: each change row, each finding of severity ``error`` (a
    warning never fails ``check``), each error line (``invalid``, ``rejected``; a
    ``skipped`` row is no finding) and each unknown-part warning line (``unknown-part``,
    which fails ``check --strict``; a fix not applied to a conversation's layout is a warning)."""
    for batch in report.change_batches():
        yield from (row_entry(report, row) for row in batch)
    for found in report.finding_batches():
        yield from (row_entry(report, finding) for finding in found if finding.severity == "error")
    for row in report.errors:
        if row["status"] != "skipped":
            yield from (line_entry(report, row, row["status"], line) for line in row["errors"])
    for row in report.warnings:
        lines = (line for line in row["warnings"] if warning_rule(line) == UNKNOWN_PART)
        yield from (line_entry(report, row, UNKNOWN_PART, line) for line in lines)


def dumps(found: list[Entry]) -> bytes:
    """``found`` as the text of a baseline file (UTF-8 JSON, entries sorted, a newline at the end)."""
    rows = [entry._asdict() for entry in sorted(found)]
    return orjson.dumps({"histmig_baseline": VERSION, "entries": rows}, option=orjson.OPT_INDENT_2) + b"\n"


def read(path: str) -> list[Entry]:
    """The entries of the baseline file at ``path``. Raises
    :class:`~histmig.errors.UnreadableInput` (exit 2) naming the file when it cannot be
    read or is not a baseline."""
    try:
        with open(path, "rb") as stream:
            data = orjson.loads(stream.read())
    except OSError as exc:
        raise UnreadableInput(f"--baseline {path}: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise UnreadableInput(f"--baseline {path}: not JSON ({exc})") from None
    if (
        not isinstance(data, dict)
        or data.get("histmig_baseline") != VERSION
        or not isinstance(data.get("entries"), list)
    ):
        raise UnreadableInput(f"--baseline {path}: not a histmig baseline (write one with --write-baseline)")
    found = []
    for index, row in enumerate(data["entries"]):
        if not isinstance(row, dict) or not all(isinstance(row.get(name), str) for name in Entry._fields):
            raise UnreadableInput(f"--baseline {path}: entries[{index}] is not a baseline entry")
        found.append(Entry(*(row[name] for name in Entry._fields)))
    return found


class Judged(NamedTuple):
    """A run against a baseline: the ``new`` entries (not in it), how many ``known`` ones it
    passed over, and the baseline's entries that no longer occur (``gone``)."""

    new: list[Entry]
    known: int
    gone: list[Entry]


def judge(found: list[Entry], baseline: list[Entry]) -> Judged:
    """``found`` against ``baseline``, entries counted (a baseline entry covers one found
    entry with its key)."""
    left = Counter(entry.key for entry in baseline)
    new = []
    for entry in found:
        if left[entry.key] > 0:
            left[entry.key] -= 1
        else:
            new.append(entry)
    gone = []
    for entry in baseline:
        if left[entry.key] > 0:
            left[entry.key] -= 1
            gone.append(entry)
    return Judged(new, len(found) - len(new), gone)
