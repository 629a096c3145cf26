"""HM301–HM302 (framework-facts §3.3)."""

from __future__ import annotations

from histmig.pipeline import Options, migrate, select_rules


def run(messages: list, code: str) -> list[tuple]:
    return [(c.rule, c.message, c.part, c.evidence) for c in migrate(messages, Options(rules=select_rules([code])))]


def test_hm301_unwraps_args_json_and_args_dict_only() -> None:
    parts = [
        {"part_kind": "tool-call", "tool_name": "a", "args": {"args_json": '{"x": 1}'}},
        {"part_kind": "tool-call", "tool_name": "a", "args": {"args_dict": {"x": 1}}},
        {"part_kind": "tool-call", "tool_name": "a", "args": {"args_json": {"x": 1}}},
        {"part_kind": "tool-call", "tool_name": "a", "args": {"args_dict": {"x": 1}, "other": 2}},
    ]
    messages = [{"kind": "response", "parts": parts}]
    assert run(messages, "HM301") == [("HM301", 0, 0, "args_json"), ("HM301", 0, 1, "args_dict")]
    assert [p["args"] for p in parts] == ['{"x": 1}', {"x": 1}, {"args_json": {"x": 1}}, {"args_dict": {"x": 1}, "other": 2}]


def test_hm302_renames_in_place() -> None:
    messages = [
        {"kind": "response", "parts": [], "provider_request_id": "req_1", "provider_response_id": None, "model_name": "m"},
        {"kind": "response", "parts": [], "provider_request_id": "req_2", "provider_response_id": "resp_2"},
    ]
    assert run(messages, "HM302") == [("HM302", 0, None, "field-rename")]
    assert list(messages[0].items()) == [("kind", "response"), ("parts", []), ("provider_response_id", "req_1"), ("model_name", "m")]
    assert messages[1]["provider_request_id"] == "req_2"
