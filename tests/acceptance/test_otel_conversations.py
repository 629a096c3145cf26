"""Issue 25 for ``histmig otel``: every corpus and captured history, cut at every run boundary
and into one message a record, stored as JSONL rows shuffled in physical order. With
``--conversation``/``--order`` each record gets back the OTel messages of its own messages, and
a conversation's records put together in order are the export of the whole history, value for
value and byte for byte (the tool calls' ids, their results' ids, every attribute), which is
pydantic-ai 2.68's own rendering of the history loaded. A history the whole export rejects is
rejected whole, every record of it kept in the rejects file as it was read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from histmig import api
from histmig.options import Options
from tests.conftest import converted, stored_apart
from tests.otel.conftest import framework_otel


def _whole_exports(tmp_path: Path, histories: dict[str, list[Any]], version: int) -> dict[str, list[Any] | None]:
    """Each history exported whole by the same command (``None``: rejected)."""
    whole = tmp_path / "whole.jsonl"
    whole.write_bytes(
        b"".join(orjson.dumps({"conversation_id": name, "messages": m}) + b"\n" for name, m in histories.items())
    )
    api.otel(str(whole), str(tmp_path / "whole.otel.jsonl"), version=version)
    exported: dict[str, list[Any] | None] = dict.fromkeys(histories)
    for line in (tmp_path / "whole.otel.jsonl").read_bytes().splitlines():
        record = orjson.loads(line)
        exported[record["conversation_id"]] = record["messages"]
    return exported


@pytest.mark.parametrize("version", [5, 6], ids=["v5", "v6"])
@pytest.mark.parametrize("layout", ["per run", "per message"])
def test_a_conversation_s_records_export_together_what_the_whole_history_exports(
    tmp_path: Path, layout: str, version: int
) -> None:
    histories, records = stored_apart(layout)
    path = tmp_path / "apart.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    out = tmp_path / "apart.otel.jsonl"
    options = Options(conversation=("conversation_id",), order="seq", jobs=2)
    result = api.otel(str(path), str(out), options, version=version)
    whole = _whole_exports(tmp_path, histories, version)
    lines = out.read_bytes().splitlines()
    written = [orjson.loads(line) for line in lines]
    rejects = tmp_path / "apart.otel.jsonl.rejects.jsonl"
    rejected = [orjson.loads(line) for line in rejects.read_bytes().splitlines()] if rejects.exists() else []
    assert len(written) + len(rejected) == len(records)
    by_name: dict[str, list[dict[str, Any]]] = {}
    for record in written:
        by_name.setdefault(record["conversation_id"], []).append(record)
    assert {name for name, exported in whole.items() if exported is not None} == set(by_name)
    assert {r["conversation_id"] for r in rejected} == {name for name, exported in whole.items() if exported is None}
    for record in rejected:  # kept as read
        assert record in records
    for name, mine in by_name.items():
        assert len(mine) == sum(record["conversation_id"] == name for record in records), name
        together = [m for record in sorted(mine, key=lambda r: r["seq"]) for m in record["messages"]]
        assert orjson.dumps(together) == orjson.dumps(whole[name]), name
        assert together == framework_otel(converted(histories[name])[0], version, True), name
    assert result.report.counts["rejected"] == len(rejected)
    assert not result.report.warnings
