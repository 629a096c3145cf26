"""The engine (histmig.engine): the full way, the second pass, the stream that skips the screen
while records keep changing, and the one record loop every source runs."""

from __future__ import annotations

import dataclasses
import sys
from typing import Annotated, Any

import msgspec
import orjson
import pytest

from histmig import engine
from histmig.engine import Plan, Stream, process, process_full, run_records
from histmig.records import Conversation, Outcome, Record
from histmig.report import Report
from histmig.rules import select
from histmig.rules.base import Change, Docs, Finding, Rule, ValueField, iter_parts
from tests.conftest import CORPUS

LEGACY_LINE = next(line for line in (CORPUS / "all.jsonl").read_bytes().splitlines() if b"retry-prompt" in line)
CLEAN_LINE = b'{"id":"c","messages":[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi"}]}]}'


@pytest.mark.parametrize(("given", "expected"), [(None, "env-1"), ("col-7", "col-7")])
@pytest.mark.parametrize(
    "body", [b'"messages":[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"x"}]}]', b'"messages":{}']
)
def test_a_record_keeps_the_id_it_came_with_else_takes_its_envelope_id(
    given: str | None, expected: str, body: bytes
) -> None:
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
    "HM990",
    "exclaim",
    "adds ! to text: changes it again on every pass",
    "tests",
    Docs("", "", "[]", "[]"),
    (
        ValueField(
            "content",
            parts="text",
            quiet=Annotated[str, msgspec.Meta(pattern="!!$")],
            test=lambda m, p: not p["content"].endswith("!!"),
            settles=True,
        ),
    ),
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

    rule = Rule(
        "HM989",
        "broken",
        "raises",
        "tests",
        Docs("", "", "[]", "[]"),
        (ValueField("content", parts="text", quiet=int, test=lambda m, p: True),),
        broken,
    )
    outcome = process(
        Record(b'[{"kind":"response","parts":[{"part_kind":"text","content":"hi"}]}]', "t", "file"), Plan(rules=(rule,))
    )
    assert (outcome.status, outcome.errors) == ("rejected", ["internal error: KeyError: 'tool_name'"])


def test_whether_the_screen_is_skipped_after_changed_records_does_not_change_the_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = (CORPUS / "all.jsonl").read_bytes().splitlines()
    huge = (
        b'{"id":"h","score":1e400,' + CLEAN_LINE[len(b'{"id":"c",') :]
    )  # the screen passes it, the full way refuses it
    data = [LEGACY_LINE, LEGACY_LINE, huge, CLEAN_LINE, LEGACY_LINE, LEGACY_LINE, b"{oops", huge, *lines]
    results = []
    for after in (0, 2, len(lines) * 2):
        monkeypatch.setattr(engine, "SKIP_SCREEN_AFTER", after)
        report = Report.in_memory()
        run_records(
            ((raw, n) for n, raw in enumerate(data, start=1)),
            Stream(Plan()),
            report,
            lambda raw, n: Record(raw, "x", f"line {n}"),
        )
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
    run_records(
        [(CLEAN_LINE, 1), (LEGACY_LINE, 2), (LEGACY_LINE, 3), (b"{oops", 4), (CLEAN_LINE, 5)],
        Stream(Plan()),
        report,
        record,
        accept,
    )
    assert named == [2, 3, 4]  # lines 1 and 5 pass the screen: only counted
    assert accepted == [(2, "changed"), (3, "changed"), (4, "rejected")]
    assert (
        report.counts["records_in"],
        report.counts["changed"],
        report.counts["rejected"],
        report.counts["unchanged"],
    ) == (5, 1, 2, 2)
    assert [(row["location"], row["errors"][0][:12]) for row in report.errors] == [
        ("line 3", "kept out"),
        ("line 4", "invalid JSON"),
    ]


def test_a_plan_fixes_the_safe_rules_and_the_unsafe_ones_only_when_asked() -> None:
    unsafe = Rule(
        "HM988", "u", "unsafe", "tests", Docs("", "", "[]", "[]"), (), lambda m, c: [], applicability="unsafe"
    )
    reports = Rule("HM989", "r", "reports", "tests", Docs("", "", "[]"), (), find=lambda m, c: [])
    rules = (*select(), unsafe, reports)
    safe = {rule.code for rule in select() if rule.fix is not None and rule.applicability == "safe"}
    fixable = {rule.code for rule in select() if rule.fix is not None}
    assert (
        {"HM101", "HM406"} <= safe
        and {"HM401", "HM407"} <= fixable - safe
        and {"HM403", "HM404", "HM405"}.isdisjoint(fixable)
    )
    assert Plan(rules).fixing == safe
    assert Plan(rules, unsafe_fixes=True).fixing == fixable | {"HM988"}


def test_a_row_of_a_table_with_a_column_naming_conversations_keeps_its_last_calls_open() -> None:
    """:meth:`Plan.for_columns`: HM407's unsafe fix is withheld for rows beside a column naming
    conversations, unless the rows are grouped into them or the fix is not asked for."""
    unsafe = Plan(unsafe_fixes=True)
    assert "HM407" not in unsafe.for_columns(["id", "session_id", "message_list"]).fixing
    assert unsafe.for_columns(["id", "owner", "message_list"]) is unsafe
    assert Plan().for_columns(["session_id"]) == Plan()
    grouped = Plan(unsafe_fixes=True, grouped=True)
    assert grouped.for_columns(["thread_id"]) is grouped


def test_an_unfixed_finding_leaves_the_record_unchanged_and_is_reported() -> None:
    unsafe = Rule(
        "HM987",
        "exclaim",
        "adds !",
        "tests",
        Docs("", "", "[]", "[]"),
        (
            ValueField(
                "content",
                parts="text",
                quiet=Annotated[str, msgspec.Meta(pattern="!$")],
                test=lambda m, p: not p["content"].endswith("!"),
            ),
        ),
        _exclaim("HM987"),
        applicability="unsafe",
    )
    raw = b'[{"kind":"response","parts":[{"part_kind":"text","content":"hi"}]}]'
    outcome = process(Record(raw, "t", "file"), Plan(rules=(unsafe,)))
    assert (outcome.status, outcome.output, outcome.quiet) == ("unchanged", raw, False)
    assert [(f.code, f.message, f.part, f.text) for f in outcome.findings] == [("HM987", 0, 0, "text -> text")]
    fixed = process(Record(raw, "t", "file"), Plan(rules=(unsafe,), unsafe_fixes=True))
    assert fixed.status == "changed" and orjson.loads(fixed.output)[0]["parts"][0]["content"] == "hi!"


