"""JSON documents (histmig.sources.json): the whole file is one record; a migrated document
keeps its final newline, an unchanged one its bytes; a rejected one goes to the rejects file
and no output is written."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from histmig import api
from histmig.cli import app
from histmig.options import Options
from histmig.sources.jsonl import BOM
from tests.conftest import CORPUS

RETRY = {"part_kind": "retry-prompt", "content": "x", "tool_name": None}


def test_an_empty_json_file_is_rejected_not_lost(tmp_path: Path) -> None:
    source = tmp_path / "empty.json"
    source.write_bytes(b"")
    report = api.convert(str(source), str(tmp_path / "out.json")).report
    assert report.counts["rejected"] == 1
    assert not (tmp_path / "out.json").exists()
    assert (tmp_path / "out.json.rejects.jsonl").read_bytes() == b"\n"


def test_a_migrated_json_document_keeps_its_final_newline(tmp_path: Path) -> None:
    document = orjson.dumps([{"kind": "request", "parts": [RETRY]}])
    for ending in (b"\n", b""):
        source, out = tmp_path / "in.json", tmp_path / "out.json"
        source.write_bytes(document + ending)
        api.convert(str(source), str(out)).report
        assert out.read_bytes().endswith(b"}]" + ending)
        assert orjson.loads(out.read_bytes())[0]["parts"][0]["part_kind"] == "retry-feedback"


def test_an_unchanged_document_is_copied_byte_for_byte_and_in_place_works(tmp_path: Path) -> None:
    native = CORPUS / "v2.68.0" / "a_tool_model_retry.json"
    out = tmp_path / "same.json"
    assert api.convert(str(native), str(out)).report.counts["unchanged"] == 1
    assert out.read_bytes() == native.read_bytes()
    legacy = tmp_path / "legacy.json"
    legacy.write_bytes((CORPUS / "v2.59.0" / "a_tool_model_retry.json").read_bytes())
    result = api.convert(str(legacy), in_place=True)
    assert result.report.counts["changed"] == 1 and result.verdict.endswith(f"written to {legacy} (in place)")
    assert b"retry-prompt" not in legacy.read_bytes()


def test_a_document_on_stdin_is_read_whole_with_format_json() -> None:
    document = (CORPUS / "v2.59.0" / "h_empty_response.json").read_bytes()
    result = CliRunner().invoke(app, ["convert", "-", "-", "--format", "json", "-q"], input=document)
    assert result.exit_code == 0
    assert [p["part_kind"] for m in orjson.loads(result.stdout_bytes) for p in m["parts"]].count("retry-feedback") == 1


def test_a_truncated_document_is_an_unreadable_input_and_nothing_is_written(tmp_path: Path) -> None:
    whole = gzip.compress((CORPUS / "v2.59.0" / "j_rich_content.json").read_bytes())
    source, out = tmp_path / "cut.json.gz", tmp_path / "out.json"
    source.write_bytes(whole[: len(whole) // 2])
    result = api.convert(str(source), str(out), Options(jobs=1))
    assert (
        result.exit_code == 1 and result.report.counts["read_errors"] == 1 and result.report.counts["records_in"] == 0
    )
    assert result.report.errors[0]["location"] == "after the start" and not out.exists()


@pytest.mark.parametrize("ending", [b"", b"\n", b"\r\n"])
def test_a_byte_order_mark_and_the_line_end_of_a_document_are_kept(tmp_path: Path, ending: bytes) -> None:
    history = (CORPUS / "v0.0.55" / "a_tool_model_retry.json").read_bytes().strip()
    source, out, plain = tmp_path / "h.json", tmp_path / "out.json", tmp_path / "plain.json"
    source.write_bytes(BOM + history + ending)
    plain_source = tmp_path / "plain_source.json"
    plain_source.write_bytes(history)
    assert api.convert(str(source), str(out)).report.counts["changed"] == 1
    api.convert(str(plain_source), str(plain))
    assert out.read_bytes() == BOM + plain.read_bytes() + ending


def test_in_place_keeps_a_document_rewritten_during_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from histmig.sources import json

    source, expected = tmp_path / "history.json", tmp_path / "expected.json"
    source.write_bytes((CORPUS / "v2.59.0" / "a_tool_model_retry.json").read_bytes())
    api.convert(str(source), str(expected), Options(jobs=1))
    newer = (CORPUS / "v2.59.0" / "j_rich_content.json").read_bytes()
    real = json.DocumentInput.__exit__

    def exit(self: json.DocumentInput, *args: object) -> None:
        source.write_bytes(newer)  # the application saves the conversation again, before the rename
        real(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(json.DocumentInput, "__exit__", exit)
    result = api.convert(str(source), in_place=True, options=Options(jobs=1))
    kept = tmp_path / "history.migrated.json"
    assert source.read_bytes() == newer and kept.read_bytes() == expected.read_bytes()
    assert result.exit_code == 1 and result.wrote[0].kept == str(kept)
    assert len(result.warnings) == 1 and result.warnings[0].startswith(f"{source}: changed while histmig read it (")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["expected.json", "history.json", "history.migrated.json"]
