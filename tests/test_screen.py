"""The screen and the settled check (histmig.screen), built from the rules' looks: the screen
passes a record only when no rule can change it and orjson reads it; the settled check takes a
migrated record only when 2.68 loads it and a second pass changes nothing."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
import orjson
import pytest

from histmig.engine import Plan, findings, joined_history
from histmig.options import Options
from histmig.rules import pending, select
from histmig.rules.base import Docs, Finding, HistoryLook, Rule, ValueField
from histmig.schema import is_current
from histmig.screen import Screen, settled_for
from tests.conftest import CORPUS, HISTORIES, NATIVE_RELEASES, converted, history_id, load

SCREEN = Screen(select())


@pytest.mark.parametrize(
    "raw",
    [
        b'{"messages":[{"kind":"request","parts":"oops"}]}',
        b'{"messages":["not a message"]}',
        b'{"messages":[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"\xff"}]}]}',
        b'{"messages":[{"kind":"request","parts":[{"part_kind":"retry\\u002dprompt","content":"x"}]}]}',
        b'{"messages":[{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"t","args":{"args\\u005fjson":"{}"}}]}]}',
        b'{"messages":[{"kind":"request","parts":[{"part_kind":"text","part_kind":"retry-prompt","content":"x"}]}]}',
        b'{"messages":[{"kind":"request","parts":[]}],"messages":3}',
        b'{"messages":[{"kind":"request","parts":[],"x":' + b"[" * 1100 + b"]" * 1100 + b"}]}",
        b'{"messages":[{"kind":"request","parts":[{"part_kind":"brand-new","content":"x"}]}]}',
        b'{"messages":[]} trailing',
        b'{"history":[{"kind":"request","parts":[]}]}',
    ],
    ids=[
        "parts-not-a-list",
        "message-not-an-object",
        "invalid-utf8",
        "escaped-retry-prompt",
        "escaped-args-wrapper",
        "duplicate-part-kind",
        "duplicate-messages",
        "too-deep",
        "unknown-part-kind",
        "trailing-bytes",
        "other-field",
    ],
)
def test_the_screen_refuses_what_it_cannot_vouch_for(raw: bytes) -> None:
    assert SCREEN(raw) is None


def test_the_screen_reads_the_named_field_and_bare_histories() -> None:
    raw = b'{"history":[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"x"}]}]}'
    assert Screen(select(), "history")(raw) == () and SCREEN(raw) is None
    assert SCREEN(b'[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"x"}]}]') == ()
    assert SCREEN(b'[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"x"}]}]') is None


def test_the_screen_asks_only_what_the_selected_rules_look_at() -> None:
    retry = b'[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"x"}]}]'
    null_id = b'[{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"t","args":{},"tool_call_id":null}]}]'
    hm2 = tuple(rule for rule in select() if rule.code.startswith("HM2"))
    assert Screen(hm2)(null_id) is None and Screen(hm2)(retry) is None  # HM201 still looks at retry-prompt parts
    hm1 = tuple(rule for rule in select() if rule.code.startswith("HM1"))
    assert Screen(hm1)(null_id) == () and Screen(hm1)(retry) is None


def test_on_the_corpus_the_screen_passes_exactly_what_no_rule_finds_anything_in() -> None:
    verdicts = {path: SCREEN(orjson.dumps({"messages": load(path)})) for path in HISTORIES}
    passed = [path for path, verdict in verdicts.items() if verdict == ()]
    reported = {
        history_id(path): [(f.code, f.message, f.part, f.severity) for f in verdict]
        for path, verdict in verdicts.items()
        if verdict
    }
    assert reported == {
        f"v{release}/m_deferred_tool_model_retry": [("HM407", 3, 0, "warning")] for release in NATIVE_RELEASES
    }
    pending_none = [path for path in HISTORIES if not pending(load(path), select())]
    quiet = [path for path in HISTORIES if not findings(load(path))]
    assert set(passed) == set(pending_none) == set(quiet)
    unchanged = [path for path in HISTORIES if converted(load(path))[1] == []]
    assert (len(quiet), len(unchanged), len(HISTORIES)) == (72, 74, 212)
    assert {path.name for path in set(unchanged) - set(quiet)} == {
        "m_deferred_tool_model_retry.json"
    }  # HM407: a deferred call awaits its result


def test_on_the_corpus_a_settled_output_is_one_the_framework_schema_loads() -> None:
    settled = Options().plan().settled("messages")
    verdicts = []
    for path in HISTORIES:
        messages, _ = converted(load(path))
        output = orjson.dumps({"messages": messages})
        verdicts.append(
            (settled(output), is_current(messages), bool(converted(messages)[1]), bool(pending(messages, select())))
        )
    assert all(current and not again for ok, current, again, _ in verdicts if ok)
    assert sum(ok for ok, *_ in verdicts) == len(HISTORIES)
    assert sum(found for *_, found in verdicts) == 6  # the deferred calls HM407 finds: reported, never changed
    assert (
        settled_for(select(), "messages", frozenset({"HM407"}))(
            orjson.dumps({"messages": load(CORPUS / "v2.68.0" / "m_deferred_tool_model_retry.json")})
        )
        is False
    )


@pytest.mark.parametrize(
    "messages",
    [
        [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "x", "timestamp": "not a date"}]}],
        [
            {
                "kind": "request",
                "parts": [{"part_kind": "tool-return", "tool_name": "t", "content": 1, "tool_call_id": None}],
            }
        ],
        [
            {
                "kind": "request",
                "parts": [{"part_kind": "retry-feedback", "content": "x", "retry": {"cause": "unknown_tool"}}],
            }
        ],
        [{"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "t", "args": {"args_json": "{}"}}]}],
        [{"kind": "response", "parts": [], "provider_request_id": "r"}],
        [{"kind": "response", "parts": [], "usage": {"input_tokens": 1.5}}],
        [{"kind": "request", "parts": [{"part_kind": "instruction", "content": "x"}]}],
        [{"kind": "request", "parts": [{"part_kind": "compaction", "timestamp": None}]}],
        [{"kind": "response", "parts": [], "timestamp": None}],
    ],
    ids=[
        "bad-timestamp",
        "null-id",
        "wrong-cause",
        "args-wrapper",
        "provider-request-id",
        "float-tokens",
        "instruction-part",
        "null-timestamp-undeclared",
        "null-response-timestamp",
    ],
)
def test_the_settled_check_refuses_what_the_framework_refuses_or_a_rule_changes(messages: list) -> None:
    assert not settled_for(select(), "messages")(orjson.dumps({"messages": messages}))
    assert not settled_for(select(), None)(orjson.dumps(messages))


def test_the_settled_check_takes_what_the_framework_loads_and_no_rule_changes() -> None:
    messages = [
        {
            "kind": "request",
            "parts": [{"part_kind": "compaction", "timestamp": "2026-01-01T00:00:00Z"}],
            "timestamp": None,
        },
        {
            "kind": "response",
            "parts": [
                {"part_kind": "tool-call", "tool_name": "t", "args": {"args_json": "{}", "x": 1}, "tool_call_id": "c"}
            ],
            "timestamp": "2026-01-01T00:00:00Z",
        },
        {
            "kind": "request",
            "parts": [{"part_kind": "tool-return", "tool_name": "t", "content": 1, "tool_call_id": "c"}],
        },
    ]
    assert is_current(messages) and not pending(messages, select())
    assert settled_for(select(), "messages")(orjson.dumps({"messages": messages})) is False
    messages[1]["parts"][0]["args"] = {"x": 1}
    assert settled_for(select(), "messages")(orjson.dumps({"messages": messages})) is True
    assert settled_for(select(), None)(orjson.dumps(messages)) is True


def _toy(code: str, quiet: object) -> Rule:
    return Rule(
        code,
        code.lower(),
        "toy",
        "tests",
        Docs("", "", "[]", "[]"),
        (ValueField("content", parts="text", quiet=quiet, test=lambda m, p: True),),
        lambda messages, ctx: [],
    )


def test_two_looks_at_one_field_must_agree_on_its_quiet_type() -> None:
    agreeing = (_toy("HM991", str), _toy("HM992", str))
    assert Screen(agreeing)(b'[{"kind":"response","parts":[{"part_kind":"text","content":"x"}]}]') == ()
    with pytest.raises(TypeError, match="two rules look at text.content with different quiet types"):
        Screen((_toy("HM991", str), _toy("HM992", Annotated[str, msgspec.Meta(pattern="^x")])))


CLEAN = [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "x"}]}]
LEGACY = [{"kind": "request", "parts": [{"part_kind": "retry-prompt", "content": "x"}]}]


@pytest.mark.parametrize("key", ["chat-history", "chat history", "payload.msgs", "class", "über"])
def test_the_screen_and_the_settled_check_take_any_json_key(key: str) -> None:
    spec = key.replace(".", "\\.")
    assert Screen(select(), spec)(orjson.dumps({"id": 1, key: CLEAN})) == ()
    assert Screen(select(), spec)(orjson.dumps({"id": 1, key: LEGACY})) is None
    assert settled_for(select(), spec)(orjson.dumps({key: CLEAN}))


def test_the_screen_follows_a_nested_path() -> None:
    screen = Screen(select(), "payload.a\\.b")
    assert screen(orjson.dumps({"payload": {"x": 1, "a.b": CLEAN}})) == ()
    assert screen(orjson.dumps({"payload": {"a.b": LEGACY}})) is None
    assert screen(orjson.dumps({"payload": CLEAN})) is None
    assert settled_for(select(), "payload.a\\.b")(orjson.dumps({"payload": {"a.b": CLEAN}}))


def test_the_screen_decodes_a_history_held_as_json_text_a_second_time() -> None:
    assert SCREEN(orjson.dumps({"messages": orjson.dumps(CLEAN).decode()})) == ()
    assert SCREEN(orjson.dumps({"messages": orjson.dumps(LEGACY).decode()})) is None
    assert SCREEN(orjson.dumps({"messages": "[{oops"})) is None
    assert SCREEN(orjson.dumps({"messages": "not a history"})) is None


@pytest.mark.parametrize("target", ["2.59.0", "2.0.0", "0.0.20"])
def test_for_an_older_target_the_screen_passes_only_what_the_full_way_leaves_quiet(target: str) -> None:
    from histmig.engine import process_full
    from histmig.options import Options
    from histmig.records import Record

    plan = Options(target=target).plan()
    raws = [orjson.dumps({"messages": load(path)}) for path in HISTORIES]
    passed = [raw for raw in raws if plan.screen(raw) == ()]
    assert passed and all(process_full(Record(raw, "corpus", "file"), plan).quiet for raw in passed)
    native = orjson.dumps(
        {
            "messages": load(
                next(path for path in HISTORIES if path.parent.name == "v2.68.0" and path.stem == "l_no_retry")
            )
        }
    )
    feedback = b'{"messages":[{"kind":"request","parts":[{"part_kind":"retry-feedback","content":"x","retry":{"cause":"model_retry"}}]}]}'
    assert (plan.screen(native) == ()) is (target != "0.0.20")  # its bare arguments are what 0.0.20 cannot load
    assert plan.screen(feedback) is None and SCREEN(feedback) == ()


def _flagged(messages, ctx):  # the toy family's find: a text part saying FLAG
    return [
        Finding("HM998", m, p, "flagged", "flag", "exact")
        for m, message in enumerate(messages)
        for p, part in enumerate(message["parts"])
        if part.get("part_kind") == "text" and part.get("content") == "FLAG"
    ]


def _flagged_skeleton(messages, parts):
    return [
        Finding("HM998", m, p, "flagged", "flag", "exact")
        for m, message in enumerate(messages)
        for p, part in enumerate(message.parts)
        if part._kind == "text" and part.content == "FLAG"
    ]


def test_two_history_look_families_are_both_asked_and_a_history_without_their_parts_is_not() -> None:
    """The pairing look and a toy one reading text parts: each family's findings are kept with
    its rule's severity; a history holding no part either reads is passed without asking."""
    toy = Rule(
        code="HM998",
        name="flag",
        summary="a text part saying FLAG (reported)",
        source="tests",
        docs=Docs(
            what="Reports FLAG.",
            why="A test rule.",
            before='[{"kind":"response","parts":[{"part_kind":"text","content":"FLAG"}]}]',
        ),
        looks=(
            HistoryLook(
                lambda messages: frozenset({"HM998"}) if _flagged(messages, None) else frozenset(),
                _flagged_skeleton,
                {"text": (("content", Any),)},
            ),
        ),
        find=_flagged,
        severity="warning",
    )
    screen = Screen((*select(), toy))
    frontier = [
        {
            "kind": "request",
            "parts": [{"part_kind": "user-prompt", "content": "hi", "timestamp": "2025-01-01T00:00:00Z"}],
        },
        {
            "kind": "response",
            "parts": [
                {"part_kind": "text", "content": "FLAG"},
                {"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": "c1"},
            ],
            "timestamp": "2025-01-01T00:00:01Z",
        },
    ]
    verdict = screen(orjson.dumps(frontier))
    assert sorted((f.code, f.message, f.part, f.severity) for f in verdict) == [
        ("HM407", 1, 1, "warning"),
        ("HM998", 1, 0, "warning"),
    ]
    assert screen(orjson.dumps(frontier[:1])) == ()
    asked: list[int] = []
    quiet = Screen(
        (
            *select(),
            Rule(
                code="HM997",
                name="count",
                summary="s",
                source="tests",
                docs=toy.docs,
                find=_flagged,
                looks=(
                    HistoryLook(
                        lambda m: frozenset(), lambda m, p: asked.append(1) or [], {"text": (("content", Any),)}
                    ),
                ),
            ),
        )
    )
    assert quiet(orjson.dumps(frontier[:1])) == () and asked == []


