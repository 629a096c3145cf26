"""Duplicated keys: a JSON object that names one key twice.

JSON leaves the meaning of ``{"part_kind":"retry-prompt","part_kind":"text"}`` open, and
readers differ: msgspec, orjson and pydantic-ai 2.68's own parser keep the last value,
others the first, a PostgreSQL ``json`` column keeps both. A record histmig rewrites or
validates is read one way and written another, so one holding a duplicated key anywhere is
rejected, naming the key and where it is (:func:`duplicated_key`).

The check is for the full way only (a record the screen passes is carried byte for byte:
every reader still reads what it read before), and it is cheap for a record without one: the
parsed record is encoded again, compact (:func:`histmig.records.dumps`). An encoding names a
key once an object, so a record whose text is its encoding, as a framework's own dump is,
names none twice (one comparison of bytes). Otherwise the colons of the two texts are
counted: the input has one colon a key it holds, plus those in its strings, plus none for a
colon written as an escape (``\\u003a``); the encoding has one a key the parsed record kept,
plus those of the strings it kept (a colon in a string written as itself). With no escape
``\\u003…`` in the input (a colon's among them; looked for only when it holds a backslash at
all), the counts are equal exactly when no key was dropped; otherwise the input is parsed
again, every object's keys kept, to find the key.
"""

from __future__ import annotations

import json
from typing import Any

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


def _find(value: Any, path: str) -> tuple[str, str] | None:
    """The path and key of the first object under ``value`` (at ``path``) naming a key twice, in document order,
    the outer object first."""
    if isinstance(value, dict):
        if isinstance(value, _Duplicated):
            return path, value.key
        for key, item in value.items():
            found = _find(item, f"{path}.{key}" if path else key)
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _find(item, f"{path or 'messages'}[{index}]")
            if found is not None:
                return found
    return None


def duplicated_key(raw: bytes, parsed: Any) -> Problem | None:
    """The problem of the first duplicated key of ``raw``, the JSON text of a record (UTF-8),
    whose parse (as msgspec gives it) is ``parsed``: its path in the record (a key inside a
    bare array's messages under ``messages``; ``None`` for the record's own object) and
    ``duplicated key 'part_kind'``; ``None`` when no object of ``raw`` names a key twice.
    Costs one encode of ``parsed`` and a comparison of bytes when it finds none, two counts
    of colons more when ``raw`` is not that encoding (see the module docstring)."""
    encoded = dumps(parsed)
    if encoded == raw:
        return None
    if raw.count(b":") == encoded.count(b":") and (b"\\" not in raw or _ESCAPES not in raw):
        return None
    found = _find(json.loads(raw, object_pairs_hook=_pairs), "")
    if found is None:
        return None
    path, key = found
    return Problem(path or None, f"duplicated key {key!r}: readers differ on which of its values counts")
