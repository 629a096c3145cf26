"""The engine (histmig.engine): the full way, the second pass, the stream that skips the screen
while records keep changing, and the one record loop every source runs."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
import orjson
import pytest

from histmig import engine
from histmig.engine import Plan, Stream, process, process_full, run_records
from histmig.records import Outcome, Record
from histmig.report import Report
from histmig.rules import registry
from histmig.rules.base import Change, Docs, Finding, Rule, ValueField, iter_parts
from tests.conftest import CORPUS

LEGACY_LINE = next(line for line in (CORPUS / "all.jsonl").read_bytes().splitlines() if b"retry-prompt" in line)
CLEAN_LINE = b'{"id":"c","messages":[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi"}]}]}'


@pytest.mark.parametrize(("given", "expected"), [(None, "env-1"), ("col-7", "col-7")])
@pytest.mark.parametrize("body", [b'"messages":[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"x"}]}]', b'"messages":{}'])
def test_a_record_keeps_the_id_it_came_with_else_takes_its_envelope_id(given: str | None, expected: str, body: bytes) -> None:
    raw = b'{"id":"env-1",' + body + b"}"
    outcome = process_full(Record(raw, "t.parquet", "row 0", given))
    assert outcome.status == ("changed" if b"retry-prompt" in body else "rejected")
    assert outcome.record.record_id == expected


def _exclaim(code: str) -> Any:
    """A fix that adds ``!`` to every response text, as rule ``code``."""

    def fix(messages: list[Any], ctx: object) -> list[Change]:
        changes = []
        for m_index, p_index, _, part in iter_parts(messages, "response"):
            if part.get("part_kind") == "text":
                part["content"] += "!"
                changes.append(Change(code, m_index, p_index, "text", "text", "exclaim", "exact"))
        return changes

    return fix


UNSETTLED = Rule(
    "HM990", "exclaim", "adds ! to text: changes it again on every pass", "tests", Docs("", "", "[]", "[]"),
    (ValueField("content", parts="text", quiet=Annotated[str, msgspec.Meta(pattern="!!$")], test=lambda m, p: not p["content"].endswith("!!"), settles=True),),
    _exclaim("HM990"),
)


def test_a_record_a_second_pass_would_change_again_is_rejected_whole() -> None:
    raw = b'[{"kind":"response","parts":[{"part_kind":"text","content":"hi"}]}]'
    outcome = process(Record(raw, "t.jsonl", "line 1"), Plan(rules=(UNSETTLED,)))
    assert (outcome.status, outcome.output) == ("rejected", None)
    assert outcome.errors == ["internal error: a second pass changed the record again (HM990)"]
    assert [change.rule for change in outcome.changes] == ["HM990"]


def test_a_rule_that_raises_rejects_the_record_and_says_so() -> None:
    def broken(messages: list[Any], ctx: object) -> list[Change]:
        raise KeyError("tool_name")

    rule = Rule("HM989", "broken", "raises", "tests", Docs("", "", "[]", "[]"), (ValueField("content", parts="text", quiet=int, test=lambda m, p: True),), broken)
    outcome = process(Record(b'[{"kind":"response","parts":[{"part_kind":"text","content":"hi"}]}]', "t", "file"), Plan(rules=(rule,)))
    assert (outcome.status, outcome.errors) == ("rejected", ["internal error: KeyError: 'tool_name'"])


def test_whether_the_screen_is_skipped_after_changed_records_does_not_change_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = (CORPUS / "all.jsonl").read_bytes().splitlines()
    huge = b'{"id":"h","score":1e400,' + CLEAN_LINE[len(b'{"id":"c",') :]  # the screen passes it, the full way refuses it
    data = [LEGACY_LINE, LEGACY_LINE, huge, CLEAN_LINE, LEGACY_LINE, LEGACY_LINE, b"{oops", huge, *lines]
    results = []
    for after in (0, 2, len(lines) * 2):
        monkeypatch.setattr(engine, "SKIP_SCREEN_AFTER", after)
        report = Report.in_memory()
        run_records(((raw, n) for n, raw in enumerate(data, start=1)), Stream(Plan()), report, lambda raw, n: Record(raw, "x", f"line {n}"))
        results.append(report.to_json())
    assert results[0] == results[1] == results[2]
    one_by_one = Report.in_memory()
    for number, line in enumerate(data, start=1):
        one_by_one.add(process(Record(line, "x", f"line {number}")))
    assert results[0] == one_by_one.to_json()
    assert results[0]["summary"]["changed"] > 100 and results[0]["summary"]["rejected"] == 1


def test_the_loop_names_only_the_records_that_go_the_full_way_and_counts_the_rest() -> None:
    named: list[int] = []
    accepted: list[tuple[int, str]] = []

    def record(raw: bytes, key: int) -> Record:
        named.append(key)
        return Record(raw, "x", f"line {key}")

    def accept(key: int, outcome: Outcome) -> Outcome:
        accepted.append((key, outcome.status))
        return Outcome(outcome.record, "rejected", None, errors=["kept out"]) if key == 3 else outcome

    report = Report.in_memory()
    run_records([(CLEAN_LINE, 1), (LEGACY_LINE, 2), (LEGACY_LINE, 3), (b"{oops", 4), (CLEAN_LINE, 5)], Stream(Plan()), report, record, accept)
    assert named == [2, 3, 4]  # lines 1 and 5 pass the screen: only counted
    assert accepted == [(2, "changed"), (3, "changed"), (4, "rejected")]
    assert (report.counts["records_in"], report.counts["changed"], report.counts["rejected"], report.counts["unchanged"]) == (5, 1, 2, 2)
    assert [(row["location"], row["errors"][0][:12]) for row in report.errors] == [("line 3", "kept out"), ("line 4", "invalid JSON")]


def test_a_plan_fixes_the_safe_rules_and_the_unsafe_ones_only_when_asked() -> None:
    unsafe = Rule("HM988", "u", "unsafe", "tests", Docs("", "", "[]", "[]"), (), lambda m, c: [], applicability="unsafe")
    rules = (*registry(), unsafe)
    assert Plan(rules).fixing == {rule.code for rule in registry()}
    assert Plan(rules, unsafe_fixes=True).fixing == {rule.code for rule in rules}


def test_an_unfixed_finding_leaves_the_record_unchanged_and_is_reported() -> None:
    unsafe = Rule(
        "HM987", "exclaim", "adds !", "tests", Docs("", "", "[]", "[]"),
        (ValueField("content", parts="text", quiet=Annotated[str, msgspec.Meta(pattern="!$")], test=lambda m, p: not p["content"].endswith("!")),),
        _exclaim("HM987"), applicability="unsafe",
    )
    raw = b'[{"kind":"response","parts":[{"part_kind":"text","content":"hi"}]}]'
    outcome = process(Record(raw, "t", "file"), Plan(rules=(unsafe,)))
    assert (outcome.status, outcome.output, outcome.quiet) == ("unchanged", raw, False)
    assert [(f.code, f.message, f.part, f.text) for f in outcome.findings] == [("HM987", 0, 0, "text -> text")]
    fixed = process(Record(raw, "t", "file"), Plan(rules=(unsafe,), unsafe_fixes=True))
    assert fixed.status == "changed" and orjson.loads(fixed.output)[0]["parts"][0]["content"] == "hi!"


def test_what_a_fixing_rule_leaves_as_it_is_is_reported_as_a_finding() -> None:
    said = Finding("HM986", 0, 0, "cannot be known", "why", "derived")
    rule = Rule(
        "HM986", "says", "leaves text as it is, and says so", "tests", Docs("", "", "[]", "[]"),
        (ValueField("content", parts="text", quiet=Annotated[str, msgspec.Meta(pattern="^$")], test=lambda m, p: True),),
        lambda messages, ctx: [said],
    )
    raw = b'[{"kind":"response","parts":[{"part_kind":"text","content":"hi"}]}]'
    outcome = process(Record(raw, "t", "file"), Plan(rules=(rule,)))
    assert (outcome.status, outcome.output, outcome.changes, outcome.findings) == ("unchanged", raw, [], [said])
    both = Rule("HM985", "both", "changes and says", "tests", Docs("", "", "[]", "[]"), rule.looks, lambda messages, ctx: [*_exclaim("HM985")(messages, ctx), said])
    changed = process(Record(raw, "t", "file"), Plan(rules=(both,)))
    assert (changed.status, [c.rule for c in changed.changes], changed.findings) == ("changed", ["HM985"], [said])
