"""Issue 19: the attempts (and, with the corpus's budgets, max_retries) HM104 reconstructs on
every legacy corpus history, against those the native releases recorded for the same scenario,
part for part; each disagreement named by the counting rule and the release that explain it
(docs/framework.md §4 "History"); and, on generated histories, ``--attempts`` is total,
idempotent and keeps every history loadable."""

from __future__ import annotations

import copy
import re
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow.parquet as pq
import pytest
from hypothesis import example, given

from histmig.api import convert, migrate
from histmig.options import Options
from histmig.schema import current_errors
from tests.acceptance.test_properties import HISTORY, SETTINGS
from tests.conftest import CORPUS, LEGACY_RELEASES, NATIVE_RELEASES, ROOT, framework_dump, load
from tests.sources.conftest import jsonl_path_output, nested_records, table_of, write_parquet

BUDGETS = {"d_parallel_same_tool_fail": 2, "d_tool_two_retries": 2, "j_rich_content": 2, "i_multi_run": 3}
"""The corpus's known budgets: the scenarios' ``Agent(retries=N)`` (tools and output alike), as
2.60.0 and 2.68.0 recorded them in ``max_retries``; every other scenario runs on the framework's
default of 1."""

NO_RETRY_WRITTEN = {
    ("0.4.11", "h_empty_text_part"): "0.4.11 took the empty text as the run's output: it wrote no retry",
    (
        "1.0.18",
        "h_empty_response",
    ): "an empty response was re-sent as an empty request, no retry part (docs/framework.md §1.1, 1.0.10-1.3.0)",
    (
        "1.107.10",
        "h_empty_response",
    ): "an empty response was re-sent as an empty request, no retry part (docs/framework.md §1.1, 1.74.0-2.5.0)",
    (
        "2.0.0",
        "h_empty_response",
    ): "an empty response was re-sent as an empty request, no retry part (docs/framework.md §1.1, 1.74.0-2.5.0)",
}
"""Scenarios where the native release writes a retry part for an event the legacy one wrote none
for: nothing to compare."""

DEFERRED = "run_id is written from 1.15.0 (docs/framework.md §4, run boundaries): in 1.0.18 a retry handed back through DeferredToolResults at a new run's start cannot be told from one the agent loop charged"
PER_CALL = "0.0.1-0.4.8 counted every failing call of a tool, 0.4.9+ once per step (docs/framework.md §4 History): the 2nd failure in one response is attempt 2"
PER_CALL_UNKNOWN_WRITER = (
    "the releases that may have written it, 0.3.5-0.7.2 by its fields, count it differently: 0.0.1-0.4.8 every failing call, "
    "0.4.9+ once per step (docs/framework.md §4 History); the attempt is left null"
)
UNKNOWN_RESULT_BUDGET = "0.0.3-0.4.3 charged an unknown tool name to the run-wide result budget (docs/framework.md §4 History): the later feedback is the run's 2nd output retry"
UNKNOWN_BOTH = "0.4.4-1.79.0 also charged an unknown tool name to the run-wide output budget, once per step (docs/framework.md §4 History): the later feedback is the run's 2nd output retry"
UNKNOWN_LIMIT_ONE = "0.4.4-1.39.1 hard-coded an unknown tool name's own budget to 1 (docs/framework.md §4 History)"

_DEFERRED_PART = {
    ("m_deferred_tool_model_retry", 2, "run_job", 1, "attempt"): DEFERRED,
    ("m_deferred_tool_model_retry", 2, "run_job", 1, "max_retries"): DEFERRED,
}
_OLD_UNKNOWN = {
    ("i_multi_run", 12, None, 1, "attempt"): UNKNOWN_BOTH,
    ("i_multi_run", 8, "weather_lookup", 1, "max_retries"): UNKNOWN_LIMIT_ONE,
    ("j_rich_content", 2, "stock_price", 1, "max_retries"): UNKNOWN_LIMIT_ONE,
}
_OLDEST = {
    ("d_parallel_same_tool_fail", 2, "get_weather", 2, "attempt"): PER_CALL,
    ("i_multi_run", 12, None, 1, "attempt"): UNKNOWN_RESULT_BUDGET,
}

EXPLAINED: dict[tuple[str, str], dict[tuple[Any, ...], str]] = {
    ("current", "1.0.18"): _DEFERRED_PART,
    ("writer", "0.0.20"): _OLDEST,
    ("writer", "0.0.55"): _OLDEST,
    ("writer", "0.4.11"): {
        ("d_parallel_same_tool_fail", 2, "get_weather", 2, "attempt"): PER_CALL_UNKNOWN_WRITER,
        ("d_parallel_same_tool_fail", 2, "get_weather", 2, "max_retries"): PER_CALL_UNKNOWN_WRITER,
        **_OLD_UNKNOWN,
    },
    ("writer", "1.0.18"): {**_OLD_UNKNOWN, **_DEFERRED_PART},
    ("release", "0.0.20"): _OLDEST,
    ("release", "0.0.55"): _OLDEST,
    ("release", "0.4.11"): _OLD_UNKNOWN,
    ("release", "1.0.18"): {**_OLD_UNKNOWN, **_DEFERRED_PART},
}
"""Every disagreement allowed, by counting mode (``release``: ``--counting`` the release that
wrote the history) and legacy release: ``(scenario, message, tool_name, nth such part,
field)`` and the counting rule and release that explain it. Any other pair of parts agrees."""

