"""Options (histmig.options): every option declared once, the sets derived from the declarations, the
codes given, the rules and plan they make, bad values."""

from __future__ import annotations

import inspect
import re

import pytest

from histmig import api
from histmig.errors import UsageError
from histmig.options import (
    COMMANDS,
    FIELDS,
    RECORD_OPTIONS,
    OptionRow,
    Options,
    codes,
    default_jobs,
    flags,
    flags_of,
    given,
    option_table,
)
from histmig.rules.base import Budgets
from histmig.sources import formats


def test_codes_are_given_one_by_one_or_comma_separated() -> None:
    assert codes(["HM1, hm201", " ", "HM3,"]) == ("HM1", "hm201", "HM3")


def test_the_rules_and_the_plan_follow_the_options() -> None:
    options = Options(
        select=("HM2,HM3",), ignore=("HM203",), unsafe_fixes=True, causes="framework", messages_field="chat"
    )
    assert [rule.code for rule in options.rules] == ["HM201", "HM202", "HM204", "HM301", "HM302"]
    plan = options.plan(validate_all=True)
    assert (plan.rules, plan.unsafe_fixes, plan.causes, plan.messages_field, plan.validate_all) == (
        options.rules,
        True,
        "framework",
        "chat",
        True,
    )
    assert Options().workers == default_jobs() and Options(jobs=3).workers == 3


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"causes": "guessed"}, "unknown cause mode 'guessed'"),
        ({"jobs": 0}, "jobs must be 1 or more, not 0"),
        ({"messages_field": "payload..messages"}, "names an empty key"),
        ({"messages_field": 'chat."messages"'}, "a key holding a backslash, a double quote or a control character"),
        ({"messages_field": "chat\\\\log"}, "a key holding a backslash"),
    ],
)
def test_bad_values_are_usage_errors(options: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        Options(**options)


def test_an_unknown_rule_code_is_a_usage_error_when_the_rules_are_asked_for() -> None:
    options = Options(ignore=("HM999",))
    with pytest.raises(UsageError, match="unknown rule code 'HM999'"):
        options.rules


def test_a_target_picks_the_rules_that_run_for_it_and_reaches_the_plan() -> None:
    pairing = ["HM401", "HM402", "HM403", "HM404", "HM405", "HM406", "HM407"]
    assert [rule.code for rule in Options(target="2.59.0").rules] == [
        "HM201",
        "HM202",
        "HM203",
        "HM204",
        "HM301",
        "HM302",
        *pairing,
        "HM501",
        "HM502",
        "HM503",
    ]
    assert [
        rule.code for rule in Options(target="2.9.0").rules if rule.code.startswith("HM4")
    ] == []  # pairing from 2.10.0
    assert [rule.code for rule in Options(target="0.0.20").rules] == [
        "HM202",
        "HM203",
        "HM501",
        "HM502",
        "HM503",
        "HM506",
    ]
    plan = Options(target="v2.0.0").plan(validate_all=True, readers=True)
    assert (str(plan.target), plan.context.target, plan.readers, plan.validates_unchanged) == (
        "2.0.0",
        plan.target,
        True,
        True,
    )
    assert Options(target="2.68.0").rules == Options().rules and Options().plan().validates_unchanged is False


@pytest.mark.parametrize(
    ("target", "message"),
    [("2.59", "'2.59' is not a release"), ("3.0.0", "histmig knows releases 0.0.13 to 2.68.0, not 3.0.0")],
)
def test_a_target_that_is_no_release_histmig_knows_is_a_usage_error(target: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        Options(target=target)


def test_selecting_rules_that_do_not_run_for_the_target_is_a_usage_error() -> None:
    with pytest.raises(
        UsageError, match=r"HM501 runs only for a --target before 2.60.0, not 2.68.0 \(see `histmig rules HM501`\)"
    ):
        Options(select=("HM501",)).rules
    with pytest.raises(UsageError, match=r"no HM1 rule runs for a --target 2.0.0 \(see `histmig rules HM1`\)"):
        Options(select=("HM1",), target="2.0.0").rules
    assert [rule.code for rule in Options(select=("HM5",), target="2.0.0").rules] == [
        "HM501",
        "HM502",
        "HM503",
        "HM504",
        "HM505",
    ]


def test_attempts_counting_and_budgets_reach_the_rules_context() -> None:
    context = Options(attempts=True, counting="1.0.18", max_retries="tools=2, output=1, tool:a=b=4").plan().context
    assert (context.counting, context.budgets) == ("1.0.18", Budgets(2, 1, (("a=b", 4),)))
    assert Options(attempts=True).plan().context.budgets == Budgets() and not Budgets()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"counting": "writer"}, "--counting and --max-retries need --attempts"),
        ({"max_retries": "tools=1"}, "--counting and --max-retries need --attempts"),
        (
            {"attempts": True, "counting": "latest"},
            "--counting must be current, writer or a release such as 1.0.18, not 'latest'",
        ),
        (
            {"attempts": True, "max_retries": "tools=x"},
            "--max-retries: 'tools=x' is not tools=N, output=N or tool:NAME=N",
        ),
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


