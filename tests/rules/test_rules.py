"""The registry (histmig.rules): rules found automatically, in order, selected by prefix; what
is derived from their looks (pending, the screen, nulls kept, known part kinds); each rule's
documented example; and a new rule added as one module, picked up everywhere."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

import histmig.rules
from histmig.cli import app
from histmig.errors import UnknownRule
from histmig.options import Options
from histmig.rules import known_part_kinds, nulls_kept, opt_ins, pending, registry, select
from histmig.screen import Screen
from tests.rules.conftest import migrate

CALL = {"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": "c"}
RETURN = {"part_kind": "tool-return", "tool_name": "t", "content": "x", "tool_call_id": "c"}
PAIRING = {"HM401", "HM402", "HM403", "HM404", "HM405", "HM406", "HM407"}

TARGETED = {
    "tool-bound-retry-prompt": (
        [
            {"kind": "response", "parts": [CALL]},
            {
                "kind": "request",
                "parts": [{"part_kind": "retry-prompt", "content": "x", "tool_name": "t", "tool_call_id": "c"}],
            },
        ],
        {"HM101", "HM104"},
    ),
    "tool-less-retry-prompt": (
        [{"kind": "request", "parts": [{"part_kind": "retry-prompt", "content": "x"}]}],
        {"HM102", "HM103", "HM104"},
    ),
    "instruction": ([{"kind": "request", "parts": [{"part_kind": "instruction", "content": "x"}]}], {"HM204"}),
    "feedback-without-input": (
        [
            {
                "kind": "request",
                "parts": [
                    {
                        "part_kind": "retry-feedback",
                        "content": [{"type": "t", "loc": [], "msg": "m"}],
                        "retry": {"cause": "validation_error"},
                    }
                ],
            }
        ],
        {"HM203", "HM104"},
    ),
    "retried-return-without-attempt": (
        [
            {"kind": "response", "parts": [CALL]},
            {
                "kind": "request",
                "parts": [{**RETURN, "outcome": "retried", "retry": {"cause": "model_retry", "attempt": None}}],
            },
        ],
        {"HM104"},
    ),
    "null-id": (
        [
            {"kind": "response", "parts": [{**CALL, "tool_call_id": None}]},
            {"kind": "request", "parts": [{**RETURN, "tool_call_id": None}]},
        ],
        {"HM201", *PAIRING},
    ),
    "null-part-timestamp": (
        [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "x", "timestamp": None}]}],
        {"HM202"},
    ),
    "null-response-timestamp": ([{"kind": "response", "parts": [], "timestamp": None}], {"HM202"}),
    "args-wrapper": (
        [
            {"kind": "response", "parts": [{**CALL, "args": {"args_json": "{}"}}]},
            {"kind": "request", "parts": [RETURN]},
        ],
        {"HM301"},
    ),
    "orphaned-result": ([{"kind": "request", "parts": [RETURN]}], {"HM401"}),
    "result-before-call": (
        [
            {"kind": "request", "parts": [RETURN]},
            {"kind": "response", "parts": [CALL]},
            {"kind": "request", "parts": [RETURN]},
        ],
        {"HM402"},
    ),
    "duplicate-result": (
        [{"kind": "response", "parts": [CALL]}, {"kind": "request", "parts": [RETURN, RETURN]}],
        {"HM403"},
    ),
    "reused-call-id": (
        [
            {"kind": "response", "parts": [CALL]},
            {"kind": "request", "parts": []},
            {"kind": "response", "parts": [CALL]},
            {"kind": "request", "parts": [RETURN]},
        ],
        {"HM404", "HM406"},
    ),
    "truncated-args": (
        [{"kind": "response", "parts": [{**CALL, "args": '{"a": '}]}, {"kind": "request", "parts": [RETURN]}],
        {"HM405"},
    ),
    "dangling-call": (
        [{"kind": "response", "parts": [CALL]}, {"kind": "request", "parts": []}, {"kind": "response", "parts": []}],
        {"HM406"},
    ),
    "unanswered-last-call": ([{"kind": "response", "parts": [CALL]}], {"HM407"}),
    "provider-request-id": ([{"kind": "response", "parts": [], "provider_request_id": "r"}], {"HM302"}),
}


def test_rules_run_in_phase_order_then_by_code() -> None:
    migration = [
        "HM201",
        "HM202",
        "HM203",
        "HM204",
        "HM301",
        "HM302",
        "HM103",
        "HM101",
        "HM102",
        "HM401",
        "HM402",
        "HM403",
        "HM404",
        "HM405",
        "HM406",
        "HM407",
    ]
    assert [rule.code for rule in registry()] == [
        *migration[:9],
        "HM104",
        *migration[9:],
        "HM501",
        "HM502",
        "HM503",
        "HM504",
        "HM505",
        "HM506",
        "HM507",
    ]
    assert [rule.code for rule in select()] == migration


def test_select_ignore_prefixes() -> None:
    assert [r.code for r in select(["HM2"], ["HM203"])] == ["HM201", "HM202", "HM204"]
    assert [r.code for r in select(["hm10"])] == ["HM103", "HM101", "HM102"]
    with pytest.raises(UnknownRule, match="unknown rule code 'HM9'"):
        select(["HM9"])


def test_an_opt_in_rule_is_selected_only_with_its_option() -> None:
    assert opt_ins() == {"attempts"}
    assert "HM104" not in [r.code for r in select()]
    assert [r.code for r in select(["hm10"], enabled=["attempts"])] == ["HM103", "HM101", "HM102", "HM104"]
    assert [r.code for r in select(["HM1"], ["HM104"], enabled=["attempts"])] == ["HM103", "HM101", "HM102"]
    with pytest.raises(UnknownRule, match="rule HM104 runs only with --attempts"):
        select(["HM104"])


@pytest.mark.parametrize("name", TARGETED)
def test_every_shape_a_rule_targets_is_pending_and_screened_out(name: str) -> None:
    history, codes = TARGETED[name]
    assert {rule.code for rule in pending(history, select(enabled=opt_ins()))} == codes
    assert Screen(select(enabled=opt_ins()))(orjson.dumps({"messages": history})) != ()
    others = tuple(rule for rule in select(enabled=opt_ins()) if rule.code not in codes)
    assert pending(history, others) == ()
    rewritten_kind = name in ("tool-bound-retry-prompt", "tool-less-retry-prompt", "instruction")
    # the skeleton cannot tell the pairing rules apart, but for the calls of the last response
    pairing_left = bool(codes & PAIRING) and not codes >= PAIRING and name != "unanswered-last-call"
    assert (Screen(others)(orjson.dumps({"messages": history})) == ()) is not (rewritten_kind or pairing_left)


def test_what_is_derived_from_the_looks() -> None:
    assert nulls_kept(registry()) == {"tool_call_id", "timestamp"}
    assert known_part_kinds(select(), "request") == {"retry-prompt", "instruction"}
    assert known_part_kinds(select(), "response") == frozenset()


@pytest.mark.parametrize("rule", [rule for rule in registry() if rule.fix is not None], ids=lambda rule: rule.code)
def test_each_rules_documented_example_is_what_its_fix_does(rule) -> None:
    before, after = orjson.loads(rule.docs.before), orjson.loads(rule.docs.after)
    assert before != after and rule.docs.what and rule.docs.why
    options = Options(
        select=(rule.code,), target=rule.docs.target, unsafe_fixes=True, **({rule.opt_in: True} if rule.opt_in else {})
    )
    changes = migrate(before, options)
    assert before == after
    assert {change.rule for change in changes} == {rule.code}
    assert migrate(before, options) == []
    findings = rule.check(orjson.loads(rule.docs.before), options.plan().context)
    assert [finding.code for finding in findings] == [rule.code] * len(changes) and {f.severity for f in findings} == {
        rule.severity
    }


@pytest.mark.parametrize("rule", [rule for rule in registry() if rule.fix is None], ids=lambda rule: rule.code)
def test_a_rule_that_only_reports_finds_what_its_example_shows(rule) -> None:
    before = orjson.loads(rule.docs.before)
    assert rule.docs.after is None and rule.docs.what and rule.docs.why
    findings = rule.check(before, Options().plan().context)
    assert [finding.code for finding in findings] == [rule.code] and before == orjson.loads(rule.docs.before)
    assert migrate(before, Options(select=(rule.code,), unsafe_fixes=True)) == []


TOY = '''
"""HM9{n}: a toy rule, added as one module."""
from typing import Annotated

import msgspec

from histmig.rules.base import MIGRATE, Change, Docs, Rule, ValueField, iter_parts


def starts_with_toy(message, part):
    return isinstance(part.get("content"), str) and part["content"].startswith("{prefix}")


def strip_toy(messages, ctx):
    changes = []
    for m_index, p_index, message, part in iter_parts(messages, "response"):
        if part.get("part_kind") == "{kind}" and starts_with_toy(message, part):
            part["content"] = part["content"][len("{prefix}"):]
            changes.append(Change("HM9{n}", m_index, p_index, "{kind}", "{kind}", "toy-prefix", "exact"))
    return changes


RULE = Rule(
    code="HM9{n}",
    name="toy-{n}",
    summary="text starting with {prefix} -> the text after it",
    source="tests",
    docs=Docs(
        what="Strips {prefix} from a text part.",
        why="A test rule.",
        before='[{{"kind":"response","parts":[{{"part_kind":"{kind}","content":"{prefix}hi"}}]}}]',
        after='[{{"kind":"response","parts":[{{"part_kind":"{kind}","content":"hi"}}]}}]',
    ),
    looks=(ValueField("content", parts="{kind}", message="response", quiet=Annotated[str, msgspec.Meta(pattern="^(?!{prefix})")], test=starts_with_toy),),
    fix=strip_toy,
    applicability="{applicability}",
    phase=MIGRATE,
)
'''


@pytest.fixture
def toy_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Two toy rules, HM901 (safe: strips ``TOY:`` from a response's text part) and HM902
    (unsafe: strips ``DROP:`` from a thinking part), each one module in a folder added to the
    rules package's path; the registry is found again before and after."""
    for n, applicability, prefix, kind in ((1, "safe", "TOY:", "text"), (2, "unsafe", "DROP:", "thinking")):
        (tmp_path / f"hm90{n}_toy.py").write_text(
            textwrap.dedent(TOY.format(n=f"0{n}", applicability=applicability, prefix=prefix, kind=kind))
        )
    monkeypatch.setattr(histmig.rules, "__path__", [*histmig.rules.__path__, str(tmp_path)])
    registry.cache_clear()
    yield tmp_path
    registry.cache_clear()
    for n in (1, 2):
        sys.modules.pop(f"histmig.rules.hm90{n}_toy", None)


