"""The report's accumulation (histmig.report): counts, change and finding rows by name, in the
order added, merged from workers in task order whatever the spill batches."""

from __future__ import annotations

import pickle
from pathlib import Path

import orjson
import pytest

from histmig import api
from histmig.options import Options
from histmig.problems import Problem, Warned
from histmig.records import Outcome, Record
from histmig.report import SKIPPED, UNKNOWN_PART, Report, record_name, rows, unknown_parts, warning_rule
from histmig.rules.base import Change, Finding
from tests.conftest import CORPUS
from tests.report.conftest import reader_report, skipped_report


def test_change_rows_come_back_in_order_whatever_the_batch_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "many.jsonl"
    source.write_bytes((CORPUS / "all.jsonl").read_bytes() * 3)
    whole = api.audit(str(source), Options(jobs=2)).report
    monkeypatch.setattr(rows, "ROWS_PER_BATCH", 3)
    assert (
        api.audit(str(source), Options(jobs=1)).report.to_json()
        == api.audit(str(source), Options(jobs=2)).report.to_json()
        == whole.to_json()
    )
    assert len(whole.changes) == sum(whole.by_rule.values()) > 300


def test_a_records_rows_are_kept_in_the_order_of_their_places() -> None:
    record = Record(b"{}", "in.jsonl", "line 3", "r3")
    changes = [
        Change("HM101", 2, 0, "retry-prompt", "tool-return", "free-text", "default", "model_retry"),
        Change("HM202", 1, None, "response", "response", "null-timestamp", "exact"),
    ]
    findings = [
        Finding("HM402", 4, 1, "orphaned result", "no-call", "exact"),
        Finding("HM401", 1, 0, "dangling call", "unanswered", "exact"),
    ]
    report = Report.in_memory()
    report.add(Outcome(record, "changed", b"{}", changes, findings=findings))
    assert [(row["rule"], row["message"], row["part"], row["cause"]) for row in report.changes] == [
        ("HM202", 1, None, None),
        ("HM101", 2, 0, "model_retry"),
    ]
    assert [(row["rule"], row["text"]) for row in report.findings] == [
        ("HM401", "dangling call"),
        ("HM402", "orphaned result"),
    ]
    summary = report.summary()
    assert (summary["changed"], summary["findings"], summary["parts_by_rule"], summary["findings_by_rule"]) == (
        1,
        2,
        {"HM101": 1, "HM202": 1},
        {"HM401": 1, "HM402": 1},
    )
    assert (report.needs_attention, report.failed) == (True, False)
    assert record_name(report.changes[0]) == "in.jsonl:line 3 [r3]"


def test_a_merged_report_keeps_every_count_and_row_in_order() -> None:
    total = Report()
    for n in range(3):
        part = Report.in_memory()
        part.add(
            Outcome(
                Record(b"{}", "in", f"line {n}"),
                "changed",
                b"{}",
                [Change("HM201", n, 0, "tool-call", "tool-call", "position", "derived")],
            )
        )
        part.add(
            Outcome(
                Record(b"{}", "in", f"line {n}"),
                "unchanged",
                b"{}",
                findings=[Finding("HM401", n, 0, "t", "e", "exact")],
            )
        )
        part.add_unchanged(2)
        total.merge(part)
    total.add_read_error("in", "after line 2", "input ends early")
    assert [row["location"] for row in total.changes] == ["line 0", "line 1", "line 2"]
    assert [row["message"] for row in total.findings] == [0, 1, 2]
    assert {key: total.counts[key] for key in ("records_in", "changed", "unchanged", "findings", "read_errors")} == {
        "records_in": 12,
        "changed": 3,
        "unchanged": 9,
        "findings": 3,
        "read_errors": 1,
    }
    assert total.failed and total.errors[-1] == {
        "source": "in",
        "location": "after line 2",
        "id": None,
        "status": "unreadable",
        "errors": ["input ends early"],
    }


def test_a_rejected_records_changes_are_not_rows_but_its_errors_are() -> None:
    report = Report()
    report.add(
        Outcome(
            Record(b"{}", "in", "line 1"),
            "rejected",
            None,
            [Change("HM101", 0, 0, "a", "b", "e", "exact")],
            ["messages[0]: bad"],
        )
    )
    report.add(
        Outcome(Record(b"{}", "in", "line 2"), "unchanged", b"{}", errors=["messages: invalid"], warnings=["w1", "w2"])
    )
    assert (
        report.changes == []
        and report.counts["rejected"] == 1
        and report.counts["invalid"] == 1
        and report.counts["warnings"] == 2
    )
    assert [row["status"] for row in report.errors] == ["rejected", "invalid"]


def test_a_skipped_row_moves_from_changed_to_skipped_and_fails_the_run() -> None:
    report = skipped_report()
    assert {key: report.counts[key] for key in ("records_in", "changed", "unchanged", "rejected", "skipped")} == {
        "records_in": 2,
        "changed": 1,
        "unchanged": 0,
        "rejected": 0,
        "skipped": 1,
    }
    assert report.errors == [
        {"source": "db:chats", "location": "id=2", "id": "c-2", "status": "skipped", "errors": [SKIPPED]}
    ]
    assert report.failed and list(report.summary())[:5] == ["records_in", "changed", "unchanged", "rejected", "skipped"]


