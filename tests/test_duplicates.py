"""Duplicated keys (histmig.duplicates): found exactly, named with their path, told apart as a
key histmig reads (the envelope's, a message's, a part's) or one inside a payload, and a record
without one costs one encode."""

from __future__ import annotations

import msgspec
import pytest

from histmig.duplicates import duplicated_key
from tests.conftest import CORPUS

_DECODER = msgspec.json.Decoder()


def _found(raw: bytes, field: tuple[str, ...] = ()) -> str | None:
    found = duplicated_key(raw, _DECODER.decode(raw), field)
    return None if found is None else str(found.problem)


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (b'{"messages":[],"messages":[]}', "duplicated key 'messages'"),
        (b'[{"kind":"request","kind":"response","parts":[]}]', "messages[0]: duplicated key 'kind'"),
        (
            b'{"messages":[{"kind":"request","parts":[{"part_kind":"retry-prompt","part_kind":"text"}]}]}',
            "messages[0].parts[0]: duplicated key 'part_kind'",
        ),
        (
            b'{"a":{"b":[1,{"tool_call_id":"x","c":"y","tool_call_id":"x"}]}}',
            "a.b[1]: duplicated key 'tool_call_id'",
        ),
        (b'{"x":"a\\u003ab","k":1,"k":2}', "duplicated key 'k'"),  # an escaped colon: found the slow way
        (b'{"k" : 1 ,\n "k": {"k":1}}', "duplicated key 'k'"),  # whitespace around the colon
        (b'{"s":"a:b","k":{"v":"c:d"},"k":{}}', "duplicated key 'k'"),  # the dropped value held a colon
        (b'{"x":"a\\u003Ab","m":[{"k":1,"k":2}]}', "m[0]: duplicated key 'k'"),  # an escaped colon, nested
        (b'{"s":"\\n","k":1,"k":2}', "duplicated key 'k'"),  # a backslash, but no escaped colon
        (b'{"k\\u0061":1,"ka":2}', "duplicated key 'ka'"),  # a key written with an escape
        (b'{"a\\"b":1,"a\\"b":2}', "duplicated key 'a\"b'"),
        (b'{"n":123456789012345678901234567890,"k":1,"k":2}', "duplicated key 'k'"),  # beyond orjson: msgspec's
    ],
)
def test_a_duplicated_key_is_named_with_its_path(raw: bytes, said: str) -> None:
    assert _found(raw) == said + ": readers differ on which of its values counts"


@pytest.mark.parametrize(
    "raw",
    [
        b'{"x":"a\\u003ab","k":1}',
        b'{"args":"{\\"a\\":1,\\"a\\":2}"}',  # a duplicate inside a string is the string's own business
        b'{"k\\u0022":1,"k":2}',
        b'{"s":"\\"x\\": y","k":{"a":1}}',  # compact, as its encoding is: compared, not counted
        b'{"s" : "a\\nb:c", "k" : {"a" : 1}}',  # not its encoding, a backslash but no escaped colon: counted
        b'{"n":123456789012345678901234567890,"k":1}',
        b"[]",
    ],
)
def test_a_record_without_one_is_passed(raw: bytes) -> None:
    assert _found(raw) is None


def test_no_record_of_the_corpus_has_one() -> None:
    lines = (CORPUS / "all.jsonl").read_bytes().splitlines()
    assert len(lines) == 212 and [_found(line) for line in lines] == [None] * 212


@pytest.mark.parametrize(
    ("raw", "field", "said", "read"),
    [
        (b'{"id":1,"id":2,"messages":[]}', ("messages",), "duplicated key 'id'", True),
        (
            b'{"p":{"messages":[],"messages":[{"kind":"request","parts":[]}]}}',
            ("p", "messages"),
            "p: duplicated key 'messages'",
            True,
        ),
        (b'[{"kind":"request","parts":[],"parts":[]}]', (), "messages[0]: duplicated key 'parts'", True),
        (
            b'[{"kind":"response","parts":[{"part_kind":"tool-call","tool_call_id":"a","tool_call_id":"b"}]}]',
            (),
            "messages[0].parts[0]: duplicated key 'tool_call_id'",
            True,
        ),
        (
            b'[{"kind":"response","parts":[{"part_kind":"tool-call","args":{"a":1,"a":2}}]}]',
            (),
            "messages[0].parts[0].args: duplicated key 'a'",
            False,
        ),
        (b'{"meta":{"k":1,"k":2},"messages":[]}', ("messages",), "meta: duplicated key 'k'", False),
        (  # a payload's comes first in the record, the part's is the one named
            b'[{"kind":"response","usage":{"n":1,"n":2},"parts":[{"part_kind":"text","content":"a","content":"b"}]}]',
            (),
            "messages[0].parts[0]: duplicated key 'content'",
            True,
        ),
        (
            b'[{"kind":"request","parts":[{"part_kind":"user-prompt","content":[{"t":1,"t":2}]}]}]',
            (),
            "messages[0].parts[0].content[0]: duplicated key 't'",
            False,
        ),
    ],
)
def test_a_key_histmig_reads_is_told_from_a_payloads(raw: bytes, field: tuple[str, ...], said: str, read: bool) -> None:
    found = duplicated_key(raw, _DECODER.decode(raw), field)
    assert found is not None and found.read is read
    assert str(found.problem).startswith(said)


def test_the_objects_on_the_paths_of_fields_histmig_reads_name_keys_it_reads() -> None:
    raw = b'{"chat": {"id": "a", "id": "b"}, "o": {"p": {"n": 1, "n": 2}}, "messages": []}'
    parsed = msgspec.json.decode(raw)
    said = "duplicated key {!r}: readers differ on which of its values counts"
    found = duplicated_key(raw, parsed, ("messages",))
    assert found is not None and (found.problem.path, found.problem.message, found.read) == (
        "chat",
        said.format("id"),
        False,
    )
    found = duplicated_key(raw, parsed, ("messages",), fields=(("chat", "id"),))
    assert found is not None and (found.problem.path, found.read) == ("chat", True)
    found = duplicated_key(raw, parsed, ("messages",), fields=(("o", "p", "n"), ("x",)))  # the first read one
    assert found is not None and (found.problem.path, found.problem.message, found.read) == (
        "o.p",
        said.format("n"),
        True,
    )
    found = duplicated_key(raw, parsed, ("messages",), fields=(("o", "n"),))  # o.p is no field's
    assert found is not None and (found.problem.path, found.read) == ("chat", False)
