"""The rollback against the real releases, not against our reading of them (issue 18, point 4):
pydantic-ai-slim 2.59.0, 2.0.0 and 1.107.10, each in its own environment (conftest), load
every corpus history converted to the newest and then ``--target`` each of them; and
``check --reader`` predicts which histories each release loads, as stored, converted, rolled
back, and for one probe history per thing the catalogue tells apart, with no miss in either
direction. The newest release, 2.68.0 (the test oracle), is held to the same predictions."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import ValidationError
from pydantic_ai.messages import ModelMessagesTypeAdapter

from histmig import api
from histmig.options import Options
from histmig.schema.releases import NEWEST, PART_KINDS, release, written_kinds
from tests.acceptance.conftest import OLD_RELEASES, load_in_release
from tests.conftest import CORPUS

CALL = {"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": "c"}
RETURN = {"part_kind": "tool-return", "tool_name": "t", "content": "x", "tool_call_id": "c"}
RETRY = {"part_kind": "retry-prompt", "content": "x", "tool_name": "t", "tool_call_id": "c"}


def _request(*parts: dict[str, Any], **fields: Any) -> list[dict[str, Any]]:
    return [{"kind": "request", "parts": list(parts), **fields}]


def _response(*parts: dict[str, Any], **fields: Any) -> list[dict[str, Any]]:
    return [{"kind": "response", "parts": list(parts), **fields}]


PROBES: dict[str, list[dict[str, Any]]] = {
    "args-json-text": _response({**CALL, "args": '{"a": 1}'}),
    "args-object": _response({**CALL, "args": {"a": 1}}),
    "args-null": _response({**CALL, "args": None}),
    "args-absent": _response({key: value for key, value in CALL.items() if key != "args"}),
    "args-json-wrapper": _response({**CALL, "args": {"args_json": "{}"}}),
    "args-dict-wrapper": _response({**CALL, "args": {"args_dict": {"a": 1}}}),
    "null-id-call": _response({**CALL, "tool_call_id": None}),
    "null-id-return": _request({**RETURN, "tool_call_id": None}),
    "null-id-retry": _request({**RETRY, "tool_call_id": None}),
    "null-id-tool-less-retry": _request({**RETRY, "tool_name": None, "tool_call_id": None}),
    "null-timestamp-part": _request({"part_kind": "user-prompt", "content": "x", "timestamp": None}),
    "null-timestamp-system-prompt": _request({"part_kind": "system-prompt", "content": "x", "timestamp": None}),
    "null-timestamp-response": _response(timestamp=None),
    "null-timestamp-request": _request(timestamp=None),
    "error-details-without-input": _request(
        {**RETRY, "content": [{"type": "missing", "loc": ["a"], "msg": "Field required"}]}
    ),
    "error-details": _request(
        {**RETRY, "content": [{"type": "missing", "loc": ["a"], "msg": "Field required", "input": {}}]}
    ),
    "user-list-content": _request(
        {"part_kind": "user-prompt", "content": ["x", {"kind": "image-url", "url": "https://example.com/a.png"}]}
    ),
    "instruction-part": _request({"part_kind": "instruction", "content": "x"}),
    "unknown-part": _request({"part_kind": "hologram", "content": "x"}),
    **{
        f"outcome-{value}": _request({**RETURN, "outcome": value})
        for value in ("success", "failed", "denied", "interrupted", "retried")
    },
    "retried-return": _request(
        {**RETURN, "outcome": "retried", "retry": {"cause": "model_retry", "attempt": None, "max_retries": None}}
    ),
    **{
        f"response-state-{value}": _response(state=value)
        for value in ("complete", "incomplete", "suspended", "interrupted")
    },
    "request-state-interrupted": _request(state="interrupted"),
    "finish-reason": _response(finish_reason="tool_call"),
    "retry-feedback": _request(
        {
            "part_kind": "retry-feedback",
            "content": "x",
            "retry": {"cause": "model_retry", "attempt": None, "max_retries": None},
        }
    ),
    "tool-availability-delta": _request({"part_kind": "tool-availability-delta", "tools_added": ["t"]}),
    "capability-load-delta": _request({"part_kind": "capability-load-delta", "loaded": ["c"]}),
    "model-settings-delta": _request({"part_kind": "model-settings-delta", "settings": {"thinking": "high"}}),
    "instruction-delta": _request({"part_kind": "instruction-delta", "id": None, "content": "x"}),
    "instruction-baseline": _request({"part_kind": "instruction-baseline", "instructions": []}),
    "request-compaction": _request({"part_kind": "compaction", "content": "x"}),
    "request-speech": _request({"part_kind": "speech", "speaker": "user", "transcript": "x"}),
    "thinking": _response({"part_kind": "thinking", "content": "x"}),
    "builtin-tool-call": _response(
        {"part_kind": "builtin-tool-call", "tool_name": "web_search", "args": {}, "tool_call_id": "b"}
    ),
    "builtin-tool-return": _response(
        {"part_kind": "builtin-tool-return", "tool_name": "web_search", "content": "x", "tool_call_id": "b"}
    ),
    "file": _response({"part_kind": "file", "content": {"kind": "binary", "data": "aGk=", "media_type": "image/png"}}),
    "response-compaction": _response({"part_kind": "compaction", "content": "x"}),
    "response-speech": _response({"part_kind": "speech", "speaker": "assistant", "transcript": "x"}),
}
"""One small history for each thing the catalogue (histmig.schema.releases) tells apart."""

TYPED_TAGS = {
    "tool-search-return",
    "capability-load-return",
    "tool-search-call",
    "capability-load-call",
    "builtin-tool-search-call",
    "builtin-tool-search-return",
    "legacy-retry-tool-return",
    "legacy-retry-feedback",
}
"""Union tags that are no wire ``part_kind``: typed variants chosen by ``tool_kind``
(docs/framework.md §3.1) and 2.68's load-time translation of ``retry-prompt`` (§2)."""

