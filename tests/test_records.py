"""Records (histmig.records): finding the history in a record, naming the record."""

from __future__ import annotations

import pickle
import re

import pytest

from histmig.errors import BadFieldPath, NotAHistory
from histmig.records import (
    Located,
    Record,
    check_messages,
    conversation_names,
    envelope_id,
    field_path,
    locate_in_conversation,
    locate_messages,
    names_conversations,
    spelled,
)

HISTORY = [{"kind": "request", "parts": []}]
TEXT = '[{"kind": "request", "parts": []}]'


@pytest.mark.parametrize(
    ("obj", "field", "found"),
    [
        (HISTORY, None, None),
        ({"messages": HISTORY, "history": []}, None, "messages"),
        ({"id": 1, "all_messages": HISTORY}, None, "all_messages"),
        ({"id": 1, "chat": HISTORY}, None, "chat"),
        ({"chat": HISTORY, "messages": "x"}, "chat", "chat"),
        ({"id": 1, "chat-history": HISTORY}, None, "chat-history"),
        ({"id": 1, "chat history": HISTORY}, "chat history", "chat history"),
        ({"payload": {"msgs": HISTORY}}, "payload.msgs", "payload.msgs"),
        ({"payload.msgs": HISTORY}, "payload\\.msgs", "payload\\.msgs"),
        ({"payload.msgs": HISTORY}, None, "payload\\.msgs"),
        ({"id": 1, "payload": {"user": "u", "messages": HISTORY}}, None, "payload.messages"),
        ({"event": {"chat": HISTORY}, "other": {"x": []}}, None, "event.chat"),
    ],
)
def test_the_history_is_the_array_or_the_named_or_found_field(
    obj: object, field: str | None, found: str | None
) -> None:
    located = locate_messages(obj, field)
    assert (located.messages, located.name, located.text) == (HISTORY, found, False)


@pytest.mark.parametrize(
    ("obj", "field", "path"),
    [
        ({"messages": TEXT}, None, ("messages",)),
        ({"id": 3, "chat-history": " " + TEXT}, None, ("chat-history",)),
        ({"payload": {"messages": TEXT}}, "payload.messages", ("payload", "messages")),
    ],
)
def test_a_history_held_as_json_text_is_found_and_put_back_as_text(
    obj: dict, field: str | None, path: tuple[str, ...]
) -> None:
    located = locate_messages(obj, field)
    assert (located.messages, located.path, located.text) == (HISTORY, path, True)
    put = located.put(obj, [{"kind": "response", "parts": []}])
    node = put
    for key in path:
        node = node[key]
    assert node == '[{"kind":"response","parts":[]}]'


def test_a_bare_history_is_replaced_whole() -> None:
    assert locate_messages(HISTORY).put(HISTORY, []) == [] and Located([]).name is None


@pytest.mark.parametrize(
    ("spec", "keys"),
    [
        ("messages", ("messages",)),
        ("payload.messages", ("payload", "messages")),
        ("a\\.b.c", ("a.b", "c")),
        ("a\\\\.b", ("a\\", "b")),
        ("chat history", ("chat history",)),
    ],
)
def test_a_field_path_splits_at_dots_and_a_backslash_escapes_one(spec: str, keys: tuple[str, ...]) -> None:
    assert field_path(spec) == keys
    assert field_path(spelled(keys)) == keys


@pytest.mark.parametrize(
    ("spec", "said"),
    [("", "names an empty key"), ("a..b", "names an empty key"), ("a\\", "lone backslash"), ("a\\b", "not 'b'")],
)
def test_a_field_path_that_names_no_key_is_refused(spec: str, said: str) -> None:
    with pytest.raises(BadFieldPath, match=said):
        field_path(spec)


