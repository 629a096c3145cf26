"""The pipeline's fast paths: :func:`histmig.rules.pending` names the rules that can
change a history, and the :class:`histmig.screen.Screen` passes a record only when no rule
can change it and orjson reads it."""

from __future__ import annotations

import orjson
import pytest

from histmig.pipeline import process_full
from histmig.records import Record
from histmig.rules import REGISTRY, pending
from histmig.schema import is_current
from histmig.screen import Screen, settled_for
from tests.conftest import HISTORIES, converted, load

CALL = {"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": "c"}
SCREEN = Screen()

TARGETED = {
    "tool-bound-retry-prompt": ([{"kind": "request", "parts": [{"part_kind": "retry-prompt", "content": "x", "tool_name": "t", "tool_call_id": "c"}]}], {"HM101"}),
    "tool-less-retry-prompt": ([{"kind": "request", "parts": [{"part_kind": "retry-prompt", "content": "x"}]}], {"HM102", "HM103"}),
    "instruction": ([{"kind": "request", "parts": [{"part_kind": "instruction", "content": "x"}]}], {"HM204"}),
    "feedback-without-input": (
        [{"kind": "request", "parts": [{"part_kind": "retry-feedback", "content": [{"type": "t", "loc": [], "msg": "m"}], "retry": {"cause": "validation_error"}}]}],
        {"HM203"},
    ),
    "null-id": ([{"kind": "response", "parts": [{**CALL, "tool_call_id": None}]}], {"HM201"}),
    "null-part-timestamp": ([{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "x", "timestamp": None}]}], {"HM202"}),
    "null-response-timestamp": ([{"kind": "response", "parts": [], "timestamp": None}], {"HM202"}),
    "args-wrapper": ([{"kind": "response", "parts": [{**CALL, "args": {"args_json": "{}"}}]}], {"HM301"}),
    "provider-request-id": ([{"kind": "response", "parts": [], "provider_request_id": "r"}], {"HM302"}),
}


@pytest.mark.parametrize("name", TARGETED)
def test_every_shape_a_rule_targets_is_pending_and_screened_out(name: str) -> None:
    history, codes = TARGETED[name]
    assert {rule.code for rule in pending(history, tuple(REGISTRY))} == codes
    assert not SCREEN(orjson.dumps({"messages": history}))


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
    assert Screen("history")(raw) and not SCREEN(raw)
    assert SCREEN(b'[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"x"}]}]')
    assert not SCREEN(b'[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"x"}]}]')


def test_on_the_corpus_the_screen_passes_exactly_what_no_rule_changes() -> None:
    passed = [path for path in HISTORIES if SCREEN(orjson.dumps({"messages": load(path)}))]
    pending_none = [path for path in HISTORIES if not pending(load(path), tuple(REGISTRY))]
    unchanged = [path for path in HISTORIES if converted(load(path))[1] == []]
    assert set(passed) == set(pending_none) == set(unchanged)
    assert (len(unchanged), len(HISTORIES)) == (74, 212)


def test_on_the_corpus_a_settled_output_is_one_the_framework_schema_loads() -> None:
    settled = settled_for("messages")
    verdicts = []
    for path in HISTORIES:
        messages, _ = converted(load(path))
        output = orjson.dumps({"messages": messages})
        verdicts.append((settled(output), is_current(messages), bool(pending(messages))))
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
    ],
    ids=["bad-timestamp", "null-id", "wrong-cause", "args-wrapper", "provider-request-id", "float-tokens", "instruction-part", "null-timestamp-undeclared"],
)
def test_the_settled_check_refuses_what_the_framework_refuses_or_a_rule_changes(messages: list) -> None:
    assert not settled_for("messages")(orjson.dumps({"messages": messages}))
    assert not settled_for(None)(orjson.dumps(messages))


def test_the_settled_check_takes_what_the_framework_loads_and_no_rule_changes() -> None:
    messages = [
        {"kind": "request", "parts": [{"part_kind": "compaction", "timestamp": "2026-01-01T00:00:00Z"}], "timestamp": None},
        {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "t", "args": {"args_json": "{}", "x": 1}, "tool_call_id": "c"}], "timestamp": "2026-01-01T00:00:00Z"},
    ]
    assert is_current(messages) and not pending(messages)
    assert settled_for("messages")(orjson.dumps({"messages": messages})) is False
    messages[1]["parts"][0]["args"] = {"x": 1}
    assert settled_for("messages")(orjson.dumps({"messages": messages})) is True
    assert settled_for(None)(orjson.dumps(messages)) is True


@pytest.mark.parametrize(("given", "expected"), [(None, "env-1"), ("col-7", "col-7")])
@pytest.mark.parametrize("body", [b'"messages":[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"x"}]}]', b'"messages":{}'])
def test_a_record_keeps_the_id_it_came_with_else_takes_its_envelope_id(given: str | None, expected: str, body: bytes) -> None:
    raw = b'{"id":"env-1",' + body + b"}"
    outcome = process_full(Record(raw, "t.parquet", "row 0", given))
    assert outcome.status == ("changed" if b"retry-prompt" in body else "rejected")
    assert outcome.record.record_id == expected
