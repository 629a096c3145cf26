"""Histories rebuilt from real spans (histmig.otel.history) against what pydantic-ai 2.68.0 stored for
the same runs (fixtures/otel-spans, scripts/make_span_fixtures.py): for every scenario, run and
instrumentation version 2-6, the rebuilt history equals ``result.all_messages()`` apart from the
fields the spans do not carry (:data:`NOT_CARRIED`, :data:`NOT_CARRIED_BY_SCENARIO`), loads in
2.68, and for versions 5 and 6 ``histmig otel`` of it gives back the OTel messages the run
recorded."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic_ai.messages import ModelMessagesTypeAdapter

from histmig.errors import RebuildError
from histmig.otel import to_otel_messages
from histmig.otel.history import (
    RunSpans,
    conversation_messages,
    group_runs,
    is_pydantic_ai_run,
    rebuild,
    recorded_content,
    summary,
    timestamp,
)
from histmig.otel.spans import Span, parse_export, read_lines
from histmig.rules.base import Budgets
from tests.conftest import FIXTURES

SPANS = FIXTURES / "otel-spans"
VERSIONS = (2, 3, 4, 5, 6)
SCENARIOS = sorted(p.name.removesuffix(".otlp.jsonl") for p in (SPANS / "v6").glob("*.otlp.jsonl"))
CASES = [(v, s) for v in VERSIONS for s in SCENARIOS]

NOT_CARRIED = ("timestamp", "signature")
"""Fields no span of any version carries, left out of every part and message before comparing:
every timestamp (a request's, a response's, a part's; the rebuilt ones are the spans' times) and
a thinking part's ``signature``."""

NOT_CARRIED_BY_SCENARIO: dict[str, dict[str, tuple[str, ...]]] = {
    "c_unknown_tool": {"call_c1": ("retry.max_retries",)},
    "e_output_tool_validation": {"call_e1": ("retry.max_retries",)},
    "m_deferred_tool": {"call_m1": ("outcome", "retry")},
}
"""The tool returns whose retry no tool span recorded (an unknown tool has no span; an output
tool's validation failure neither; a deferred call answered through DeferredToolResults), by
tool_call_id: what of them the spans do not carry, in every version (their ``attempt`` is not
either, but HM104 counts it as the framework did). No span records a retry-feedback part's
``retry.max_retries`` either."""

CRASHED = {"b_tool_args_validation", "k_tool_retries_exhausted"}
"""The scenarios whose run raised (retries exhausted): what ``capture_run_messages`` held ends
with an empty request (``state: 'interrupted'``) that no span records."""


def spans_of(path: Path) -> list[Span]:
    with path.open("rb") as stream:
        return [span for number, raw in read_lines(stream) for span in parse_export(raw, number)]


def runs_of(version_dir: str, scenario: str) -> tuple[list[RunSpans], list[list[dict[str, Any]]]]:
    runs, foreign = group_runs(spans_of(SPANS / version_dir / f"{scenario}.otlp.jsonl"))
    assert foreign == []
    truth = orjson.loads((SPANS / version_dir / f"{scenario}.messages.json").read_bytes())
    assert len(runs) == len(truth)
    return runs, truth


def _drop(obj: dict[str, Any], dotted: str) -> None:
    head, _, rest = dotted.partition(".")
    if rest and isinstance(obj.get(head), dict):
        _drop(obj[head], rest)
    elif not rest:
        obj.pop(head, None)


def comparable(messages: list[dict[str, Any]], scenario: str, budgets: bool = False) -> list[dict[str, Any]]:
    """``messages`` without what the spans do not carry (with the agent's ``budgets`` given,
    the ``max_retries`` no span records are compared too)."""
    messages = copy.deepcopy(messages)
    if scenario in CRASHED and messages and messages[-1]["kind"] == "request" and not messages[-1]["parts"]:
        assert messages[-1]["state"] == "interrupted"
        messages.pop()
    by_call = NOT_CARRIED_BY_SCENARIO.get(scenario, {})
    for message in messages:
        for key in NOT_CARRIED:
            message.pop(key, None)
        for part in message["parts"]:
            for key in NOT_CARRIED:
                part.pop(key, None)
            if part["part_kind"] == "retry-feedback" and not budgets:
                _drop(part, "retry.max_retries")
            for dotted in by_call.get(part.get("tool_call_id"), ()):
                if not (budgets and dotted == "retry.max_retries"):
                    _drop(part, dotted)
    return messages


