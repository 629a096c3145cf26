"""Tool pairing against pydantic-ai-slim 2.68.0 (issue: tool pairing, item 3).

On every corpus history, every captured history (runs that ended in an exception) and generated
histories damaged as stored histories are (results dropped, ids duplicated and reused across
responses, results moved before their calls, the tail cut, args cut mid-stream): after histmig's
fixes, safe and unsafe, 2.68's two pairing passes (``_drop_orphaned_tool_results``, then
``_repair_dangling_tool_calls`` with the same ``repair_last_response``: closing the calls of the
last response is HM407's fix) change nothing; what 2.68 loads from histmig's output equals what
those two passes make of the input, part for part, apart from a re-paired result (which the
framework drops, answering its call with an interrupted return); and nothing of the input is
lost: each part is in the output or written whole into a change.

The input the passes are compared on is the history once the rules of the earlier phases ran
(HM1xx-HM3xx, whose own agreement with 2.68 the corpus tests check): 2.68 translates legacy parts
at load time its own way. A timestamp the framework would take from the clock at load time (a
part or response stored without one) is pinned first, the same in both, so that two loads
compare.
"""

from __future__ import annotations

import copy
import itertools
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from pydantic_ai.messages import ModelMessagesTypeAdapter, _drop_orphaned_tool_results, _repair_dangling_tool_calls

from histmig.api import migrate, validate
from histmig.options import Options
from histmig.rules.base import ABSENT_PART, Change
from histmig.rules.pairing import SYNTHESIZED_KEY, fragment
from tests.conftest import CORPUS, HISTORIES, framework_dump, history_id, load

CAPTURED = sorted((CORPUS / "captured").glob("v*/*.json"))
EARLIER = Options(ignore=("HM4",))
"""The rules of the phases before tool pairing."""
PINNED = "2001-02-03T04:05:06Z"


def fixes(close_frontier: bool) -> Options:
    """Every fix, safe and unsafe; HM407's (closing the last response's calls) only with
    ``close_frontier``, the counterpart of 2.68's ``repair_last_response``."""
    return Options(unsafe_fixes=True, ignore=() if close_frontier else ("HM407",))


def pinned(messages: list[Any]) -> list[Any]:
    """``messages`` with :data:`PINNED` as the timestamp of each message and part that has
    none and that 2.68 would give the load's clock time."""
    dumped = framework_dump(messages)
    for message, loaded in zip(messages, dumped):
        for item, filled in [(message, loaded), *zip(message["parts"], loaded["parts"])]:
            if "timestamp" not in item and filled.get("timestamp") is not None:
                item["timestamp"] = PINNED
    return messages


def framework_passes(messages: list[Any], repair_last_response: bool) -> list[Any]:
    """What 2.68's two pairing passes make of ``messages`` (loaded), dumped as JSON data."""
    loaded = ModelMessagesTypeAdapter.validate_python(messages)
    repaired = _repair_dangling_tool_calls(
        _drop_orphaned_tool_results(loaded), repair_last_response=repair_last_response
    )
    return ModelMessagesTypeAdapter.dump_python(repaired, mode="json")


def _repaired(changes: list[Change], output: list[Any]) -> list[tuple[int, int]]:
    """The places in ``output`` of the results HM401 re-paired: each is its change's part as it
    was (``removed``) but for its ``tool_call_id``."""
    places: list[tuple[int, int]] = []
    for change in changes:
        if change.evidence == "only-open-call":
            was = {k: v for k, v in change.removed.items() if k != "tool_call_id"}
            places.append(
                next(
                    (m, p)
                    for m, message in enumerate(output)
                    for p, part in enumerate(message["parts"])
                    if (m, p) not in places
                    and part.get("tool_call_id") != change.removed["tool_call_id"]
                    and {k: v for k, v in part.items() if k != "tool_call_id"} == was
                )
            )
    return places