LEGACY_AND_CRASHED = orjson.dumps(
    {
        "id": "c-9",
        "messages": [
            {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "go"}]},
            {
                "kind": "response",
                "parts": [{"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": "a"}],
                "timestamp": "2025-05-01T10:00:00Z",
            },
            {
                "kind": "request",
                "parts": [
                    {
                        "part_kind": "retry-prompt",
                        "content": "again",
                        "tool_name": "t",
                        "tool_call_id": "a",
                        "timestamp": "2025-05-01T10:00:01Z",
                    }
                ],
            },
            {
                "kind": "response",
                "parts": [{"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": "b"}],
                "timestamp": "2025-05-01T10:00:02Z",
            },
            {
                "kind": "request",
                "parts": [{"part_kind": "user-prompt", "content": "hello?", "timestamp": "2025-05-01T10:00:03Z"}],
            },
            {
                "kind": "response",
                "parts": [{"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": "c"}],
                "timestamp": "2025-05-01T10:00:04Z",
            },
        ],
    }
)
"""A legacy retry (HM101 acts at its place), a dangling call (HM406) and a call of the last
response (HM407): the pairing the record's migration left to the settled check is found there,
and the record is migrated again with the pairing rules."""


def test_pairing_left_to_the_settled_check_comes_out_as_if_asked_at_its_phase() -> None:
    deferred, direct = (
        process_full(Record(LEGACY_AND_CRASHED, "t", "line 1")),
        process_full(Record(LEGACY_AND_CRASHED, "t", "line 1"), defer=False),
    )
    assert (deferred.status, deferred.output, deferred.changes, deferred.findings) == (
        direct.status,
        direct.output,
        direct.changes,
        direct.findings,
    )
    assert [(c.rule, c.message, c.part) for c in deferred.changes] == [("HM101", 2, 0), ("HM406", 4, 0)]
    assert [(f.code, f.message, f.part, f.severity) for f in deferred.findings] == [("HM407", 5, 0, "warning")]
    frontier_only = orjson.loads(LEGACY_AND_CRASHED)
    del frontier_only["messages"][3:5]
    outcome = process_full(Record(orjson.dumps(frontier_only), "t", "line 2"))
    assert [(c.rule, c.message) for c in outcome.changes] == [("HM101", 2)]
    assert [(f.code, f.message, f.part, f.severity) for f in outcome.findings] == [("HM407", 3, 0, "warning")]
    assert outcome.record.record_id == "c-9"


LEGACY_HISTORY = orjson.loads(LEGACY_LINE)["messages"]


def test_a_history_held_as_json_text_is_migrated_and_written_back_as_text() -> None:
    raw = orjson.dumps({"id": "t-1", "messages": orjson.dumps(LEGACY_HISTORY).decode(), "tail": 1})
    outcome = process(Record(raw, "t.jsonl", "line 1"))
    assert outcome.status == "changed" and outcome.record.record_id == "t-1"
    written = orjson.loads(outcome.output)
    assert list(written) == ["id", "messages", "tail"] and isinstance(written["messages"], str)
    expected = orjson.loads(orjson.dumps(LEGACY_HISTORY))
    engine.migrate(expected)
    assert orjson.loads(written["messages"]) == expected
    clean = orjson.dumps({"messages": orjson.dumps(expected).decode()})
    assert process_full(Record(clean, "t.jsonl", "line 2")).output == clean
    assert process(Record(outcome.output, "t.jsonl", "line 3")).status == "unchanged"


@pytest.mark.parametrize(
    ("key", "field"),
    [
        ("chat-history", None),
        ("chat-history", "chat-history"),
        ("chat history", "chat history"),
        ("a.b", "a\\.b"),
        ('chat "history"', None),  # no struct can be named by it (msgspec): checked as a bare history
        ("chat\\history", None),
        ("chat\thistory", None),
        ("", None),  # no field path spells it
    ],
)
def test_a_record_whose_messages_field_is_no_identifier_is_migrated(key: str, field: str | None) -> None:
    raw = orjson.dumps({"id": "k", key: LEGACY_HISTORY})
    outcome = process(Record(raw, "t.jsonl", "line 1"), Plan(messages_field=field))
    assert outcome.status == "changed", outcome.errors
    assert b"retry-prompt" not in outcome.output and list(orjson.loads(outcome.output)) == ["id", key]
    assert process_full(Record(outcome.output, "t.jsonl", "line 2"), Plan(messages_field=field)).status == "unchanged"


def test_a_nested_messages_field_is_migrated_and_named_in_error_paths() -> None:
    raw = orjson.dumps({"payload": {"messages": LEGACY_HISTORY}})
    outcome = process(Record(raw, "t.jsonl", "line 1"), Plan(messages_field="payload.messages"))
    assert outcome.status == "changed" and b"retry-prompt" not in outcome.output
    bad = orjson.dumps({"payload": {"messages": [{"kind": "request", "parts": "oops"}]}})
    rejected = process(Record(bad, "t.jsonl", "line 2"), Plan(messages_field="payload.messages"))
    assert (rejected.status, rejected.errors) == ("rejected", ["payload.messages[0].parts is not a list"])
    invalid = orjson.dumps({"payload": {"messages": [{"kind": "request", "parts": [{"part_kind": "user-prompt"}]}]}})
    checked = process(Record(invalid, "t.jsonl", "line 3"), Plan(messages_field="payload.messages", validate_all=True))
    assert checked.errors[0] == "payload.messages[0].parts[0].content: Field required"


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"[1,2]", "messages[0] is not a message (an object with 'kind' and a 'parts' list)"),
        (
            b'{"messages":[{"kind":"request","parts":[]},"hi"]}',
            "messages[1] is not a message (an object with 'kind' and a 'parts' list)",
        ),
        (
            b'[[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"x","tool_name":null}]}]]',
            "messages[0] is a list, not a message: a record holds one history (many histories go in a JSONL file, one a line)",
        ),
        (b'{"messages":[{"kind":"request","parts":"oops"}]}', "messages[0].parts is not a list"),
    ],
    ids=["scalars", "a-scalar-among-messages", "a-list-of-histories", "parts-not-a-list"],
)
def test_an_array_of_other_things_than_messages_is_rejected_not_copied(raw: bytes, error: str) -> None:
    outcome = process(Record(raw, "t.jsonl", "line 1"))
    assert (outcome.status, outcome.output, outcome.errors) == ("rejected", None, [error])


