"""``check`` as a gate, against the pydantic-ai 2.68.0 oracle (issue: check as a gate, item 1).

Histories are generated valid (tests/acceptance/test_properties.py's strategies), then damaged
at every level: a known part kind moved into the other message kind, a part kind no release
knows, a field of the wrong type, a field missing, a null, a retry-prompt error list no release
wrote, and a key written twice in the JSON text, at every level (the envelope's messages
field, a ``kind``, ``parts``, a ``part_kind``, any key of a message, a part or a payload), its
first value ``"twice"``, one histmig would rewrite (a legacy part or history) or the same value.
Properties, each over a file of such records: ``check --strict`` exiting 0 means the oracle
loads every record and none names a key histmig reads twice (an envelope's, a message's, a
part's; without ``--strict``: all the oracle refuses is parts of a kind it loads in no message,
a newer release's); every record ``convert`` changes held no key twice and loads in the oracle
(or holds such a newer part, said in a warning), every other is written as it was read or
rejected, and one written as it was read that names a key twice holds nothing to rewrite for a
reader keeping the first values either; and a record the screen passes holds no part the
oracle's part-kind unions refuse.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from pydantic_ai.messages import ModelMessagesTypeAdapter

from histmig import api
from histmig.engine import process
from histmig.options import Options
from histmig.records import Record, dumps
from tests.acceptance.test_properties import HISTORY, SCREEN

KINDS_OF = {
    "request": ({"part_kind": "text", "content": "x"}, {"part_kind": "tool-call", "tool_name": "t", "args": "{}"}),
    "response": ({"part_kind": "user-prompt", "content": "x"}, {"part_kind": "retry-prompt", "content": "x"}),
}
WRONG_VALUES = (5, None, "yesterday", [], {}, True, 1.5, "")
FIELDS = ("content", "tool_call_id", "tool_name", "timestamp", "args", "part_kind", "retry", "outcome", "kind", "parts")
BAD_RETRY_CONTENT = (["a", "b"], [{"loc": 5, "msg": None}], 5, [{"type": "t", "loc": [None], "msg": "m"}], [[]])
DAMAGE = st.sampled_from(["wrong-message", "unknown-kind", "wrong-type", "missing", "retry-content", "legacy"])


def _damage(history: list[Any], kind: str, at: int, pick: int) -> None:
    """Give ``history`` one damage of ``kind`` at its ``at``-th message or part (``pick``
    chooses the field and value)."""
    if not history:
        return
    message = history[at % len(history)]
    parts = [part for m in history if isinstance(m.get("parts"), list) for part in m["parts"] if isinstance(part, dict)]
    part = parts[at % len(parts)] if parts else None
    if (
        kind == "wrong-message"
        and message.get("kind") in ("request", "response")
        and isinstance(message.get("parts"), list)
    ):
        message["parts"].insert(pick % (len(message["parts"]) + 1), dict(KINDS_OF[message["kind"]][pick % 2]))
    elif kind == "unknown-kind" and isinstance(message.get("parts"), list):
        message["parts"].append({"part_kind": "hologram", "content": "x"})
    elif kind == "legacy" and isinstance(message.get("parts"), list):
        message["parts"].append({"part_kind": "retry-prompt", "content": "again", "tool_name": None})
    elif kind == "retry-content" and isinstance(message.get("parts"), list):
        history.append(
            {
                "kind": "request",
                "parts": [
                    {
                        "part_kind": "retry-prompt",
                        "content": copy.deepcopy(BAD_RETRY_CONTENT[pick % len(BAD_RETRY_CONTENT)]),
                        "tool_name": "t" if pick % 2 else None,
                        "tool_call_id": "c",
                    }
                ],
            }
        )
    elif kind in ("missing", "wrong-type"):
        target = message if part is None or pick % 3 == 0 else part
        name = FIELDS[pick % len(FIELDS)]
        if kind == "missing":
            target.pop(name, None)
        else:
            target[name] = copy.deepcopy(WRONG_VALUES[pick % len(WRONG_VALUES)])  # never the shared [] or {} itself


LEGACY_PART = {"part_kind": "retry-prompt", "content": "x", "tool_name": None}
OTHER_KIND = {"request": "response", "response": "request"}


def _first_value(key: str, value: Any, how: int) -> Any:
    """The value a key written twice gets first (``how``): ``"twice"``, a value histmig would
    rewrite (a retry-prompt ``part_kind``, the other message ``kind``, a legacy history under
    ``messages``, legacy parts under ``parts``), or the true value itself."""
    if how == 1 and key == "part_kind":
        return "retry-prompt"
    if how == 1 and key == "kind" and value in OTHER_KIND:
        return OTHER_KIND[value]
    if how == 1 and key == "messages":
        return [{"kind": "request", "parts": [dict(LEGACY_PART)]}]
    if how == 1 and key == "parts":
        return [dict(LEGACY_PART)]
    return value if how == 2 else "twice"


def _text(value: Any, twice: tuple[int, int, int] | None, counter: list[int]) -> str:
    """``value`` as JSON text; with ``twice`` ``(object, key, how)``, the ``object``-th object
    (counted from 0, document order) writes its ``key``-th key (modulo) a second time, first,
    with :func:`_first_value` of ``how`` (the true one after it: the value most readers keep)."""
    if isinstance(value, dict):
        number = counter[0]
        counter[0] += 1
        members = [
            json.dumps(key, ensure_ascii=False) + ":" + _text(item, twice, counter) for key, item in value.items()
        ]
        if twice is not None and number == twice[0] and value:
            index = twice[1] % len(value)
            key, item = list(value.items())[index]
            first = _first_value(key, item, twice[2])
            members.insert(index, json.dumps(key, ensure_ascii=False) + ":" + json.dumps(first, ensure_ascii=False))
        return "{" + ",".join(members) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_text(item, twice, counter) for item in value) + "]"
    return json.dumps(value, ensure_ascii=False)


RECORD = st.tuples(
    HISTORY,
    st.lists(st.tuples(DAMAGE, st.integers(0, 50), st.integers(0, 50)), max_size=3),
    st.one_of(st.none(), st.tuples(st.integers(0, 30), st.integers(0, 6), st.integers(0, 2))),
    st.booleans(),
)


def _record(
    history: list[Any], damages: list[tuple[str, int, int]], twice: tuple[int, int, int] | None, envelope: bool
) -> bytes:
    for kind, at, pick in damages:
        _damage(history, kind, at, pick)
    return _text({"id": "r", "messages": history} if envelope else history, twice, [0]).encode()


def _refusals(raw: bytes) -> list[Any]:
    """What pydantic-ai 2.68.0 says of the history of ``raw`` (its messages field, or the
    array), loading it as its ``ModelMessagesTypeAdapter`` loads JSON text: ``[]`` when it
    loads it, else its errors."""
    parsed = orjson.loads(raw)
    history = parsed["messages"] if isinstance(parsed, dict) else parsed
    try:
        ModelMessagesTypeAdapter.validate_json(orjson.dumps(history))
    except ValidationError as exc:
        return exc.errors()
    return []


def _loads(raw: bytes) -> bool:
    return not _refusals(raw)


def _expected_tags() -> frozenset[str]:
    """Every part kind 2.68 loads in a request or a response, as its errors list them."""
    try:
        ModelMessagesTypeAdapter.validate_python([{"kind": kind, "parts": [{"part_kind": "?"}]} for kind in KINDS_OF])
    except ValidationError as exc:
        return frozenset(tag.strip(" '") for error in exc.errors() for tag in error["ctx"]["expected_tags"].split(","))
    raise AssertionError("2.68 loaded a part of kind '?'")


TAGS_2_68 = _expected_tags()


class _Twice(dict[str, Any]):
    """An object of the text that names a key twice."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    built = dict(pairs)
    return _Twice(built) if len(built) != len(pairs) else built