def test_every_option_is_declared_once_for_each_command_that_takes_it() -> None:
    for command in COMMANDS:
        names = [flag.name for flag in flags_of(command)]
        assert len(names) == len(set(names)), command
    by_flag = {(flag.flag, command) for flag in flags() for command in flag.commands}
    assert len(by_flag) == sum(len(flag.commands) for flag in flags())
    key = next(flag for flag in flags() if flag.flag == "--key-column")
    assert (key.name, key.formats, key.commands, key.default) == (
        "key_column",
        frozenset({"postgres", "sqlite"}),
        frozenset({"convert", "audit", "check"}),
        None,
    )
    assert [flag.flag for flag in flags() if flag.name == "target"] == ["--target", "--reader"]
    assert {flag.name for flag in flags()} >= FIELDS and all(
        flag.formats is None or flag.formats <= set(formats()) for flag in flags()
    )


def test_the_spark_option_set_is_the_options_about_records() -> None:
    assert RECORD_OPTIONS == {
        "select",
        "ignore",
        "unsafe_fixes",
        "causes",
        "messages_field",
        "target",
        "attempts",
        "counting",
        "max_retries",
    }


def test_each_parameter_is_a_keyword_of_the_api_function_of_each_command_that_takes_it() -> None:
    rendered = {"report_format", "quiet", "report_detail", "no_timestamp"}  # the command line renders the report
    for command in COMMANDS:
        function = getattr(api, command.replace("-", "_"))
        keywords = set(inspect.signature(function).parameters)
        for flag in flags_of(command):
            if flag.name not in FIELDS and flag.name not in rendered:
                assert flag.name in keywords, (command, flag.flag)


def test_the_option_table_gives_flag_help_commands_and_formats() -> None:
    table = option_table()
    assert len(table) == len(flags())
    row = next(row for row in table if row.flag == "--single-transaction")
    assert row == OptionRow(
        "--single-transaction",
        "",
        "PostgreSQL --in-place: the whole table in one transaction (all or nothing) instead of one a page of rows.",
        ("convert", "audit", "check"),
        ("postgres",),
    )
    jobs = next(row for row in table if row.flag.startswith("--jobs"))
    assert (jobs.flag, jobs.metavar, jobs.formats) == ("--jobs, -j", "N", ())
    engine = next(row for row in table if row.flag == "--engine")
    assert "pip install 'histmig[spark]'" in engine.help and engine.commands == ("convert",)
    assert [row.commands for row in table if row.flag == "--rejects"] == [
        ("convert", "otel", "otel-upgrade", "from-otel")
    ]
    assert [row.commands for row in table if row.flag == "--runs"] == [("from-otel",)]


def test_an_option_is_given_when_it_is_not_its_default() -> None:
    select, overwrite = (next(flag for flag in flags() if flag.name == name) for name in ("select", "overwrite"))
    assert (given(select, ()), given(select, None), given(select, ("HM1",))) == (False, False, True)
    assert (given(overwrite, False), given(overwrite, True)) == (False, True)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"order": "seq"}, "--order and --max-conversation-bytes need --conversation"),
        ({"max_conversation_bytes": 10}, "--order and --max-conversation-bytes need --conversation"),
        (
            {"conversation": ("*", "session_id")},
            "--conversation '*' (the whole input is one conversation) takes no other key",
        ),
        ({"conversation": ("a..b",)}, "--conversation/--order 'a..b': names an empty key"),
        ({"conversation": ("",)}, "--conversation '': names an empty key"),
        ({"conversation": ("a,,b",)}, "--conversation 'a,,b': names an empty key"),
        ({"conversation": ("a", " ")}, "--conversation ' ': names an empty key"),
        ({"conversation": ("s",), "max_conversation_bytes": 0}, "--max-conversation-bytes must be 1 or more, not 0"),
    ],
)
def test_bad_conversation_options_are_usage_errors(options: dict, message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        Options(**options)


def test_conversation_keys_are_given_one_by_one_or_comma_separated() -> None:
    grouping = Options(conversation=("tenant, session_id", "payload.thread"), order="seq").grouping
    assert grouping is not None
    assert (grouping.keys, grouping.order, grouping.limit) == (
        ("tenant", "session_id", "payload.thread"),
        "seq",
        64 << 20,
    )
    assert grouping.paths == (("tenant",), ("session_id",), ("payload", "thread"))
    assert Options(conversation=("*",)).grouping.whole  # type: ignore[union-attr]
    assert Options().grouping is None