SPEECH = {"part_kind": "speech", "speaker": "user", "transcript": "hi"}
FEEDBACK = {
    "part_kind": "retry-feedback",
    "content": "Please call a tool.",
    "retry": {"cause": "no_output", "attempt": 1, "max_retries": 1},
}


def _target(target: str, **plan: Any) -> Plan:
    from histmig.options import Options

    return Options(target=target).plan(**plan)


def test_for_an_older_target_valid_means_what_it_loads_and_nothing_it_cannot_load_is_copied_unsaid() -> None:
    kept = process(
        Record(orjson.dumps([{"kind": "request", "parts": [SPEECH]}]), "t.jsonl", "line 1"), _target("2.0.0")
    )
    assert (kept.status, kept.errors) == (
        "unchanged",
        ["messages[0].parts[0].part_kind: 2.0.0 cannot load a 'speech' part (loaded from 2.28.0)"],
    )
    assert [finding.code for finding in kept.findings] == ["HM503"]
    rejected = process(
        Record(orjson.dumps([{"kind": "request", "parts": [FEEDBACK, SPEECH]}]), "t.jsonl", "line 2"), _target("2.0.0")
    )
    assert (rejected.status, [c.rule for c in rejected.changes], rejected.errors) == (
        "rejected",
        ["HM502"],
        ["messages[0].parts[1].part_kind: 2.0.0 cannot load a 'speech' part (loaded from 2.28.0)"],
    )
    null_args = process_full(
        Record(
            b'[{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"t","args":null,"tool_call_id":"c"}]}]',
            "t.jsonl",
            "line 3",
        ),
        _target("0.1.0"),
    )
    assert (null_args.status, null_args.errors) == (
        "unchanged",
        ["messages[0].parts[0].args: 0.1.0 cannot load null arguments (loaded from 0.2.7)"],
    )


def test_for_an_older_target_a_rolled_back_record_is_validated_without_the_settled_check() -> None:
    plan = _target("2.59.0")
    assert plan.settled("messages") is None and Plan().settled("messages") is not None
    outcome = process(
        Record(orjson.dumps({"messages": [{"kind": "request", "parts": [FEEDBACK]}]}), "t.jsonl", "line 1"), plan
    )
    assert (outcome.status, [c.rule for c in outcome.changes], outcome.errors) == ("changed", ["HM502"], [])
    assert orjson.loads(outcome.output)["messages"][0]["parts"][0]["part_kind"] == "retry-prompt"
    assert process(Record(outcome.output, "t.jsonl", "line 1"), plan).status == "unchanged"


def test_under_readers_every_outcome_tells_the_releases_that_load_the_record_as_it_was_read() -> None:
    plan = _target("2.0.0", validate_all=True, readers=True)
    changed = process(Record(orjson.dumps([{"kind": "request", "parts": [FEEDBACK]}]), "t.jsonl", "line 1"), plan)
    assert changed.status == "changed" and changed.readers.row() == ("2.0.0", False, "2.60.0", [["2.60.0", None]])
    broken = process(Record(b"{oops", "t.jsonl", "line 2"), plan)
    assert broken.status == "rejected" and broken.readers.row() == ("2.0.0", False, None, [])
    clean = process(Record(CLEAN_LINE, "t.jsonl", "line 3"), plan)
    assert (clean.status, clean.quiet, clean.readers.loads) == ("unchanged", False, True)
    report = Report.in_memory()
    run_records([(CLEAN_LINE, 3)], Stream(plan), report, lambda raw, n: Record(raw, "t.jsonl", f"line {n}"))
    assert report.readers == [
        {
            "source": "t.jsonl",
            "location": "line 3",
            "id": "c",
            "reader": "2.0.0",
            "loads": True,
            "oldest": "0.0.13",
            "releases": [["0.0.13", None]],
        }
    ]


def test_what_a_fixing_rule_leaves_as_it_is_is_reported_as_a_finding() -> None:
    said = Finding("HM986", 0, 0, "cannot be known", "why", "derived")
    rule = Rule(
        "HM986",
        "says",
        "leaves text as it is, and says so",
        "tests",
        Docs("", "", "[]", "[]"),
        (
            ValueField(
                "content", parts="text", quiet=Annotated[str, msgspec.Meta(pattern="^$")], test=lambda m, p: True
            ),
        ),
        lambda messages, ctx: [said],
    )
    raw = b'[{"kind":"response","parts":[{"part_kind":"text","content":"hi"}]}]'
    outcome = process(Record(raw, "t", "file"), Plan(rules=(rule,)))
    assert (outcome.status, outcome.output, outcome.changes, outcome.findings) == ("unchanged", raw, [], [said])
    both = Rule(
        "HM985",
        "both",
        "changes and says",
        "tests",
        Docs("", "", "[]", "[]"),
        rule.looks,
        lambda messages, ctx: [*_exclaim("HM985")(messages, ctx), said],
    )
    changed = process(Record(raw, "t", "file"), Plan(rules=(both,)))
    assert (changed.status, [c.rule for c in changed.changes], changed.findings) == ("changed", ["HM985"], [said])


DEFERRED = orjson.loads((CORPUS / "v2.68.0" / "m_deferred_tool_model_retry.json").read_bytes())
"""A 2.68 run that stopped for a deferred tool (messages 0-1) and the run that resumed it with
the tool's result (2-3, which ends waiting for another): every message names its conversation."""