AGREEMENT = {
    "current": {
        "0.0.20": (20, 20, 20),
        "0.0.55": (20, 20, 20),
        "0.4.11": (24, 24, 24),
        "1.0.18": (28, 27, 27),
        "1.107.10": (28, 28, 28),
        "2.0.0": (28, 28, 28),
        "2.59.0": (29, 29, 29),
    },
    "writer": {
        "0.0.20": (20, 18, 20),
        "0.0.55": (20, 18, 20),
        "0.4.11": (24, 22, 21),
        "1.0.18": (28, 26, 25),
        "1.107.10": (28, 28, 28),
        "2.0.0": (28, 28, 28),
        "2.59.0": (29, 29, 29),
    },
    "release": {
        "0.0.20": (20, 18, 20),
        "0.0.55": (20, 18, 20),
        "0.4.11": (24, 23, 22),
        "1.0.18": (28, 26, 25),
        "1.107.10": (28, 28, 28),
        "2.0.0": (28, 28, 28),
        "2.59.0": (29, 29, 29),
    },
}
"""Per counting mode and legacy release (against 2.60.0 and 2.68.0 alike): the retry parts
compared, those agreeing on ``attempt``, those agreeing on ``max_retries``."""


def retry_parts(messages: list[Any]) -> dict[tuple[int, Any, int], tuple[Any, Any]]:
    """``(message, tool_name, nth such part in the message) -> (attempt, max_retries)`` of
    every retried tool-return and retry-feedback part (a legacy release may order one
    request's parts differently)."""
    found: dict[tuple[int, Any, int], tuple[Any, Any]] = {}
    seen: Counter[tuple[int, Any]] = Counter()
    for m_index, message in enumerate(messages):
        for part in message["parts"]:
            if part["part_kind"] == "retry-feedback" or (
                part["part_kind"] == "tool-return" and part.get("outcome") == "retried"
            ):
                seen[m_index, part.get("tool_name")] += 1
                retry = part.get("retry") or {}
                found[m_index, part.get("tool_name"), seen[m_index, part.get("tool_name")]] = (
                    retry.get("attempt"),
                    retry.get("max_retries"),
                )
    return found


def _pairs(legacy: str, native: str) -> list[tuple[str, Path, Path]]:
    return [
        (path.stem, path, CORPUS / f"v{native}" / path.name)
        for path in sorted((CORPUS / f"v{legacy}").glob("*.json"))
        if (CORPUS / f"v{native}" / path.name).exists()
    ]


@pytest.mark.parametrize("native", NATIVE_RELEASES)
@pytest.mark.parametrize("legacy", LEGACY_RELEASES)
@pytest.mark.parametrize("mode", ["current", "writer", "release"])
def test_reconstructed_attempts_equal_what_the_native_release_recorded(mode: str, legacy: str, native: str) -> None:
    disagreements: dict[tuple[Any, ...], tuple[Any, Any]] = {}
    compared = attempts_agree = budgets_agree = 0
    for scenario, legacy_path, native_path in _pairs(legacy, native):
        messages = load(legacy_path)
        budget = BUDGETS.get(scenario, 1)
        migrate(
            messages,
            Options(
                attempts=True,
                counting=legacy if mode == "release" else mode,
                max_retries=f"tools={budget},output={budget}",
            ),
        )
        framework_dump(messages)
        ours, theirs = retry_parts(messages), retry_parts(load(native_path))
        assert (set(theirs) - set(ours) != set()) is ((legacy, scenario) in NO_RETRY_WRITTEN) and set(ours) <= set(
            theirs
        ), scenario
        for key in ours:
            compared += 1
            for field, mine, native_value in zip(("attempt", "max_retries"), ours[key], theirs[key]):
                if mine == native_value:
                    attempts_agree += field == "attempt"
                    budgets_agree += field == "max_retries"
                else:
                    disagreements[(scenario, *key, field)] = (mine, native_value)
    assert disagreements.keys() == EXPLAINED.get((mode, legacy), {}).keys()
    assert (compared, attempts_agree, budgets_agree) == AGREEMENT[mode][legacy]


def test_the_two_native_releases_recorded_the_same_attempts() -> None:
    pairs = _pairs("2.60.0", "2.68.0")
    assert len(pairs) == 26
    assert all(retry_parts(load(a)) == retry_parts(load(b)) for _, a, b in pairs)


