"""HM506 (framework-facts §3.3)."""

from __future__ import annotations

from histmig.api import migrate
from histmig.options import Options


def test_hm506_wraps_bare_arguments_as_releases_before_0_0_21_stored_them_and_hm301_undoes_it() -> None:
    calls = [
        {"part_kind": "tool-call", "tool_name": "t", "args": args, "tool_call_id": None}
        for args in ('{"a": 1}', {"a": 1}, None, {"args_dict": {"a": 1}})
    ]
    messages = [{"kind": "response", "parts": [dict(call) for call in calls]}]
    changes = migrate(messages, Options(target="0.0.20"))
    assert [part["args"] for part in messages[0]["parts"]] == [
        {"args_json": '{"a": 1}'},
        {"args_dict": {"a": 1}},
        {"args_dict": {}},
        {"args_dict": {"a": 1}},
    ]
    assert [(c.part, c.evidence) for c in changes] == [
        (0, "nothing lost; wrapped as args_json"),
        (1, "nothing lost; wrapped as args_dict"),
        (2, "nothing lost; wrapped as args_dict"),
    ]
    migrate(messages)
    assert [part["args"] for part in messages[0]["parts"]] == ['{"a": 1}', {"a": 1}, {}, {"a": 1}]