def test_a_rule_added_as_one_module_is_picked_up_everywhere(toy_rules: Path) -> None:
    history = [
        {
            "kind": "response",
            "parts": [{"part_kind": "text", "content": "TOY:hi"}, {"part_kind": "thinking", "content": "DROP:bye"}],
        }
    ]
    quiet = [{"kind": "response", "parts": [{"part_kind": "text", "content": "hi"}]}]
    assert [rule.code for rule in select() if rule.code.startswith("HM9")] == ["HM901", "HM902"]
    assert {rule.code for rule in pending(history, select())} == {"HM901", "HM902"}
    assert Screen(select())(orjson.dumps(history)) is None and Screen(select())(orjson.dumps(quiet)) == ()
    source = toy_rules / "in.jsonl"
    source.write_bytes(
        orjson.dumps({"id": "r1", "messages": history}) + b"\n" + orjson.dumps({"id": "r2", "messages": quiet}) + b"\n"
    )
    runner = CliRunner()
    check = runner.invoke(app, ["check", str(source), "--report", "-", "--report-format", "json"])
    assert check.exit_code == 1
    report = orjson.loads(check.stdout)
    assert report["summary"]["parts_by_rule"] == {"HM901": 1} and report["summary"]["findings_by_rule"] == {"HM902": 1}
    assert (
        "histmig check: 1 of 2 records to migrate, 0 invalid, 0 rejected, 0 with findings only, 1 current and valid; 1 finding"
        in check.stderr
    )
    shown = runner.invoke(app, ["rules", "HM90"])
    assert (
        shown.exit_code == 0
        and "HM901 (toy-01)" in shown.stdout
        and "Fix: unsafe" in shown.stdout
        and '"TOY:hi"' in shown.stdout
    )


