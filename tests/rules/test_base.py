"""The rule model (histmig.rules.base): where looks are, the types the screen and the settled
check decode a looked-at field as, a rule's findings."""

from __future__ import annotations

from typing import Optional, Union

import msgspec
import pytest

from histmig.rules.base import (
    ABSENT,
    ANY_PART,
    NOT_NULL,
    AbsentField,
    Budgets,
    Change,
    Context,
    Docs,
    Finding,
    NullField,
    PartKind,
    Rule,
    ValueField,
    always,
    is_json,
)


@pytest.mark.parametrize(
    ("look", "place", "covered"),
    [
        (PartKind("retry-prompt", message="request"), ("request", "retry-prompt"), True),
        (PartKind("retry-prompt", message="request"), ("response", "retry-prompt"), False),
        (PartKind(("a", "b")), ("response", "b"), True),
        (NullField("timestamp", parts=ANY_PART), ("request", "anything"), True),
        (NullField("timestamp", parts=ANY_PART), ("request", None), False),
        (NullField("timestamp", message="response"), ("response", None), True),
        (NullField("timestamp", message="response"), ("response", "text"), False),
    ],
)
def test_a_look_covers_its_places(look, place: tuple, covered: bool) -> None:
    assert look.covers(*place) is covered


def test_the_quiet_and_settled_types_of_each_look() -> None:
    null = NullField("tool_call_id", parts="tool-call")
    assert (
        null.quiet_type(),
        null.settled_type(None),
        null.settled_type(Optional[str]),
        null.settled_type(Union[int, str, None]),
    ) == (str, NOT_NULL, str, Union[int, str])
    absent = AbsentField("provider_request_id", message="response")
    assert (absent.quiet_type(), absent.settled_type(str)) == (ABSENT, ABSENT)
    value = ValueField("args", quiet=Union[str, None], test=always)
    assert (
        value.quiet_type(),
        value.settled_type(int),
        ValueField("args", quiet=str, test=always, settles=True).settled_type(int),
    ) == (Union[str, None], int, str)
    assert msgspec.json.decode(b"{}", type=msgspec.defstruct("S", [("x", ABSENT, 0)])).x == 0
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b'{"x": 1}', type=msgspec.defstruct("S", [("x", ABSENT, 0)]))


def test_a_rules_check_is_its_fix_on_a_copy() -> None:
    def fix(messages: list, ctx: Context) -> list[Change]:
        messages.append({"kind": "request", "parts": []})
        return [Change("HM999", 1, None, "x", "y", "e", "exact")]

    rule = Rule("HM999", "t", "s", "tests", Docs("", "", "[]", "[]"), (), fix, "unsafe")
    history: list = []
    assert [(f.code, f.message, f.part, f.text) for f in rule.check(history, Context())] == [
        ("HM999", 1, None, "x -> y")
    ]
    assert history == [] and rule.order == (40, "HM999")


def test_a_rule_that_only_reports_finds_with_its_severity() -> None:
    def find(messages: list, ctx: Context) -> list[Finding]:
        return [Finding("HM998", 0, 0, "there", "e", "exact")]

    rule = Rule("HM998", "t", "s", "tests", Docs("", "", "[]"), (), find=find, severity="warning")
    assert [(f.code, f.severity) for f in rule.check([], Context())] == [("HM998", "warning")]
    with pytest.raises(TypeError, match="rule HM997 needs a fix or a find"):
        Rule("HM997", "t", "s", "tests", Docs("", "", "[]"), ())


def test_a_fix_may_say_what_it_leaves_as_it_is_and_check_keeps_it() -> None:
    left = Finding("HM999", 0, 0, "cannot be known", "why", "derived")

    def fix(messages: list, ctx: Context) -> list:
        return [Change("HM999", 1, None, "x", "y", "e", "exact"), left]

    rule = Rule("HM999", "t", "s", "tests", Docs("", "", "[]", "[]"), (), fix)
    assert rule.check([], Context()) == [Finding("HM999", 1, None, "x -> y", "e", "exact"), left]
    assert rule.opt_in is None


def test_budgets_parse_from_the_command_line_form() -> None:
    assert Budgets.parse("tools=3,output=1,tool:search=5,tool:fetch=0") == Budgets(3, 1, (("fetch", 0), ("search", 5)))
    assert Budgets.parse("output=0").output == 0 and bool(Budgets.parse("output=0"))
    assert Budgets.parse("tool:tools=1,tools=2") == Budgets(2, by_tool=(("tools", 1),))
    assert Budgets(3, by_tool=(("a", 1),)).of_tool("a", 3) == 1 and Budgets(3).of_tool("b", 3) == 3
    for twice, key in (("tools=1,tools=2", "tools"), ("output=1, output=1", "output"), ("tool:a=1,tool:a=2", "tool:a")):
        with pytest.raises(ValueError, match=f"--max-retries: {key} is given twice"):
            Budgets.parse(twice)
    for bad in ("", "tools", "tools=-1", "tools=1.5", "tool:=2", "retries=1", "tools=1,,output=2"):
        with pytest.raises(ValueError, match="--max-retries: .* is not tools=N, output=N or tool:NAME=N"):
            Budgets.parse(bad)


@pytest.mark.parametrize(
    ("text", "json"),
    [
        ('{"q": 1}', True),
        (b"[1, 2]", True),
        ('"x"', True),
        ('{"q": "cut mid-str', False),
        (b"", False),
        ("{nope", False),
    ],
)
def test_is_json_tells_one_json_value_from_text_that_is_not(text: str | bytes, json: bool) -> None:
    assert is_json(text) is json
