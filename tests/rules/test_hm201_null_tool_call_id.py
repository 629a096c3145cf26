"""HM201 (docs/framework.md §2 load failures, §3.3)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson

from histmig import api
from histmig.options import Options
from histmig.rules.hm201_null_tool_call_id import conversation_key, derived_tool_call_id
from tests.conftest import CORPUS
from tests.rules.conftest import call, check_noop, opening, result, run


def _opened(text: str, at: str = "2024-10-01T10:00:00Z") -> dict:
    return {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": text, "timestamp": at}]}


def test_hm201_pairs_null_ids_in_order() -> None:
    messages = [
        _opened("hi"),
        {"kind": "response", "parts": [call("a"), call("a")]},
        {"kind": "request", "parts": [result("retry-prompt", "a"), result("tool-return", "a")]},
        {"kind": "response", "parts": [call("a")]},
        {"kind": "request", "parts": [result("tool-return", "a")]},
    ]
    key = conversation_key(messages)
    changes = run(messages, "HM201")
    first, second, third = (
        derived_tool_call_id(key, 1, 0, "a"),
        derived_tool_call_id(key, 1, 1, "a"),
        derived_tool_call_id(key, 3, 0, "a"),
    )
    assert [p["tool_call_id"] for m in messages[1:] for p in m["parts"]] == [first, second, first, second, third, third]
    assert first.startswith("pyd_ai_") and len(first) == 39 and len({first, second, third}) == 3
    assert [c[3] for c in changes] == ["position", "position", "paired-call", "paired-call", "position", "paired-call"]


def test_hm201_skips_calls_already_answered_by_id() -> None:
    messages = [
        opening(),
        {"kind": "response", "parts": [call("a", "c1"), call("a", "c2")]},
        {
            "kind": "request",
            "parts": [
                result("tool-return", "a", "c1"),
                {"part_kind": "retry-prompt", "tool_name": "a", "content": "x"},
            ],
        },
    ]
    run(messages, "HM201")
    assert messages[2]["parts"][1]["tool_call_id"] == "c2"


def test_hm201_a_result_without_a_call_gets_its_own_id() -> None:
    messages = [
        opening(),
        {"kind": "response", "parts": []},
        {"kind": "request", "parts": [result("tool-return", "a")]},
    ]
    assert run(messages, "HM201") == [("HM201", 2, 0, "position:no-call")]
    assert messages[2]["parts"][0]["tool_call_id"] == derived_tool_call_id(conversation_key(messages), 2, 0, "a")


def test_hm201_derives_no_id_in_a_fragment() -> None:
    """A record that starts with a response, or whose first request holds a result, is a piece
    of a conversation: the ids derived from its own opening and places would not be the whole
    conversation's, so its null ids stay, each a warning of certainty ``fragment``."""
    for messages in (
        [{"kind": "response", "parts": [call("a")]}, {"kind": "request", "parts": [result("tool-return", "a")]}],
        [{"kind": "request", "parts": [result("tool-return", "a")]}, {"kind": "response", "parts": [call("a")]}],
    ):
        before = [dict(message, parts=[dict(part) for part in message["parts"]]) for message in messages]
        assert run(messages, "HM201") == [] and messages == before
        found = Options(select=("HM201",)).rules[0].check(messages, Options().plan().context)
        assert sorted((f.code, f.message, f.part, f.certainty, f.severity) for f in found) == [
            ("HM201", 0, 0, "fragment", "warning"),
            ("HM201", 1, 0, "fragment", "warning"),
        ]


def test_hm201_leaves_absent_ids_on_calls_and_tool_less_retries() -> None:
    messages = [
        {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "a", "args": {}}]},
        {
            "kind": "request",
            "parts": [{"part_kind": "retry-prompt", "content": "x", "tool_name": None, "tool_call_id": None}],
        },
    ]
    assert run(messages, "HM201") == []


def test_derived_ids_differ_by_conversation_place_and_tool_and_are_the_same_on_every_run() -> None:
    ids = {
        derived_tool_call_id(key, m, p, name)
        for key in ("k1", "k2")
        for m in range(3)
        for p in range(3)
        for name in ("a", "b")
    }
    assert len(ids) == 36
    expected = "pyd_ai_" + hashlib.sha256(b"histmig:k1:1:2:a").hexdigest()[:32]
    assert derived_tool_call_id("k1", 1, 2, "a") == derived_tool_call_id("k1", 1, 2, "a") == expected