def test_an_unsafe_fix_applies_only_with_unsafe_fixes(toy_rules: Path) -> None:
    history = [{"kind": "response", "parts": [{"part_kind": "thinking", "content": "DROP:hi"}]}]
    safe_only = orjson.loads(orjson.dumps(history))
    assert [c.rule for c in migrate(safe_only, Options(select=("HM902",)))] == []
    assert safe_only == history
    assert [c.rule for c in migrate(safe_only, Options(select=("HM902",), unsafe_fixes=True))] == ["HM902"]
    assert safe_only[0]["parts"][0]["content"] == "hi"
    source, out = toy_rules / "in.jsonl", toy_rules / "out.jsonl"
    source.write_bytes(orjson.dumps(history) + b"\n")
    runner = CliRunner()
    kept = runner.invoke(
        app, ["convert", str(source), str(out), "--select", "HM902", "--report", "-", "--report-format", "json"]
    )
    assert kept.exit_code == 0 and out.read_bytes() == source.read_bytes()
    assert [(row["rule"], row["line"]) for row in orjson.loads(kept.stdout)["findings"]] == [("HM902", 1)]
    fixed = runner.invoke(app, ["convert", str(source), str(out), "--select", "HM902", "--unsafe-fixes", "-q"])
    assert fixed.exit_code == 0 and orjson.loads(out.read_bytes()) == [
        {"kind": "response", "parts": [{"part_kind": "thinking", "content": "hi"}]}
    ]