def _set_aside(loaded: list[Any], expected: list[Any], places: list[tuple[int, int]]) -> tuple[list[Any], list[Any]]:
    """``loaded`` without the re-paired results at ``places``, ``expected`` without the
    interrupted return the framework gave each of their calls instead. The requests of the
    turn such a result was in (those after the same response, up to the next one) compare by
    their parts alone, in any order and whichever request holds them: the framework drops the
    request a re-paired result leaves empty and answers the call in the turn's next request
    or in a new one, where histmig keeps the stored requests; and 2.68 places its interrupted
    returns after a request's results, the re-paired one among them."""
    turns: dict[int, list[Any]] = {}
    for m, p in places:
        turn = sum(message["kind"] == "response" for message in loaded[:m])
        turns.setdefault(turn, []).append(loaded[m]["parts"][p]["tool_call_id"])
    kept = [
        {**message, "parts": [part for p, part in enumerate(message["parts"]) if (m, p) not in places]}
        for m, message in enumerate(loaded)
    ]
    return _merged(kept, turns, drop=False), _merged(expected, turns, drop=True)


def _merged(messages: list[Any], turns: dict[int, list[Any]], drop: bool) -> list[Any]:
    """``messages`` with the requests of each turn in ``turns`` (its number of responses
    before it) as one request of their parts, sorted (none when they hold none); with
    ``drop``, less one synthesized interrupted return for each call id of the turn (none for
    a call of the last response, without repair_last_response)."""
    out: list[Any] = []
    turn, pending = 0, None
    for message in [*messages, None]:
        if message is None or message["kind"] == "response":
            if pending is not None:
                if drop:
                    for call_id in turns[turn]:
                        synthesized = [
                            part
                            for part in pending
                            if part.get("tool_call_id") == call_id and (part.get("metadata") or {}).get(SYNTHESIZED_KEY)
                        ]
                        if synthesized:
                            pending.remove(synthesized[0])
                if pending:
                    out.append({"kind": "request", "parts": sorted(pending, key=_key)})
                pending = None
            if message is None:
                break
            turn += 1
            out.append(message)
        elif turn in turns:
            pending = [*(pending or []), *message["parts"]]
        else:
            out.append(message)
    return out


def _key(part: Any) -> bytes:
    return orjson.dumps(part, option=orjson.OPT_SORT_KEYS)


def assert_pairs_as_the_framework(history: list[Any], close_frontier: bool) -> list[Change]:
    """The three properties of the module docstring for one history; returns histmig's
    changes. A history that looks like a piece of a conversation (a result moved into its
    opening request) is left as the earlier phases leave it."""
    before = copy.deepcopy(history)
    migrate(before, EARLIER)
    output = copy.deepcopy(history)
    changes = [change for change in migrate(output, fixes(close_frontier)) if change.rule.startswith("HM4")]
    if fragment(before):  # a result in the opening request: no fix acts on a piece of a conversation
        assert changes == [] and output == before
        return changes
    pinned(before), pinned(output)
    loaded = framework_dump(output)
    assert framework_passes(output, close_frontier) == loaded
    expected = framework_passes(before, close_frontier)
    places = _repaired(changes, output)
    if places:
        loaded, expected = _set_aside(loaded, expected, places)
    assert loaded == expected

    kept = Counter(_key(part) for message in before for part in message["parts"])
    kept.subtract(_key(change.removed) for change in changes if change.part is not None and change.after == ABSENT_PART)
    added = sum(change.before == ABSENT_PART for change in changes)
    repaired = [change for change in changes if change.evidence == "only-open-call"]
    written = Counter(_key(part) for message in output for part in message["parts"])
    assert sum(written.values()) == sum(kept.values()) + added
    assert sum((kept - written).values()) == len(repaired)  # each re-paired part changed its id only
    assert sum((written - kept).values()) == added + len(repaired)
    return changes


@pytest.mark.parametrize("close_frontier", [True, False], ids=["closing-the-frontier", "leaving-the-frontier"])
@pytest.mark.parametrize("path", HISTORIES + CAPTURED, ids=history_id)
def test_each_corpus_and_captured_history_pairs_as_the_framework(path: Path, close_frontier: bool) -> None:
    assert_pairs_as_the_framework(load(path), close_frontier)


