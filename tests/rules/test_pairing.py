"""What the tool-pairing rules share (histmig.rules.pairing): 2.68's ordered matching walk, the
interrupted return built and placed as 2.68 builds and places it, the quick walks."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelRequest, ModelResponse, _synthesized_tool_returns

from histmig.options import Options
from histmig.rules import registry
from histmig.rules.base import Finding
from histmig.rules.pairing import (
    CODES,
    analyse,
    call_names,
    close_calls,
    drop_parts,
    found,
    fragment,
    interrupted_return,
    mentioned_call_names,
    new_request,
)
from histmig.screen import Screen
from tests.rules.conftest import call, result

STAMP = "2025-05-01T10:00:01Z"


def response(*parts: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"kind": "response", "parts": list(parts), **fields}


def request(*parts: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"kind": "request", "parts": list(parts), **fields}


def test_the_walk_answers_the_oldest_open_call_and_tells_each_kind_apart() -> None:
    messages = [
        request(result("tool-return", "t", "early")),
        response(call("t", "a"), call("t", "a"), call("t", "early"), call("u", "cut") | {"args": '{"x": '}),
        request(result("tool-return", "t", "a"), result("tool-return", "t", "ghost")),
        response(call("t", "early"), {"part_kind": "builtin-tool-call", "tool_name": "web", "tool_call_id": "a"}),
        request(result("tool-return", "t", "a"), result("tool-return", "t", "a")),
        response(call("v", "last")),
    ]
    pairing = analyse(messages)
    assert pairing.orphaned == [(2, 1)]
    assert pairing.before_call == [(0, 0)]
    assert pairing.reused == [((3, 0), (1, 2))]  # the second response's "early" shadows the first's
    assert pairing.duplicate == [
        ((4, 1), (1, 1))
    ]  # "a" twice in one response: answered FIFO, a third result is one too many
    assert pairing.truncated == [(1, 3)]
    assert sorted(pairing.dangling) == [(1, 2), (1, 3), (3, 0)]
    assert pairing.frontier == [(5, 0)]
    assert found(messages) == frozenset(CODES.values())


def test_a_retried_result_answers_a_cut_call_and_null_ids_are_left_to_hm201() -> None:
    cut = call("t", "c") | {"args": '{"city": "Os'}
    answered = [response(cut), request(result("tool-return", "t", "c") | {"outcome": "retried"})]
    assert analyse(answered).truncated == [] and found(answered) == frozenset()
    assert found([response(cut), request(result("tool-return", "t", "c"))]) == {"HM405"}
    assert found([response(call("t", None)), request(result("tool-return", "t", None))]) == frozenset(CODES.values())
    assert (
        found([response(call("t", "c")), request(result("retry-prompt", "t", "c"))]) == frozenset()
    )  # a tool-bound retry-prompt answers


@pytest.mark.parametrize(
    "messages",
    [
        [
            response(call("t", "a"), call("u", "b")),
            request(result("tool-return", "u", "b"), result("tool-return", "t", "a")),
            response(),
        ],
        [
            response(call("t", "a")),
            request(result("tool-return", "t", "a") | {"outcome": "retried"}),
            response(call("t", "a") | {"args": "{}"}),
        ],
        [response(call("t", "a")), request(result("tool-return", "t", "b"))],
        [
            response(call("t", "a") | {"args": "{nope"}),
            request(result("tool-return", "t", "a") | {"outcome": "retried"}),
        ],
        [
            response(call("t", "a") | {"args": "{nope"}),
            request(result("tool-return", "t", "a") | {"outcome": "failed"}),
        ],
        [request(result("tool-return", "t", "a")), response(call("t", "a"))],
    ],
    ids=["answered-in-turn", "frontier", "orphan", "cut-but-retried", "cut-not-retried", "early"],
)
def test_the_screen_passes_a_history_exactly_when_no_pairing_rule_finds_anything(messages: list[Any]) -> None:
    pairing = tuple(rule for rule in registry() if rule.code in CODES.values())
    assert (Screen(pairing)(orjson.dumps(messages)) == ()) is (found(messages) == frozenset())


def test_the_screen_places_a_frontier_call_in_the_last_response_when_an_earlier_one_is_equal() -> None:
    """The last response found by place, not by value: a response equal to an earlier one
    (hypothesis found it) had its frontier finding placed at the earlier one."""
    same = response(call("t", "a"))
    messages = [same, request(result("tool-return", "t", "a")), dict(same)]
    pairing = tuple(rule for rule in registry() if rule.code in CODES.values())
    assert [(f.code, f.message, f.part) for f in Screen(pairing)(orjson.dumps(messages))] == [("HM407", 2, 0)]


def test_the_interrupted_return_is_the_one_2_68_synthesizes() -> None:
    stored = response(call("get_weather", "c1") | {"tool_kind": None}, timestamp=STAMP, model_name="m")
    loaded = ModelMessagesTypeAdapter.validate_python([stored])[0]
    assert isinstance(loaded, ModelResponse)
    framework = ModelMessagesTypeAdapter.dump_json(
        [ModelRequest(parts=_synthesized_tool_returns(loaded, list(loaded.tool_calls)))]
    )
    ours = new_request([interrupted_return(stored["parts"][0], stored)])
    assert orjson.dumps([ours]) == framework
    assert "timestamp" not in interrupted_return(stored["parts"][0], response())  # never the clock


def test_returns_go_after_the_results_of_the_next_request_or_into_a_new_one() -> None:
    messages = [
        response(call("t", "a"), call("t", "b"), timestamp=STAMP),
        request(result("tool-return", "t", "b"), {"part_kind": "user-prompt", "content": "more"}),
        response(call("t", "c")),
        response(call("t", "d")),
    ]
    added = close_calls(messages, [(0, 0), (2, 0), (3, 0)])
    assert added == [(1, 1), (3, 0), (5, 0)]
    assert [p.get("tool_call_id") or p["part_kind"] for p in messages[1]["parts"]] == ["b", "a", "user-prompt"]
    assert [m["kind"] for m in messages] == ["response", "request", "response", "request", "response", "request"]
    assert messages[3]["parts"][0]["tool_call_id"] == "c" and messages[5]["parts"][0]["tool_call_id"] == "d"


def test_dropping_keeps_an_emptied_last_request_and_reports_a_gone_one_whole() -> None:
    messages = [
        request(result("tool-return", "t", "x"), run_id="r1"),
        response(),
        request(result("tool-return", "t", "y")),
    ]
    changes = drop_parts(messages, [(0, 0), (2, 0)], "HM401", "orphaned")
    assert messages == [response(), request()]
    assert [(c.message, c.part, c.before, c.after, c.evidence) for c in changes] == [
        (0, 0, "tool-return", "absent", "orphaned"),
        (2, 0, "tool-return", "absent", "orphaned"),
        (0, None, "request", "absent", "emptied"),
    ]
    assert changes[0].removed == result("tool-return", "t", "x") and changes[2].removed == {
        "kind": "request",
        "parts": [],
        "run_id": "r1",
    }


@pytest.mark.parametrize(
    ("messages", "piece"),
    [
        ([], False),
        (["not a message"], False),
        ([request({"part_kind": "user-prompt", "content": "hi"})], False),
        ([request({"part_kind": "user-prompt", "content": "hi"}), response(call("t", "a"))], False),
        ([request({"part_kind": "retry-prompt", "content": "again", "tool_name": None})], False),
        ([response({"part_kind": "text", "content": "hi"})], True),
        ([request(result("tool-return", "t", "a")), response(call("t", "b"))], True),
        ([request({"part_kind": "user-prompt", "content": "go on"}, result("retry-prompt", "t", "a"))], True),
        ([request(result("tool-return", "t", None))], True),
        ([request({"part_kind": "user-prompt", "content": "hi"}), request(result("tool-return", "t", "a"))], True),
        (
            [
                request({"part_kind": "user-prompt", "content": "hi"}),
                response(),
                request(result("tool-return", "t", "a")),
            ],
            False,
        ),
    ],
    ids=[
        "empty",
        "junk",
        "prompt",
        "prompt-call",
        "tool-less-retry",
        "response",
        "result",
        "retry",
        "null-id",
        "prompt-then-result",
        "result-after-a-response",
    ],
)
def test_a_fragment_starts_with_a_response_or_answers_calls_it_does_not_hold(messages: list[Any], piece: bool) -> None:
    assert fragment(messages) is piece
    assert (analyse(messages).certainty == "fragment") is piece


@pytest.mark.parametrize(
    ("messages", "names"),
    [
        (
            [request({"part_kind": "user-prompt", "content": "hi"}), response(call("t", "a"), call("t", "b"))],
            ["a", "b"],
        ),
        ([request({"part_kind": "user-prompt", "content": "hi"}), response(call("t", None))], ["null"]),
        (
            [request(result("tool-return", "t", "a"), result("retry-prompt", "t", "b")), response(call("t", "c"))],
            ["a", "b"],
        ),
        ([request(result("tool-return", "t", None), result("tool-return", "t", "a"))], ["a", "null"]),
        ([request({"part_kind": "user-prompt", "content": "hi"}), request(result("tool-return", "t", "b"))], ["b"]),
        ([response(call("t", "a"))], []),
        (
            [
                request({"part_kind": "user-prompt", "content": "hi"}),
                response(call("t", "a")),
                request(result("tool-return", "t", "a")),
            ],
            [],
        ),
    ],
    ids=[
        "frontier",
        "null-frontier",
        "fragment-answers",
        "null-result",
        "prompt-then-result",
        "starts-with-a-response",
        "answered",
    ],
)
def test_a_record_is_tied_to_another_by_its_open_calls_or_a_fragments_first_results(
    messages: list[Any], names: list[str]
) -> None:
    """A whole-looking history by the calls of its last response without a result; a fragment
    by the results its first request holds (not by its own last calls: it is a piece already).
    A part without an id ties to any other without one: no id tells them apart."""
    assert call_names(messages) == tuple(f"tool_call_id={name}" for name in names)


@pytest.mark.parametrize(
    ("raw", "names"),
    [
        (b'{"parts":[{"tool_call_id":"c1","tool_call_id" : "c\\u0032"}]', ["c1", "c2"]),
        (b'[{"part_kind":"tool-return","tool_call_id":null,"content":"x"', ["null"]),
        (b'{"messages":"[{\\"tool_call_id\\":\\"c3\\"},{\\"tool_call_id\\": null}]"}', ["c3", "null"]),
        (b'{"tool_call_id":"c\\', []),
        (b'{"messages":[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"x"}]}]}', []),
    ],
)
def test_a_rejected_record_names_every_tool_call_id_it_holds(raw: bytes, names: list[str]) -> None:
    """Read from its bytes, not parsed (invalid JSON, a key given twice): its own values, and a
    history held as text; a cut-off value names none."""
    assert mentioned_call_names(raw) == tuple(f"tool_call_id={name}" for name in names)


def test_the_screen_passes_a_fragment_with_its_findings_whatever_the_fixes() -> None:
    """One message a record: a response holding a call passes the screen with HM407's finding
    of certainty ``fragment`` even when HM407's fix applies (no fix acts on a fragment, so the
    record is not built); the same call after the run's prompt goes the full way."""
    pairing = tuple(rule for rule in registry() if rule.code in CODES.values())
    screen = Screen(pairing, fixing=frozenset(CODES.values()))
    piece = [response(call("t", "a"))]
    assert [(f.code, f.message, f.part, f.certainty, f.severity) for f in screen(orjson.dumps(piece))] == [
        ("HM407", 0, 0, "fragment", "warning")
    ]
    assert screen(orjson.dumps([request({"part_kind": "user-prompt", "content": "go"}), *piece])) is None
    assert [(f.code, f.certainty) for f in Screen(pairing)(orjson.dumps([request(), *piece]))] == [("HM407", "exact")]