@pytest.mark.parametrize(("version", "scenario"), CASES, ids=[f"v{v}-{s}" for v, s in CASES])
def test_rebuilt_history_equals_the_stored_one(version: int, scenario: str) -> None:
    runs, truth = runs_of(f"v{version}", scenario)
    for end, stored in enumerate(truth):
        rebuilt = rebuild(runs[: end + 1])
        assert comparable(rebuilt.messages, scenario) == comparable(stored, scenario)
        # key order too: the shape ModelMessagesTypeAdapter.dump_json writes
        assert [(list(m), [list(p) for p in m["parts"]]) for m in rebuilt.messages] == [
            (list(m), [list(p) for p in m["parts"]]) for m in stored[: len(rebuilt.messages)]
        ]
        loaded = ModelMessagesTypeAdapter.validate_json(orjson.dumps(rebuilt.messages))
        assert len(loaded) == len(rebuilt.messages)
        assert "request.timestamp" in rebuilt.derived
        if any(p["part_kind"] == "thinking" for m in stored for p in m["parts"]):
            assert "thinking.signature" in rebuilt.unknowable


AGENT_BUDGETS = {"d_parallel_same_tool_fail": "tools=3"}
"""The budgets each scenario's agent ran with (scripts/make_span_fixtures.py), as
``--max-retries`` gives them: ``retries=3`` for one, the framework's default 1 (tools and
output) for the others."""


@pytest.mark.parametrize(("version", "scenario"), CASES, ids=[f"v{v}-{s}" for v, s in CASES])
def test_the_agent_s_budgets_fill_every_max_retries_no_span_recorded(version: int, scenario: str) -> None:
    """Given the budgets the agent ran with, every retry comes back with the ``max_retries``
    the framework stored, also those of a retry no tool span recorded (retry feedback, an
    unknown tool, an output tool), derived as HM104 derives it; the rest is as without them."""
    runs, truth = runs_of(f"v{version}", scenario)
    budgets = Budgets.parse(AGENT_BUDGETS.get(scenario, "tools=1,output=1"))
    for end, stored in enumerate(truth):
        rebuilt = rebuild(runs[: end + 1], budgets)
        assert comparable(rebuilt.messages, scenario, budgets=True) == comparable(stored, scenario, budgets=True)
        without = rebuild(runs[: end + 1])
        assert comparable(rebuilt.messages, scenario) == comparable(without.messages, scenario)
        retries = [p["retry"] for m in rebuilt.messages for p in m["parts"] if isinstance(p.get("retry"), dict)]
        assert all(isinstance(retry["max_retries"], int) for retry in retries if retry["attempt"] is not None)
        derived = {name for name in rebuilt.derived if name.endswith(".retry.max_retries")}
        assert derived == {name for name in without.unknowable if name.endswith(".retry.max_retries")}
        assert not {name for name in rebuilt.unknowable if name.endswith(".retry.max_retries")}


@pytest.mark.parametrize("version", (5, 6), ids=["v5", "v6"])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_otel_export_of_the_rebuilt_history_gives_back_the_recorded_messages(version: int, scenario: str) -> None:
    runs, _ = runs_of(f"v{version}", scenario)
    for end, run in enumerate(runs):
        recorded, _ = conversation_messages(run)
        rebuilt = rebuild(runs[: end + 1])
        assert to_otel_messages(rebuilt.messages, version=version, include_content=True) == recorded


def test_every_version_rebuilds_every_run_equal() -> None:
    """The note's figure: per version, every run of every scenario comes back equal."""
    counts = {}
    for version in VERSIONS:
        equal = 0
        for scenario in SCENARIOS:
            runs, truth = runs_of(f"v{version}", scenario)
            equal += sum(
                comparable(rebuild(runs[: end + 1]).messages, scenario) == comparable(stored, scenario)
                for end, stored in enumerate(truth)
            )
        counts[version] = equal
    assert counts == dict.fromkeys(VERSIONS, 16)


