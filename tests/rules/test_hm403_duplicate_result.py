"""HM403 (2.68's ordered matching walk): a second result for one call is reported, never fixed."""

from __future__ import annotations

from histmig.api import validate
from histmig.options import Options
from tests.rules.conftest import call, result, run


def test_hm403_reports_the_second_result_and_where_the_call_is() -> None:
    messages = [
        {"kind": "response", "parts": [call("t", "a"), call("t", "a")]},
        {
            "kind": "request",
            "parts": [
                result("tool-return", "t", "a"),
                result("tool-return", "t", "a"),
                result("tool-return", "t", "a"),
            ],
        },
    ]
    found = validate(messages, Options(select=("HM403",)))
    assert [(f.code, f.message, f.part, f.text) for f in found] == [
        (
            "HM403",
            1,
            2,
            "tool-return 't' (a) answers the call at messages[0].parts[1], which an earlier result answered",
        )
    ]
    assert run(messages, "HM403", unsafe_fixes=True) == []