def _figures(paths: list[Path]) -> dict[str, Any]:
    """For ``paths``' histories: histmig's tool-pairing findings by rule; how many histories
    2.68 does not load as stored; and how many its pairing passes change, before every request
    (``repair_last_response=False``) and in ``repair_messages`` (``True``), as stored (those it
    loads), after ``convert`` and after ``convert --unsafe-fixes``."""
    figures: dict[str, Any] = {"findings": Counter(), "unloadable": 0}
    for path in paths:
        history = load(path)
        figures["findings"].update(finding.code for finding in validate(history) if finding.code.startswith("HM4"))
        try:
            stored = pinned(copy.deepcopy(history))
        except ValidationError:
            figures["unloadable"] += 1
            stored = None
        versions = {
            "stored": stored,
            "converted": pinned(_migrated(history, Options())),
            "unsafe": pinned(_migrated(history, Options(unsafe_fixes=True))),
        }
        for name, version in versions.items():
            for repair_last_response in (False, True):
                key = f"{name}, repair_last_response={repair_last_response}"
                figures[key] = figures.get(key, 0) + (
                    version is not None and framework_passes(version, repair_last_response) != framework_dump(version)
                )
    return figures


def _migrated(history: list[Any], options: Options) -> list[Any]:
    output = copy.deepcopy(history)
    migrate(output, options)
    return output


def test_the_corpus_and_captured_findings_and_what_2_68_would_repair() -> None:
    """The figures of the issue's note: framework-written histories pair, but for the calls of
    their last response (deferred calls awaiting results, runs that raised mid-tool)."""
    assert _figures(HISTORIES) == {
        "findings": Counter({"HM407": 6}),
        "unloadable": 16,
        "stored, repair_last_response=False": 0,
        "stored, repair_last_response=True": 6,
        "converted, repair_last_response=False": 0,
        "converted, repair_last_response=True": 6,
        "unsafe, repair_last_response=False": 0,
        "unsafe, repair_last_response=True": 0,
    }
    assert _figures(CAPTURED) == {
        "findings": Counter({"HM407": 9}),
        "unloadable": 2,
        "stored, repair_last_response=False": 0,
        "stored, repair_last_response=True": 8,
        "converted, repair_last_response=False": 0,
        "converted, repair_last_response=True": 9,
        "unsafe, repair_last_response=False": 0,
        "unsafe, repair_last_response=True": 0,
    }


TOOLS = ("get_weather", "search", "add")
IDS = st.sampled_from(["call_1", "call_2", "call_3", "call_4", "pyd_ai_5"])
TIMESTAMPS = st.sampled_from(["2025-05-01T10:00:00Z", "2025-05-01T10:00:01.5Z", None])
ARGS = st.one_of(st.just({"city": "Oslo"}), st.just('{"q": 1}'), st.just('{"q": "cut mid-str'), st.just(""))


@st.composite
def conversations(draw: st.DrawFn) -> list[Any]:
    """A framework-shaped conversation: a prompt, then turns of a response with tool calls
    (sometimes a native call beside them) and the request answering them (in any order,
    sometimes retried, with user content after), ending in a text response."""
    messages: list[Any] = [
        {
            "kind": "request",
            "parts": [{"part_kind": "user-prompt", "content": "go", "timestamp": "2025-05-01T09:59:59Z"}],
            "run_id": "r1",
        }
    ]
    for turn in range(draw(st.integers(0, 4))):
        stamp = draw(TIMESTAMPS)
        names = draw(st.lists(st.sampled_from(TOOLS), min_size=1, max_size=3))
        ids = draw(st.lists(IDS, min_size=len(names), max_size=len(names)))
        calls = [
            {"part_kind": "tool-call", "tool_name": n, "args": draw(ARGS), "tool_call_id": i, "tool_kind": None}
            for n, i in zip(names, ids)
        ]
        if draw(st.booleans()):
            calls.append(
                {
                    "part_kind": "builtin-tool-call",
                    "tool_name": "web_search",
                    "args": None,
                    "tool_call_id": draw(IDS),
                    "provider_name": "openai",
                }
            )
        messages.append(
            {"kind": "response", "parts": calls, **({"timestamp": stamp} if stamp else {}), "model_name": "m"}
        )
        results = [
            {
                "part_kind": "tool-return",
                "tool_name": call["tool_name"],
                "content": f"result {turn}.{n}",
                "tool_call_id": call["tool_call_id"],
                "timestamp": "2025-05-01T10:00:02Z",
                **draw(st.sampled_from([{}, {"outcome": "retried", "retry": {"cause": "model_retry"}}])),
            }
            for n, call in enumerate(calls)
            if call["part_kind"] == "tool-call"
        ]
        extra = (
            [{"part_kind": "user-prompt", "content": "also this", "timestamp": "2025-05-01T10:00:03Z"}]
            if draw(st.booleans())
            else []
        )
        messages.append({"kind": "request", "parts": draw(st.permutations(results)) + extra, "metadata": {"n": turn}})
    messages.append(
        {"kind": "response", "parts": [{"part_kind": "text", "content": "done"}], "timestamp": "2025-05-01T10:01:00Z"}
    )
    return messages


