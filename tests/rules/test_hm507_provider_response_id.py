"""HM507 (framework-facts §3.3)."""

from __future__ import annotations

from histmig.api import migrate
from histmig.options import Options


def test_hm507_renames_the_id_in_place_for_0_7_3_to_0_8_0_and_hm302_renames_it_back() -> None:
    messages = [
        {"kind": "response", "parts": [], "provider_response_id": "r1", "finish_reason": None},
        {"kind": "response", "parts": [], "provider_response_id": None},
    ]
    changes = migrate(messages, Options(target="0.8.0"))
    assert [list(message) for message in messages] == [
        ["kind", "parts", "provider_request_id", "finish_reason"],
        ["kind", "parts", "provider_response_id"],
    ]
    assert [(c.rule, c.message, c.before, c.after) for c in changes] == [
        ("HM507", 0, "provider_response_id", "provider_request_id")
    ]
    assert migrate(messages, Options(target="0.8.1")) and messages[0]["provider_response_id"] == "r1"
    assert migrate(messages, Options(target="0.7.2")) == []
