"""Every case of ../shared/docs/bug-cases.md with its expected output."""

from __future__ import annotations

import orjson
import pytest
from pydantic import ValidationError
from pydantic_ai.messages import ModelMessagesTypeAdapter

from histmig.engine import Plan, process
from histmig.options import Options
from histmig.records import Record
from histmig.report import Report
from tests.conftest import framework_dump

RETRY = {"attempt": None, "max_retries": None}


def run(raw: bytes, options: Options = Options()) -> tuple[object, list]:
    outcome = process(Record(raw, "case.json", "file"), options.plan())
    assert outcome.status == "changed", outcome.errors
    return orjson.loads(outcome.output), [
        (c.rule, c.message, c.part, c.cause, c.evidence, c.certainty) for c in outcome.changes
    ]


BC1 = b"""[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"weather in Oslo?","timestamp":"2025-05-01T10:00:00Z"}]},
 {"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"get_weather","args":{"town":"Oslo"},"tool_call_id":"call_1"}],"timestamp":"2025-05-01T10:00:01Z"},
 {"kind":"request","parts":[{"part_kind":"retry-prompt","content":"city not found","tool_name":"get_weather","tool_call_id":"call_1","timestamp":"2025-05-01T10:00:02Z"}]},
 {"kind":"response","parts":[{"part_kind":"text","content":"{}"}],"timestamp":"2025-05-01T10:00:03Z"},
 {"kind":"request","parts":[{"part_kind":"retry-prompt","content":[{"type":"missing","loc":["city"],"msg":"Field required","input":{}}],"tool_name":null,"tool_call_id":"pyd_ai_x","timestamp":"2025-05-01T10:00:04Z"}]}]"""


def test_bc1_a_tool_bound_and_a_tool_less_retry_in_one_conversation() -> None:
    out, changes = run(BC1)
    before = orjson.loads(BC1)
    assert out[2]["parts"] == [
        {
            "part_kind": "tool-return",
            "content": "city not found",
            "tool_name": "get_weather",
            "tool_call_id": "call_1",
            "timestamp": "2025-05-01T10:00:02Z",
            "outcome": "retried",
            "retry": {"cause": "model_retry", **RETRY},
        }
    ]
    assert out[4]["parts"] == [
        {
            "part_kind": "retry-feedback",
            "content": [{"type": "missing", "loc": ["city"], "msg": "Field required", "input": {}}],
            "timestamp": "2025-05-01T10:00:04Z",
            "retry": {"cause": "validation_error", **RETRY},
        }
    ]
    assert [out[i] for i in (0, 1, 3)] == [before[i] for i in (0, 1, 3)]
    assert changes == [
        ("HM101", 2, 0, "model_retry", "free-text", "default"),
        ("HM102", 4, 0, "validation_error", "error-list", "shape"),
    ]
    framework_dump(out)


def test_bc2_the_framework_no_output_text_is_no_output() -> None:
    raw = b'[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"Please return text or call a tool.","tool_name":null,"tool_call_id":"pyd_ai_1","timestamp":"2025-05-01T10:00:04Z"}]}]'
    out, changes = run(raw)
    assert out == [
        {
            "kind": "request",
            "parts": [
                {
                    "part_kind": "retry-feedback",
                    "content": "Please return text or call a tool.",
                    "timestamp": "2025-05-01T10:00:04Z",
                    "retry": {"cause": "no_output", **RETRY},
                }
            ],
        }
    ]
    assert changes == [("HM102", 0, 0, "no_output", "no-output:please", "exact")]


def test_bc2_every_no_output_wording_across_releases() -> None:
    wordings = [
        "Plain text responses are not permitted, please call one of the functions instead.",
        "Plain text responses are not permitted, please include your response in a tool call",
        "Responses without text or tool calls are not permitted.",
        "Please return text.",
        "Please include your response in a tool call or return an image.",
    ]
    for text in wordings:
        raw = orjson.dumps(
            [{"kind": "request", "parts": [{"part_kind": "retry-prompt", "content": text, "tool_name": None}]}]
        )
        out, _ = run(raw)
        assert out[0]["parts"][0]["retry"]["cause"] == "no_output", text


def test_bc2_framework_mode_keeps_the_loader_cause() -> None:
    raw = b'[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"Please return text or call a tool.","tool_name":null,"tool_call_id":"pyd_ai_1","timestamp":"2025-05-01T10:00:04Z"}]}]'
    out, _ = run(raw, Options(causes="framework"))
    assert out[0]["parts"][0]["retry"] == {"cause": "model_retry", **RETRY}


