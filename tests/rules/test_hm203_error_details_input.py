"""HM203 (framework-facts §2 load failures, bug case BC3)."""

from __future__ import annotations

from tests.rules.conftest import run


def test_hm203_inserts_input_after_msg() -> None:
    messages = [
        {
            "kind": "request",
            "parts": [
                {
                    "part_kind": "retry-feedback",
                    "retry": {"cause": "validation_error"},
                    "content": [
                        {"type": "t", "loc": [], "msg": "m", "ctx": {}},
                        {"type": "t", "loc": [], "msg": "m", "input": 1},
                    ],
                }
            ],
        }
    ]
    assert run(messages, "HM203") == [("HM203", 0, 0, "missing-input:1")]
    assert list(messages[0]["parts"][0]["content"][0]) == ["type", "loc", "msg", "input", "ctx"]


def test_hm203_leaves_a_response_and_text_content_alone() -> None:
    messages = [
        {
            "kind": "response",
            "parts": [{"part_kind": "retry-feedback", "content": [{"type": "t", "loc": [], "msg": "m"}]}],
        },
        {
            "kind": "request",
            "parts": [{"part_kind": "retry-feedback", "content": "no list", "retry": {"cause": "model_retry"}}],
        },
    ]
    assert run(messages, "HM203") == []
