"""HM302 (framework-facts §3.3)."""

from __future__ import annotations

from tests.rules.conftest import run


def test_hm302_renames_in_place() -> None:
    messages = [
        {
            "kind": "response",
            "parts": [],
            "provider_request_id": "req_1",
            "provider_response_id": None,
            "model_name": "m",
        },
        {"kind": "response", "parts": [], "provider_request_id": "req_2", "provider_response_id": "resp_2"},
    ]
    assert run(messages, "HM302") == [("HM302", 0, None, "field-rename")]
    assert list(messages[0].items()) == [
        ("kind", "response"),
        ("parts", []),
        ("provider_response_id", "req_1"),
        ("model_name", "m"),
    ]
    assert messages[1]["provider_request_id"] == "req_2"
