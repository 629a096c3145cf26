"""HM405 (2.68 ``_repair_dangling_tool_calls``'s note on cut args): a call whose args text is
not JSON, unless a retried result answers it (the framework saw it and asked again)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic_ai import Agent, IncompleteToolCall, capture_run_messages
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse, ToolCallPart
from pydantic_ai.models.function import FunctionModel

from histmig import api
from histmig.api import validate
from histmig.rules.base import Finding
from tests.rules.conftest import call, check_found, check_noop, result

PROMPT = {"part_kind": "user-prompt", "content": "go"}
DONE = {"kind": "response", "parts": [{"part_kind": "text", "content": "done"}]}


def _returned(name: str, call_id: str, content: str = "x") -> dict[str, Any]:
    return {"part_kind": "tool-return", "tool_name": name, "content": content, "tool_call_id": call_id}


def _history(args: Any, *answers: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"kind": "request", "parts": [PROMPT]},
        {"kind": "response", "parts": [call("get_weather", "a") | {"args": args}]},
        {"kind": "request", "parts": list(answers) or [_returned("get_weather", "a")]},
        DONE,
    ]


CUT = Finding("HM405", 1, 0, "tool-call 'get_weather' (a) has args that are not JSON", "truncated-args", "exact")


def test_hm405_reports_cut_args_not_retried() -> None:
    cut = call("t", "a") | {"args": '{"city": "Os'}
    answered = [{"kind": "response", "parts": [cut]}, {"kind": "request", "parts": [result("tool-return", "t", "a")]}]
    assert [(f.code, f.message, f.part, f.evidence) for f in validate(answered)] == [("HM405", 0, 0, "truncated-args")]
    retried = [
        {"kind": "response", "parts": [cut]},
        {"kind": "request", "parts": [result("tool-return", "t", "a") | {"outcome": "retried"}]},
    ]
    assert validate(retried) == []
    wrapped = [
        {"kind": "response", "parts": [call("t", "a") | {"args": {"args_json": "{"}}]},
        {"kind": "request", "parts": [result("tool-return", "t", "a")]},
    ]
    assert [f.code for f in validate(wrapped)] == ["HM301", "HM405"]  # a 0.0.13-0.0.20 wrapper's text counts
    assert (
        validate(
            [
                {"kind": "response", "parts": [call("t", "a") | {"args": ""}]},
                {"kind": "request", "parts": [result("tool-return", "t", "a")]},
            ]
        )
        == []
    )


def test_hm405_reports_args_cut_mid_string() -> None:
    check_found("HM405", _history('{"city": "Os'), [CUT])


def test_hm405_reports_args_cut_after_a_key() -> None:
    check_found("HM405", _history('{"city":'), [CUT])


def test_hm405_reports_text_that_never_was_json() -> None:
    check_found("HM405", _history("city=Oslo"), [CUT], unsafe_fixes=True)


def test_hm405_leaves_cut_args_the_framework_answered_with_a_retry_alone() -> None:
    retried = _returned("get_weather", "a", "Invalid JSON") | {"outcome": "retried"}
    check_noop("HM405", _history('{"city": "Os', retried))


def test_hm405_leaves_json_text_and_objects_alone() -> None:
    check_noop("HM405", _history('{"city": "Oslo"}'))
    check_noop("HM405", _history({"city": "Oslo"}))


def test_hm405_leaves_empty_and_null_args_alone() -> None:
    check_noop("HM405", _history(""))
    check_noop("HM405", _history(None))


def test_hm405_reports_cut_args_of_a_call_the_framework_answered_as_interrupted() -> None:
    interrupted = _returned("get_weather", "a", "The tool call was interrupted before a result was produced.")
    check_found("HM405", _history('{"city": "Os', interrupted | {"outcome": "interrupted"}), [CUT])


def test_a_call_the_token_limit_cut_in_the_last_response_is_a_warning_as_2_68_records_it(tmp_path: Path) -> None:
    def cut(messages, info):  # the provider stopped mid-call: its token limit
        return ModelResponse(parts=[ToolCallPart("weather", '{"city": "Os', "c1")], finish_reason="length")

    agent = Agent(FunctionModel(cut))

    @agent.tool_plain
    def weather(city: str) -> str:
        return city

    with capture_run_messages() as messages, pytest.raises(IncompleteToolCall):
        agent.run_sync("weather in Oslo?")  # the first cut call is retried, the second ends the run
    history = orjson.loads(ModelMessagesTypeAdapter.dump_json(messages))
    found = api.validate(history)
    assert [(f.code, f.severity) for f in found] == [("HM405", "warning"), ("HM407", "warning")]
    assert found[0].text.endswith("(the token limit cut it: finish_reason 'length')")
    source = tmp_path / "run.json"
    source.write_bytes(orjson.dumps(history))
    assert api.check(str(source)).exit_code == 0  # a warning does not fail check
    last = max(m for m, message in enumerate(history) if message["kind"] == "response")
    assert history[last]["finish_reason"] == "length" and history[-1] == history[-1] | {"kind": "request", "parts": []}
    history[last]["finish_reason"] = "stop"  # a cut call the history does not explain
    assert [(f.code, f.severity) for f in api.validate(history)] == [("HM405", "error"), ("HM407", "warning")]
    history[last]["finish_reason"] = "length"
    history.append({"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "again"}]})
    history.append({"kind": "response", "parts": [{"part_kind": "text", "content": "ok"}]})
    assert [f.severity for f in api.validate(history) if f.code == "HM405"] == ["error"]  # no longer the last response
