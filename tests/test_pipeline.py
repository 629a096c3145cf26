"""The pipeline's fast path: :func:`histmig.pipeline.clean` says a history needs no rule only
when no rule changes it."""

from __future__ import annotations

import pytest

from histmig.pipeline import clean
from tests.conftest import HISTORIES, converted, load

CALL = {"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": "c"}


@pytest.mark.parametrize(
    "history",
    [
        [{"kind": "request", "parts": [{"part_kind": "retry-prompt", "content": "x"}]}],
        [{"kind": "request", "parts": [{"part_kind": "instruction", "content": "x"}]}],
        [{"kind": "request", "parts": [{"part_kind": "retry-feedback", "content": [], "retry": {"cause": "validation_error"}}]}],
        [{"kind": "response", "parts": [{**CALL, "tool_call_id": None}]}],
        [{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "x", "timestamp": None}]}],
        [{"kind": "response", "parts": [], "timestamp": None}],
        [{"kind": "response", "parts": [{**CALL, "args": {"args_json": "{}"}}]}],
        [{"kind": "response", "parts": [], "provider_request_id": "r"}],
        [{"kind": "request", "parts": "oops"}],
        ["not a message"],
    ],
    ids=["retry-prompt", "instruction", "feedback-list", "null-id", "null-part-timestamp", "null-response-timestamp", "args-wrapper", "provider-request-id", "parts-not-a-list", "message-not-an-object"],
)
def test_every_shape_a_rule_targets_is_not_clean(history: list) -> None:
    assert not clean(history)


def test_a_clean_corpus_history_is_one_no_rule_changes() -> None:
    clean_ones = [path for path in HISTORIES if clean(load(path))]
    unchanged = [path for path in HISTORIES if converted(load(path))[1] == []]
    assert set(clean_ones) <= set(unchanged)
    assert (len(clean_ones), len(unchanged)) == (68, 74)
