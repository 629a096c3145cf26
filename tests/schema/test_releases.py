"""The catalogue of the schema history (histmig.schema.releases): releases and their order,
spans of releases, the part kinds each release writes, and what each feature of a history
tells (tests/acceptance/test_releases.py holds it to the real releases)."""

from __future__ import annotations

from typing import Any

import pytest

from histmig.schema import REQUEST_PART_KINDS, RESPONSE_PART_KINDS
from histmig.schema.releases import (
    EVERY,
    NEWEST,
    OLDEST,
    Release,
    Span,
    before,
    but,
    describe,
    from_pairs,
    includes,
    intersect,
    load_errors,
    newer_kinds,
    readers,
    release,
    since,
    written_kinds,
)

RETRIED = {"part_kind": "tool-return", "tool_name": "t", "content": "x", "tool_call_id": "c", "outcome": "retried"}


def test_releases_are_read_and_ordered_as_versions() -> None:
    assert release("2.59.0") == Release(2, 59, 0) and release(" v1.107.10") == Release(1, 107, 10)
    assert release("1.107.10") < release("2.0.0") < release("2.10.0") < release("2.59.0")
    assert str(release("0.0.20")) == "0.0.20"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2.59", "'2.59' is not a release"),
        ("latest", "'latest' is not a release"),
        ("0.0.12", "not 0.0.12"),
        ("2.69.0", "not 2.69.0"),
    ],
)
def test_what_is_no_release_histmig_knows_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        release(text)


def test_spans_intersect_and_say_themselves_in_words() -> None:
    retried = but(Release(1, 67, 0), Release(2, 60, 0))
    assert intersect(retried, since(Release(0, 0, 21))) == (
        Span(Release(0, 0, 21), Release(1, 67, 0)),
        Span(Release(2, 60, 0), None),
    )
    assert intersect(before(Release(0, 0, 45)), since(Release(0, 0, 45))) == ()
    assert [includes(retried, release(name)) for name in ("0.4.11", "1.107.10", "2.59.0", "2.60.0")] == [
        True,
        False,
        False,
        True,
    ]
    assert describe(retried) == "before 1.67.0 and from 2.60.0"
    assert (describe(EVERY), describe(()), describe((Span(Release(0, 7, 3), Release(0, 8, 1)),))) == (
        "every release",
        "no release",
        "0.7.3 to before 0.8.1",
    )
    assert from_pairs([["0.0.21", "1.67.0"], ["2.60.0", None]]) == intersect(retried, since(Release(0, 0, 21)))


def test_the_newest_release_writes_the_kinds_of_the_current_schema() -> None:
    assert (
        written_kinds(NEWEST, "request") == REQUEST_PART_KINDS
        and written_kinds(NEWEST, "response") == RESPONSE_PART_KINDS
    )
    assert "retry-prompt" in written_kinds(release("2.59.0"), "request") and "retry-feedback" not in written_kinds(
        release("2.59.0"), "request"
    )
    assert written_kinds(OLDEST, "request") | written_kinds(OLDEST, "response") == {
        "system-prompt",
        "user-prompt",
        "tool-return",
        "retry-prompt",
        "text",
        "tool-call",
    }
    assert newer_kinds("response") == {
        "thinking",
        "builtin-tool-call",
        "builtin-tool-return",
        "file",
        "compaction",
        "speech",
    }


