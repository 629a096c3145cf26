"""HM405 (2.68 ``_repair_dangling_tool_calls``'s note on cut args): a call whose args text is
not JSON, unless a retried result answers it (the framework saw it and asked again)."""

from __future__ import annotations

from histmig.api import validate
from tests.rules.conftest import call, result


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
