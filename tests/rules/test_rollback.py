"""What the rollback rules share (histmig.rules.rollback)."""

from __future__ import annotations

from histmig.rules.rollback import ABSENT, evidence, lost, to_retry_prompt, tool_less_id
from histmig.schema.releases import release


def test_a_retry_prompt_has_the_keys_every_release_wrote_in_their_order() -> None:
    part = {
        "part_kind": "retry-feedback",
        "extra": 1,
        "retry": {"cause": "model_retry"},
        "content": "x",
        "timestamp": "t",
    }
    assert list(to_retry_prompt(part, "messages[0].parts[0]", None, None).items()) == [
        ("content", "x"),
        ("tool_name", None),
        ("tool_call_id", None),
        ("timestamp", "t"),
        ("part_kind", "retry-prompt"),
        ("extra", 1),
    ]
    assert list(to_retry_prompt({"content": "x"}, "here", "t", ABSENT)) == ["content", "tool_name", "part_kind"]


def test_what_is_lost_is_named_with_the_values_of_few_kinds() -> None:
    part = {
        "retry": {"cause": "model_retry", "attempt": 2, "max_retries": None},
        "tool_kind": None,
        "metadata": {"a": 1},
        "tool_name": "t",
    }
    assert lost(part, "tool_name") == {
        "retry.cause": "model_retry",
        "retry.attempt": 2,
        "metadata": {"a": 1},
        "tool_name": "t",
    }
    assert (
        evidence(lost(part, "tool_name"), "note")
        == "lost retry.cause='model_retry', retry.attempt, metadata, tool_name; note"
    )
    assert evidence({}) == "nothing lost"


def test_a_tool_less_retry_has_a_null_id_before_0_0_45_and_a_derived_one_after() -> None:
    assert tool_less_id(release("0.0.44"), "k", 3, 1) is None
    assert (
        tool_less_id(release("0.0.45"), "k", 3, 1)
        == tool_less_id(release("2.59.0"), "k", 3, 1)
        != tool_less_id(release("2.59.0"), "k", 3, 2)
        != tool_less_id(release("2.59.0"), "j", 3, 2)
    )
