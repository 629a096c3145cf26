"""Records (histmig.records): finding the history in a record, naming the record."""

from __future__ import annotations

import pytest

from histmig.records import NotAHistory, Record, envelope_id, locate_messages

HISTORY = [{"kind": "request", "parts": []}]


@pytest.mark.parametrize(
    ("obj", "field", "found"),
    [
        (HISTORY, None, None),
        ({"messages": HISTORY, "history": []}, None, "messages"),
        ({"id": 1, "all_messages": HISTORY}, None, "all_messages"),
        ({"id": 1, "chat": HISTORY}, None, "chat"),
        ({"chat": HISTORY, "messages": "x"}, "chat", "chat"),
    ],
)
def test_the_history_is_the_array_or_the_named_or_found_field(obj: object, field: str | None, found: str | None) -> None:
    messages, where = locate_messages(obj, field)
    assert (messages, where) == (HISTORY, found)


@pytest.mark.parametrize(
    ("obj", "field", "message"),
    [
        (7, None, "expected a JSON array or object, got a number"),
        (None, None, "expected a JSON array or object, got null"),
        ("x", None, "expected a JSON array or object, got a string"),
        ({"chat": 3}, "chat", "field 'chat' is missing or not an array"),
        ({"messages": {}}, None, "field 'messages' is not an array (if the messages are in another field, name it with --messages-field)"),
        ({"a": HISTORY, "b": HISTORY}, None, "no messages field found (name it with --messages-field)"),
    ],
)
def test_what_is_not_a_history_is_said(obj: object, field: str | None, message: str) -> None:
    with pytest.raises(NotAHistory) as raised:
        locate_messages(obj, field)
    assert str(raised.value) == message


def test_a_record_is_named_by_file_place_and_id() -> None:
    assert envelope_id({"conversation_id": 42, "id": True}) == "42"
    assert envelope_id({"record_id": "r"}) == "r" and envelope_id(HISTORY) is None
    assert Record(b"[]", "in.jsonl", "line 3", "c-1").name == "in.jsonl:line 3 [c-1]"
    assert Record(b"[]", "in.jsonl", "line 3").name == "in.jsonl:line 3"