def test_every_explanation_names_a_release_and_a_rule() -> None:
    for explained in EXPLAINED.values():
        for text in explained.values():
            assert re.search(r"\d+\.\d+\.\d+", text) and "docs/framework.md §" in text


_DANGLING_THEN_EMPTY = [  # HM406's return, added after HM104 counted, must not change a second count
    {"parts": [], "kind": "request"},
    {
        "parts": [{"tool_name": "get_weather", "args": None, "tool_call_id": "call_1", "part_kind": "tool-call"}],
        "timestamp": "2025-05-01T10:00:00Z",
        "kind": "response",
    },
    {"parts": [], "kind": "request"},
    {"parts": [], "timestamp": "2025-05-01T10:00:00Z", "kind": "response"},
    {"parts": [], "kind": "request"},
    {
        "parts": [{"content": "", "tool_name": None, "tool_call_id": "call_1", "part_kind": "retry-prompt"}],
        "kind": "request",
    },
]


@SETTINGS
@given(HISTORY)
@example(_DANGLING_THEN_EMPTY)
def test_attempts_are_total_idempotent_and_only_fill_retry_counts(history: list[dict[str, Any]]) -> None:
    plain = copy.deepcopy(history)
    migrate(plain)
    migrate(history, Options(attempts=True, max_retries="tools=2,output=2"))
    assert migrate(copy.deepcopy(history), Options(attempts=True, max_retries="tools=2,output=2")) == []
    assert current_errors(history) == []
    framework_dump(history)
    for before, after in zip(plain, history):
        for old, new in zip(before["parts"], after["parts"]):
            assert _without_counts(new) == _without_counts(old)
            if isinstance(old.get("retry"), dict):
                for key in ("attempt", "max_retries"):
                    stored, filled = old["retry"].get(key), new["retry"].get(key)
                    assert (
                        filled == stored
                        if stored is not None
                        else filled in (None, *((1, 2) if key == "attempt" else (2,)))
                    )


def _without_counts(part: dict[str, Any]) -> dict[str, Any]:
    retry = part.get("retry")
    return (
        {**part, "retry": {k: v for k, v in retry.items() if k not in ("attempt", "max_retries")}}
        if isinstance(retry, dict)
        else part
    )


def _docs_block(marker: str) -> str:
    """The fenced block of docs/attempts.md that follows ``marker``."""
    text = (ROOT / "docs" / "attempts.md").read_text()
    return re.search(re.escape(marker) + r".*?```\w*\n(.*?)```", text, re.DOTALL)[1]  # type: ignore[index]


def test_the_attempts_page_audit_counts_retries_that_reached_their_budget(tmp_path: Path) -> None:
    out, again = tmp_path / "chats.v2.jsonl", tmp_path / "again.jsonl"
    result = convert(
        str(CORPUS / "all.jsonl"), str(out), Options(attempts=True, max_retries="tools=2,output=1", jobs=1)
    )
    other = convert(
        str(CORPUS / "all.jsonl"), str(again), Options(attempts=True, max_retries="tools=2,output=1", jobs=2)
    )
    assert (result.exit_code, out.read_bytes(), result.report.to_json()["changes"]) == (
        0,
        again.read_bytes(),
        other.report.to_json()["changes"],
    )
    assert (result.report.by_rule["HM104"], result.report.counts["findings"]) == (
        174,
        5,
    )  # 177 legacy retries, 3 handed back through deferred results (+2 native ones)
    query = _docs_block("<!-- audit: retries at their budget -->").replace("chats.v2.jsonl", str(out))
    rows = duckdb.sql(query).fetchall()
    assert rows == [
        ("(output)", 67),
        ("final_result", 25),
        ("fetch_page", 9),
        ("get_weather", 6),
        ("add", 4),
        ("get_wether", 2),
    ]


def test_a_nested_parquet_column_gets_the_attempts_the_jsonl_path_writes(tmp_path: Path) -> None:
    records = nested_records()
    options = Options(attempts=True, max_retries="tools=2,output=1", jobs=1)
    source, out = (
        write_parquet(tmp_path / "nested.parquet", table_of(records, nested=True)),
        tmp_path / "nested.v2.parquet",
    )
    report = convert(str(source), str(out), options).report
    expected, _ = jsonl_path_output(records, tmp_path, options)
    rejected = {int(row["location"].removeprefix("row ")) for row in report.errors}
    cells = pq.read_table(out).column("messages").to_pylist()
    filled = [retry_parts(orjson.loads(expected[row])) for row in range(len(records)) if row not in rejected]
    assert [retry_parts(cell) for row, cell in enumerate(cells) if row not in rejected] == filled
    assert (len(records), len(rejected), report.by_rule["HM104"], report.counts["findings"]) == (149, 1, 112, 5)