def _joined_verdict(raws: list[bytes], field: str | None = None) -> Any:
    """What the screen says of a conversation today without :meth:`Screen.pieces`: of the
    history its records put together (:func:`~histmig.engine.joined_history`)."""
    joined = joined_history(raws, field)
    return None if joined is None else Plan(grouped=True).history_screen(joined)  # type: ignore[misc]


def _pieces(raws: list[bytes], field: str | None = None) -> Any:
    return Plan(grouped=True, messages_field=field).screen.pieces(raws)  # type: ignore[union-attr]


@pytest.mark.parametrize("path", HISTORIES, ids=history_id)
def test_on_the_corpus_the_pieces_of_a_history_screen_as_the_history_put_together(path: Any) -> None:
    """Stored a message a record, a run (two halves) a record, bare or in an envelope: the
    verdict of the pieces is the joined history's, its findings' places the history's own."""
    messages = load(path)
    half = len(messages) // 2
    layouts = [
        [orjson.dumps({"id": "c", "seq": i, "messages": [message]}) for i, message in enumerate(messages)],
        [orjson.dumps(messages[:half]), orjson.dumps({"id": "c", "messages": messages[half:]})],
    ]
    for raws in layouts:
        assert _pieces(raws) == _joined_verdict(raws)
        assert _pieces(raws, "messages") == _joined_verdict(raws, "messages")


