"""Baselines (histmig.baseline): check fails only on what the baseline does not hold, whatever
the file, line or order of the records, and says what it passed over and what is gone."""

from __future__ import annotations

import random
import re
from pathlib import Path

import orjson
import pytest

from histmig import api
from histmig.errors import UnreadableInput, UsageError
from histmig.options import Options
from histmig.report.baseline import Entry, judge, read
from tests.conftest import CORPUS

LINES = (CORPUS / "all.jsonl").read_bytes().splitlines()


def _dangling(call_id: str, envelope: bool) -> bytes:
    history = [
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "weather?"}]},
        {
            "kind": "response",
            "parts": [{"part_kind": "tool-call", "tool_name": "w", "args": "{}", "tool_call_id": call_id}],
        },
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "and?"}]},
        {"kind": "response", "parts": [{"part_kind": "text", "content": "ok"}]},
    ]
    return orjson.dumps({"note": "no id", "messages": history} if envelope else history)


def test_a_baseline_passes_today_and_fails_on_a_new_finding_only(tmp_path: Path) -> None:
    source, baseline = tmp_path / "chats.jsonl", tmp_path / "baseline.json"
    source.write_bytes(b"\n".join([*LINES, _dangling("c1", True)]) + b"\n")
    plain = api.check(str(source))
    assert plain.exit_code == 1
    written = api.check(str(source), write_baseline=str(baseline))
    count = len(read(str(baseline)))
    assert (written.exit_code, written.verdict) == (0, f"histmig check: wrote {count} baseline entries to {baseline}")
    assert count == 271  # the corpus's 270 changes to make, and the dangling call's
    same = api.check(str(source), baseline=str(baseline))
    assert (same.exit_code, same.verdict) == (
        0,
        f"histmig check: nothing beyond the baseline; {count} known ones passed over",
    )
    assert same.notes == [] and same.report.run.exit_code == 0 and same.report.run.options["baseline"] == str(baseline)

    moved = tmp_path / "elsewhere.jsonl"  # another file, the records shuffled: the same findings
    shuffled = [*LINES, _dangling("c1", True)]
    random.Random(7).shuffle(shuffled)
    moved.write_bytes(b"\n".join(shuffled) + b"\n")
    assert api.check(str(moved), baseline=str(baseline)).exit_code == 0

    source.write_bytes(b"\n".join([*LINES[1:], _dangling("c1", True), _dangling("c2", False)]) + b"\n")
    judged = api.check(str(source), baseline=str(baseline))
    assert judged.exit_code == 1
    assert judged.judged.new == [
        Entry(
            judged.judged.new[0].record,
            "HM406",
            judged.judged.new[0].fingerprint,
            "messages[2].parts[0]: absent -> tool-return",
        )
    ]
    assert judged.judged.new[0].record.startswith("messages:")  # a bare history: named by its messages' digest
    gone = judged.judged.gone
    assert {entry.record for entry in gone} == {"id:v0.0.20/a_tool_model_retry"} and len(gone) == len(judged.notes)
    assert judged.verdict == (
        f"histmig check: 1 finding not in the baseline (HM406: 1); {count - len(gone)} known ones passed over; "
        f"{len(gone)} baseline entries no longer found (see the notes; --write-baseline drops them)"
    )
    assert (
        judged.notes[0]
        == f"baseline entry no longer found: id:v0.0.20/a_tool_model_retry {gone[0].rule} {gone[0].what}"
    )


def test_a_record_without_id_is_named_by_its_messages_not_its_envelope_or_line(tmp_path: Path) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_bytes(b"{}\n" + _dangling("c1", True) + b"\n")
    second.write_bytes(
        orjson.dumps({"note": "another envelope", "messages": orjson.loads(_dangling("c1", False))}) + b"\n"
    )
    baseline = tmp_path / "baseline.json"
    api.check(str(first), write_baseline=str(baseline))
    assert sorted(entry.rule for entry in read(str(baseline))) == ["HM406", "rejected"]
    again = api.check(str(second), baseline=str(baseline))
    assert again.exit_code == 0 and again.judged.known == 1 and [e.rule for e in again.judged.gone] == ["rejected"]