def test_a_crashed_run_is_rebuilt_from_its_last_model_request_span() -> None:
    runs, truth = runs_of("v6", "k_tool_retries_exhausted")
    assert runs[0].run.status_code == 2
    otel, source = conversation_messages(runs[0])
    assert source == "gen_ai.input.messages+gen_ai.output.messages"
    rebuilt = rebuild(runs)
    # the run span's all_messages stops before the last response; the chat span has it
    assert rebuilt.messages[-1]["parts"][0]["tool_call_id"] == "call_k2"
    assert len(rebuilt.messages) == len(truth[0]) - 1


def test_retried_tool_returns_take_their_retry_from_the_tool_span() -> None:
    runs, _ = runs_of("v6", "d_parallel_same_tool_fail")
    parts = rebuild(runs).messages[2]["parts"]
    assert [(p["tool_call_id"], p["outcome"], p["retry"]) for p in parts] == [
        ("call_d1", "success", None),
        ("call_d2", "retried", {"cause": "model_retry", "attempt": 1, "max_retries": 3}),
        ("call_d3", "retried", {"cause": "model_retry", "attempt": 1, "max_retries": 3}),
    ]


def test_an_unknown_tool_s_cause_is_derived_from_its_text() -> None:
    runs, _ = runs_of("v5", "c_unknown_tool")
    rebuilt = rebuild(runs)
    part = rebuilt.messages[2]["parts"][0]
    # the cause from its text, the attempt counted by HM104, the agent's budget unknowable
    assert part["retry"] == {"cause": "unknown_tool", "attempt": 1, "max_retries": None}
    assert {"tool-return.retry.cause", "tool-return.retry.attempt"} <= set(rebuilt.derived)
    assert "tool-return.retry.max_retries" in rebuilt.unknowable
    assert "tool-return.retry.attempt" not in rebuilt.unknowable


def test_a_retry_the_tool_span_recorded_is_not_said_derived() -> None:
    runs, _ = runs_of("v3", "a_tool_model_retry")
    rebuilt = rebuild(runs)
    assert rebuilt.messages[2]["parts"][0]["retry"] == {"cause": "model_retry", "attempt": 1, "max_retries": 1}
    assert not [field for field in rebuilt.derived + rebuilt.unknowable if "retry" in field]


def test_retry_feedback_attempts_are_counted() -> None:
    runs, truth = runs_of("v6", "f_output_validator_text")
    rebuilt = rebuild(runs)
    assert rebuilt.messages[2]["parts"][0]["retry"] == {"cause": "model_retry", "attempt": 1, "max_retries": None}
    assert truth[0][2]["parts"][0]["retry"]["attempt"] == 1
    assert "retry-feedback.retry.attempt" in rebuilt.derived


@pytest.mark.parametrize("version", VERSIONS)
def test_no_output_feedback_is_told_by_role_or_by_the_empty_response(version: int) -> None:
    runs, _ = runs_of(f"v{version}", "h_empty_response")
    rebuilt = rebuild(runs)
    part = rebuilt.messages[2]["parts"][0]
    assert (part["part_kind"], part["content"], part["retry"]["cause"]) == (
        "retry-feedback",
        "Please return text.",
        "no_output",
    )
    # version 6 records it under "system"; before, it is a user text told by the empty response
    assert ("retry-feedback.part_kind" in rebuilt.derived) is (version < 6)


def test_multi_run_history_takes_each_request_s_run_id_from_its_model_request_span() -> None:
    runs, truth = runs_of("v4", "i_multi_run")
    rebuilt = rebuild(runs)
    assert [m["run_id"] for m in rebuilt.messages] == [m["run_id"] for m in truth[1]]
    assert {m["run_id"] for m in rebuilt.messages} == {"run-i_multi_run-0", "run-i_multi_run-1"}


