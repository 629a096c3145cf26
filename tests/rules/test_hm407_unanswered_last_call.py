"""HM407 (2.68 ``repair_messages(repair_last_response=True)``): a call of the last response is a
warning; ``--unsafe-fixes`` closes it with the interrupted return."""

from __future__ import annotations

from histmig.api import validate
from tests.rules.conftest import call, result, run


def test_hm407_is_a_warning_and_its_fix_is_unsafe() -> None:
    messages = [
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "run the job"}]},
        {"kind": "response", "parts": [call("run_job", "c1"), call("log", "c2")], "timestamp": "2025-05-01T10:00:01Z"},
        {"kind": "request", "parts": [result("tool-return", "log", "c2")]},
    ]
    assert [(f.code, f.message, f.part, f.severity) for f in validate(messages)] == [("HM407", 1, 0, "warning")]
    assert run(messages, "HM407") == []
    assert run(messages, "HM407", unsafe_fixes=True) == [("HM407", 2, 1, "frontier")]
    assert [(p["tool_call_id"], p.get("outcome")) for p in messages[2]["parts"]] == [
        ("c2", None),
        ("c1", "interrupted"),
    ]
    assert validate(messages) == []
