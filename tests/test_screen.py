"""The screen and the settled check (histmig.screen), built from the rules' looks: the screen
passes a record only when no rule can change it and orjson reads it; the settled check takes a
migrated record only when 2.68 loads it and a second pass changes nothing."""

from __future__ import annotations

from typing import Annotated

import msgspec
import orjson
import pytest

from histmig.rules import pending, select
from histmig.rules.base import Docs, Rule, ValueField
from histmig.schema import is_current
from histmig.screen import Screen, settled_for
from tests.conftest import HISTORIES, converted, load

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
        "parts-not-a-list", "message-not-an-object", "invalid-utf8", "escaped-retry-prompt", "escaped-args-wrapper",
        "duplicate-part-kind", "duplicate-messages", "too-deep", "unknown-part-kind", "trailing-bytes", "other-field",
    ],
)
def test_the_screen_refuses_what_it_cannot_vouch_for(raw: bytes) -> None:
    assert not SCREEN(raw)


def test_the_screen_reads_the_named_field_and_bare_histories() -> None:
    raw = b'{"history":[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"x"}]}]}'
    assert Screen(select(), "history")(raw) and not SCREEN(raw)
    assert SCREEN(b'[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"x"}]}]')
    assert not SCREEN(b'[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"x"}]}]')


def test_the_screen_asks_only_what_the_selected_rules_look_at() -> None:
    retry = b'[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"x"}]}]'
    null_id = b'[{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"t","args":{},"tool_call_id":null}]}]'
    hm2 = tuple(rule for rule in select() if rule.code.startswith("HM2"))
    assert not Screen(hm2)(null_id) and not Screen(hm2)(retry)  # HM201 still looks at retry-prompt parts
    hm1 = tuple(rule for rule in select() if rule.code.startswith("HM1"))
    assert Screen(hm1)(null_id) and not Screen(hm1)(retry)


def test_on_the_corpus_the_screen_passes_exactly_what_no_rule_changes() -> None:
    passed = [path for path in HISTORIES if SCREEN(orjson.dumps({"messages": load(path)}))]
    pending_none = [path for path in HISTORIES if not pending(load(path), select())]
    unchanged = [path for path in HISTORIES if converted(load(path))[1] == []]
    assert set(passed) == set(pending_none) == set(unchanged)
    assert (len(unchanged), len(HISTORIES)) == (74, 212)


def test_on_the_corpus_a_settled_output_is_one_the_framework_schema_loads() -> None:
    settled = settled_for(select(), "messages")
    verdicts = []
    for path in HISTORIES:
        messages, _ = converted(load(path))
        output = orjson.dumps({"messages": messages})
        verdicts.append((settled(output), is_current(messages), bool(pending(messages, select()))))
    assert all(current and not again for ok, current, again in verdicts if ok)
    assert sum(ok for ok, _, _ in verdicts) == len(HISTORIES)


@pytest.mark.parametrize(
    "messages",
    [
        [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "x", "timestamp": "not a date"}]}],
        [{"kind": "request", "parts": [{"part_kind": "tool-return", "tool_name": "t", "content": 1, "tool_call_id": None}]}],
        [{"kind": "request", "parts": [{"part_kind": "retry-feedback", "content": "x", "retry": {"cause": "unknown_tool"}}]}],
        [{"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "t", "args": {"args_json": "{}"}}]}],
        [{"kind": "response", "parts": [], "provider_request_id": "r"}],
        [{"kind": "response", "parts": [], "usage": {"input_tokens": 1.5}}],
        [{"kind": "request", "parts": [{"part_kind": "instruction", "content": "x"}]}],
        [{"kind": "request", "parts": [{"part_kind": "compaction", "timestamp": None}]}],
        [{"kind": "response", "parts": [], "timestamp": None}],
    ],
    ids=["bad-timestamp", "null-id", "wrong-cause", "args-wrapper", "provider-request-id", "float-tokens", "instruction-part", "null-timestamp-undeclared", "null-response-timestamp"],
)
def test_the_settled_check_refuses_what_the_framework_refuses_or_a_rule_changes(messages: list) -> None:
    assert not settled_for(select(), "messages")(orjson.dumps({"messages": messages}))
    assert not settled_for(select(), None)(orjson.dumps(messages))


def test_the_settled_check_takes_what_the_framework_loads_and_no_rule_changes() -> None:
    messages = [
        {"kind": "request", "parts": [{"part_kind": "compaction", "timestamp": "2026-01-01T00:00:00Z"}], "timestamp": None},
        {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "t", "args": {"args_json": "{}", "x": 1}, "tool_call_id": "c"}], "timestamp": "2026-01-01T00:00:00Z"},
    ]
    assert is_current(messages) and not pending(messages, select())
    assert settled_for(select(), "messages")(orjson.dumps({"messages": messages})) is False
    messages[1]["parts"][0]["args"] = {"x": 1}
    assert settled_for(select(), "messages")(orjson.dumps({"messages": messages})) is True
    assert settled_for(select(), None)(orjson.dumps(messages)) is True


def _toy(code: str, quiet: object) -> Rule:
    return Rule(code, code.lower(), "toy", "tests", Docs("", "", "[]", "[]"), (ValueField("content", parts="text", quiet=quiet, test=lambda m, p: True),), lambda messages, ctx: [])


def test_two_looks_at_one_field_must_agree_on_its_quiet_type() -> None:
    agreeing = (_toy("HM991", str), _toy("HM992", str))
    assert Screen(agreeing)(b'[{"kind":"response","parts":[{"part_kind":"text","content":"x"}]}]')
    with pytest.raises(TypeError, match="two rules look at text.content with different quiet types"):
        Screen((_toy("HM991", str), _toy("HM992", Annotated[str, msgspec.Meta(pattern="^x")])))