@pytest.mark.parametrize(
    ("obj", "field", "message"),
    [
        (7, None, "expected a JSON array or object, got a number"),
        (None, None, "expected a JSON array or object, got null"),
        ("x", None, "expected a JSON array or object, got a string"),
        ({"chat": 3}, "chat", "field 'chat' is missing or not an array"),
        (
            {"chat": "[oops"},
            "chat",
            "field 'chat' is JSON text that does not parse (JSON is malformed: invalid character (byte 1))",
        ),
        ({"chat": '[{"kind": "req'}, "chat", "field 'chat' is truncated JSON text"),
        ({"messages": '[{"kind": "req'}, None, "field 'messages' is truncated JSON text"),
        ({"chat": "{}"}, "chat", "field 'chat' is a string that is not a JSON array"),
        ({"payload": []}, "payload.messages", "field 'payload.messages' is missing or not an array"),
        (
            {"messages": {}},
            None,
            "field 'messages' is not an array (if the messages are in another field, name it with --messages-field)",
        ),
        ({"a": HISTORY, "b": HISTORY}, None, "no messages field found (name it with --messages-field)"),
        ({"a": {"m": HISTORY}, "b": {"m": HISTORY}}, None, "no messages field found (name it with --messages-field)"),
        (
            HISTORY[0],
            None,
            "the record is one message, not a history (a store of one message a record: convert, audit, check and otel "
            "put each conversation together with --conversation KEY --order KEY, docs/layouts.md)",
        ),
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


def test_a_record_is_a_value_named_once_its_id_is_known() -> None:
    """A record is told its id by a copy (the source's is kept), travels to a worker and back
    as itself, and compares and hashes by its fields."""
    record = Record(b"[]", "in.jsonl", "line 3")
    named = record._replace(record_id="c-1")
    assert (record.record_id, named.name) == (None, "in.jsonl:line 3 [c-1]")
    assert pickle.loads(pickle.dumps(named)) == named == Record(b"[]", "in.jsonl", "line 3", "c-1") != record
    assert len({named, Record(b"[]", "in.jsonl", "line 3", "c-1")}) == 1
    with pytest.raises(AttributeError):
        record.raw = b"{}"  # type: ignore[misc]


def test_check_messages_names_the_first_item_that_is_not_a_message_under_its_prefix() -> None:
    check_messages([{"kind": "request", "parts": []}, {"kind": "response", "parts": [], "extra": 1}])
    with pytest.raises(
        NotAHistory, match=r"^payload\.msgs\[1\] is not a message \(an object with 'kind' and a 'parts' list\)$"
    ):
        check_messages([{"kind": "request", "parts": []}, {"role": "user"}, "hi"], "payload.msgs")
    with pytest.raises(NotAHistory, match=r"^messages\[0\] is a list, not a message: a record holds one history"):
        check_messages([[], []])
    with pytest.raises(NotAHistory, match=r"^messages\[0\]\.parts is not a list$"):
        check_messages([{"kind": "request", "parts": None}])


def test_a_record_names_its_conversations_by_envelope_field_and_by_message() -> None:
    messages = [
        {"kind": "request", "parts": [], "conversation_id": "c-1"},
        {"kind": "response", "parts": [], "conversation_id": "c-1"},
        {"kind": "request", "parts": [], "conversation_id": None},
        "not a message",
    ]
    envelope = {"session_id": "s-9", "thread_id": 42, "chat_id": None, "conversation_id": True, "id": "r-1"}
    assert conversation_names(envelope, messages) == (
        "conversation_id=c-1",
        "conversation_id=true",  # any value but null names one, as its JSON text
        "session_id=s-9",
        "thread_id=42",
    )
    assert conversation_names(messages, messages) == ("conversation_id=c-1",)
    assert conversation_names({"id": "r-1"}, [{"kind": "request", "parts": []}]) == ()
    assert conversation_names({"thread_id": 1.5, "session_id": ["s"]}, "not a history") == (
        'session_id=["s"]',
        "thread_id=1.5",
    )


@pytest.mark.parametrize(
    ("name", "names"),
    [
        (n, True)
        for n in ("session_id", "SESSION_ID", "Session_Id", "sessionId", "conversationId", "ChatID", "thread_id")
    ]
    + [(n, False) for n in ("session", "user_session_id", "sessions_id", "id")],
)
def test_a_field_or_column_names_a_conversation_in_any_case_with_or_without_its_underscore(
    name: str, names: bool
) -> None:
    assert names_conversations(name) == names
    assert bool(conversation_names({name: "s", "messages": []}, [])) == names


def test_a_conversation_is_named_by_any_value_but_null() -> None:
    assert conversation_names({"sessionId": "s", "thread_id": 1.5, "chat_id": None}, []) == (
        "sessionId=s",
        "thread_id=1.5",
    )
    assert conversation_names({"session_id": {"id": "x"}}, [{"conversation_id": "c"}]) == (
        "conversation_id=c",
        'session_id={"id":"x"}',
    )


def test_a_conversation_is_named_by_a_field_of_an_object_within_the_envelope_as_the_option_names_it() -> None:
    envelope = {"meta": {"chat.v1": {"threadId": 7}, "user_id": "u"}, "runs": [{"session_id": "s"}], "messages": []}
    assert conversation_names(envelope, []) == ("meta.chat\\.v1.threadId=7",)


def test_a_record_of_a_conversation_may_hold_its_one_message_in_a_field() -> None:
    message = {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]}
    record = {"conversation_id": "c", "seq": 2, "message": message}
    for field in (None, "message"):
        located = locate_in_conversation(record, field)
        assert (located.messages, located.path, located.single) == ([message], ("message",), True)
        assert located.put(record, [{**message, "kind": "request"}]) == record
    assert locate_in_conversation(message) == Located([message], single=True)
    with pytest.raises(NotAHistory, match="no messages field found"):  # two messages: which one is the record's
        locate_in_conversation({"a": message, "b": message})
    one = "the record holds one message (field 'message'), not a history (a store of one message a record: "
    for field in (None, "message"):  # read as a whole history, it names the option that reads it
        with pytest.raises(NotAHistory, match="^" + re.escape(one) + ".*--conversation KEY --order KEY"):
            locate_messages(record, field)
