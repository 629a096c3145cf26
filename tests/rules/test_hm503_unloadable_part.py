"""HM503 (framework-facts §3.2)."""

from __future__ import annotations

from histmig.api import migrate
from histmig.options import Options

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