def test_a_record_naming_a_conversation_keeps_its_last_calls_open_whatever_the_fixes() -> None:
    """Another record of the conversation (the next run's) may answer them: a record alone
    cannot tell, so HM407's unsafe fix leaves them open and the outcome names the conversation
    and the calls left open; a record naming none, and a history given alone, are closed as
    before."""
    unsafe = Plan(unsafe_fixes=True)
    first_run = orjson.dumps(DEFERRED[:2])
    kept = process_full(Record(first_run, "t", "row 1"), unsafe)
    calls = tuple(f"tool_call_id={p['tool_call_id']}" for p in DEFERRED[1]["parts"] if p["part_kind"] == "tool-call")
    assert calls and (kept.status, kept.output, kept.conversations) == (
        "unchanged",
        first_run,
        (f"conversation_id={DEFERRED[0]['conversation_id']}", *calls),
    )
    assert [(f.code, f.message, f.certainty, f.severity) for f in kept.findings] == [("HM407", 1, "exact", "warning")]
    anonymous = [{key: value for key, value in m.items() if key != "conversation_id"} for m in DEFERRED[:2]]
    closed = process_full(Record(orjson.dumps(anonymous), "t", "row 1"), unsafe)
    assert closed.status == "changed" and [c.rule for c in closed.changes] == ["HM407"] and closed.conversations == ()
    alone = orjson.loads(first_run)
    assert [c.rule for c in engine.migrate(alone, unsafe)] == ["HM407"] and len(alone) == 3
    named = process_full(Record(orjson.dumps({"session_id": "s-1", "messages": anonymous}), "t", "line 1"), unsafe)
    assert named.status == "unchanged" and named.conversations == ("session_id=s-1", *calls)
    within = {"meta": {"app": {"session_id": "s-1"}}, "tags": [{"thread_id": "t-1"}], "messages": anonymous}
    nested = process_full(Record(orjson.dumps(within), "t", "line 1"), unsafe)  # not within an array
    assert nested.status == "unchanged" and nested.conversations == ("meta.app.session_id=s-1", *calls)


def test_a_fragment_is_left_as_it_is_whatever_the_fixes_and_names_its_conversation() -> None:
    resumed = orjson.dumps(DEFERRED[2:])
    for plan in (Plan(), Plan(unsafe_fixes=True)):
        outcome = process(Record(resumed, "t", "row 2"), plan)
        assert (outcome.status, outcome.output, outcome.changes) == ("unchanged", resumed, [])
        assert [(f.code, f.certainty, f.severity) for f in outcome.findings] == [
            ("HM401", "fragment", "warning"),
            ("HM407", "fragment", "warning"),
        ]
        answered = [
            f"tool_call_id={p['tool_call_id']}" for p in DEFERRED[2]["parts"] if p["part_kind"] == "tool-return"
        ]
        assert answered and outcome.conversations == (f"conversation_id={DEFERRED[2]['conversation_id']}", *answered)


# ------------------------------------------------------------ a conversation of several records (issue 25)


def _conversation(*records: Any, name: str = "session_id='s1'") -> Conversation:
    return Conversation(
        tuple(
            Record(r if isinstance(r, bytes) else orjson.dumps(r), "chats.jsonl", f"line {i}")
            for i, r in enumerate(records, 1)
        ),
        name,
    )


CALL = {
    "kind": "response",
    "parts": [{"part_kind": "tool-call", "tool_name": "get_weather", "args": "{}", "tool_call_id": None}],
}
RESULT = {
    "kind": "request",
    "parts": [{"part_kind": "tool-return", "tool_name": "get_weather", "content": "sunny", "tool_call_id": None}],
}
PROMPT = {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "weather?"}]}
ANSWER = {"kind": "response", "parts": [{"part_kind": "text", "content": "Sunny."}]}


def test_a_call_and_its_result_in_two_records_get_one_derived_id_and_an_untouched_record_its_bytes() -> None:
    first = (
        b'[{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "weather?"}]}]'  # spaced: kept as is
    )
    outcomes = engine.process_conversation(_conversation(first, [CALL], [RESULT, ANSWER]), Plan())
    assert [o.status for o in outcomes] == ["unchanged", "changed", "changed"]
    assert outcomes[0].output == first
    call, result = orjson.loads(outcomes[1].output)[0], orjson.loads(outcomes[2].output)[0]
    assert call["parts"][0]["tool_call_id"] == result["parts"][0]["tool_call_id"]
    whole = process(Record(orjson.dumps([PROMPT, CALL, RESULT, ANSWER]), "whole", "line 1"), Plan())
    assert orjson.loads(whole.output) == [PROMPT, call, result, ANSWER]  # the whole history's ids
    assert [(c.rule, c.message, c.part) for c in outcomes[2].changes] == [("HM201", 0, 0)]  # the record's own place


def test_a_conversation_whose_key_was_not_found_keeps_its_last_calls_open_whatever_the_fixes() -> None:
    """A record ``--conversation`` could not group (its key missing or null: a misspelt key
    leaves every record so) is a conversation of its own not known to be whole: the next
    run's record may answer its last calls, so HM407's unsafe fix leaves them open; with its
    key, it is a whole conversation, and they are closed."""
    grouped = dataclasses.replace(Plan(unsafe_fixes=True), grouped=True)
    first_run = orjson.dumps({"messages": [PROMPT, {**CALL, "parts": [{**CALL["parts"][0], "tool_call_id": "c1"}]}]})
    record = Record(first_run, "chats.jsonl", "line 1")
    note = "no conversation key (sesion_id missing or null): a conversation of its own"
    (untold,) = Stream(grouped).conversation(Conversation((record,), "line 1", note))
    assert (untold.status, untold.output, [f.code for f in untold.findings]) == ("unchanged", first_run, ["HM407"])
    (whole,) = Stream(grouped).conversation(Conversation((record,), "session_id='s1'"))
    assert whole.status == "changed" and [c.rule for c in whole.changes] == ["HM407"]


