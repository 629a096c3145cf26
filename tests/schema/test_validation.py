"""Validation (histmig.schema.validation): the real path of every error inside the history, what
2.68 loads and what any release wrote."""

from __future__ import annotations

from histmig.schema import current_errors, is_current, legacy_errors

RETRY = {"part_kind": "retry-prompt", "content": "x", "tool_name": "t", "tool_call_id": None}


def test_an_error_is_named_by_its_path_inside_the_history_without_union_tags() -> None:
    history = [
        {
            "kind": "request",
            "parts": [{"part_kind": "tool-return", "tool_name": "t", "content": "c", "tool_call_id": None}],
        }
    ]
    assert current_errors(history) == ["messages[0].parts[0].tool_call_id: Input should be a valid string"]
    assert current_errors([{"kind": "request"}]) == ["messages[0].parts: Field required"]
    assert current_errors("no") == ["messages: Input should be a valid list"]


def test_legacy_shapes_are_read_but_do_not_load() -> None:
    history = [{"kind": "request", "parts": [RETRY]}]
    assert legacy_errors(history) == [] and not is_current(history) and current_errors(history) != []
    flat = [{"role": "user", "content": "hi"}]
    assert legacy_errors(flat) != [] and not is_current(flat)
    assert is_current([{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]}])
