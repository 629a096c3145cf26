"""HM201 (framework-facts §2 load failures, §3.3)."""

from __future__ import annotations

import hashlib

from histmig.rules.hm201_null_tool_call_id import derived_tool_call_id
from tests.rules.conftest import call, result, run


def test_hm201_pairs_null_ids_in_order() -> None:
    messages = [
        {"kind": "response", "parts": [call("a"), call("a")]},
        {"kind": "request", "parts": [result("retry-prompt", "a"), result("tool-return", "a")]},
        {"kind": "response", "parts": [call("a")]},
        {"kind": "request", "parts": [result("tool-return", "a")]},
    ]
    changes = run(messages, "HM201")
    first, second, third = derived_tool_call_id(0, 0, "a"), derived_tool_call_id(0, 1, "a"), derived_tool_call_id(2, 0, "a")
    assert [p["tool_call_id"] for m in messages for p in m["parts"]] == [first, second, first, second, third, third]
    assert first.startswith("pyd_ai_") and len(first) == 39 and len({first, second, third}) == 3
    assert [c[3] for c in changes] == ["position", "position", "paired-call", "paired-call", "position", "paired-call"]


def test_hm201_skips_calls_already_answered_by_id() -> None:
    messages = [
        {"kind": "response", "parts": [call("a", "c1"), call("a", "c2")]},
        {"kind": "request", "parts": [result("tool-return", "a", "c1"), {"part_kind": "retry-prompt", "tool_name": "a", "content": "x"}]},
    ]
    run(messages, "HM201")
    assert messages[1]["parts"][1]["tool_call_id"] == "c2"


def test_hm201_a_result_without_a_call_gets_its_own_id() -> None:
    messages = [{"kind": "request", "parts": [result("tool-return", "a")]}]
    assert run(messages, "HM201") == [("HM201", 0, 0, "position:no-call")]
    assert messages[0]["parts"][0]["tool_call_id"] == derived_tool_call_id(0, 0, "a")


def test_hm201_leaves_absent_ids_on_calls_and_tool_less_retries() -> None:
    messages = [
        {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "a", "args": {}}]},
        {"kind": "request", "parts": [{"part_kind": "retry-prompt", "content": "x", "tool_name": None, "tool_call_id": None}]},
    ]
    assert run(messages, "HM201") == []


def test_derived_ids_differ_by_place_and_tool_and_are_the_same_on_every_run() -> None:
    ids = {derived_tool_call_id(m, p, name) for m in range(3) for p in range(3) for name in ("a", "b")}
    assert len(ids) == 18
    assert derived_tool_call_id(1, 2, "a") == derived_tool_call_id(1, 2, "a") == "pyd_ai_" + hashlib.sha256(b"histmig:1:2:a").hexdigest()[:32]


def test_hm201_derives_a_tool_less_retrys_null_id_for_a_target_before_2_60_0() -> None:
    messages = [{"kind": "request", "parts": [{"part_kind": "retry-prompt", "content": "x", "tool_name": None, "tool_call_id": None}]}]
    assert run(messages, "HM201", target="2.59.0") == [("HM201", 0, 0, "position:tool-less")]
    assert messages[0]["parts"][0]["tool_call_id"] == derived_tool_call_id(0, 0, None)
    assert run([{"kind": "request", "parts": [{"part_kind": "retry-prompt", "content": "x", "tool_name": None, "tool_call_id": None}]}], "HM201", target="2.60.0") == []