TAGS = re.compile(r"expected tags: (.*)$")


def _records(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


@pytest.fixture(scope="session")
def sets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The histories each release is asked to load, as JSONL files of ``{"id", "messages"}``
    records: the corpus as ``stored``; converted to the ``newest``; ``newest`` rolled back
    with ``--target`` each old release; the ``probes``."""
    work = tmp_path_factory.mktemp("sets")
    found = {"stored": CORPUS / "all.jsonl", "newest": work / "newest.jsonl", "probes": work / "probes.jsonl"}
    found["probes"].write_bytes(
        b"".join(orjson.dumps({"id": f"probe/{name}", "messages": history}) + b"\n" for name, history in PROBES.items())
    )
    assert api.convert(str(found["stored"]), str(found["newest"]), Options(jobs=1)).exit_code == 0
    for name in OLD_RELEASES:
        found[f"target-{name}"] = work / f"target-{name}.jsonl"
        rolled = api.convert(str(found["newest"]), str(found[f"target-{name}"]), Options(jobs=1, target=name))
        assert (rolled.exit_code, rolled.report.counts["changed"], rolled.report.counts["rejected"]) == (0, 181, 0)
    return found


@pytest.fixture(scope="session")
def loaded(
    release_pythons: dict[str, Path], sets: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, str | None]]:
    """By release (the three old ones, then 2.68.0 in this process), by ``set/id``, ``None``
    where the release loads the history, else its first error; plus, under ``tags/request``
    and ``tags/response``, the error naming every part kind tag of the release. One process a
    release for every history."""
    names = [
        (set_name, record["id"], record["messages"]) for set_name, path in sets.items() for record in _records(path)
    ]
    names += [("tags", kind, [{"kind": kind, "parts": [{"part_kind": "zzz"}]}]) for kind in ("request", "response")]
    keys = [f"{set_name}/{key}" for set_name, key, _ in names]
    found = {}
    for name, python in release_pythons.items():
        found[name] = dict(
            zip(
                keys,
                load_in_release(python, [history for *_, history in names], tmp_path_factory.mktemp(name)),
                strict=True,
            )
        )
    found[str(NEWEST)] = dict(zip(keys, [_newest_error(history) for *_, history in names], strict=True))
    return found


def _newest_error(history: list[Any]) -> str | None:
    try:
        ModelMessagesTypeAdapter.validate_json(orjson.dumps(history))
    except ValidationError as exc:
        first = exc.errors()[0]
        return ".".join(map(str, first["loc"])) + ": " + first["msg"]
    return None


def _loads(loaded: dict[str, str | None], set_name: str) -> int:
    return sum(error is None for key, error in loaded.items() if key.startswith(f"{set_name}/"))


def test_the_rolled_back_corpus_loads_in_each_release_and_the_counts_before_and_after(
    loaded: dict[str, dict[str, str | None]],
) -> None:
    counts = {
        name: (_loads(loaded[name], "stored"), _loads(loaded[name], "newest"), _loads(loaded[name], f"target-{name}"))
        for name in OLD_RELEASES
    }
    assert counts == {"2.59.0": (150, 31, 212), "2.0.0": (150, 31, 212), "1.107.10": (150, 31, 212)}
    assert (_loads(loaded[str(NEWEST)], "stored"), _loads(loaded[str(NEWEST)], "newest")) == (196, 212)


@pytest.mark.parametrize("name", [*OLD_RELEASES, str(NEWEST)])
def test_reader_predicts_what_each_release_loads_with_no_miss(
    name: str, loaded: dict[str, dict[str, str | None]], sets: dict[str, Path]
) -> None:
    predicted: dict[str, bool] = {}
    for set_name, path in sets.items():
        report = api.check(str(path), Options(jobs=1, target=name)).report
        predicted.update((f"{set_name}/{row['id']}", row["loads"]) for row in report.readers)
    actual = {key: error is None for key, error in loaded[name].items() if not key.startswith("tags/")}
    assert len(predicted) == len(actual) == 212 * (2 + len(OLD_RELEASES)) + len(PROBES)
    misses = {key: (predicted[key], loaded[name][key]) for key in actual if predicted[key] != actual[key]}
    assert misses == {}
    assert 0 < sum(actual.values()) < len(actual)


@pytest.mark.parametrize("name", [*OLD_RELEASES, str(NEWEST)])
def test_the_catalogues_part_kinds_are_the_releases(name: str, loaded: dict[str, dict[str, str | None]]) -> None:
    for kind in ("request", "response"):
        error = loaded[name][f"tags/{kind}"]
        tags = set(re.findall(r"'([^']+)'", TAGS.search(error).group(1)))  # type: ignore[arg-type, union-attr]
        assert tags - TYPED_TAGS == {part for part, first in PART_KINDS[kind].items() if first <= release(name)}
        assert written_kinds(release(name), kind) <= tags


REFUSED_BY_EVERY_RELEASE = [
    "null-id-call",
    "null-id-return",
    "null-id-retry",
    "null-id-tool-less-retry",
    "null-timestamp-part",
    "null-timestamp-system-prompt",
    "null-timestamp-response",
    "error-details-without-input",
    "instruction-part",
    "unknown-part",
]
"""Probes no release from 0.0.45 loads (before it, null ids and a system prompt's null
timestamp loaded)."""


def test_each_release_refuses_the_probes_the_catalogue_says(loaded: dict[str, dict[str, str | None]]) -> None:
    refused = {
        name: [
            key.removeprefix("probes/probe/")
            for key, error in found.items()
            if key.startswith("probes/") and error is not None
        ]
        for name, found in loaded.items()
    }
    before_2_60 = [
        *REFUSED_BY_EVERY_RELEASE,
        "outcome-retried",
        "retried-return",
        "retry-feedback",
        "capability-load-delta",
        "model-settings-delta",
        "request-compaction",
    ]
    before_2_10 = before_2_60 + [
        "outcome-interrupted",
        "response-state-suspended",
        "tool-availability-delta",
        "instruction-delta",
        "instruction-baseline",
        "request-speech",
        "response-speech",
    ]
    assert {name: sorted(found) for name, found in refused.items()} == {
        "2.59.0": sorted(before_2_60),
        "2.0.0": sorted(before_2_10),
        "1.107.10": sorted(before_2_10),
        str(NEWEST): sorted(REFUSED_BY_EVERY_RELEASE),
    }
