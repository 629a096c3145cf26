"""HM404 (2.68 ``_open_tool_calls``): an id reused by a call of a later response while the
earlier call is open shadows it; reported, and the shadowed call is dangling (HM406)."""

from __future__ import annotations

from histmig.api import validate
from histmig.options import Options
from tests.rules.conftest import call, opening, result, run


def test_hm404_reports_the_reusing_call_and_hm406_closes_the_shadowed_one() -> None:
    messages = [
        opening(),
        {"kind": "response", "parts": [call("t", "call_1")], "timestamp": "2025-05-01T10:00:00Z"},
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "go on"}]},
        {"kind": "response", "parts": [call("u", "call_1")]},
        {"kind": "request", "parts": [result("tool-return", "u", "call_1")]},
    ]
    found = validate(messages, Options(select=("HM404", "HM406")))
    assert [(f.code, f.message, f.part) for f in found] == [("HM406", 1, 0), ("HM404", 3, 0)]
    assert found[1].text == "tool-call 'u' (call_1) reuses the id of the unanswered call at messages[1].parts[0]"
    assert run(messages, "HM404", "HM406", unsafe_fixes=True) == [("HM406", 2, 0, "dangling")]


def test_hm404_within_one_response_is_fifo_not_reuse() -> None:
    messages = [
        {"kind": "response", "parts": [call("t", "a"), call("t", "a")]},
        {"kind": "request", "parts": [result("tool-return", "t", "a"), result("tool-return", "t", "a")]},
    ]
    assert validate(messages) == []