def test_records_apart_are_fragments_and_together_a_whole_conversation_with_nothing_to_say() -> None:
    call = {**CALL, "parts": [{**CALL["parts"][0], "tool_call_id": "c1"}]}
    result = {**RESULT, "parts": [{**RESULT["parts"][0], "tool_call_id": "c1"}]}
    plan = Plan(unsafe_fixes=True)
    alone = process(Record(orjson.dumps([result, ANSWER]), "x", "line 2"), plan)
    assert [(f.code, f.certainty) for f in alone.findings] == [("HM401", "fragment")]
    outcomes = engine.process_conversation(_conversation([PROMPT, call], [result, ANSWER]), plan)
    assert [(o.status, o.changes, o.findings) for o in outcomes] == [("unchanged", [], []), ("unchanged", [], [])]


def test_a_fix_that_needs_a_new_message_in_a_store_of_one_message_a_record_is_not_applied_and_said() -> None:
    call = {**CALL, "parts": [{**CALL["parts"][0], "tool_call_id": "c1"}]}
    plan = Plan(unsafe_fixes=True)
    outcomes = engine.process_conversation(_conversation(PROMPT, call), plan)
    assert [o.status for o in outcomes] == ["unchanged", "unchanged"]
    assert outcomes[1].warnings == [
        "HM407 not applied: its fix would add a message to a record that is one message (not applicable to this layout)"
    ]
    assert [(f.code, f.message) for f in outcomes[1].findings] == [("HM407", 0)]
    runs = engine.process_conversation(_conversation([PROMPT, ANSWER], [PROMPT, call]), plan)  # per run
    assert [o.status for o in runs] == ["unchanged", "changed"] and not runs[1].warnings
    assert orjson.loads(runs[1].output)[2]["parts"][0]["part_kind"] == "tool-return"  # the new request joins its record


def test_a_record_that_cannot_be_read_rejects_its_whole_conversation() -> None:
    outcomes = engine.process_conversation(_conversation([PROMPT], b"[{not json", [ANSWER]), Plan())
    assert [o.status for o in outcomes] == ["rejected"] * 3
    assert outcomes[1].errors[0].startswith("invalid JSON")
    said = "rejected with its conversation (session_id='s1'): chats.jsonl:line 2 cannot be read"
    assert outcomes[0].errors == outcomes[2].errors == [said]


@pytest.mark.parametrize("envelope", [False, True], ids=["bare", "envelope"])
def test_a_record_nested_too_deep_rejects_its_conversation_through_the_screen_too(envelope: bool) -> None:
    deep = b"[" * 5000 + b"]" * 5000
    if envelope:
        deep = b'{"messages":' + deep + b"}"
    stream = Plan(grouped=True).processor()
    outcomes = stream.conversation(_conversation([PROMPT], deep))
    assert [o.status for o in outcomes] == ["rejected"] * 2
    assert outcomes[1].errors[0] == f"invalid JSON: nested deeper than {sys.getrecursionlimit()} levels"
    (alone,) = stream.conversation(Conversation((Record(deep, "chats.jsonl", "line 1"),), "line 1"))
    assert alone.status == "rejected"


def test_a_key_read_twice_in_one_record_rejects_its_conversation_and_a_payloads_only_when_rewritten() -> None:
    """A duplicated key histmig reads, in a record of a history or in a record that is one
    message, rejects the whole conversation (every record kept); one in a payload is carried
    while its record is left as it is, and rejects the conversation once that record would
    be rewritten."""
    twice_kind = b'[{"kind": "request", "kind": "response", "parts": [{"part_kind": "text", "content": "a"}]}]'
    one_message = b'{"kind": "request", "parts": [{"part_kind": "user-prompt", "part_kind": "text", "content": "a"}]}'
    for record, path in ((twice_kind, "messages[0]"), (one_message, "messages[0].parts[0]")):
        outcomes = engine.process_conversation(_conversation([PROMPT], record, [ANSWER]), Plan())
        assert [(o.status, o.output) for o in outcomes] == [("rejected", None)] * 3
        assert [(e.path, e.message) for e in outcomes[1].errors] == [  # type: ignore[attr-defined]
            (
                path,
                f"duplicated key {'kind' if path == 'messages[0]' else 'part_kind'!r}: readers differ on which of its values counts",
            )
        ]
        assert outcomes[0].errors == [
            "rejected with its conversation (session_id='s1'): chats.jsonl:line 2 cannot be read"
        ]
    args_twice = b'{"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "f", "args": {"a": 1, "a": 2}, "tool_call_id": "c1"}]}'
    kept = engine.process_conversation(_conversation(PROMPT, args_twice), Plan())
    assert [(o.status, o.output) for o in kept] == [("unchanged", orjson.dumps(PROMPT)), ("unchanged", args_twice)]
    rewritten = args_twice.replace(b'"c1"', b"null")  # HM201 would give the call its id
    outcomes = engine.process_conversation(_conversation(PROMPT, rewritten), Plan())
    assert [o.status for o in outcomes] == ["rejected", "rejected"]
    assert [(e.path, e.message) for e in outcomes[1].errors] == [  # type: ignore[attr-defined]
        ("messages[0].parts[0].args", "duplicated key 'a': readers differ on which of its values counts")
    ]
    assert outcomes[0].errors == [
        "rejected with its conversation (session_id='s1'): chats.jsonl:line 2 cannot be rewritten"
    ]


@pytest.mark.parametrize("field", [None, "message"])
def test_a_conversation_of_one_record_holding_one_message_in_a_field_is_migrated_not_rejected(
    field: str | None,
) -> None:
    stream = Plan(grouped=True, messages_field=field).processor()
    retry = {"kind": "request", "parts": [{"part_kind": "retry-prompt", "content": "again", "tool_name": None}]}
    for message, status in ((ANSWER, "unchanged"), (retry, "changed")):
        record = Record(orjson.dumps({"conversation_id": "c", "seq": 0, "message": message}), "chats.jsonl", "line 1")
        (outcome,) = stream.conversation(Conversation((record,), "conversation_id='c'"))
        assert (outcome.status, outcome.errors) == (status, [])
    assert orjson.loads(outcome.output)["message"]["parts"][0]["part_kind"] == "retry-feedback"  # type: ignore[arg-type]
    bad = Record(b'{"conversation_id": "c", "note": {"kind": "x"}}', "chats.jsonl", "line 2")
    (outcome,) = stream.conversation(Conversation((bad,), "conversation_id='c'"))
    assert outcome.status == "rejected" and outcome.errors


