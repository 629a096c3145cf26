"""OpenTelemetry export (histmig.otel) against the oracle, pydantic-ai-slim 2.68.0
(docs/framework.md §5): for every corpus history, both versions and both include_content
settings, histmig's export of the migrated history equals what the framework's
``messages_to_otel_messages`` returns for that history loaded, value for value and key order
included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from histmig.errors import OtelExportError
from histmig.otel import to_otel_messages, upgrade_v5_to_v6
from tests.conftest import FIXTURES, HISTORIES, converted, history_id, load
from tests.otel.conftest import framework_otel, tcr, text

EVERY_PART = FIXTURES / "otel" / "every_part.json"
VERSIONS = (5, 6)
CONTENT = (True, False)


def assert_same_export(messages: list[Any], version: int, include_content: bool) -> list[dict[str, Any]]:
    ours = to_otel_messages(messages, version=version, include_content=include_content)
    theirs = framework_otel(messages, version, include_content)
    assert ours == theirs
    assert orjson.dumps(ours) == orjson.dumps(theirs)  # key order too
    return ours


@pytest.mark.parametrize("include_content", CONTENT, ids=["content", "no-content"])
@pytest.mark.parametrize("version", VERSIONS, ids=["v5", "v6"])
@pytest.mark.parametrize("path", HISTORIES, ids=history_id)
def test_corpus_export_matches_the_framework(path: Path, version: int, include_content: bool) -> None:
    messages, _ = converted(load(path))
    exported = assert_same_export(messages, version, include_content)
    assert exported, "every corpus history has at least one message"


@pytest.mark.parametrize("include_content", CONTENT, ids=["content", "no-content"])
@pytest.mark.parametrize("version", VERSIONS, ids=["v5", "v6"])
def test_every_part_kind_matches_the_framework(version: int, include_content: bool) -> None:
    messages = load(EVERY_PART)
    exported = assert_same_export(messages, version, include_content)
    roles = [m["role"] for m in exported]
    if version == 6:
        assert roles == [
            "system",
            "user",
            "assistant",
            "tool",
            "user",
            "tool",
            "system",
            "user",
            "system",
            "user",
            "assistant",
            "user",
            "assistant",
        ]
    else:
        assert roles == ["system", "user", "assistant", "user", "system", "user", "assistant", "user", "assistant"]


def test_the_differential_covers_every_part_kind() -> None:
    kinds = {p["part_kind"] for path in [*HISTORIES, EVERY_PART] for m in converted(load(path))[0] for p in m["parts"]}
    assert kinds == {
        "system-prompt",
        "user-prompt",
        "tool-return",
        "retry-feedback",
        "tool-availability-delta",
        "capability-load-delta",
        "model-settings-delta",
        "instruction-delta",
        "instruction-baseline",
        "compaction",
        "speech",
        "text",
        "thinking",
        "tool-call",
        "builtin-tool-call",
        "builtin-tool-return",
        "file",
    }


def test_version_6_moves_tool_results_and_fixed_no_output_feedback() -> None:
    messages = [
        {
            "kind": "response",
            "parts": [{"part_kind": "tool-call", "tool_name": "t", "args": {"a": 1}, "tool_call_id": "c1"}],
        },
        {
            "kind": "request",
            "parts": [
                {
                    "part_kind": "tool-return",
                    "tool_name": "t",
                    "content": "Try again.",
                    "tool_call_id": "c1",
                    "outcome": "retried",
                    "retry": None,
                },
                {"part_kind": "retry-feedback", "content": "Please call a tool.", "retry": {"cause": "no_output"}},
                {"part_kind": "user-prompt", "content": "hi"},
            ],
        },
    ]
    v5 = to_otel_messages(messages, version=5, include_content=True)
    v6 = to_otel_messages(messages, version=6, include_content=True)
    assert [m["role"] for m in v5] == ["assistant", "user"]
    assert v5[1]["parts"] == [
        {"type": "tool_call_response", "id": "c1", "name": "t", "result": "Try again."},
        {"type": "text", "content": "Please call a tool."},
        {"type": "text", "content": "hi"},
    ]
    assert [(m["role"], len(m["parts"])) for m in v6] == [("assistant", 1), ("tool", 1), ("system", 1), ("user", 1)]
    assert v6 == framework_otel(messages, 6, True)


def test_retry_feedback_is_fenced_unless_it_is_fixed_no_output_text() -> None:
    framing = "Your previous response failed the application's validation (this is automated feedback, not a message from the user):"
    errors = [
        {"type": "missing", "loc": ["a"], "msg": "Field required", "input": {"b": 1}, "ctx": {"k": 1}},
        {"type": "extra", "loc": ["b"], "msg": "x", "input": {"b": 1}},
    ]
    messages = [
        {
            "kind": "request",
            "parts": [
                {"part_kind": "retry-feedback", "content": errors, "retry": {"cause": "validation_error"}},
                {"part_kind": "retry-feedback", "content": "Please call a tool.", "retry": {"cause": "model_retry"}},
                {"part_kind": "retry-feedback", "content": "Please call a tool.", "retry": {"cause": "no_output"}},
            ],
        }
    ]
    texts = [p["content"] for m in to_otel_messages(messages, version=5, include_content=True) for p in m["parts"]]
    assert texts == [
        f'{framing}\n<pyai:validation_errors>\n[{{"type":"missing","loc":["a"],"msg":"Field required","input":{{"b":1}}}},{{"type":"extra","loc":["b"],"msg":"x"}}]\n</pyai:validation_errors>',
        f"{framing}\n<pyai:retry_feedback>\nPlease call a tool.\n</pyai:retry_feedback>",
        "Please call a tool.",
    ]
    assert_same_export(messages, 5, True)


def test_a_legacy_part_must_be_migrated_first() -> None:
    messages = [{"kind": "request", "parts": [{"part_kind": "retry-prompt", "content": "x", "tool_name": None}]}]
    with pytest.raises(OtelExportError, match=r"messages\[0\]\.parts\[0\]: legacy retry-prompt"):
        to_otel_messages(messages, version=6, include_content=True)


def test_a_tool_part_without_an_id_is_not_given_a_random_one() -> None:
    messages = [{"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "t", "args": None}]}]
    with pytest.raises(OtelExportError, match="without a tool_call_id"):
        to_otel_messages(messages, version=6, include_content=True)


def test_only_versions_5_and_6() -> None:
    with pytest.raises(ValueError, match="must be one of"):
        to_otel_messages([], version=4, include_content=True)


def test_the_input_history_is_not_modified() -> None:
    messages, _ = converted(load(EVERY_PART))
    before = orjson.dumps(messages)
    to_otel_messages(messages, version=6, include_content=True)
    assert orjson.dumps(messages) == before


# --- otel-upgrade: version 5 roles -> version 6 roles ---------------------------------------


def test_upgrade_splits_a_user_message_in_order() -> None:
    v5 = [
        {"role": "system", "parts": [text("s")]},
        {"role": "user", "parts": [tcr("a"), tcr("b"), text("u1"), tcr("c"), text("u2")]},
        {"role": "assistant", "parts": [text("r")], "finish_reason": "stop"},
    ]
    assert upgrade_v5_to_v6(v5) == [
        {"role": "system", "parts": [text("s")]},
        {"role": "tool", "parts": [tcr("a"), tcr("b")]},
        {"role": "user", "parts": [text("u1")]},
        {"role": "tool", "parts": [tcr("c")]},
        {"role": "user", "parts": [text("u2")]},
        {"role": "assistant", "parts": [text("r")], "finish_reason": "stop"},
    ]


def test_upgrade_is_idempotent_and_leaves_everything_else_alone() -> None:
    v5 = [
        {"role": "user", "parts": [text("only text")], "x-note": 1},
        {"role": "user", "parts": [tcr("a")], "x-note": 2},
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "a", "name": "t"}]},
        {"role": "tool", "parts": [tcr("b")]},
    ]
    once = upgrade_v5_to_v6(v5)
    assert once[0] is v5[0] and once[2] is v5[2] and once[3] is v5[3]
    assert once[1] == {"role": "tool", "parts": [tcr("a")], "x-note": 2}
    assert upgrade_v5_to_v6(once) == once
    assert v5[1] == {"role": "user", "parts": [tcr("a")], "x-note": 2}  # input not modified


def test_upgrade_rejects_what_is_not_an_otel_array() -> None:
    with pytest.raises(ValueError, match=r"otel_messages\[0\]"):
        upgrade_v5_to_v6([{"kind": "request", "parts": []}])


def has_fixed_no_output_feedback(messages: list[Any]) -> bool:
    return any(
        p.get("part_kind") == "retry-feedback"
        and p["retry"]["cause"] == "no_output"
        and p["content"].startswith("Please ")
        for m in messages
        for p in m["parts"]
    )


def test_upgrading_the_version_5_export_gives_the_version_6_export() -> None:
    """Across the corpus, upgrade(v5 export) == v6 export, with and without content, except
    for histories holding fixed no-output feedback, which v5 cannot tell from user text."""
    exact = skipped = 0
    for path in HISTORIES:
        messages, _ = converted(load(path))
        for include_content in CONTENT:
            v5 = to_otel_messages(messages, version=5, include_content=include_content)
            v6 = to_otel_messages(messages, version=6, include_content=include_content)
            if has_fixed_no_output_feedback(messages):
                assert upgrade_v5_to_v6(v5) != v6
                skipped += 1
            else:
                assert upgrade_v5_to_v6(v5) == v6
                exact += 1
    assert (exact, skipped) == (380, 44)


def test_fixed_no_output_feedback_stays_user_when_upgraded() -> None:
    messages = [
        {
            "kind": "request",
            "parts": [
                {"part_kind": "retry-feedback", "content": "Please return text.", "retry": {"cause": "no_output"}}
            ],
        }
    ]
    v5 = to_otel_messages(messages, version=5, include_content=True)
    assert upgrade_v5_to_v6(v5) == [{"role": "user", "parts": [text("Please return text.")]}]
    assert to_otel_messages(messages, version=6, include_content=True) == [
        {"role": "system", "parts": [text("Please return text.")]}
    ]


# --- the commands -----------------------------------------------------------------------------


def test_a_url_item_in_a_tool_result_that_2_68_would_rebuild_is_refused() -> None:
    part = {
        "part_kind": "tool-return",
        "tool_name": "t",
        "content": [{"kind": "image-url", "url": "https://e.invalid/x.png"}],
        "tool_call_id": "c1",
    }
    with pytest.raises(OtelExportError, match=r"messages\[0\]\.parts\[0\]\.content: a image-url item in a tool result"):
        to_otel_messages([{"kind": "request", "parts": [part]}], version=6, include_content=True)
    assert to_otel_messages([{"kind": "request", "parts": [part]}], version=6, include_content=False) == [
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "name": "t"}]}
    ]