DAMAGE = st.sampled_from(
    [
        "drop-result",
        "duplicate-result",
        "result-before-call",
        "cut-tail",
        "reuse-id",
        "orphan",
        "rename-result",
        "evict-response",
    ]
)


def _results(history: list[Any]) -> list[tuple[int, int]]:
    return [
        (m, p)
        for m, message in enumerate(history)
        if message["kind"] == "request"
        for p, part in enumerate(message["parts"])
        if part["part_kind"] == "tool-return"
    ]


_FRESH = itertools.count()
"""Contents no other result has: a re-paired result is told from the others by its content."""


def _damage(history: list[Any], kind: str, at: int) -> None:
    """Do to ``history`` one thing stored histories suffer, at its ``at``-th result."""
    results = _results(history)
    if kind == "cut-tail":
        del history[max(1, at % (len(history) + 1)) :]
        return
    if not results:
        return
    m, p = results[at % len(results)]
    part = history[m]["parts"][p]
    if kind == "drop-result":
        del history[m]["parts"][p]
    elif kind == "duplicate-result":
        history[m]["parts"].insert(p + 1, {**part, "content": f"again {next(_FRESH)}"})
    elif kind == "result-before-call" and m >= 2 and history[m - 2]["kind"] == "request":
        del history[m]["parts"][p]
        history[m - 2]["parts"].append(part)  # the request before the call's response
    elif kind == "orphan":
        history[m]["parts"].append({**part, "tool_call_id": "evicted", "content": f"evicted {next(_FRESH)}"})
    elif kind == "evict-response" and history[m - 1]["kind"] == "response":
        del history[m - 1]  # context eviction: the response that made the calls is gone
    elif kind == "rename-result":
        part["tool_call_id"] = "mis-built"
    elif kind == "reuse-id":
        calls = [c for c in history[m - 1]["parts"] if c["part_kind"] == "tool-call"]
        earlier = [
            c["tool_call_id"]
            for message in history[: m - 1]
            if message["kind"] == "response"
            for c in message["parts"]
            if c["part_kind"] == "tool-call"
        ]
        if calls and earlier:
            old = calls[0]["tool_call_id"]
            calls[0]["tool_call_id"] = earlier[0]
            for result in history[m]["parts"]:
                if result.get("tool_call_id") == old:
                    result["tool_call_id"] = earlier[0]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.lists(st.tuples(DAMAGE, st.integers(0, 40)), max_size=4), st.booleans())
def test_damaged_histories_pair_as_the_framework(
    history: list[Any], damages: list[tuple[str, int]], close_frontier: bool
) -> None:
    for kind, at in damages:
        _damage(history, kind, at)
    assert_pairs_as_the_framework(history, close_frontier)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.lists(st.tuples(DAMAGE, st.integers(0, 40)), max_size=3))
def test_what_the_screen_passes_needs_nothing_but_the_findings_it_gives(
    history: list[Any], damages: list[tuple[str, int]]
) -> None:
    for kind, at in damages:
        _damage(history, kind, at)
    verdict = Options().plan().screen(orjson.dumps(history))  # type: ignore[misc]
    if verdict is not None:
        assert list(verdict) == validate(history)
        assert migrate(copy.deepcopy(history)) == []