def test_a_conversation_rolled_back_a_message_a_record_is_its_whole_history_rolled_back_each_error_in_its_record() -> (
    None
):
    """HM501 replaces two parts in two records: no part moves (an object a rule makes is never
    taken for one it replaced), and the rolled-back records are the whole history's; an older
    target's load errors go to the record holding the message."""
    from histmig.options import Options

    messages = orjson.loads((CORPUS / "v2.68.0" / "d_tool_two_retries.json").read_bytes())
    split = _conversation(*([message] for message in messages))
    outcomes = engine.process_conversation(split, dataclasses.replace(_target("2.59.0"), grouped=True))
    whole = process(Record(orjson.dumps(messages), "whole", "line 1"), _target("2.59.0"))
    assert [o.warnings for o in outcomes] == [[]] * len(messages)
    assert [m for o in outcomes for m in orjson.loads(o.output)] == orjson.loads(whole.output)  # type: ignore[arg-type]
    kept = dataclasses.replace(Options(target="2.59.0", ignore=("HM501",)).plan(), grouped=True)
    errors = [o.errors for o in engine.process_conversation(split, kept)]
    retried = [
        at for at, message in enumerate(messages) if any(p.get("outcome") == "retried" for p in message["parts"])
    ]
    assert retried and [at for at, own in enumerate(errors) if own] == retried
    assert all(
        line.startswith("messages[0].parts[0].outcome: 2.59.0 cannot load") for at in retried for line in errors[at]
    )


def test_a_key_of_the_conversation_or_order_field_read_twice_rejects_its_conversation() -> None:
    """A nested ``--order``/``--conversation`` field names keys histmig reads: a value given
    twice there orders the conversation by whichever value a reader keeps."""
    twice = b'{"chat": {"id": "s1"}, "o": {"n": 1, "n": 0}, "messages": [' + orjson.dumps(ANSWER) + b"]}"
    first = {"chat": {"id": "s1"}, "o": {"n": 0}, "messages": [PROMPT]}
    plan = Plan(grouped=True, read_fields=(("chat", "id"), ("o", "n")))
    outcomes = engine.process_conversation(_conversation(first, twice), plan)
    assert [o.status for o in outcomes] == ["rejected", "rejected"]
    assert [(e.path, e.message) for e in outcomes[1].errors] == [  # type: ignore[attr-defined]
        ("o", "duplicated key 'n': readers differ on which of its values counts")
    ]
    alone = engine.process_conversation(
        _conversation(first, twice), Plan(grouped=True)
    )  # a payload of an unchanged one
    assert [o.status for o in alone] == ["unchanged", "unchanged"]


def test_an_error_is_named_in_the_record_that_holds_it() -> None:
    bad = {"kind": "response", "parts": [{"part_kind": "text", "content": 5}]}
    outcomes = engine.process_conversation(
        _conversation({"messages": [PROMPT]}, {"messages": [ANSWER, bad]}), Plan(validate_all=True)
    )
    assert outcomes[0].errors == []
    assert outcomes[1].errors[0].path == "messages[1].parts[0].content"  # type: ignore[attr-defined]
    assert outcomes[1].errors[1:] == ["no release 0.0.13-2.68 wrote this shape: no rule can migrate it"]


def test_a_conversations_history_is_joined_from_each_records_own_bytes() -> None:
    """The history the screen sees of a conversation is its records' messages, each as its
    record holds its bytes, in one array: a bare history's items, an envelope's messages
    (found, or the field named) and a record that is one message."""
    records = [
        b' [{"kind": "request", "parts": []} , 1]',
        b'{"id": "c", "messages": [ {"a": [1, 2]} ]}',
        b' {"kind": "response", "parts": []} ',
    ]
    joined = engine.joined_history(records, None)
    assert joined == b'[{"kind": "request", "parts": []},1,{"a": [1, 2]},{"kind": "response", "parts": []}]'
    named = engine.joined_history([records[1]] * 2, "messages")
    assert named == b'[{"a": [1, 2]},{"a": [1, 2]}]'


def test_records_that_only_put_together_are_json_are_rejected_not_passed() -> None:
    """Each record's bytes are checked on their own before the screen sees them joined: two
    halves of one message, neither JSON, are rejected (and kept), not passed as unchanged."""
    halves = (b'[{"kind": "response", "parts": [], "note": "]', b'["}]')
    assert b"[" + halves[0][1:-1] + b"," + halves[1][1:-1] + b"]" == b'[{"kind": "response", "parts": [], "note": ","}]'
    assert engine.joined_history(halves, None) is None
    stream = Plan(grouped=True).processor()
    outcomes = stream.conversation(_conversation(*halves))
    assert [o.status for o in outcomes] == ["rejected", "rejected"]
    assert outcomes[0].errors[0].startswith("invalid JSON")


def test_a_conversation_whose_records_put_together_need_nothing_is_not_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "process_conversation", lambda *_: pytest.fail("built"))
    records = ({"session_id": "s1", "messages": [PROMPT]}, ANSWER)  # an envelope and a message alone
    outcomes = Plan(grouped=True).processor().conversation(_conversation(*records))
    assert [(o.status, o.output) for o in outcomes] == [("unchanged", orjson.dumps(r)) for r in records]


def test_a_record_holding_no_message_keeps_its_place_in_its_conversation() -> None:
    outcomes = engine.process_conversation(_conversation([PROMPT, CALL], [RESULT], []), Plan())
    assert [o.status for o in outcomes] == ["changed", "changed", "unchanged"]
    assert outcomes[2].output == b"[]" and outcomes[2].changes == []