def test_the_conversation_key_is_its_opening_prompts_and_their_times() -> None:
    assert conversation_key([_opened("hi")]) == conversation_key([_opened("hi"), {"kind": "response", "parts": []}])
    assert (
        len(
            {
                conversation_key([_opened("hi")]),
                conversation_key([_opened("ho")]),
                conversation_key([_opened("hi", "2024-10-01T10:00:01Z")]),
            }
        )
        == 3
    )
    with_null = {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi", "timestamp": None}]}
    without = {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]}
    assert conversation_key([with_null]) == conversation_key([without])  # HM202 removing the null changes nothing
    assert conversation_key([]) == conversation_key(["not a message"]) == hashlib.sha256(b"[]").hexdigest()[:32]


LEGACY_NULL_IDS = [
    orjson.loads(line) for line in (CORPUS / "all.jsonl").read_bytes().splitlines() if b'"tool_call_id":null' in line
]


def _export(records: int) -> list[dict]:
    """``records`` conversations of the corpus's null-id shapes (0.0.20), each with its own
    prompt and time, as an application's export holds them."""
    out = []
    for n in range(records):
        record = orjson.loads(orjson.dumps(LEGACY_NULL_IDS[n % len(LEGACY_NULL_IDS)]))
        opening = record["messages"][0]["parts"]
        for part in opening:
            if part.get("part_kind") == "user-prompt":
                part["content"] = f"{part['content']} (conversation {n})"
                part["timestamp"] = f"2024-10-{1 + n % 28:02d}T10:{n % 60:02d}:00Z"
        out.append({"id": f"c-{n}", "messages": record["messages"]})
    return out


def test_no_derived_id_is_shared_by_two_conversations_of_an_export(tmp_path: Path) -> None:
    source, out = tmp_path / "export.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(b"".join(orjson.dumps(record) + b"\n" for record in _export(135)))
    result = api.convert(str(source), str(out))
    owners: dict[str, set[str]] = {}
    for line in out.read_bytes().splitlines():
        record = orjson.loads(line)
        for message in record["messages"]:
            for part in message["parts"]:
                if str(part.get("tool_call_id", "")).startswith("pyd_ai_"):
                    owners.setdefault(part["tool_call_id"], set()).add(record["id"])
    assert len(owners) > 135 and [call_id for call_id, ids in owners.items() if len(ids) > 1] == []
    rows = [row for row in result.report.changes if row["rule"] == "HM201"]
    calls = [row["tool_call_id"] for row in rows if row["evidence"] == "position"]
    assert len(set(calls)) == len(calls) and set(calls) <= set(owners)
    first = orjson.loads(out.read_bytes().splitlines()[int(rows[0]["location"].split()[-1]) - 1])
    assert first["messages"][rows[0]["message"]]["parts"][rows[0]["part"]]["tool_call_id"] == rows[0]["tool_call_id"]
    assert all(row["tool_call_id"].startswith("pyd_ai_") for row in rows)


def test_the_ids_are_the_same_whichever_rules_run_with_it() -> None:
    alone, every = (
        orjson.loads(orjson.dumps(LEGACY_NULL_IDS[0]["messages"])),
        orjson.loads(orjson.dumps(LEGACY_NULL_IDS[0]["messages"])),
    )
    run(alone, "HM201")
    api.migrate(every)
    ids = [
        [p.get("tool_call_id") for m in history for p in m["parts"] if p.get("part_kind") == "tool-call"]
        for history in (alone, every)
    ]
    assert ids[0] == ids[1] and all(ids[0])


def test_hm201_derives_a_tool_less_retrys_null_id_for_a_target_before_2_60_0() -> None:
    messages = [
        {
            "kind": "request",
            "parts": [{"part_kind": "retry-prompt", "content": "x", "tool_name": None, "tool_call_id": None}],
        }
    ]
    assert run(messages, "HM201", target="2.59.0") == [("HM201", 0, 0, "position:tool-less")]
    assert messages[0]["parts"][0]["tool_call_id"] == derived_tool_call_id(conversation_key(messages), 0, 0, None)
    assert (
        run(
            [
                {
                    "kind": "request",
                    "parts": [{"part_kind": "retry-prompt", "content": "x", "tool_name": None, "tool_call_id": None}],
                }
            ],
            "HM201",
            target="2.60.0",
        )
        == []
    )


def test_hm201_leaves_stored_ids_alone() -> None:
    check_noop(
        "HM201",
        [
            _opened("hi"),
            {"kind": "response", "parts": [call("a", "c1")]},
            {"kind": "request", "parts": [result("tool-return", "a", "c1")]},
        ],
    )


def test_hm201_leaves_a_history_without_tool_parts_alone() -> None:
    check_noop("HM201", [_opened("hi"), {"kind": "response", "parts": [{"part_kind": "text", "content": "hello"}]}])