_MESSAGE = {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]}
_RETRY = {"kind": "request", "parts": [{"part_kind": "retry-prompt", "content": "bad"}]}


@pytest.mark.parametrize(
    ("record", "pieces"),
    [
        ({"id": "c", "messages": [_MESSAGE]}, ()),
        ([_MESSAGE], ()),
        ({"id": "c", "messages": [_RETRY]}, None),
        ({"id": "c", "messages": orjson.dumps([_MESSAGE]).decode()}, None),  # JSON text: read by neither
        ({"messages": [_MESSAGE], "history": "text"}, None),  # another candidate that is no array
        ({"messages": [_RETRY], "history": "text"}, None),
        ({"messages": [_MESSAGE], "history": 3}, None),
        (_MESSAGE, False),  # one message: read whole
        ({**_RETRY, "messages": [_MESSAGE]}, False),  # one message, its messages field does not count
        ({**_MESSAGE, "messages": [_RETRY]}, False),
        ({**_MESSAGE, "messages": [{"kind": "request"}]}, False),
        ({"id": "c", "history": [_MESSAGE]}, False),  # another candidate
        ({"id": "c", "messages": None, "history": [_RETRY]}, False),
        ({"id": "c"}, False),
    ],
)
def test_the_pieces_of_a_history_say_nothing_where_it_is_put_together_otherwise(record: Any, pieces: Any) -> None:
    """Records whose history is not where the screen reads it say ``False`` (the history is
    then put together); JSON text, or a record that does not decode, is what the joined
    history says of it: ``None``."""
    raws = [orjson.dumps({"id": "c", "messages": [_MESSAGE]}), orjson.dumps(record)]
    assert _pieces(raws) == pieces
    if pieces is not False:
        assert _joined_verdict(raws) == pieces