def test_readers_rows_one_a_record_and_their_counts(tmp_path: Path) -> None:
    report, source = reader_report(tmp_path)
    assert [(row["location"], row["loads"], row["oldest"], row["releases"]) for row in report.readers] == [
        ("line 1", False, "2.60.0", [["2.60.0", None]]),
        ("line 2", True, "0.0.13", [["0.0.13", None]]),
        ("line 3", False, None, []),
        ("line 4", False, "0.0.21", [["0.0.21", "0.0.45"]]),
    ]
    summary = report.summary()
    assert {key: summary[key] for key in ("reader", "reader_loads", "reader_cannot_load", "oldest_releases")} == {
        "reader": "2.0.0",
        "reader_loads": 1,
        "reader_cannot_load": 3,
        "oldest_releases": {"0.0.13": 1, "0.0.21": 1, "2.60.0": 1, "none": 1},
    }
    assert reader_report(tmp_path, jobs=2)[0].to_json() == report.to_json()
    assert "reader" not in api.check(source).report.summary() and "readers" not in api.check(source).report.to_json()


def _piece(location: str, certainty: str, conversations: tuple[str, ...]) -> Outcome:
    """An outcome whose finding says it may be a piece of a conversation: a fragment's HM401, or
    the call of its last response (HM407)."""
    code = "HM401" if certainty == "fragment" else "HM407"
    finding = Finding(code, 0, 0, "found", "orphaned" if code == "HM401" else "frontier", certainty, "warning")
    return Outcome(
        Record(b"[]", "chats", location), "unchanged", b"[]", findings=[finding], conversations=conversations
    )


def test_a_record_another_record_continues_is_a_fragment_whatever_the_order_and_the_workers() -> None:
    """A record whose last response's calls are open is a piece of a conversation when a
    fragment (the next run's record) or another such record names its conversation; else its
    finding stays as it is. Told from every record, however they were split among workers."""
    outcomes = [
        _piece("row 1", "exact", ("conversation_id=c",)),  # the run that stopped for a deferred tool
        _piece("row 2", "exact", ("conversation_id=d",)),  # a whole history waiting for its tool: HM407
        _piece("row 3", "exact", ("session_id=s",)),
        _piece("row 4", "fragment", ("conversation_id=c",)),  # the run resumed with the tool's result
        _piece("row 5", "exact", ("session_id=s",)),
        _piece("row 6", "fragment", ()),
    ]
    told = []
    for order in (outcomes, outcomes[::-1], outcomes[3:] + outcomes[:3]):
        for split in (1, 2, 4):
            report = Report()
            for start in range(0, len(order), split):
                part = Report.in_memory()
                for outcome in order[start : start + split]:
                    part.add(outcome)
                report.merge(part)
            certainty = {row["location"]: row["certainty"] for row in report.findings}
            told.append((report.fragments, report.summary()["fragments"], certainty))
    expected = {"row 1": "fragment", "row 2": "exact", "row 3": "fragment", "row 5": "fragment"}
    assert told == [(5, 5, {**expected, "row 4": "fragment", "row 6": "fragment"})] * 9


def test_a_record_whose_open_call_a_fragment_answers_is_a_fragment_but_two_open_calls_of_one_id_are_not() -> None:
    """Bare rows naming no conversation (a release before 2.60): a row whose last call a
    fragment's first result answers (by its ``tool_call_id``) is a piece; two rows leaving a
    call of one id open are two histories reusing an id, each a legitimate HM407."""
    report = Report()
    for outcome in (
        _piece("row 1", "exact", ("tool_call_id=a",)),
        _piece("row 2", "fragment", ("tool_call_id=a",)),
        _piece("row 3", "exact", ("tool_call_id=b",)),
        _piece("row 4", "exact", ("tool_call_id=b",)),
    ):
        report.add(outcome)
    assert {row["location"]: row["certainty"] for row in report.findings} == {
        "row 1": "fragment",
        "row 2": "fragment",
        "row 3": "exact",
        "row 4": "exact",
    }
    assert report.fragments == 2 and report.answered() == frozenset({"tool_call_id=a"})


def test_the_summary_has_the_json_reports_shape(tmp_path: Path) -> None:
    report = api.audit(str(CORPUS / "all.jsonl")).report
    summary = report.summary()
    assert summary == orjson.loads(orjson.dumps(report.json_head(timestamp=False)))["summary"]
    assert {"evidence": "error-list", "certainty": "shape", "parts": 41} in summary["parts_by_evidence"]


def test_a_warning_line_is_of_the_rule_whose_fix_was_not_applied_or_an_unknown_part() -> None:
    """Told by the line's type, which a report sent from a worker keeps (pickled)."""
    said = "HM201 not applied: its fix would move a part to another record (not applicable to this layout)"
    unknown = Problem("messages[1].parts[0]", "unknown part_kind 'x', carried unchanged")
    sent = Report.in_memory()
    sent.add(Outcome(Record(b"[]", "a.jsonl", "line 1"), "unchanged", b"[]", warnings=[Warned("HM201", said)]))
    sent.add(Outcome(Record(b"[]", "a.jsonl", "line 2"), "unchanged", b"[]", warnings=[unknown, unknown]))
    report = Report()
    report.merge(pickle.loads(pickle.dumps(sent)))
    lines = [line for row in report.warnings for line in row["warnings"]]
    assert [warning_rule(line) for line in lines] == ["HM201", UNKNOWN_PART, UNKNOWN_PART]
    assert (unknown_parts(report), report.counts["warnings"]) == ((2, 1), 3)