def test_records_grouped_into_conversations_are_named_by_their_messages_whatever_the_order(tmp_path: Path) -> None:
    def piece(session: str, call_id: str, prompt: str) -> bytes:
        history = orjson.loads(_dangling(call_id, False))
        history[0]["parts"][0]["content"] = prompt
        return orjson.dumps({"session_id": session, "messages": history})

    lines = [piece("s1", "c1", "a"), piece("s2", "c2", "b"), piece("s1", "c3", "c"), piece("s3", "c4", "d")]
    source, baseline = tmp_path / "chats.jsonl", tmp_path / "baseline.json"
    source.write_bytes(b"\n".join(lines) + b"\n")
    grouped = Options(conversation=("session_id",))
    assert api.check(str(source), grouped, write_baseline=str(baseline)).exit_code == 0
    written = read(str(baseline))
    assert len(written) == 4 and all(re.fullmatch(r"messages:[0-9a-f]{16}", entry.record) for entry in written)
    for seed in range(3):  # the two records of s1 change places, and their lines with the others
        shuffled = list(lines)
        random.Random(seed).shuffle(shuffled)
        source.write_bytes(b"\n".join(shuffled) + b"\n")
        judged = api.check(str(source), grouped, baseline=str(baseline))
        assert (judged.exit_code, judged.judged.new, judged.judged.known, judged.judged.gone) == (0, [], 4, [])


def test_entries_are_counted() -> None:
    one = Entry("id:a", "HM406", "f", "x")
    assert judge([one, one], [one]) == ([one], 1, [])
    assert judge([one], [one, one]) == ([], 1, [one])


def test_unknown_parts_fail_against_a_baseline_only_with_strict(tmp_path: Path) -> None:
    source, baseline = tmp_path / "in.jsonl", tmp_path / "b.json"
    source.write_bytes(b'{"id":"n","messages":[{"kind":"request","parts":[]}]}\n')
    api.check(str(source), write_baseline=str(baseline))
    source.write_bytes(b'{"id":"n","messages":[{"kind":"request","parts":[{"part_kind":"hologram"}]}]}\n')
    assert api.check(str(source), baseline=str(baseline)).exit_code == 0
    assert api.check(str(source), baseline=str(baseline), strict=True).exit_code == 1


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (b"{oops", "not JSON"),
        (b'{"entries": []}', "not a histmig baseline"),
        (b'{"histmig_baseline": 1, "entries": [{"record": 1}]}', "entries[0] is not a baseline entry"),
    ],
)
def test_a_file_that_is_no_baseline_is_unreadable_input(tmp_path: Path, text: bytes, said: str) -> None:
    path = tmp_path / "b.json"
    path.write_bytes(text)
    with pytest.raises(UnreadableInput, match="^" + re.escape(f"--baseline {path}: {said}")):
        api.check(str(CORPUS / "all.jsonl"), Options(), baseline=str(path))
    with pytest.raises(UnreadableInput, match="No such file"):
        api.check(str(CORPUS / "all.jsonl"), baseline=str(tmp_path / "missing.json"))
    with pytest.raises(UsageError, match="not both"):
        api.check(str(CORPUS / "all.jsonl"), baseline=str(path), write_baseline=str(path))


def test_the_baseline_file_is_the_same_bytes_for_the_same_findings(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join(LINES) + b"\n")
    api.check(str(source), Options(jobs=2), write_baseline=str(tmp_path / "one.json"))
    source.write_bytes(b"\n".join(reversed(LINES)) + b"\n")
    api.check(str(source), Options(jobs=1), write_baseline=str(tmp_path / "two.json"))
    assert (tmp_path / "one.json").read_bytes() == (tmp_path / "two.json").read_bytes()


def test_a_fix_not_applied_is_no_baseline_entry_and_fails_nothing(tmp_path: Path) -> None:
    """A warning never fails ``check``: against a baseline it is no entry, with ``--strict`` too."""
    from tests.run.test_result import _parted

    source, baseline = _parted(tmp_path, [0, 1, 3]), tmp_path / "b.json"
    grouped = Options(conversation=("session_id",), order="seq")
    api.check(str(source), grouped, write_baseline=str(baseline))
    assert {entry.rule for entry in read(str(baseline))} == {"HM406"}
    assert len(read(str(baseline))) == 4  # the HM406 findings; not the fix not applied
    assert api.check(str(source), grouped, baseline=str(baseline), strict=True).exit_code == 0