@pytest.mark.parametrize(
    ("raw", "pieces"),
    [
        (b' [{"kind":"request","parts":[]}]', False),  # not [ or { first
        (b"", False),
        (b"5", False),
        (b'{"id":"\xff","messages":[{"kind":"request","parts":[]}]}', False),  # not UTF-8, outside the history
        (b'{"id":"c","messages":[{"kind":"request","parts":[],"x":' + b"[" * 1100 + b"]" * 1100 + b"}]}", False),
        (b'{"messages":[{"kind":"request","parts":[]}]', None),  # truncated
    ],
    ids=["space-first", "empty", "number", "not-utf8", "too-deep", "truncated"],
)
def test_the_pieces_of_a_history_read_each_records_own_bytes(raw: bytes, pieces: Any) -> None:
    raws = [b'{"messages":[{"kind":"request","parts":[]}]}', raw]
    assert _pieces(raws) == pieces
    if pieces is not False:
        assert _joined_verdict(raws) == pieces


def test_the_pieces_of_a_history_at_a_named_field_read_that_key_alone() -> None:
    raws = [orjson.dumps({"log": [_MESSAGE]}), orjson.dumps({**_MESSAGE, "log": [_MESSAGE]})]
    assert _pieces(raws, "log") == () == _joined_verdict(raws, "log")  # a message with the field: the field
    for missing in ({"messages": [_MESSAGE]}, {"log": None}, {"log": "[]"}):
        assert _pieces([raws[0], orjson.dumps(missing)], "log") is None
        assert _joined_verdict([raws[0], orjson.dumps(missing)], "log") is None
