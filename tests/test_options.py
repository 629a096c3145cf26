"""Options (histmig.options): the codes given, the rules and plan they make, bad values."""

from __future__ import annotations

import pytest

from histmig.options import Options, codes, default_jobs
from histmig.rules.base import Budgets
from histmig.sources.base import UsageError


def test_codes_are_given_one_by_one_or_comma_separated() -> None:
    assert codes(["HM1, hm201", " ", "HM3,"]) == ("HM1", "hm201", "HM3")


def test_the_rules_and_the_plan_follow_the_options() -> None:
    options = Options(select=("HM2,HM3",), ignore=("HM203",), unsafe_fixes=True, causes="framework", messages_field="chat")
    assert [rule.code for rule in options.rules] == ["HM201", "HM202", "HM204", "HM301", "HM302"]
    plan = options.plan(validate_all=True)
    assert (plan.rules, plan.unsafe_fixes, plan.causes, plan.messages_field, plan.validate_all) == (options.rules, True, "framework", "chat", True)
    assert Options().workers == default_jobs() and Options(jobs=3).workers == 3


@pytest.mark.parametrize(("options", "message"), [({"causes": "guessed"}, "unknown cause mode 'guessed'"), ({"jobs": 0}, "jobs must be 1 or more, not 0")])
def test_bad_values_are_usage_errors(options: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        Options(**options)


def test_an_unknown_rule_code_is_a_usage_error_when_the_rules_are_asked_for() -> None:
    options = Options(ignore=("HM999",))
    with pytest.raises(UsageError, match="unknown rule code 'HM999'"):
        options.rules


def test_attempts_counting_and_budgets_reach_the_rules_context() -> None:
    context = Options(attempts=True, counting="1.0.18", max_retries="tools=2, output=1, tool:a=b=4").plan().context
    assert (context.counting, context.budgets) == ("1.0.18", Budgets(2, 1, (("a=b", 4),)))
    assert Options(attempts=True).plan().context.budgets == Budgets() and not Budgets()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"counting": "writer"}, "--counting and --max-retries need --attempts"),
        ({"max_retries": "tools=1"}, "--counting and --max-retries need --attempts"),
        ({"attempts": True, "counting": "latest"}, "--counting must be current, writer or a release such as 1.0.18, not 'latest'"),
        ({"attempts": True, "max_retries": "tools=x"}, "--max-retries: 'tools=x' is not tools=N, output=N or tool:NAME=N"),
        ({"attempts": True, "max_retries": "retries=1"}, "--max-retries: 'retries=1' is not"),
        ({"attempts": True, "max_retries": "tool:=1"}, "--max-retries: 'tool:=1' is not"),
    ],
)
def test_bad_attempt_options_are_usage_errors(options: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        Options(**options)


def test_an_opt_in_rule_selected_without_its_option_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="rule HM104 runs only with --attempts"):
        Options(select=("HM104",)).rules