def test_a_rule_module_without_a_rule_and_a_code_defined_twice_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(histmig.rules, "__path__", [*histmig.rules.__path__, str(tmp_path)])
    (tmp_path / "hm999_empty.py").write_text("")
    registry.cache_clear()
    try:
        with pytest.raises(TypeError, match="hm999_empty defines no RULE"):
            registry()
        (tmp_path / "hm999_empty.py").write_text("from histmig.rules.hm101_tool_bound_retry import RULE\n")
        sys.modules.pop("histmig.rules.hm999_empty", None)
        with pytest.raises(ValueError, match="rule HM101 is defined twice"):
            registry()
    finally:
        sys.modules.pop("histmig.rules.hm999_empty", None)
        registry.cache_clear()


def test_every_rule_names_its_source_in_pydantic_ai_and_keeps_its_notes_for_developers() -> None:
    for rule in registry():
        assert rule.source.startswith("pydantic-ai "), rule.code
        assert "framework-facts" not in rule.source + rule.docs.what + rule.docs.why, rule.code
        assert rule.facts.startswith("docs/framework.md §"), rule.code


def test_every_rule_that_finds_says_why_its_findings_are_errors_or_warnings() -> None:
    finders = [rule for rule in registry() if rule.find is not None]
    assert [rule.code for rule in finders if not rule.docs.severity] == []
    assert {rule.code for rule in finders} >= {"HM401", "HM403", "HM405", "HM406", "HM407"}
    assert all(rule.docs.severity.startswith("Warning" if rule.severity == "warning" else "Error") for rule in finders)