def _twice(raw: bytes) -> bool:
    """Whether an object of ``raw`` names a key twice (which readers read differently)."""
    found = []
    json.loads(raw, object_pairs_hook=lambda pairs: found.append(len(pairs) != len(dict(pairs))))
    return any(found)


def _twice_read(raw: bytes) -> bool:
    """Whether the envelope, a message or a part of ``raw`` names a key twice (the keys histmig
    reads; one inside a payload, tool args, is not)."""
    parsed = json.loads(raw, object_pairs_hook=_pairs)
    history = parsed.get("messages") if isinstance(parsed, dict) else parsed
    objects = [parsed] if isinstance(parsed, dict) else []
    for message in history if isinstance(history, list) else []:
        objects.append(message)
        parts = message.get("parts") if isinstance(message, dict) else None
        objects += parts if isinstance(parts, list) else []
    return any(isinstance(item, _Twice) for item in objects)


def _first_wins(raw: bytes) -> bytes:
    """``raw`` as a reader keeping the first value of a key written twice reads it."""
    return dumps(json.loads(raw, object_pairs_hook=lambda pairs: dict(reversed(pairs))))


def _only_unknown_kinds(raw: bytes) -> bool:
    """Whether all 2.68 refuses in ``raw`` is parts of a kind it loads in no message (a newer
    release's: carried, a warning), not a known kind in the wrong message."""
    return all(
        error["type"] == "union_tag_invalid" and error["ctx"]["tag"] not in TAGS_2_68 for error in _refusals(raw)
    )


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(st.lists(RECORD, min_size=1, max_size=4))
def test_check_passes_only_what_2_68_loads_and_convert_writes_only_what_it_loads(
    tmp_path_factory: pytest.TempPathFactory, records: list[tuple[Any, ...]]
) -> None:
    work = tmp_path_factory.mktemp("gate")
    lines = [_record(*record) for record in records]
    source = work / "in.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    options = Options(jobs=1)
    strict = api.check(str(source), options, strict=True)
    if strict.exit_code == 0:  # a key inside a payload (tool args) may be written twice: carried, 2.68 reads the last
        assert all(_loads(line) and not _twice_read(line) for line in lines)
    lenient = api.check(str(source), options)
    if lenient.exit_code == 0:
        assert all(_only_unknown_kinds(line) for line in lines)
    else:  # the verdict's counts partition the records
        classes = re.findall(
            r"(\d+) (?:of \d+ records to migrate|invalid|rejected|with findings only|current)", lenient.verdict
        )
        assert sum(map(int, classes)) == len(lines), lenient.verdict
    _check_convert(work, source, lines, options)