def test_no_pairing_fix_acts_on_a_fragment() -> None:
    """Each pairing fix, given a fragment, changes nothing and returns its rule's findings, of
    certainty ``fragment``, as warnings."""
    piece = [
        request(result("tool-return", "t", "gone"), result("tool-return", "t", "a")),
        response(call("t", "a"), call("t", "b")),
        request({"part_kind": "user-prompt", "content": "and?"}),
        response(call("t", "c"), timestamp=STAMP),
    ]
    for rule in registry():
        if rule.code in CODES.values() and rule.fix is not None:
            work = orjson.loads(orjson.dumps(piece))
            done = rule.fix(work, Options().plan().context)
            assert work == piece and done and all(type(d) is Finding for d in done), rule.code
            assert {(d.certainty, d.severity) for d in done} == {("fragment", "warning")}, rule.code


def test_lifting_stand_ins_removes_synthesized_returns_and_the_requests_they_alone_made_up() -> None:
    from histmig.rules.pairing import lift_stand_ins

    response = {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "t", "tool_call_id": "a"}]}
    stand_in = interrupted_return(response["parts"][0], response)
    stored = {
        "part_kind": "tool-return",
        "tool_name": "t",
        "content": "x",
        "tool_call_id": "b",
        "outcome": "interrupted",
    }
    messages = [
        response,
        new_request([dict(stand_in)]),  # HM406's own request: goes
        {"kind": "request", "parts": [stored, dict(stand_in)], "metadata": {"n": 1}},
        {"kind": "request", "parts": [dict(stand_in)], "metadata": {"n": 2}},  # a stored request: stays, emptied
    ]
    changes = lift_stand_ins(messages, "HM401")
    assert [(c.message, c.part, c.before, c.evidence) for c in changes] == [
        (1, 0, "tool-return", "synthesized"),
        (1, None, "request", "synthesized"),
        (2, 1, "tool-return", "synthesized"),
        (3, 0, "tool-return", "synthesized"),
    ]
    assert messages == [
        response,
        {"kind": "request", "parts": [stored], "metadata": {"n": 1}},
        {"kind": "request", "parts": [], "metadata": {"n": 2}},
    ]
    assert lift_stand_ins(messages, "HM401") == []