def test_a_new_message_goes_at_the_end_of_the_record_holding_the_message_before_it() -> None:
    """HM406 answers a dangling call with a new request right after its response: in the
    record of that response, not at the start of the next record."""
    call = {**CALL, "parts": [{**CALL["parts"][0], "tool_call_id": "c1"}]}
    outcomes = engine.process_conversation(_conversation([PROMPT, call], [ANSWER]), Plan(unsafe_fixes=True))
    first = orjson.loads(outcomes[0].output)
    assert [m["kind"] for m in first] == ["request", "response", "request"]
    assert first[2]["parts"][0]["part_kind"] == "tool-return" and outcomes[0].changes[0].rule == "HM406"
    assert (outcomes[1].status, outcomes[1].output) == ("unchanged", orjson.dumps([ANSWER]))


RETRY = '{"part_kind":"retry-prompt","content":"x","tool_name":"t","tool_call_id":"c"}'


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (
            '{"messages":[{"kind":"request","parts":[{"part_kind":"retry-prompt","part_kind":"text","content":"x","tool_name":"t"},'
            + RETRY
            + "]}]}",
            "messages[0].parts[0]: duplicated key 'part_kind'",
        ),
        ('{"messages":[{"kind":"request","parts":[' + RETRY + ']}],"messages":[]}', "duplicated key 'messages'"),
        (
            '[{"kind":"request","parts":[' + RETRY[:-1] + ',"tool_call_id":"d"}]}]',
            "messages[0].parts[0]: duplicated key 'tool_call_id'",
        ),
        (
            '{"history":'
            + orjson.dumps('[{"kind":"request","kind":"request","parts":[' + RETRY + "]}]").decode()
            + "}",
            "history[0]: duplicated key 'kind'",
        ),
    ],
)
@pytest.mark.parametrize("validate_all", [False, True])
def test_a_record_with_a_duplicated_key_is_rejected_naming_it(raw: str, error: str, validate_all: bool) -> None:
    outcome = process(Record(raw.encode(), "t.jsonl", "line 1"), Plan(validate_all=validate_all))
    assert (outcome.status, outcome.errors) == ("rejected", [error + ": readers differ on which of its values counts"])


_PROMPT = '{"kind":"request","parts":[{"part_kind":"user-prompt","content":"x"}]}'


@pytest.mark.parametrize(
    ("raw", "error"),
    [  # the last value needs nothing, another a rule or is refused: not "unchanged", whichever is read
        ('{"messages":[{"kind":"request","parts":[' + RETRY + ']}],"messages":[]}', "duplicated key 'messages'"),
        (
            '{"messages":[{"kind":"request","parts":[{"part_kind":"retry-prompt","part_kind":"user-prompt",'
            '"content":"x"}]}]}',
            "messages[0].parts[0]: duplicated key 'part_kind'",
        ),
        ('{"messages":[{"kind":"response","kind":"request","parts":[]}]}', "messages[0]: duplicated key 'kind'"),
        ('{"messages":[{"kind":"request","parts":[' + RETRY + '],"parts":[]}]}', "messages[0]: duplicated key 'parts'"),
    ],
)
def test_a_duplicate_whose_last_value_needs_nothing_is_rejected_on_every_way(raw: str, error: str) -> None:
    record = Record(raw.encode(), "t.jsonl", "line 1")
    said = [error + ": readers differ on which of its values counts"]
    assert Plan().screen(raw.encode()) is None  # msgspec decodes every value: the screen refuses the record
    for outcome in (process(record), process_full(record), Stream(Plan()).full(record)):
        assert (outcome.status, outcome.errors) == ("rejected", said)


def test_a_duplicate_the_screen_carries_is_carried_by_the_full_way_of_a_stream_too() -> None:
    raw = ('{"messages":[' + _PROMPT + '],"messages":[' + _PROMPT + "]}").encode()  # both values need nothing
    stream = Stream(Plan())
    stream._changed_in_a_row = engine.SKIP_SCREEN_AFTER  # the screen not asked: the full way, then the screen
    assert Plan().screen(raw) == () and process_full(Record(raw, "t", "line 1")).status == "rejected"
    outcome = stream.full(Record(raw, "t", "line 1"))
    assert (outcome.status, outcome.output, outcome.errors) == ("unchanged", raw, [])


@pytest.mark.parametrize("validate_all", [False, True])
def test_a_duplicate_in_a_payload_is_carried_unless_the_record_is_rewritten(validate_all: bool) -> None:
    call = '{"part_kind":"tool-call","tool_name":"t","args":{"a":1,"a":2},"tool_call_id":"c"}'
    current = '[{"kind":"response","parts":[' + call + "]}]"
    plan = Plan(validate_all=validate_all)
    kept = process_full(Record(current.encode(), "t", "line 1"), plan)
    assert (kept.status, kept.output, kept.errors) == ("unchanged", current.encode(), [])
    legacy = '[{"kind":"response","parts":[' + call + ']},{"kind":"request","parts":[' + RETRY + "]}]"
    rewritten = process_full(Record(legacy.encode(), "t", "line 1"), plan)
    assert (rewritten.status, rewritten.output) == ("rejected", None)
    assert rewritten.errors == [
        "messages[0].parts[0].args: duplicated key 'a': readers differ on which of its values counts"
    ]


@pytest.mark.parametrize(
    ("message", "kind", "error"),
    [
        ("request", "text", "part_kind 'text' is a response part: no release loads it in a request"),
        ("request", "tool-call", "part_kind 'tool-call' is a response part: no release loads it in a request"),
        ("response", "user-prompt", "part_kind 'user-prompt' is a request part: no release loads it in a response"),
        ("response", "retry-prompt", "part_kind 'retry-prompt' is a request part: no release loads it in a response"),
    ],
)
def test_a_known_part_kind_in_the_wrong_message_is_invalid_not_unknown(message: str, kind: str, error: str) -> None:
    history = [
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]},
        {"kind": message, "parts": [{"part_kind": "hologram"}, {"part_kind": kind, "content": "x", "tool_name": "t"}]},
    ]
    outcome = process(Record(orjson.dumps(history), "t.jsonl", "line 1"), Plan(validate_all=True))
    assert outcome.status != "changed" and outcome.errors[0] == "messages[1].parts[1]: " + error
    assert outcome.warnings == ["messages[1].parts[0]: unknown part_kind 'hologram', carried unchanged"]
    legacy = [*history, {"kind": "request", "parts": [orjson.loads(RETRY)]}]
    converted = process(Record(orjson.dumps(legacy), "t.jsonl", "line 2"), Plan())
    assert converted.status == "rejected" and converted.errors[0] == "messages[1].parts[1]: " + error


