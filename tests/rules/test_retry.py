"""What HM101-HM103 share (histmig.rules.retry; docs/framework.md §2)."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from histmig.errors import Malformed
from histmig.rules.retry import dump_error_details
from tests.conftest import framework_dump
from tests.rules.conftest import migrate


def test_dump_error_details_matches_the_framework() -> None:
    errors = [
        {"loc": ["a"], "type": "missing", "msg": "m", "input": {"x": 1}, "ctx": {"c": 1}, "url": "u", "extra": 5},
        {"type": "missing", "loc": ["b"], "msg": "m", "input": {"x": 1}},
        {"type": "missing", "loc": ["b", "c"], "msg": "m", "input": {"x": 1}},
        {"type": "missing", "loc": [], "msg": "m", "input": {"x": 2}},
    ]
    part = {
        "part_kind": "retry-prompt",
        "content": errors,
        "tool_name": "t",
        "tool_call_id": "c",
        "timestamp": "2025-01-01T00:00:00Z",
    }
    expected = framework_dump([{"kind": "request", "parts": [part]}])[0]["parts"][0]["content"]
    assert dump_error_details(errors) == expected
    assert [list(e) for e in dump_error_details(errors)] == [list(e) for e in expected]


@pytest.mark.parametrize(
    "locs",
    [[["a"], []], [[], ["b"]], [[], []], [[], ["b", "c"], []], [[0], [], ["x"]]],
    ids=["named-then-root", "root-then-named", "root-twice", "nested-between", "index-then-root"],
)
def test_a_repeated_root_input_is_dropped_under_an_empty_loc_too(locs: list[list[object]]) -> None:
    errors = [{"type": "missing", "loc": loc, "msg": "m", "input": {"whole": "value"}} for loc in locs]
    part = {"part_kind": "retry-prompt", "content": errors, "tool_name": "t", "tool_call_id": "c"}
    expected = framework_dump([{"kind": "request", "parts": [part]}])[0]["parts"][0]["content"]
    assert dump_error_details(errors) == expected
    assert ["input" in entry for entry in expected] == [True] + [len(loc) > 1 for loc in locs[1:]]


@pytest.mark.parametrize("tool_name", ["t", None])
def test_a_content_no_release_wrote_is_malformed(tool_name: str | None) -> None:
    messages = [
        {"kind": "request", "parts": [{"content": {"a": 1}, "tool_name": tool_name, "part_kind": "retry-prompt"}]}
    ]
    with pytest.raises(Malformed, match=r"^messages\[0\]\.parts\[0\]\.content: "):
        migrate(messages)


@pytest.mark.parametrize(
    ("content", "at", "said"),
    [
        (["a", "b"], "[0]", "an error-details entry must be an object"),
        ([{"loc": 5, "msg": None}], "[0]", "an error-details entry must have 'type'"),
        ([{"type": "missing", "loc": 5, "msg": "m", "input": 1}], "[0].loc", "'loc' of an error-details entry"),
        ([{"type": "missing", "loc": ["a", None], "msg": "m"}], "[0].loc", "'loc' of an error-details entry"),
        ([{"type": "missing", "loc": [], "msg": None}], "[0].msg", "'msg' of an error-details entry must be"),
        (
            [{"type": "t", "loc": [], "msg": "m", "input": 1}, {"type": "t", "loc": [], "msg": "m", "url": 3}],
            "[1].url",
            "'url'",
        ),
    ],
)
@pytest.mark.parametrize("tool_name", ["t", None])
def test_an_error_list_the_loader_refuses_is_malformed_at_its_entry(
    content: list, at: str, said: str, tool_name: str | None
) -> None:
    part = {"content": content, "tool_name": tool_name, "tool_call_id": "c", "part_kind": "retry-prompt"}
    messages = [{"kind": "request", "parts": [part]}]
    with pytest.raises(ValidationError):  # pydantic-ai 2.68 still loads a retry-prompt: not this one
        framework_dump(messages)
    with pytest.raises(Malformed, match=rf"^messages\[0\]\.parts\[0\]\.content{re.escape(at)}: {re.escape(said)}"):
        migrate(messages)


@pytest.mark.parametrize(
    ("part", "keys"),
    [
        (
            {"content": "x", "tool_name": "t", "tool_call_id": "c", "part_kind": "retry-prompt"},
            ["content", "tool_name", "tool_call_id", "outcome", "retry", "part_kind"],
        ),
        (
            {
                "part_kind": "retry-prompt",
                "content": "x",
                "tool_name": "t",
                "tool_call_id": "c",
                "timestamp": "2025-01-01T00:00:00Z",
            },
            ["part_kind", "content", "tool_name", "tool_call_id", "timestamp", "outcome", "retry"],
        ),
        (
            {
                "tool_call_id": None,
                "content": "x",
                "part_kind": "retry-prompt",
                "tool_name": None,
                "timestamp": "2025-01-01T00:00:00Z",
            },
            ["content", "part_kind", "timestamp", "retry"],
        ),
        (
            {"retry": "stale", "content": "x", "tool_name": None, "part_kind": "retry-prompt"},
            ["content", "retry", "part_kind"],
        ),
    ],
)
def test_new_keys_go_before_a_last_part_kind_else_at_the_end(part: dict, keys: list[str]) -> None:
    messages = [{"kind": "request", "parts": [part]}]
    migrate(messages)
    assert list(messages[0]["parts"][0]) == keys
