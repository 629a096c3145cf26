"""Property tests over generated histories (issue: bad input, nothing lost, item 3).

Histories hold every part kind the schema core knows, random retry-prompt parts and random
extra fields. Properties: migrate never raises, never changes a part no rule targets, is
idempotent, keeps message and part counts, and its output validates against the current
schema and loads in pydantic-ai-slim 2.68.0.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from histmig import engine
from histmig.api import migrate
from histmig.options import Options
from histmig.rules import opt_ins, select
from histmig.rules.base import Change, Context
from histmig.schema import current_errors
from histmig.screen import Screen, settled_for
from tests.conftest import framework_dump

TS = st.sampled_from(["2025-05-01T10:00:00Z", "2024-01-02T03:04:05.123456Z"])
TEXT = st.text(max_size=30)
NAMES = st.sampled_from(["get_weather", "final_result", "add", "search_tools", ""])
IDS = st.sampled_from(["call_1", "call_2", "pyd_ai_x", ""])
EXTRA = st.dictionaries(
    st.sampled_from(["x_note", "x_rank", "x_tags"]),
    st.one_of(st.integers(), TEXT, st.lists(st.integers(), max_size=3)),
    max_size=2,
)
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), TEXT)
ERROR = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["missing", "int_parsing"]),
        "loc": st.lists(st.one_of(TEXT, st.integers(0, 3)), max_size=3),
        "msg": TEXT,
        "input": SCALAR,
    },
    optional={"ctx": st.fixed_dictionaries({"error": TEXT})},
)
RETRY_TEXT = st.one_of(
    TEXT,
    st.sampled_from(
        [
            "Please return text or call a tool.",
            "Plain text responses are not permitted, please include your response in a tool call",
            "Unknown tool name: 'nope'. Available tools: 'add'",
            "Tool 'x' is not available yet: search for it first, then call it again once you've seen its schema.",
            "Timed out after 5 seconds.",
        ]
    ),
)


def _part(kind: str, **fields: Any) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda fixed, extra: {**fixed, **extra, "part_kind": kind}, st.fixed_dictionaries(fields), EXTRA)


RETRY_PROMPT = st.builds(
    lambda content, name, call_id, ts, extra: {
        "content": content,
        "tool_name": name,
        "tool_call_id": call_id,
        **({"timestamp": ts} if ts else {}),
        **extra,
        "part_kind": "retry-prompt",
    },
    st.one_of(RETRY_TEXT, st.lists(ERROR, max_size=3)),
    st.one_of(st.none(), NAMES),
    IDS.filter(bool),
    st.one_of(st.none(), TS),
    EXTRA,
)
REQUEST_PARTS = st.one_of(
    RETRY_PROMPT,
    _part("system-prompt", content=TEXT, timestamp=TS),
    _part("user-prompt", content=st.one_of(TEXT, st.lists(TEXT, max_size=2)), timestamp=TS),
    _part(
        "tool-return",
        tool_name=NAMES,
        content=st.one_of(TEXT, st.lists(SCALAR, max_size=2)),
        tool_call_id=IDS,
        timestamp=TS,
        outcome=st.sampled_from(["success", "failed", "denied"]),
    ),
    _part(
        "retry-feedback",
        content=TEXT,
        retry=st.fixed_dictionaries({"cause": st.sampled_from(["validation_error", "no_output", "model_retry"])}),
    ),
    _part("tool-availability-delta", tools_added=st.lists(NAMES, max_size=2)),
    _part("model-settings-delta", settings=st.fixed_dictionaries({"thinking": st.sampled_from(["high", "low"])})),
    _part("instruction-delta", id=st.one_of(st.none(), TEXT), content=st.one_of(st.none(), TEXT)),
    _part("compaction", content=TEXT),
)
RESPONSE_PARTS = st.one_of(
    _part("text", content=TEXT),
    _part("thinking", content=TEXT),
    _part(
        "tool-call",
        tool_name=NAMES,
        args=st.one_of(st.none(), TEXT, st.dictionaries(st.text(max_size=5), SCALAR, max_size=2)),
        tool_call_id=IDS,
    ),
    _part("builtin-tool-call", tool_name=NAMES, args=st.none(), tool_call_id=IDS),
    _part("builtin-tool-return", tool_name=NAMES, content=TEXT, tool_call_id=IDS, timestamp=TS),
)
MESSAGE = st.one_of(
    st.builds(
        lambda parts, extra: {"parts": parts, **extra, "kind": "request"}, st.lists(REQUEST_PARTS, max_size=4), EXTRA
    ),
    st.builds(
        lambda parts, ts: {"parts": parts, "timestamp": ts, "kind": "response"},
        st.lists(RESPONSE_PARTS, max_size=3),
        TS,
    ),
)
HISTORY = st.lists(MESSAGE, max_size=6)

SCREEN = Screen(select(), fixing=Options().plan().fixing)
SETTLED = settled_for(select(), "messages", Options().plan().fixing)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


REWRITES = Options(select=("HM1", "HM2", "HM3"))
"""The rules that rewrite parts where they are (the tool-pairing rules add and remove parts)."""
EVERYTHING = Options(unsafe_fixes=True)


@SETTINGS
@given(HISTORY, st.sampled_from([Options(), EVERYTHING]))
def test_convert_is_total_idempotent_and_loads(history: list[dict[str, Any]], options: Options) -> None:
    migrate(history, options)
    assert migrate(copy.deepcopy(history), options) == []
    assert current_errors(history) == []
    framework_dump(history)


@SETTINGS
@given(HISTORY)
def test_the_rewrite_rules_rewrite_each_retry_prompt_part_in_place(history: list[dict[str, Any]]) -> None:
    original = copy.deepcopy(history)
    changes = migrate(history, REWRITES)
    assert [len(m["parts"]) for m in history] == [len(m["parts"]) for m in original]
    assert len([c for c in changes if c.rule.startswith("HM1")]) == sum(
        p["part_kind"] == "retry-prompt" for m in original for p in m["parts"]
    )


@SETTINGS
@given(HISTORY)
def test_parts_no_rule_targets_are_untouched(history: list[dict[str, Any]]) -> None:
    original = copy.deepcopy(history)
    migrate(history, REWRITES)
    for before, after in zip(original, history):
        assert {k: v for k, v in after.items() if k != "parts"} == {k: v for k, v in before.items() if k != "parts"}
        for old, new in zip(before["parts"], after["parts"]):
            if old["part_kind"] != "retry-prompt":
                assert list(new.items()) == list(old.items())
            else:
                assert {
                    k: v
                    for k, v in new.items()
                    if k not in ("part_kind", "outcome", "retry", "content", "tool_name", "tool_call_id")
                } == {k: v for k, v in old.items() if k not in ("part_kind", "content", "tool_name", "tool_call_id")}


DAMAGE = st.sampled_from(
    ["null-id", "null-timestamp", "args-wrapper", "provider-request-id", "instruction", "feedback-without-input"]
)


def _damage(history: list[dict[str, Any]], kind: str, at: int) -> None:
    """Give ``history`` one shape a repair rule targets, at the ``at``-th part or message."""
    parts = [(message, part) for message in history for part in message["parts"]]
    if kind == "provider-request-id" and history:
        history[at % len(history)]["provider_request_id"] = "req_1"
    elif kind == "instruction" and history:
        history[at % len(history)]["parts"].append({"part_kind": "instruction", "content": "be brief"})
    elif kind == "feedback-without-input" and history:
        history[at % len(history)]["parts"].append(
            {
                "part_kind": "retry-feedback",
                "content": [{"type": "missing", "loc": ["a"], "msg": "m"}],
                "retry": {"cause": "validation_error"},
            }
        )
    elif parts:
        message, part = parts[at % len(parts)]
        if kind == "null-id":
            part["tool_call_id"] = None
        elif kind == "null-timestamp":
            part["timestamp"] = None
        elif kind == "args-wrapper":
            part["args"] = {"args_json": "{}"}


@SETTINGS
@given(HISTORY, st.lists(st.tuples(DAMAGE, st.integers(0, 50)), max_size=3))
def test_the_pending_rules_change_what_every_rule_would(
    history: list[dict[str, Any]], damages: list[tuple[str, int]]
) -> None:
    for kind, at in damages:
        _damage(history, kind, at)
    every_rule = copy.deepcopy(history)
    every = select(enabled=opt_ins())  # HM104 too
    plan = engine.Plan(every, unsafe_fixes=True)
    changes = [
        done
        for rule in every
        if rule.code in plan.fixing
        for done in rule.fix(every_rule, Context())
        if isinstance(done, Change)
    ]  # type: ignore[misc]
    only_pending = copy.deepcopy(history)
    assert engine.migrate(only_pending, plan) == changes
    assert only_pending == every_rule
    verdict = SCREEN(json.dumps({"messages": history}, ensure_ascii=False).encode())
    if verdict is not None:  # nothing to change, which is not valid: api.migrate would validate it too
        assert engine.migrate(copy.deepcopy(history), Options().plan()) == []
        assert list(verdict) == [f for rule in select() for f in rule.check(history, Context())]
    if SETTLED(json.dumps({"messages": history}, ensure_ascii=False, separators=(",", ":")).encode()):
        assert engine.migrate(copy.deepcopy(history), Options().plan()) == [] and current_errors(history) == []
