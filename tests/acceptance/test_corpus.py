"""The real corpus against the oracle, pydantic-ai-slim 2.68.0 (issue: core migration, tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from histmig.engine import process
from histmig.options import Options
from histmig.records import Record
from histmig.schema import current_errors, legacy_errors
from tests.conftest import CORPUS, HISTORIES, NATIVE_RELEASES, converted, framework_dump, history_id, load

RETRY_RULES = {"HM101", "HM102"}


def test_the_corpus_is_all_there() -> None:
    assert len(HISTORIES) == 212
    assert sum(1 for _ in (CORPUS / "oracle-2.68").glob("v*/*.json")) == 196
    assert (len(list(CORPUS.glob("captured/v*/*.json"))), len(list(CORPUS.glob("oracle-2.68/captured/v*/*.json")))) == (
        25,
        23,
    )


def test_every_stored_history_is_a_shape_the_legacy_schema_knows(history_path: Path) -> None:
    assert legacy_errors(load(history_path)) == []


def test_every_history_converts_and_the_framework_loads_it(history_path: Path) -> None:
    messages, _ = converted(load(history_path))
    assert current_errors(messages) == []
    assert not [p for m in messages for p in m["parts"] if p.get("part_kind") == "retry-prompt"]
    framework_dump(messages)


def test_the_oldest_histories_do_not_load_as_stored_but_do_once_converted() -> None:
    failing = []
    for path in sorted(CORPUS.glob("v0.0.20/*.json")):
        try:
            framework_dump(load(path))
        except ValueError:
            failing.append(path.stem)
            framework_dump(converted(load(path))[0])
    assert len(failing) == 16


def test_every_derived_id_of_the_oldest_histories_is_distinct_and_pairs_its_result() -> None:
    derived = 0
    for path in sorted(CORPUS.glob("v0.0.20/*.json")):
        messages, changes = converted(load(path))
        parts = [part for message in messages for part in message["parts"]]
        calls = [part["tool_call_id"] for part in parts if part["part_kind"] == "tool-call"]
        answers = [part["tool_call_id"] for part in parts if part["part_kind"] == "tool-return"]
        derived += sum(change.rule == "HM201" and change.evidence == "position" for change in changes)
        assert len(set(calls)) == len(calls), path.stem
        assert set(answers) <= set(calls), path.stem
    assert derived == 29


def _without(
    messages: list[dict[str, Any]], skip: set[tuple[int, int | None]], untimed: set[tuple[int, int | None]]
) -> list[Any]:
    """``messages`` without ``retry`` fields, without the parts a repair rule changed
    (``skip``) and without the timestamps the loader filled from its clock (``untimed``)."""
    out = []
    for m_index, message in enumerate(messages):
        message = dict(message)
        if (m_index, None) in untimed:
            message.pop("timestamp", None)
        parts = []
        for p_index, part in enumerate(message["parts"]):
            if (m_index, p_index) in skip:
                continue
            part = {
                k: v
                for k, v in part.items()
                if k != "retry" and not ((m_index, p_index) in untimed and k == "timestamp")
            }
            parts.append(part)
        message["parts"] = parts
        out.append(message)
    return out


def _untimed(original: list[dict[str, Any]]) -> set[tuple[int, int | None]]:
    untimed: set[tuple[int, int | None]] = set()
    for m_index, message in enumerate(original):
        if "timestamp" not in message:
            untimed.add((m_index, None))
        untimed.update((m_index, p) for p, part in enumerate(message["parts"]) if "timestamp" not in part)
    return untimed


ORACLE_DIR = CORPUS / "oracle-2.68"
ORACLE = sorted(ORACLE_DIR.glob("v*/*.json")) + sorted(ORACLE_DIR.glob("captured/v*/*.json"))
"""What 2.68 makes of each history it loads, the captured ones (runs that raised) included."""


def _stored(oracle_path: Path) -> Any:
    """The stored history an oracle file is 2.68's reading of."""
    return load(CORPUS / oracle_path.relative_to(ORACLE_DIR))


def _oracle_id(oracle_path: Path) -> str:
    return str(oracle_path.relative_to(ORACLE_DIR).with_suffix(""))


@pytest.mark.parametrize("oracle_path", ORACLE, ids=_oracle_id)
def test_the_framework_reads_the_converted_history_as_it_reads_the_original(oracle_path: Path) -> None:
    original = _stored(oracle_path)
    messages, changes = converted(original)
    repaired = {(c.message, c.part) for c in changes if c.rule not in RETRY_RULES}
    untimed = _untimed(original)
    assert _without(framework_dump(messages), repaired, untimed) == _without(load(oracle_path), repaired, untimed)


