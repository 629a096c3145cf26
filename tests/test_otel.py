"""OpenTelemetry export (histmig.otel) against the oracle, pydantic-ai-slim 2.68.0
(framework-facts §5): for every corpus history, both versions and both include_content
settings, histmig's export of the migrated history equals what the framework's
``messages_to_otel_messages`` returns for that history loaded, value for value and key order
included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.models.instrumented import InstrumentationSettings

from histmig.otel import OtelExportError, to_otel_messages, upgrade_v5_to_v6
from tests.conftest import FIXTURES, HISTORIES, converted, history_id, load

EVERY_PART = FIXTURES / "otel" / "every_part.json"
VERSIONS = (5, 6)
CONTENT = (True, False)


def framework_otel(messages: list[Any], version: int, include_content: bool) -> list[dict[str, Any]]:
    """What pydantic-ai 2.68.0 records as ``pydantic_ai.all_messages`` for ``messages``."""
    settings = InstrumentationSettings(version=version, include_content=include_content)
    return settings.messages_to_otel_messages(ModelMessagesTypeAdapter.validate_python(messages))


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
        assert roles == ["system", "user", "assistant", "tool", "user", "tool", "system", "user", "system", "user", "assistant", "user", "assistant"]
    else:
        assert roles == ["system", "user", "assistant", "user", "system", "user", "assistant", "user", "assistant"]


def test_the_differential_covers_every_part_kind() -> None:
    kinds = {p["part_kind"] for path in [*HISTORIES, EVERY_PART] for m in converted(load(path))[0] for p in m["parts"]}
    assert kinds == {
        "system-prompt", "user-prompt", "tool-return", "retry-feedback", "tool-availability-delta",
        "capability-load-delta", "model-settings-delta", "instruction-delta", "instruction-baseline",
        "compaction", "speech", "text", "thinking", "tool-call", "builtin-tool-call", "builtin-tool-return", "file",
    }


def test_version_6_moves_tool_results_and_fixed_no_output_feedback() -> None:
    messages = [
        {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "t", "args": {"a": 1}, "tool_call_id": "c1"}]},
        {
            "kind": "request",
            "parts": [
                {"part_kind": "tool-return", "tool_name": "t", "content": "Try again.", "tool_call_id": "c1", "outcome": "retried", "retry": None},
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
    errors = [{"type": "missing", "loc": ["a"], "msg": "Field required", "input": {"b": 1}, "ctx": {"k": 1}}, {"type": "extra", "loc": ["b"], "msg": "x", "input": {"b": 1}}]
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