_OPEN_CALL = {**CALL, "parts": [{**CALL["parts"][0], "tool_call_id": "c1"}]}
_RETRY = {
    "kind": "request",
    "parts": [{"part_kind": "retry-prompt", "tool_name": "get_weather", "content": "bad", "tool_call_id": "c1"}],
}


def test_a_conversation_the_screen_passes_with_findings_is_not_built_and_each_record_gets_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The last response's open call (HM407) is found by the screen of the records put
    together: placed in the record holding it, at its own place, the record named by its
    envelope id, as the full way gives it."""
    conversation = _conversation({"id": "e1", "messages": [PROMPT]}, {"id": "e2", "messages": [ANSWER, _OPEN_CALL]})
    expected = engine.process_conversation(conversation, Plan(grouped=True))
    monkeypatch.setattr(engine, "process_conversation", lambda *_: pytest.fail("built"))
    outcomes = Plan(grouped=True).processor().conversation(conversation)

    def seen(outcome: Outcome) -> tuple[Any, ...]:
        return (outcome.record, outcome.status, outcome.output, outcome.changes, outcome.errors, outcome.findings)

    assert [seen(o) for o in outcomes] == [seen(o) for o in expected]
    assert outcomes[0].findings == [] and outcomes[1].record.record_id == "e2"
    assert [(f.code, f.message, f.part) for f in outcomes[1].findings] == [("HM407", 1, 0)]


def test_a_source_that_writes_only_changes_is_handed_no_outcome_of_a_quiet_conversation() -> None:
    """Without ``quiet_too`` a conversation the screen passes is only counted: ``accept`` sees
    the records of the others alone, and the report is the same."""
    conversations = [
        (_conversation(PROMPT, ANSWER), [1, 2]),
        (_conversation([PROMPT, _OPEN_CALL], [_RETRY, ANSWER]), [3, 4]),
        (_conversation({"id": "e", "messages": [PROMPT]}, {"messages": [ANSWER, _OPEN_CALL]}), [5, 6]),
    ]
    reports = []
    for quiet_too in (True, False):
        accepted: list[tuple[int, str]] = []

        def accept(key: int, outcome: Outcome, accepted: list[tuple[int, str]] = accepted) -> Outcome:
            accepted.append((key, outcome.status))
            return outcome

        report = Report.in_memory()
        engine.run_conversations(conversations, Plan(grouped=True).processor(), report, accept, quiet_too=quiet_too)
        reports.append(report.to_json())
        assert accepted == ([(1, "unchanged"), (2, "unchanged")] if quiet_too else []) + [
            (3, "unchanged"),  # the call's record: the retry-prompt answering it is in the next
            (4, "changed"),
            (5, "unchanged"),
            (6, "unchanged"),
        ]
    assert reports[0] == reports[1]
    assert reports[0]["summary"]["records_in"] == 6 and reports[0]["summary"]["changed"] == 1
    assert reports[0]["summary"]["findings_by_rule"] == {"HM407": 1}


def test_a_conversation_read_from_its_bytes_makes_its_records_only_when_the_screen_does_not_pass_it() -> None:
    """A grouped source hands over each conversation's bytes (:meth:`Conversation.read`): one
    the screen passes with nothing to say is counted with no record made; the records of the
    others are made once, each named by its place, and their outcomes are those of the
    conversation made of its records."""
    made: list[int] = []

    def record(raw: bytes, place: int) -> Record:
        made.append(place)
        return Record(raw, "chats.jsonl", f"line {place}")

    pieces = [[PROMPT, ANSWER], [[PROMPT, _OPEN_CALL], [_RETRY, ANSWER]]]
    read = []
    for n, records in enumerate(pieces):
        places = [10 * n + i for i in range(len(records))]
        raws = [orjson.dumps(r) for r in records]
        read.append((Conversation.read(raws, record, places, "session_id='s1'"), places))
    report = Report.in_memory()
    outcomes: list[tuple[int, str, str]] = []

    def accept(key: int, outcome: Outcome) -> Outcome:
        outcomes.append((key, outcome.status, outcome.record.location))
        return outcome

    engine.run_conversations(read, Plan(grouped=True).processor(), report, accept, quiet_too=False)
    assert made == [10, 11]
    assert outcomes == [(10, "unchanged", "line 10"), (11, "changed", "line 11")]
    built = _conversation(*pieces[1])
    assert read[1][0].raws == built.raws and [r.raw for r in read[1][0].records] == list(built.raws)
    assert report.to_json()["summary"]["records_in"] == 4 and made == [10, 11]


def test_a_conversations_history_is_put_together_only_where_the_screen_cannot_read_its_pieces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The screen reads each record of a conversation once (:meth:`~histmig.screen.Screen.pieces`);
    a record that is one message, or a history in another field, is joined as before, and the
    verdict is the same either way; a history at a nested field is joined (and so not passed)."""
    joined: list[int] = []
    real = engine.joined_history
    monkeypatch.setattr(
        engine, "joined_history", lambda records, field: joined.append(len(records)) or real(records, field)
    )
    stream = Plan(grouped=True).processor()
    apart = _conversation({"id": "e1", "messages": [PROMPT]}, {"id": "e2", "messages": [ANSWER, _OPEN_CALL]})
    verdict = stream.screen(apart)
    assert [(f.code, f.message, f.part) for f in verdict or ()] == [("HM407", 2, 0)] and joined == []
    assert stream.screen(_conversation({"messages": [PROMPT]}, ANSWER)) == () and joined == [2]
    assert stream.screen(_conversation({"messages": [PROMPT]}, {"history": [_RETRY]})) is None and joined == [2, 2]
    nested = Plan(grouped=True, messages_field="chat.log").processor()
    assert nested.screen(_conversation({"chat": {"log": [PROMPT]}}, {"chat": {"log": [ANSWER]}})) is None
    assert joined == [2, 2, 2]