def test_a_history_is_loaded_by_the_releases_all_its_features_are() -> None:
    history = [
        {
            "kind": "response",
            "parts": [
                {"part_kind": "thinking", "content": "x"},
                {"part_kind": "tool-call", "tool_name": "t", "args": "{}", "tool_call_id": "c"},
            ],
        },
        {"kind": "request", "parts": [RETRIED]},
    ]
    assert readers(history) == (Span(Release(0, 3, 0), Release(1, 67, 0)), Span(Release(2, 60, 0), None))
    assert load_errors(history, release("2.0.0")) == [
        "messages[1].parts[0].outcome: 2.0.0 cannot load outcome 'retried' (loaded before 1.67.0 and from 2.60.0)"
    ]
    assert load_errors(history, release("0.2.0")) == [
        "messages[0].parts[0].part_kind: 0.2.0 cannot load a 'thinking' part (loaded from 0.3.0)"
    ]
    assert readers([{"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]}]) == EVERY


@pytest.mark.parametrize(
    ("part", "loaded"),
    [
        ({"part_kind": "tool-call", "tool_name": "t", "args": {"args_json": "{}"}}, "every release"),
        ({"part_kind": "tool-call", "tool_name": "t", "args": {"a": 1}}, "from 0.0.21"),
        ({"part_kind": "tool-call", "tool_name": "t", "args": None}, "from 0.2.7"),
        ({"part_kind": "tool-call", "tool_name": "t", "args": {}, "tool_call_id": None}, "0.0.21 to before 0.0.45"),
        ({"part_kind": "tool-call", "tool_name": "t", "args": [1]}, "every release"),
        ({"part_kind": "text", "content": "x", "tool_call_id": None}, "every release"),
    ],
)
def test_response_part_features(part: dict, loaded: str) -> None:
    """(A list as arguments loads in no release, which the legacy schema tells: the catalogue
    tells only what differs by release.)"""
    assert describe(readers([{"kind": "response", "parts": [part]}])) == loaded


@pytest.mark.parametrize(
    ("message", "loaded"),
    [
        (
            {"kind": "request", "parts": [{"part_kind": "retry-prompt", "content": "x", "tool_call_id": None}]},
            "before 0.0.45",
        ),
        (
            {"kind": "request", "parts": [{"part_kind": "system-prompt", "content": "x", "timestamp": None}]},
            "before 0.0.43",
        ),
        ({"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "x", "timestamp": None}]}, "no release"),
        ({"kind": "request", "parts": [{"part_kind": "user-prompt", "content": ["x"]}]}, "from 0.0.26"),
        (
            {
                "kind": "request",
                "parts": [{"part_kind": "retry-feedback", "content": [{"type": "t", "loc": [], "msg": "m"}]}],
            },
            "no release",
        ),
        ({"kind": "request", "parts": [{"part_kind": "instruction", "content": "x"}]}, "no release"),
        ({"kind": "request", "parts": [{**RETRIED, "outcome": "interrupted"}]}, "before 1.67.0 and from 2.10.0"),
        ({"kind": "request", "parts": [], "state": "interrupted"}, "every release"),
        ({"kind": "request", "parts": [], "state": "paused"}, "before 2.0.0"),
        ({"kind": "response", "parts": [], "state": "suspended"}, "before 1.92.0 and from 2.10.0"),
        ({"kind": "response", "parts": [], "state": "incomplete"}, "before 1.92.0 and from 1.97.0"),
        ({"kind": "response", "parts": [], "state": ["not", "a", "state"]}, "before 1.92.0"),
        ({"kind": "response", "parts": [], "finish_reason": "paused"}, "before 1.0.2"),
        ({"kind": "response", "parts": [], "timestamp": None}, "no release"),
    ],
)
def test_message_and_request_part_features(message: dict, loaded: str) -> None:
    assert describe(readers([message])) == loaded


def test_entries_that_are_no_messages_are_passed_over() -> None:
    assert readers(["no", {"kind": "request", "parts": "no"}, {"kind": "request", "parts": ["no"]}]) == EVERY


@pytest.mark.parametrize(
    ("part_kind", "kind"), [({}, "request"), ([], "request"), ("user-prompt", {}), ("user-prompt", [1])]
)
def test_a_part_kind_or_message_kind_that_is_no_text_is_told_as_any_unknown_one(part_kind: Any, kind: Any) -> None:
    """An object or a list where a kind is (unhashable) is told as an unknown text kind is: a part
    of no kind passed over, a message of no kind loaded by no release."""
    told = readers([{"kind": kind, "parts": [{"part_kind": part_kind, "content": "hi"}]}])
    unknown = readers(
        [
            {
                "kind": "request" if kind == "request" else "chat",
                "parts": [{"part_kind": part_kind if isinstance(part_kind, str) else None, "content": "hi"}],
            }
        ]
    )
    assert told == unknown == (EVERY if kind == "request" else ())
