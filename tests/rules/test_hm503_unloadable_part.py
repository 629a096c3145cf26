"""HM503 (docs/framework.md §3.2)."""

from __future__ import annotations

from histmig.options import Options
from histmig.rules.base import Change, Finding
from tests.rules.conftest import check_found, check_noop, check_transformed, migrate

PROMPT = {"part_kind": "user-prompt", "content": "hi"}
LOST_SPEECH = "lost the part (2.0.0 cannot load it: loaded from 2.28.0)"

SPEECH = {"part_kind": "speech", "speaker": "user", "transcript": "hi"}
DELTA = {"part_kind": "tool-availability-delta", "tools_added": ["search"]}


def test_hm503_removes_the_parts_the_target_cannot_load_only_with_unsafe_fixes() -> None:
    messages = [
        {"kind": "request", "parts": [SPEECH, DELTA, {"part_kind": "user-prompt", "content": "hi"}]},
        {"kind": "response", "parts": [SPEECH]},
    ]
    assert migrate(messages, Options(target="2.0.0")) == [] and len(messages[0]["parts"]) == 3
    changes = migrate(messages, Options(target="2.0.0", unsafe_fixes=True))
    assert [(c.message, c.part, c.before, c.after, c.evidence) for c in changes] == [
        (0, 0, "speech", "removed", "lost the part (2.0.0 cannot load it: loaded from 2.28.0)"),
        (0, 1, "tool-availability-delta", "removed", "lost the part (2.0.0 cannot load it: loaded from 2.23.0)"),
        (1, 0, "speech", "removed", "lost the part (2.0.0 cannot load it: loaded from 2.28.0)"),
    ]
    assert messages == [
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "hi"}]},
        {"kind": "response", "parts": []},
    ]


def test_hm503_keeps_what_the_target_loads_and_leaves_retry_feedback_to_hm502() -> None:
    feedback = {"part_kind": "retry-feedback", "content": "x", "retry": {"cause": "model_retry"}}
    messages = [
        {"kind": "request", "parts": [SPEECH, DELTA, feedback, {"part_kind": "compaction", "content": "s"}]},
        {"kind": "response", "parts": [{"part_kind": "compaction", "content": "s"}]},
    ]
    changes = migrate(messages, Options(select=("HM503",), target="2.59.0", unsafe_fixes=True))
    assert [(c.message, c.part, c.before) for c in changes] == [(0, 3, "compaction")]
    assert messages[0]["parts"] == [SPEECH, DELTA, feedback] and len(messages[1]["parts"]) == 1


def test_hm503_reports_a_part_the_target_cannot_load_without_unsafe_fixes() -> None:
    check_found(
        "HM503",
        [{"kind": "request", "parts": [PROMPT, SPEECH]}],
        [Finding("HM503", 0, 1, "speech -> removed", LOST_SPEECH, "exact")],
        target="2.0.0",
    )


def test_hm503_removes_it_with_unsafe_fixes() -> None:
    check_transformed(
        "HM503",
        [{"kind": "request", "parts": [PROMPT, SPEECH]}],
        [{"kind": "request", "parts": [PROMPT]}],
        [Change("HM503", 0, 1, "speech", "removed", LOST_SPEECH, "exact")],
        target="2.0.0",
        unsafe_fixes=True,
    )


def test_hm503_removes_a_response_part_too() -> None:
    text = {"part_kind": "text", "content": "hello"}
    check_transformed(
        "HM503",
        [{"kind": "request", "parts": [PROMPT]}, {"kind": "response", "parts": [SPEECH, text]}],
        [{"kind": "request", "parts": [PROMPT]}, {"kind": "response", "parts": [text]}],
        [Change("HM503", 1, 0, "speech", "removed", LOST_SPEECH, "exact")],
        target="2.0.0",
        unsafe_fixes=True,
    )


def test_hm503_leaves_a_part_the_target_loads_alone() -> None:
    check_noop("HM503", [{"kind": "request", "parts": [PROMPT, SPEECH]}], target="2.28.0", unsafe_fixes=True)


def test_hm503_leaves_the_parts_every_release_loads_alone() -> None:
    check_noop(
        "HM503",
        [
            {"kind": "request", "parts": [PROMPT]},
            {"kind": "response", "parts": [{"part_kind": "text", "content": "x"}]},
        ],
        target="0.0.20",
        unsafe_fixes=True,
    )


def test_hm503_leaves_an_unknown_part_kind_alone() -> None:
    check_noop(
        "HM503",
        [{"kind": "request", "parts": [PROMPT, {"part_kind": "hologram", "x": 1}]}],
        target="2.0.0",
        unsafe_fixes=True,
    )
