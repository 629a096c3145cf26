"""The round trip (issue 18, point 2): every legacy history of the corpus, converted to the
newest and then ``--target`` the release that wrote it, gives back the stored history, value
for value, apart from what the reports of the two runs name: ids derived by HM201 (forward)
or by a rollback rule (``derived``), nulls HM202 repaired, and the error lists HM101 cleaned
as the framework's loader does (``ctx`` dropped)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from histmig import api
from histmig.options import Options
from tests.conftest import CORPUS, LEGACY_RELEASES

PLACE = re.compile(r"^\[(\d+)\]\.parts\[(\d+)\]\.(\w+)")


def differences(stored: Any, back: Any, path: str = "") -> list[str]:
    """The paths (``[2].parts[0].tool_call_id``) where ``back`` differs from ``stored``: a
    value, a key only one has, a list's length."""
    if type(stored) is not type(back):
        return [path]
    if isinstance(stored, dict):
        keys = [*stored, *(key for key in back if key not in stored)]
        return [
            found
            for key in keys
            for found in (
                differences(stored[key], back[key], f"{path}.{key}")
                if key in stored and key in back
                else [f"{path}.{key}"]
            )
        ]
    if isinstance(stored, list):
        if len(stored) != len(back):
            return [f"{path}[len]"]
        return [
            found for index, (a, b) in enumerate(zip(stored, back)) for found in differences(a, b, f"{path}[{index}]")
        ]
    return [] if stored == back else [path]


def _explained(field: str, rows: list[dict[str, Any]]) -> bool:
    """Whether the change ``rows`` at one part name a difference in its ``field``."""
    rules = {(row["rule"], row["certainty"]) for row in rows}
    if field == "tool_call_id":
        return ("HM201", "derived") in rules or any(
            certainty == "derived" for rule, certainty in rules if rule.startswith("HM5")
        )
    if field == "content":
        return any(rule == "HM101" for rule, _ in rules)
    return field == "timestamp" and any(rule == "HM202" for rule, _ in rules)


@pytest.fixture(scope="module")
def round_trips(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, Any, Any, list[dict[str, Any]]]]:
    """For each legacy history: its id, the stored messages, the messages after the round
    trip, and the change rows of both runs (``convert``, then ``convert --target`` the
    release that wrote it)."""
    work = tmp_path_factory.mktemp("round-trip")
    records = [orjson.loads(line) for line in (CORPUS / "all.jsonl").read_bytes().splitlines()]
    found = []
    for name in LEGACY_RELEASES:
        stored, newest, back = work / f"{name}.jsonl", work / f"{name}.newest.jsonl", work / f"{name}.back.jsonl"
        stored.write_bytes(b"".join(orjson.dumps(record) + b"\n" for record in records if record["version"] == name))
        forward = api.convert(str(stored), str(newest), Options(jobs=1))
        rollback = api.convert(str(newest), str(back), Options(jobs=1, target=name))
        assert (forward.exit_code, rollback.exit_code) == (0, 0)
        rows = [*forward.report.changes, *rollback.report.changes]
        for before, after in zip(_read(stored), _read(back), strict=True):
            found.append(
                (
                    before["id"],
                    before["messages"],
                    after["messages"],
                    [row for row in rows if row["id"] == before["id"]],
                )
            )
    return found


def _read(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_every_legacy_history_comes_back_apart_from_what_the_reports_name(
    round_trips: list[tuple[str, Any, Any, list[dict[str, Any]]]],
) -> None:
    assert len(round_trips) == 160
    unexplained, named = [], Counter()
    for history, stored, back, rows in round_trips:
        for path in differences(stored, back):
            place = PLACE.match(path)
            at = [row for row in rows if place and (row["message"], row["part"]) == (int(place[1]), int(place[2]))]
            if place is None or not _explained(place[3], at):
                unexplained.append((history, path))
            else:
                named[place[3]] += 1
    assert unexplained == []
    assert named == {"tool_call_id": 102, "content": 2}


def test_most_come_back_byte_for_byte_and_the_rest_only_where_named(
    round_trips: list[tuple[str, Any, Any, list[dict[str, Any]]]],
) -> None:
    same = [history for history, stored, back, _ in round_trips if orjson.dumps(back) == orjson.dumps(stored)]
    assert len(same) == 99
    by_release = Counter(history.split("/")[0] for history, stored, back, _ in round_trips if stored != back)
    assert by_release == {
        "v0.0.20": 14,
        "v0.0.55": 4,
        "v0.4.11": 6,
        "v1.0.18": 9,
        "v1.107.10": 9,
        "v2.0.0": 9,
        "v2.59.0": 10,
    }


def test_the_oldest_release_gets_its_own_shapes_back(
    round_trips: list[tuple[str, Any, Any, list[dict[str, Any]]]],
) -> None:
    """0.0.20 wrote wrapped arguments, null ids on tool-less retries and tool-less
    unknown-tool retries: the rollback writes them again (HM506, HM502, HM501)."""
    back = {history: messages for history, _, messages, _ in round_trips}
    unknown = back["v0.0.20/c_unknown_tool"]
    retry = next(part for message in unknown for part in message["parts"] if part["part_kind"] == "retry-prompt")
    assert (retry["tool_name"], retry["tool_call_id"], retry["content"].startswith("Unknown tool name: ")) == (
        None,
        None,
        True,
    )
    calls = [
        part
        for history, messages in back.items()
        if history.startswith("v0.0.20/")
        for message in messages
        for part in message["parts"]
        if part["part_kind"] == "tool-call"
    ]
    assert calls and all(set(part["args"]) <= {"args_json", "args_dict"} and len(part["args"]) == 1 for part in calls)
