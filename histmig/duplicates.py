"""Duplicated keys: a JSON object that names one key twice.

JSON leaves the meaning of ``{"part_kind":"retry-prompt","part_kind":"text"}`` open, and
readers differ: msgspec, orjson and pydantic-ai 2.68's own parser keep the last value,
others the first, a PostgreSQL ``json`` column keeps both. Which duplicates histmig refuses
depends on what it does with the record (docs/errors.md "Duplicated keys"):

- the keys histmig *reads* are those of the envelope (the record's object and each object on
  the way to its messages field: the messages field itself, the ids), of every message
  (``kind``, ``parts``, ...) and of every part (``part_kind``, ``tool_call_id``, ...); a
  record naming one of them twice is rejected whatever is done with it, since which value
  counts decides what the record is (:attr:`Duplicate.read`);
- below them, inside a value (tool args, a part's content object, usage, metadata) lies a
  *payload*, which histmig neither reads nor judges: a record it leaves as it is keeps one
  there, byte for byte (each reader reads it as before, 2.68 its last value); a record it
  rewrites is rejected, since writing it again would keep one value of two.

The check is for the full way only (a record the screen passes is carried byte for byte:
every reader still reads what it read before; msgspec refuses a message or part whose
``kind`` or ``part_kind`` is given two different values), and it is cheap for a record
without one: the parsed record is encoded again, compact (:func:`histmig.records.dumps`). An
encoding names a key once an object, so a record whose text is its encoding, as a
framework's own dump is, names none twice (one comparison of bytes). Otherwise the colons of
the two texts are counted: the input has one colon a key it holds, plus those in its
strings, plus none for a colon written as an escape (``\\u003a``); the encoding has one a
key the parsed record kept, plus those of the strings it kept (a colon in a string written as
itself). With no escape ``\\u003…`` in the input (a colon's among them; looked for only when
it holds a backslash at all), the counts are equal exactly when no key was dropped;
otherwise the input is parsed again, every object's keys kept, to find the key. (Counting the
keys histmig reads, ``"part_kind"``, ``"kind"``, ... one search each, costs more than the
encoding: each search reads the whole record.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal, NamedTuple

from histmig.problems import Problem
from histmig.records import dumps

_ESCAPES = b"\\u003"  # of a colon (\u003a, \u003A) and its neighbours: one search, the slow way for all


class _Duplicated(dict[str, Any]):
    """An object of the input that names ``key`` more than once."""

    key: str


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    built = dict(pairs)
    if len(built) == len(pairs):
        return built
    seen: set[str] = set()
    duplicated = _Duplicated(built)
    duplicated.key = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
    return duplicated


class Duplicate(NamedTuple):
    """A duplicated key of a record: the ``problem`` (its path in the record, a key inside a
    bare array's messages under ``messages``; ``None`` for the record's own object, and
    ``duplicated key 'part_kind'``) and whether it is a key histmig reads (``read``: one of
    the envelope, a message or a part, see the module docstring) or one inside a payload."""

    problem: Problem
    read: bool


_Role = Literal["envelope", "history", "message", "part", "payload"]


def _found(
    value: Any, path: str, role: _Role, rest: tuple[str, ...], fields: tuple[tuple[str, ...], ...] = ()
) -> Iterator[tuple[str, str, bool]]:
    """Each object under ``value`` (at ``path``, of ``role``; ``rest``: for an envelope, the
    keys still to follow to the history; ``fields``: the paths still to follow to the other
    values histmig reads there, whose objects are read as an envelope's) naming a key twice, in
    document order, an object before what it holds: its path, the key, and whether histmig
    reads it."""
    if isinstance(value, dict):
        if isinstance(value, _Duplicated):
            yield path, value.key, role != "payload"
        for key, item in value.items():
            inner_fields = tuple(field[1:] for field in fields if field[0] == key and field[1:])
            if role == "envelope" and rest and key == rest[0]:
                inner: _Role = "envelope" if rest[1:] else "history"
            elif role == "envelope" and inner_fields:
                inner = "envelope"
            else:
                inner = "part" if role == "message" and key == "parts" else "payload"
            yield from _found(
                item,
                f"{path}.{key}" if path else key,
                inner,
                rest[1:] if inner == "envelope" and rest and key == rest[0] else (),
                inner_fields if inner == "envelope" else (),
            )
    elif isinstance(value, list):
        inner = "message" if role == "history" else "part" if role == "part" else "payload"
        for index, item in enumerate(value):
            yield from _found(item, f"{path or 'messages'}[{index}]", inner, ())


def duplicated_key(
    raw: bytes,
    parsed: Any,
    field: tuple[str, ...] = (),
    *,
    single: bool = False,
    fields: tuple[tuple[str, ...], ...] = (),
) -> Duplicate | None:
    """The first duplicated key of ``raw``, the JSON text of a record (UTF-8), whose parse
    (as msgspec gives it) is ``parsed`` and whose history is at ``field`` (the keys from the
    record down, :attr:`~histmig.records.Located.path`; ``()``: ``raw`` is the history;
    ``single``: ``raw`` is the one message of a history, :attr:`~histmig.records.Located.single`): the
    first histmig reads, else the first in a payload (:class:`Duplicate`); ``None`` when no
    object of ``raw`` names a key twice. ``fields``: the paths of the record's other values
    histmig reads (``--conversation``, ``--order``: ``("chat", "id")``), whose objects count as
    the envelope's (``{"chat": {"id": 1, "id": 2}}`` names a key histmig reads twice). Costs
    one encode of ``parsed`` and a comparison of bytes when it finds none, two counts of colons
    more when ``raw`` is not that encoding (see the module docstring)."""
    encoded = dumps(parsed)
    if encoded == raw:
        return None
    if raw.count(b":") == encoded.count(b":") and (b"\\" not in raw or _ESCAPES not in raw):
        return None
    reparsed = json.loads(raw, object_pairs_hook=_pairs)
    found = list(
        _found(reparsed, "messages[0]", "message", ())
        if single
        else _found(reparsed, "", "envelope" if field else "history", field, fields)
    )
    if not found:
        return None
    path, key, read = next((one for one in found if one[2]), found[0])
    return Duplicate(
        Problem(path or None, f"duplicated key {key!r}: readers differ on which of its values counts"), read
    )