def test_earlier_runs_missing_leave_their_responses_span_fields_unknowable() -> None:
    runs, truth = runs_of("v5", "i_multi_run")
    rebuilt = rebuild(runs[1:])
    assert rebuilt.messages[1]["model_name"] is None  # run 0's response: its chat span is not given
    assert rebuilt.messages[-1]["model_name"] == truth[1][-1]["model_name"]
    assert "response.model_name" in rebuilt.unknowable


def test_content_off_spans_are_recognised_and_summarised() -> None:
    runs, _ = runs_of("v6-no-content", "a_tool_model_retry")
    otel, _ = conversation_messages(runs[0])
    assert not recorded_content(otel)
    assert summary(otel) == {
        "roles": ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"],
        "part_types": {"text": 3, "tool_call": 2, "tool_call_response": 2},
        "tool_calls": [{"id": "call_a1", "name": "get_weather"}, {"id": "call_a2", "name": "get_weather"}],
    }
    with pytest.raises(RebuildError, match="without content"):
        rebuild(runs)


def test_a_run_span_without_messages_cannot_be_rebuilt() -> None:
    runs, _ = runs_of("v5", "g_text_output")
    run = runs[0]
    bare = RunSpans(
        Span(**{**run.run.__dict__, "attributes": {k: v for k, v in run.run.attributes.items() if "messages" not in k}})
    )
    with pytest.raises(RebuildError, match=f"run span {run.run.span_id} has no pydantic_ai.all_messages"):
        rebuild([bare])


def test_another_framework_s_agent_span_is_not_pydantic_ai_s() -> None:
    span = Span("ab", "cd", None, "invoke_agent helper", 0, 1, {"gen_ai.operation.name": "invoke_agent"}, 0, 1)
    assert not is_pydantic_ai_run(span)
    runs, foreign = group_runs([span])
    assert (runs, foreign) == ([], [span])


def test_timestamps_are_the_iso_text_the_framework_dumps() -> None:
    assert timestamp(1_796_168_398_078_607_642) == "2026-12-01T23:39:58.078607Z"
    assert timestamp(1_796_168_398_000_000_999) == "2026-12-01T23:39:58Z"


def test_tool_call_ids_a_span_left_out_are_derived_and_paired() -> None:
    runs, _ = runs_of("v5", "d_parallel_same_tool_fail")
    run = runs[0]
    otel = orjson.loads(run.run.attributes["pydantic_ai.all_messages"])
    for message in otel:
        for part in message["parts"]:
            part.pop("id", None)
    attributes = {**run.run.attributes, "pydantic_ai.all_messages": orjson.dumps(otel).decode()}
    bare = RunSpans(Span(**{**run.run.__dict__, "attributes": attributes}), run.chats, {})
    rebuilt = rebuild([bare])
    calls = [p["tool_call_id"] for p in rebuilt.messages[1]["parts"]]
    returns = [p["tool_call_id"] for p in rebuilt.messages[2]["parts"]]
    assert len(set(calls)) == 3 and all(c.startswith("pyd_ai_") and len(c) == 39 for c in calls)
    assert returns == calls  # each return paired with its call, in order
    assert rebuild([bare]).messages == rebuilt.messages  # reproducible
    assert {"tool-call.tool_call_id", "tool-return.tool_call_id"} <= set(rebuilt.derived)
    ModelMessagesTypeAdapter.validate_json(orjson.dumps(rebuilt.messages))


@pytest.mark.parametrize("version", VERSIONS)
def test_provider_ids_finish_reasons_and_cache_usage_come_from_the_model_request_spans(version: int) -> None:
    runs, truth = runs_of(f"v{version}", "a_tool_model_retry_provider_ids")
    responses = [m for m in rebuild(runs).messages if m["kind"] == "response"]
    assert [(r["provider_response_id"], r["finish_reason"]) for r in responses] == [
        ("resp_1", "tool_call"),
        ("resp_2", "stop"),
    ]
    usage = responses[0]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["cache_read_tokens"], usage["cache_write_tokens"]) == (
        40,
        7,
        12,
        3,
    )
    assert [r["usage"] for r in responses] == [m["usage"] for m in truth[0] if m["kind"] == "response"]