def _retry_parts(messages: list[dict[str, Any]]) -> list[tuple[str, str | None, Any, str | None]]:
    return [
        (
            part["part_kind"],
            part.get("tool_name"),
            part["content"],
            part["retry"]["cause"] if part.get("retry") else None,
        )
        for message in messages
        for part in message["parts"]
        if part.get("part_kind") == "retry-feedback" or part.get("outcome") == "retried"
    ]


SCENARIOS_2_59 = sorted((CORPUS / "v2.59.0").glob("*.json"))


@pytest.mark.parametrize("legacy_path", SCENARIOS_2_59, ids=lambda p: p.stem)
def test_inferred_causes_equal_what_2_60_records_natively(legacy_path: Path) -> None:
    messages, _ = converted(load(legacy_path))
    native = load(CORPUS / "v2.60.0" / legacy_path.name)
    ours, theirs = _retry_parts(framework_dump(messages)), _retry_parts(framework_dump(native))
    assert [(kind, name, cause) for kind, name, _, cause in ours] == [
        (kind, name, cause) for kind, name, _, cause in theirs
    ]
    assert [content for *_, content, _ in ours] == [content for *_, content, _ in theirs]


def test_cause_agreement_over_every_legacy_release() -> None:
    """Every legacy release against 2.60.0, scenario by scenario. The only disagreements are
    g_text_not_allowed up to 1.0.18: those releases answered the text reply with a fixed
    no-output text (docs/framework.md §1.1, cause ``no_output`` in the 2.60+ agent loop), while
    the same scripted reply fails output validation from 1.107.10 on."""
    compared, disagreements = 0, []
    for path in sorted(CORPUS.glob("v*/*.json")):
        native = CORPUS / "v2.60.0" / path.name
        if path.parent.name in ("v2.60.0", "v2.68.0") or not native.exists():
            continue
        ours = [cause for *_, cause in _retry_parts(converted(load(path))[0])]
        theirs = [cause for *_, cause in _retry_parts(load(native))]
        if len(ours) == len(theirs):
            compared += len(ours)
            disagreements += [(history_id(path), a, b) for a, b in zip(sorted(ours), sorted(theirs)) if a != b]
    assert compared == 177
    assert disagreements == [
        (f"v{release}/g_text_not_allowed", "no_output", "validation_error")
        for release in ("0.0.20", "0.0.55", "0.4.11", "1.0.18")
    ]


def _convert_bytes(raw: bytes) -> bytes:
    outcome = process(Record(raw, "corpus", "file"))
    assert outcome.status != "rejected", outcome.errors
    return outcome.output


def test_conversion_is_idempotent_byte_for_byte(history_path: Path) -> None:
    once = _convert_bytes(history_path.read_bytes())
    assert _convert_bytes(once) == once


@pytest.mark.parametrize("path", [p for p in HISTORIES if p.parent.name.lstrip("v") in NATIVE_RELEASES], ids=history_id)
def test_native_histories_pass_through_unchanged(path: Path) -> None:
    raw = path.read_bytes()
    outcome = process(Record(raw, "corpus", "file"))
    assert (outcome.status, outcome.output, outcome.changes) == ("unchanged", raw, [])


def test_converted_records_keep_their_envelope() -> None:
    line = (CORPUS / "all.jsonl").read_bytes().splitlines()[0]
    outcome = process(Record(line, "all.jsonl", "line 1"))
    before, after = orjson.loads(line), orjson.loads(outcome.output)
    assert list(after) == list(before) == ["id", "version", "scenario", "messages"]
    assert {k: after[k] for k in ("id", "version", "scenario")} == {k: before[k] for k in ("id", "version", "scenario")}
    assert outcome.record.record_id == "v0.0.20/a_tool_model_retry"


@pytest.mark.parametrize("oracle_path", ORACLE, ids=_oracle_id)
def test_framework_causes_reproduce_the_loaders_retry_values(oracle_path: Path) -> None:
    original = _stored(oracle_path)
    messages, _ = converted(original, Options(causes="framework"))
    retries = [part.get("retry") for message in framework_dump(messages) for part in message["parts"]]
    assert retries == [part.get("retry") for message in load(oracle_path) for part in message["parts"]]