def _check_convert(work: Path, source: Path, lines: list[bytes], options: Options) -> None:
    """Every record ``convert`` writes is the one it read, or one the oracle loads; the
    others are in the rejects file, unchanged."""
    out = work / "out.jsonl"
    result = api.convert(str(source), str(out), options, rejects=str(work / "rejects.jsonl"))
    written = iter(out.read_bytes().splitlines())
    warned = {row["location"] for row in result.report.warnings}
    dropped = {row["location"] for row in result.report.errors if row["status"] == "rejected"}
    rejected = (work / "rejects.jsonl").read_bytes().splitlines() if (work / "rejects.jsonl").exists() else []
    for n, line in enumerate(lines, 1):
        if f"line {n}" in dropped:
            continue
        output = next(written)  # a part of an unknown kind is carried, and said: a warning
        assert output == line or ((_loads(output) or f"line {n}" in warned) and not _twice(line)), output
        if output == line and _twice(line):  # carried: a reader keeping the first values has nothing to rewrite
            assert process(Record(_first_wins(line), "x", "line 1")).status != "changed", line
    assert next(written, None) is None and len(dropped) == len(rejected)
    assert all(row in lines for row in rejected)
    assert result.report.counts["rejected"] == len(rejected)


@settings(max_examples=300, deadline=None)
@given(RECORD)
def test_the_screen_passes_no_part_in_a_message_2_68_refuses_it_in(record: tuple[Any, ...]) -> None:
    raw = _record(*record)
    if SCREEN(raw) is None:
        return
    try:
        ModelMessagesTypeAdapter.validate_json(orjson.dumps(orjson.loads(raw)["messages"]) if raw[:1] == b"{" else raw)
    except ValidationError as exc:
        assert all(error["type"] != "union_tag_invalid" for error in exc.errors()), exc
