"""HM104 (docs/framework.md §4): attempts filled where they are null, max_retries from the budgets
given, findings where neither can be known, an opt-in rule the screen and the settled check know
about only when it is selected."""

from __future__ import annotations

import copy
from typing import Any

import orjson

from histmig.engine import _apply
from histmig.options import Options
from histmig.rules import pending, select
from histmig.rules.base import Change
from histmig.rules.hm104_retry_attempt import RULE
from histmig.screen import Screen, settled_for
from tests.conftest import HISTORIES, converted, load
from tests.rules.conftest import check_noop, check_transformed, migrate
from tests.rules.test_counting import TEXT, answers, calls, feedback, prompt

WITH = select(enabled=["attempts"])


def fill(messages: list[Any], **options: Any) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Run every rule with ``--attempts`` (and ``options``) over ``messages`` in place: HM104's
    changes as ``(message, part, after, evidence)`` and its findings as ``(message, part,
    evidence, text)``."""
    plan = Options(attempts=True, **options).plan()
    changes, findings, _ = _apply(messages, plan.walk.to_run(messages)[0], plan)
    return (
        [(c.message, c.part, c.after, c.evidence) for c in changes if c.rule == "HM104"],
        [(f.message, f.part, f.evidence, f.text) for f in findings if f.code == "HM104"],
    )


def retries(messages: list[Any]) -> list[tuple[int | None, int | None]]:
    return [
        (part["retry"].get("attempt"), part["retry"].get("max_retries"))
        for message in messages
        for part in message["parts"]
        if isinstance(part.get("retry"), dict)
    ]


def legacy_two_retries() -> list[Any]:
    """A 2.59-shaped history: a tool retried twice (in legacy parts), then text feedback."""
    retry = {"part_kind": "retry-prompt", "content": "Timed out.", "tool_name": "fetch", "tool_call_id": "c0.0"}
    return [
        prompt("a"),
        calls("fetch", run_id="a"),
        {"kind": "request", "parts": [retry], "run_id": "a"},
        calls("fetch", step=1, run_id="a"),
        {"kind": "request", "parts": [{**retry, "tool_call_id": "c1.0"}], "run_id": "a"},
        {**TEXT, "run_id": "a"},
        {"kind": "request", "parts": [{"part_kind": "retry-prompt", "content": "End with a period."}], "run_id": "a"},
    ]


def test_attempts_are_filled_on_the_parts_the_migration_makes_and_budgets_fill_max_retries() -> None:
    messages = legacy_two_retries()
    changes, findings = fill(messages, max_retries="tools=3,output=1,tool:other=9")
    assert retries(messages) == [(1, 3), (2, 3), (1, 1)]
    assert changes == [
        (2, 0, "attempt=1 max_retries=3", "tool counter, run start at the history's start"),
        (4, 0, "attempt=2 max_retries=3", "tool counter, run start at the history's start"),
        (6, 0, "attempt=1 max_retries=1", "output counter, run start at the history's start"),
    ]
    assert findings == []
    without = legacy_two_retries()
    fill(without)
    assert retries(without) == [(1, None), (2, None), (1, None)]


def test_a_tools_own_budget_and_an_output_tools_and_an_unknown_names() -> None:
    messages = [
        prompt(),
        calls("fetch", "final_result", "nope"),
        {
            "kind": "request",
            "parts": [
                answers(("fetch", "retry"))["parts"][0],
                {**answers(("final_result", "retry"), cause="validation_error")["parts"][0], "tool_call_id": "c0.1"},
                {**answers(("nope", "retry"), cause="unknown_tool")["parts"][0], "tool_call_id": "c0.2"},
            ],
        },
    ]
    fill(messages, max_retries="tools=2,output=4,tool:fetch=5")
    assert retries(messages) == [(1, 5), (1, 4), (1, 2)]
    again = copy.deepcopy(messages)
    for part in again[2]["parts"]:
        part["retry"] |= {"attempt": None, "max_retries": None}
    fill(again, max_retries="tools=2,tool:final_result=7")
    assert retries(again) == [(1, 2), (1, 7), (1, 2)]


def test_an_attempt_above_the_budget_given_is_a_contradiction_and_neither_is_written() -> None:
    messages = legacy_two_retries()
    changes, findings = fill(messages, max_retries="tools=1")
    assert retries(messages) == [(1, 1), (None, None), (1, None)]
    assert [change[:3] for change in changes] == [(2, 0, "attempt=1 max_retries=1"), (6, 0, "attempt=1")]
    assert findings == [
        (
            4,
            0,
            "budget-contradiction",
            "attempt 2 is above the budget 1 it was checked against: a contradiction (another budget, or other "
            "counting rules), neither is written",
        )
    ]


def test_an_attempt_or_a_budget_already_stored_is_never_changed() -> None:
    messages = [prompt(), calls("t"), answers(("t", "retry")), calls("t", step=1), answers(("t", "retry"), step=1)]
    messages[2]["parts"][0]["retry"] = {"cause": "model_retry", "attempt": 3, "max_retries": 5}
    messages[4]["parts"][0]["retry"]["max_retries"] = 5
    changes, _ = fill(messages, max_retries="tools=2")
    assert retries(messages) == [(3, 5), (4, 5)]
    assert [change[:3] for change in changes] == [(4, 0, "attempt=4")]


def test_what_cannot_be_known_stays_null_and_the_report_says_why() -> None:
    deferred = [prompt("a"), calls("job", run_id="a"), answers(("job", "retry"), run_id="b")]
    cut = [answers(("t", "retry")), calls("t", step=1), answers(("t", "retry"), step=1)]
    refused = [prompt(), calls("s"), answers(("s", "retry"), cause="unavailable_tool")]
    assert fill(deferred) == (
        [],
        [
            (
                2,
                0,
                "deferred-retry",
                "a retry handed back through DeferredToolResults (its call was made by an earlier run): the "
                "framework charges no budget for it, attempt stays null",
            )
        ],
    )
    text = (
        "the history does not begin with its run's start (it opens on results of calls it does not hold: cut "
        "short, or resumed with deferred tool results): the count is not known, attempt stays null"
    )
    assert fill(cut) == ([], [(0, 0, "history-cut", text), (2, 0, "history-cut", text)])
    assert fill(refused) == ([], [])  # the framework does not charge a first refusal: null, as it records it
    assert retries(deferred) + retries(cut) + retries(refused) == [(None, None)] * 4


def test_releases_that_may_have_written_a_run_but_count_it_differently_leave_it_null() -> None:
    legacy = {"part_kind": "retry-prompt", "content": "Ambiguous.", "tool_name": "t"}
    old = {
        "kind": "response",
        "parts": [{"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": f"c{n}"} for n in (1, 2)],
        "usage": {"request_tokens": 1},
    }
    messages = [
        prompt(),
        old,
        {"kind": "request", "parts": [{**legacy, "tool_call_id": "c1"}, {**legacy, "tool_call_id": "c2"}]},
    ]
    one = copy.deepcopy(messages)
    changes, findings = fill(messages, counting="writer", max_retries="tools=2")
    assert changes == [
        (2, 0, "attempt=1 max_retries=2", "tool counter, run start at the history's start, counted as 0.2.0-0.7.2 did")
    ]
    assert findings == [
        (
            2,
            1,
            "writer-ambiguous",
            "the releases that may have written this run (0.2.0-0.7.2, from its fields) count it differently "
            "(2 as 0.0.1-0.4.3 counted; 2 as 0.4.4-0.4.8 counted; 1 as 0.4.9-1.39.1 counted): attempt stays null",
        )
    ]
    assert fill(one, counting="0.4.11", max_retries="tools=2")[0][1][2:] == (
        "attempt=1 max_retries=2",
        "tool counter, run start at the history's start, counted as 0.4.9-1.39.1 did",
    )


def test_a_budget_the_writing_releases_disagree_on_is_left_null_and_said() -> None:
    unknown = {
        "part_kind": "retry-prompt",
        "content": "Unknown tool name: 'nope'. No tools available.",
        "tool_name": "nope",
        "tool_call_id": "c0.0",
    }
    thinking = {"part_kind": "thinking", "content": "hm"}  # 0.3.0+
    messages = [prompt(), {**calls("nope"), "usage": {"request_tokens": 1}}, {"kind": "request", "parts": [unknown]}]
    messages[1]["parts"].append(thinking)
    changes, findings = fill(messages, counting="writer", max_retries="tools=3,output=5")
    assert [change[2:] for change in changes] == [
        ("attempt=1", "output/unknown tool counter, run start at the history's start, counted as 0.3.0-0.7.2 did")
    ]
    assert findings == [
        (
            2,
            0,
            "writer-ambiguous",
            "max_retries stays null: the releases that may have written this run checked it against different budgets "
            "(5 as 0.0.1-0.4.3 counted; 1 as 0.4.4-0.4.8 counted; 1 as 0.4.9-1.39.1 counted)",
        )
    ]


def test_a_retried_return_without_retry_info_is_counted_not_filled() -> None:
    messages = [prompt(), calls("t"), answers(("t", "retry")), calls("t", step=1), answers(("t", "retry"), step=1)]
    messages[2]["parts"][0]["retry"] = None  # what pydantic-ai's loader writes for a legacy text retry
    fill(messages)
    assert messages[2]["parts"][0]["retry"] is None and retries(messages) == [(2, None)]


def test_a_second_pass_changes_nothing_and_every_run_is_the_same() -> None:
    messages = legacy_two_retries()
    fill(messages, max_retries="tools=3")
    once = orjson.dumps(messages)
    assert fill(messages, max_retries="tools=3") == ([], [])
    assert orjson.dumps(messages) == once
    assert orjson.dumps(converted(legacy_two_retries(), Options(attempts=True, max_retries="tools=3"))[0]) == once


def test_it_runs_only_with_attempts() -> None:
    migration = [rule for rule in select() if not rule.code.startswith("HM4")]
    assert RULE.opt_in == "attempts" and max(rule.phase for rule in migration) < RULE.phase < min(
        rule.phase for rule in select() if rule.code.startswith("HM4")
    )
    assert (
        "HM104" not in [rule.code for rule in Options().rules]
        and [rule.code for rule in Options(attempts=True).rules if not rule.code.startswith("HM4")][-1] == "HM104"
    )
    messages = legacy_two_retries()
    migrate(messages)
    assert retries(messages) == [(None, None)] * 3


def test_the_screen_passes_what_has_nothing_to_fill_and_the_settled_check_wants_every_attempt() -> None:
    screen, settled = Screen(WITH), settled_for(WITH, None)
    counted = [prompt(), calls("t"), answers(("t", "retry"))]
    counted[2]["parts"][0]["retry"]["attempt"] = 1
    null = [prompt(), calls("t"), answers(("t", "retry"))]
    loader = copy.deepcopy(null)
    loader[2]["parts"][0]["retry"] = None
    assert [
        screen(orjson.dumps(h)) == () for h in (counted, null, loader, [prompt(), TEXT], [prompt(), TEXT, feedback()])
    ] == [True, False, True, True, False]
    assert [settled(orjson.dumps(h)) for h in (counted, null, loader)] == [True, False, True]
    assert Screen(select())(orjson.dumps(null)) == () and settled_for(select(), None)(orjson.dumps(null))


def test_on_the_corpus_the_screen_with_attempts_passes_exactly_the_histories_with_nothing_to_fill() -> None:
    screen = Screen(WITH)
    passed = {path for path in HISTORIES if screen(orjson.dumps({"messages": load(path)})) == ()}
    untouched = {path for path in HISTORIES if not converted(load(path), Options(attempts=True))[1]}
    assert passed == {path for path in HISTORIES if not pending(load(path), WITH)}
    assert {f"{p.parent.name}/{p.stem}" for p in untouched - passed} == {
        "v2.60.0/m_deferred_tool_model_retry",
        "v2.68.0/m_deferred_tool_model_retry",
    }
    assert (len(passed), len(untouched)) == (72, 74)


def _one_retry(attempt: int | None = None, max_retries: int | None = None) -> list[dict[str, Any]]:
    """A run that called ``add``, was asked to retry (attempt ``attempt``), called again and ended."""
    retry = {"cause": "validation_error", "attempt": attempt, "max_retries": max_retries}

    def call(call_id: str) -> dict[str, Any]:
        part = {"part_kind": "tool-call", "tool_name": "add", "args": {"a": "one"}, "tool_call_id": call_id}
        return {"kind": "response", "parts": [part]}

    return [
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "add"}]},
        call("c1"),
        {
            "kind": "request",
            "parts": [
                {
                    "part_kind": "tool-return",
                    "tool_name": "add",
                    "content": "bad",
                    "tool_call_id": "c1",
                    "outcome": "retried",
                    "retry": retry,
                }
            ],
        },
        call("c2"),
        {
            "kind": "request",
            "parts": [{"part_kind": "tool-return", "tool_name": "add", "content": "2", "tool_call_id": "c2"}],
        },
        {"kind": "response", "parts": [{"part_kind": "text", "content": "2"}]},
    ]


COUNTED = "tool counter, run start at the history's start"


def test_hm104_fills_the_first_retry_of_a_tool_as_attempt_1() -> None:
    check_transformed(
        "HM104",
        _one_retry(),
        _one_retry(attempt=1),
        [Change("HM104", 2, 0, "attempt=null", "attempt=1", COUNTED, "derived")],
        attempts=True,
    )


def test_hm104_fills_max_retries_from_the_budget_given() -> None:
    check_transformed(
        "HM104",
        _one_retry(),
        _one_retry(attempt=1, max_retries=3),
        [Change("HM104", 2, 0, "attempt=null", "attempt=1 max_retries=3", COUNTED, "derived")],
        attempts=True,
        max_retries="tools=3",
    )


def test_hm104_leaves_a_stored_attempt_alone() -> None:
    check_noop("HM104", _one_retry(attempt=1), attempts=True)


def test_hm104_leaves_a_run_without_retries_alone() -> None:
    check_noop("HM104", [m for i, m in enumerate(_one_retry()) if i not in (1, 2)], attempts=True)
