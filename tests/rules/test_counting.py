"""Retry counting replayed release by release (histmig.rules.counting, docs/framework.md §4): the
counting rules of each release range, runs and their starts, the releases a run's fields tell,
and what each replay counts."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from histmig.rules.counting import ERAS, History, counting_rules, eras_between, release_range, written_between
from histmig.schema.releases import release
from tests.conftest import CORPUS

CURRENT = counting_rules("current")[0]


def prompt(run_id: str | None = None) -> dict[str, Any]:
    return {
        "kind": "request",
        "parts": [{"part_kind": "user-prompt", "content": "go"}],
        **({"run_id": run_id} if run_id else {}),
    }


def calls(*names: str, run_id: str | None = None, step: int = 0) -> dict[str, Any]:
    parts = [
        {"part_kind": "tool-call", "tool_name": name, "args": {}, "tool_call_id": f"c{step}.{n}"}
        for n, name in enumerate(names)
    ]
    return {"kind": "response", "parts": parts, **({"run_id": run_id} if run_id else {})}


def answers(
    *results: tuple[str, str], run_id: str | None = None, step: int = 0, cause: str = "model_retry"
) -> dict[str, Any]:
    """A request answering ``calls(..., step=step)``: each result ``(name, "ok"|"retry")``."""
    parts = []
    for n, (name, how) in enumerate(results):
        part = {
            "part_kind": "tool-return",
            "tool_name": name,
            "content": "done" if how == "ok" else "try again",
            "tool_call_id": f"c{step}.{n}",
        }
        if how != "ok":
            part |= {"outcome": "retried", "retry": {"cause": cause, "attempt": None, "max_retries": None}}
        parts.append(part)
    return {"kind": "request", "parts": parts, **({"run_id": run_id} if run_id else {})}


def feedback(cause: str = "model_retry", run_id: str | None = None) -> dict[str, Any]:
    part = {
        "part_kind": "retry-feedback",
        "content": "again",
        "retry": {"cause": cause, "attempt": None, "max_retries": None},
    }
    return {"kind": "request", "parts": [part], **({"run_id": run_id} if run_id else {})}


TEXT = {"kind": "response", "parts": [{"part_kind": "text", "content": "hi"}]}


def attempts(messages: list[Any], counting: str = "current") -> list[int | None]:
    """The attempts one counting gives the retry parts of ``messages``, in order."""
    history = History(messages)
    counted = history.replay(counting_rules(counting)[0])
    return [counted[retry.message, retry.part].attempt for retry in history.retries]


def test_releases_and_the_counting_of_each() -> None:
    assert release("1.39.1") == (1, 39, 1) and release("v2.0.0") == (2, 0, 0)
    for named in ("2.x", "v2.0.0b1"):  # one parser for every release: a pre-release is none
        with pytest.raises(ValueError, match=f"'{named}' is not a release"):
            release(named)
    with pytest.raises(ValueError, match="--counting must be current, writer or a release such as 1.0.18, not '3.0.0'"):
        counting_rules("3.0.0")  # histmig knows releases 0.0.13 to 2.68.0
    assert [era.releases for era in ERAS] == [
        "0.0.1-0.4.3",
        "0.4.4-0.4.8",
        "0.4.9-1.39.1",
        "1.40.0-1.79.0",
        "1.80.0-2.15.0",
        "2.16.0+",
    ]
    assert [
        counting_rules(mode)[0].releases
        for mode in ("current", "0.0.20", "0.4.4", "1.0.18", "1.79.0", "1.107.10", "2.15.3", "2.68.0")
    ] == [
        "2.16.0+",
        "0.0.1-0.4.3",
        "0.4.4-0.4.8",
        "0.4.9-1.39.1",
        "1.40.0-1.79.0",
        "1.80.0-2.15.0",
        "1.80.0-2.15.0",
        "2.16.0+",
    ]
    assert counting_rules("writer") == ERAS
    with pytest.raises(
        ValueError, match="--counting must be current, writer or a release such as 1.0.18, not 'newest'"
    ):
        counting_rules("newest")


def test_the_eras_of_a_release_range() -> None:
    assert [era.releases for era in eras_between((0, 3, 5), (0, 7, 3))] == [
        "0.0.1-0.4.3",
        "0.4.4-0.4.8",
        "0.4.9-1.39.1",
    ]
    assert [era.releases for era in eras_between((1, 95, 0), (2, 0, 0))] == ["1.80.0-2.15.0"]
    assert [era.releases for era in eras_between((2, 0, 0), None)] == ["1.80.0-2.15.0", "2.16.0+"]
    assert eras_between((2, 58, 0), (1, 15, 0)) == ERAS  # fields that contradict each other tell nothing
    assert [
        release_range(*bounds)
        for bounds in (((0, 3, 5), (0, 7, 3)), ((1, 0, 18), (1, 15, 0)), ((1, 95, 0), (2, 0, 0)), ((2, 0, 0), None))
    ] == [
        "0.3.5-0.7.2",
        "1.0.18-1.14.x",
        "1.95.0-1.x",
        "2.0.0+",
    ]


@pytest.mark.parametrize(
    ("path", "bounds"),
    [
        ("v0.0.20/a_tool_model_retry", ((0, 0, 1), (0, 2, 0))),
        ("v0.4.11/a_tool_model_retry", ((0, 3, 5), (0, 7, 3))),
        ("v0.4.11/c_unknown_tool", ((0, 4, 4), (0, 7, 3))),
        ("v1.0.18/a_tool_model_retry", ((1, 0, 18), (1, 15, 0))),
        ("v1.107.10/a_tool_model_retry", ((1, 95, 0), (2, 0, 0))),
        ("v2.0.0/a_tool_model_retry", ((2, 0, 0), None)),
        ("v2.59.0/a_tool_model_retry", ((2, 58, 0), None)),
    ],
)
def test_the_releases_a_corpus_history_was_written_by_are_told_from_its_fields(path: str, bounds: tuple) -> None:
    release_of_path = release(path.split("/")[0])
    low, high = written_between(orjson.loads((CORPUS / f"{path}.json").read_bytes()))
    assert (low, high) == bounds and low <= release_of_path and (high is None or release_of_path < high)


def test_a_history_without_its_null_fields_still_tells_its_releases_apart() -> None:
    old = [prompt(), {"kind": "response", "parts": [], "usage": {"request_tokens": 1}, "vendor_details": None}]
    assert written_between(old) == ((0, 2, 5), (0, 7, 3))
    newer = [
        {**prompt("r"), "state": "complete"},
        {**TEXT, "run_id": "r", "state": "complete", "usage": {"input_tokens": 1}},
    ]
    assert written_between(newer) == ((2, 0, 0), None)
    assert written_between([prompt(), {**TEXT, "usage": {}}]) == ((0, 2, 0), (1, 15, 0))  # no run id: before 1.15.0


def test_runs_start_where_the_run_id_changes_or_at_a_request_of_prompts() -> None:
    by_id = [
        prompt("a"),
        calls("t", run_id="a"),
        answers(("t", "retry"), run_id="a"),
        {**TEXT, "run_id": "a"},
        prompt("b"),
        {**TEXT, "run_id": "b"},
    ]
    assert [(run.start, run.end, run.how, run.cut) for run in History(by_id).runs] == [
        (0, 4, "history", False),
        (4, 6, "run_id", False),
    ]
    inferred = [
        prompt(),
        calls("t"),
        answers(("t", "ok")),
        TEXT,
        prompt(),
        TEXT,
        {"kind": "request", "parts": []},
        TEXT,
    ]
    assert [(run.start, run.how) for run in History(inferred).runs] == [(0, "history"), (4, "inferred")]
    cut = [answers(("t", "retry")), calls("t", step=1), answers(("t", "ok"), step=1), TEXT, prompt(), TEXT]
    assert [(run.start, run.cut) for run in History(cut).runs] == [(0, True), (4, False)]
    assert History([]).runs == [] and History([]).retries == []


def test_several_failing_calls_of_one_tool_in_one_response_share_an_attempt_since_0_4_9() -> None:
    messages = [
        prompt(),
        calls("t", "t"),
        answers(("t", "retry"), ("t", "retry")),
        calls("t", step=1),
        answers(("t", "retry"), step=1),
    ]
    assert attempts(messages) == [1, 1, 2]
    assert attempts(messages, "1.0.18") == [1, 1, 2]
    assert attempts(messages, "0.4.8") == [1, 2, 3]
    assert attempts(messages, "0.0.20") == [1, 2, 3]


def test_a_success_resets_a_tool_and_since_2_16_an_untouched_tool_keeps_its_count() -> None:
    untouched = [
        prompt(),
        calls("t"),
        answers(("t", "retry")),
        calls("u", step=1),
        answers(("u", "ok"), step=1),
        calls("t", step=2),
        answers(("t", "retry"), step=2),
    ]
    assert attempts(untouched) == [1, 2]
    assert attempts(untouched, "1.107.10") == [1, 1]  # 0.4.9-2.15.0: every tool that did not fail is reset
    assert attempts(untouched, "0.4.5") == [1, 2]
    succeeded = [
        prompt(),
        calls("t"),
        answers(("t", "retry")),
        calls("t", step=1),
        answers(("t", "ok"), step=1),
        calls("t", step=2),
        answers(("t", "retry"), step=2),
    ]
    assert [attempts(succeeded, mode) for mode in ("current", "1.0.18", "0.0.20")] == [[1, 1]] * 3
    both = [
        prompt(),
        calls("t"),
        answers(("t", "retry")),
        calls("t", "t", step=1),
        answers(("t", "retry"), ("t", "ok"), step=1),
        calls("t", step=2),
        answers(("t", "retry"), step=2),
    ]
    assert attempts(both) == [1, 2, 3]  # a tool that failed and succeeded in one step is still charged


def test_unknown_tool_names_are_counted_on_their_own_or_also_on_the_run_wide_counter() -> None:
    messages = [prompt(), calls("nope"), answers(("nope", "retry"), cause="unknown_tool"), TEXT, feedback()]
    history = History(messages)
    for mode, expected, budgets in (
        ("current", [1, 1], [("unknown", "nope"), ("output", None)]),
        ("1.79.0", [1, 2], [("unknown", "nope"), ("output", None)]),
        ("1.0.18", [1, 2], [("one", None), ("output", None)]),
        ("0.0.20", [1, 2], [("output", None), ("output", None)]),
    ):
        counted = history.replay(counting_rules(mode)[0])
        found = [counted[r.message, r.part] for r in history.retries]
        assert ([c.attempt for c in found], [c.budget for c in found]) == (expected, budgets), mode


def test_output_tools_and_tool_less_feedback_share_the_run_wide_counter() -> None:
    output_fail = answers(("final_result", "retry"), cause="validation_error")
    messages = [
        prompt(),
        calls("final_result"),
        output_fail,
        {"kind": "response", "parts": [{"part_kind": "thinking", "content": "hm"}]},
        feedback("no_output"),
        calls("final_result", step=2),
        {**output_fail, "parts": [{**output_fail["parts"][0], "tool_call_id": "c2.0"}]},
    ]
    history = History(messages)
    counted = history.replay(CURRENT)
    # docs/framework.md §4, verified sequence: output tool fail (1), thinking-only (2), output tool fail (2)
    assert [(counted[r.message, r.part].attempt, counted[r.message, r.part].counter) for r in history.retries] == [
        (1, "tool"),
        (2, "output"),
        (2, "tool"),
    ]
    assert attempts(messages, "0.0.20") == [1, 2, 3]  # result tools had no counter of their own before 0.4.4


def test_an_empty_response_re_sent_as_an_empty_request_was_an_output_retry() -> None:
    empty = {"kind": "response", "parts": []}
    assert attempts([prompt(), empty, {"kind": "request", "parts": []}, TEXT, feedback()]) == [2]
    assert attempts([{"kind": "request", "parts": []}, TEXT, feedback()]) == [
        1
    ]  # a run's own first request is no re-sending


def test_the_first_refusal_of_an_unavailable_tool_in_a_run_is_not_charged() -> None:
    refusal = lambda step: answers(("secret", "retry"), cause="unavailable_tool", step=step)  # noqa: E731
    messages = [
        prompt("a"),
        calls("secret", run_id="a"),
        refusal(0),
        calls("secret", step=1),
        refusal(1),
        calls("secret", step=2),
        refusal(2),
        {**prompt("b")},
        calls("secret", step=3, run_id="b"),
        refusal(3),
    ]
    history = History(messages)
    counted = history.replay(CURRENT)
    assert [(counted[r.message, r.part].attempt, counted[r.message, r.part].why) for r in history.retries] == [
        (None, "free"),
        (1, None),
        (2, None),
        (None, "free"),
    ]


def test_a_retry_handed_back_at_a_later_run_is_not_charged_and_a_cut_history_is_not_known() -> None:
    deferred = [
        prompt("a"),
        calls("job", run_id="a"),
        answers(("job", "retry"), run_id="b"),
        calls("job", step=1, run_id="b"),
        answers(("job", "retry"), step=1, run_id="b"),
    ]
    history = History(deferred)
    counted = history.replay(CURRENT)
    assert [(counted[r.message, r.part].attempt, counted[r.message, r.part].why) for r in history.retries] == [
        (None, "deferred"),
        (1, None),
    ]
    cut = [
        answers(("t", "retry"), ("u", "retry")),
        calls("t", "u", step=1),
        answers(("t", "ok"), ("u", "retry"), step=1),
        calls("t", "w", step=2),
        answers(("t", "retry"), ("w", "retry"), step=2),
        TEXT,
        feedback(),
    ]
    history = History(cut)
    counted = history.replay(CURRENT)
    assert [(counted[r.message, r.part].attempt, counted[r.message, r.part].why) for r in history.retries] == [
        (None, "cut"),
        (None, "cut"),
        (None, "cut"),
        (1, None),
        (None, "cut"),
        (None, "cut"),  # t is known once it succeeded; w and the output counter never
    ]
    assert attempts(cut, "1.0.18") == [
        None,
        None,
        None,
        1,
        1,
        None,
    ]  # 0.4.9-2.15.0 reset every tool that did not fail at a step


def test_an_attempt_already_stored_leads_the_count() -> None:
    messages = [
        prompt(),
        calls("t"),
        answers(("t", "retry")),
        calls("t", step=1),
        answers(("t", "retry"), step=1),
        TEXT,
        feedback(),
        TEXT,
        feedback(),
    ]
    messages[2]["parts"][0]["retry"]["attempt"] = 4
    messages[6]["parts"][0]["retry"]["attempt"] = 2
    assert attempts(messages) == [4, 5, 2, 3]


def test_output_tools_are_told_by_name_and_by_their_status_texts() -> None:
    status = {
        "part_kind": "tool-return",
        "tool_name": "answer",
        "content": "Final result processed.",
        "tool_call_id": "x",
    }
    messages = [
        prompt(),
        calls("answer"),
        answers(("answer", "retry")),
        calls("answer", step=1),
        {"kind": "request", "parts": [{**status, "tool_call_id": "c1.0"}]},
    ]
    history = History(messages)
    assert [r.kind for r in history.retries] == ["output-tool"]
    assert [
        r.kind for r in History([prompt(), calls("final_result_City"), answers(("final_result_City", "retry"))]).retries
    ] == ["output-tool"]