BC3 = b'[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":[{"type":"missing","loc":["city"],"msg":"Field required"}],"tool_name":"final_result","tool_call_id":"call_2","timestamp":"2025-05-01T10:00:02Z"}]}]'


def test_bc3_error_details_without_input_load_and_are_reported() -> None:
    out, changes = run(BC3)
    assert out[0]["parts"][0]["content"] == [
        {"type": "missing", "loc": ["city"], "msg": "Field required", "input": None}
    ]
    assert out[0]["parts"][0]["retry"] == {"cause": "validation_error", **RETRY}
    assert changes == [
        ("HM203", 0, 0, None, "missing-input:1", "shape"),
        ("HM101", 0, 0, "validation_error", "error-list", "shape"),
    ]
    assert framework_dump(out)[0]["parts"][0]["content"][0]["input"] is None


def test_bc3_the_report_lists_the_changes_to_a_part_in_the_order_they_were_made() -> None:
    report = Report.in_memory()
    report.add(process(Record(BC3, "bc3.jsonl", "line 1")))
    assert [(row["rule"], row["before"], row["after"]) for row in report.changes] == [
        ("HM203", "retry-prompt", "retry-prompt"),
        ("HM101", "retry-prompt", "tool-return"),
    ]


def test_bc3_the_original_does_not_load_for_want_of_input_and_does_once_it_has_one() -> None:
    with pytest.raises(ValidationError) as raised:
        ModelMessagesTypeAdapter.validate_json(BC3)
    assert [error["loc"][-1] for error in raised.value.errors() if error["type"] == "missing"] == ["input"]
    with_input = orjson.loads(BC3)
    with_input[0]["parts"][0]["content"][0]["input"] = None
    assert ModelMessagesTypeAdapter.validate_python(with_input)[0].parts[0].outcome == "retried"


def test_bc4_a_retry_part_with_no_timestamp_gets_none() -> None:
    raw = (
        b'[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"Please return text.","tool_name":null}]}]'
    )
    first, _ = run(raw)
    second, _ = run(raw)
    assert (
        first
        == second
        == [
            {
                "kind": "request",
                "parts": [
                    {
                        "part_kind": "retry-feedback",
                        "content": "Please return text.",
                        "retry": {"cause": "no_output", **RETRY},
                    }
                ],
            }
        ]
    )


def test_bc4_a_null_timestamp_is_removed_not_filled() -> None:
    raw = b'[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"x","tool_name":"t","tool_call_id":"c","timestamp":null}]}]'
    out, changes = run(raw)
    assert "timestamp" not in out[0]["parts"][0]
    assert changes[0][:3] == ("HM202", 0, 0)


BC5 = b'[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi"},{"part_kind":"instruction","content":"Be concise."}]}]'


def test_bc5_an_instruction_part_moves_to_instructions() -> None:
    out, changes = run(BC5)
    assert out == [
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}], "instructions": "Be concise."}
    ]
    assert changes == [("HM204", 0, 1, None, "instruction-part", "exact")]
    framework_dump(out)


def test_bc5_check_names_the_record_and_the_path() -> None:
    outcome = process(Record(BC5, "case.json", "file"), Plan(rules=(), validate_all=True))
    assert outcome.status == "unchanged"
    assert any(line.startswith("messages[0].parts[1]") for line in outcome.errors), outcome.errors
    assert "no release 0.0.13-2.68 wrote this shape" not in outcome.errors[-1]


def test_check_says_when_no_release_wrote_a_shape() -> None:
    raw = b'[{"kind":"request","parts":[{"part_kind":"user-prompt"}]}]'
    outcome = process(Record(raw, "case.json", "file"), Plan(validate_all=True))
    assert outcome.errors == [
        "messages[0].parts[0].content: Field required",
        "no release 0.0.13-2.68 wrote this shape: no rule can migrate it",
    ]


def test_bc6_nested_repeated_inputs_are_carried_as_the_framework_carries_them() -> None:
    big = {"title": "x" * 10_000}
    content = [
        {"type": "missing", "loc": ["report", "summary"], "msg": "Field required", "input": big},
        {"type": "missing", "loc": ["report", "owner"], "msg": "Field required", "input": big},
    ]
    raw = orjson.dumps(
        [
            {
                "kind": "request",
                "parts": [
                    {
                        "part_kind": "retry-prompt",
                        "tool_name": "final_result",
                        "tool_call_id": "call_3",
                        "content": content,
                    }
                ],
            }
        ]
    )
    out, _ = run(raw)
    assert out[0]["parts"][0]["content"] == content
    assert framework_dump(orjson.loads(raw))[0]["parts"][0]["content"] == content
