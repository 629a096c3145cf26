"""The cause catalogue, entry by entry (docs/framework.md §1)."""

from __future__ import annotations

import pytest

from histmig.rules.causes import CATALOGUE, NO_OUTPUT_TEXTS, framework_cause, infer_cause, unknown_tool_name

TOOL_BOUND = [
    ("Unknown tool name: 'get_wether'. Available tools: get_weather", "unknown_tool", "unknown-tool"),
    ("Unknown tool name: 'x'. Available tools: 'a', 'b'", "unknown_tool", "unknown-tool"),
    ("Unknown tool name: 'x'. No tools available.", "unknown_tool", "unknown-tool"),
    (
        "Unknown tool name: 'x'. No tools are available yet: search for the tools you need.",
        "unknown_tool",
        "unknown-tool",
    ),
    (
        "Tool 'deploy' is not available yet: it belongs to capability 'ops'. Call `load_capability` for it first, "
        "then call the tool again once you've read the capability's instructions.",
        "unavailable_tool",
        "unavailable-tool:capability",
    ),
    (
        "Tool 'deploy' is not available yet: search for it first, then call it again once you've seen its schema.",
        "unavailable_tool",
        "unavailable-tool:deferred",
    ),
    ("Timed out after 5 seconds.", "model_retry", "tool-timeout"),
    ("Timed out after 0.5 seconds.", "model_retry", "tool-timeout"),
    ("Please provide search keywords.", "model_retry", "search-tools:keywords"),
    ("Please provide at least one non-empty search query.", "model_retry", "search-tools:query"),
    ("No capability found with id 'ops'.", "model_retry", "load-capability:unknown"),
    (
        "Capability 'ops' is already available. Use its existing instructions and tools; do not call "
        "`load_capability` for it again.",
        "model_retry",
        "load-capability:already-loaded",
    ),
    (
        "Capability 'ops' is already active. Use its existing instructions and any tools it provides; do not "
        "call `load_capability` for it again.",
        "model_retry",
        "load-capability:already-loaded",
    ),
    (
        "Capability 'ops' is already being loaded by an earlier `load_capability` call in this response; do not "
        "call `load_capability` for it again.",
        "model_retry",
        "load-capability:being-loaded",
    ),
    ("MCP tool call failed", "model_retry", "mcp:call-failed"),
    ("Tool 'search' returned an error", "model_retry", "mcp:returned-error"),
    ("Failed to fetch https://x.invalid/: 404", "model_retry", "web-fetch"),
    (
        '1 validation error:\n```json\n[{"type":"missing"}]\n```\n\nFix the errors and try again.',
        "validation_error",
        "rendered:validation-errors",
    ),
    ("city not found\n\nFix the errors and try again.", "model_retry", "rendered:retry"),
    ("City not found, use the full name.", "model_retry", "free-text"),
]

TOOL_LESS = [
    *[(text, "no_output", "no-output:please") for text in sorted(NO_OUTPUT_TEXTS)],
    (
        "Plain text responses are not permitted, please call one of the functions instead.",
        "no_output",
        "no-output:plain-text-functions",
    ),
    (
        "Plain text responses are not permitted, please include your response in a tool call",
        "no_output",
        "no-output:plain-text-tool-call",
    ),
    ("Responses without text or tool calls are not permitted.", "no_output", "no-output:no-text-or-tool-calls"),
    ("Invalid kind: banana", "model_retry", "invalid-kind"),
    ("Unknown tool name: 'x'. Available tools: add", "model_retry", "free-text"),
    ("Answer in a full sentence.", "model_retry", "free-text"),
]


@pytest.mark.parametrize(("text", "cause", "evidence"), TOOL_BOUND)
def test_tool_bound_texts(text: str, cause: str, evidence: str) -> None:
    verdict = infer_cause(text, tool_bound=True)
    assert (verdict.cause, verdict.evidence) == (cause, evidence)


@pytest.mark.parametrize(("text", "cause", "evidence"), TOOL_LESS)
def test_tool_less_texts(text: str, cause: str, evidence: str) -> None:
    verdict = infer_cause(text, tool_bound=False)
    assert (verdict.cause, verdict.evidence) == (cause, evidence)


def test_a_no_output_text_answering_a_tool_is_free_text() -> None:
    assert infer_cause("Please return text.", tool_bound=True).cause == "model_retry"


EXACT = {entry.name: entry.binding for entry in CATALOGUE if entry.certainty == "exact"}


@pytest.mark.parametrize(
    ("text", "evidence"),
    [(text, evidence) for text, _, evidence in TOOL_BOUND + TOOL_LESS if evidence in EXACT]
    + [(text, "no-output:please") for text in sorted(NO_OUTPUT_TEXTS)],
)
def test_an_exact_text_followed_by_more_words_is_free_text(text: str, evidence: str) -> None:
    tool_bound = EXACT[evidence] == "tool-bound"
    assert infer_cause(text, tool_bound=tool_bound).evidence == evidence
    for more in (" Mention the city.", "\nMention the city.", "!"):
        assert infer_cause(text + more, tool_bound=tool_bound) == ("model_retry", "free-text", "default")


def test_an_error_list_is_validation_error_by_shape() -> None:
    verdict = infer_cause([{"type": "missing", "loc": [], "msg": "m", "input": 1}], tool_bound=False)
    assert (verdict.cause, verdict.evidence, verdict.certainty) == ("validation_error", "error-list", "shape")


def test_every_catalogue_entry_is_exercised() -> None:
    named = {evidence for *_, evidence in TOOL_BOUND + TOOL_LESS}
    assert {entry.name for entry in CATALOGUE} <= named


@pytest.mark.parametrize(
    ("content", "tool_bound", "cause"),
    [
        ("x", True, None),
        ("Please return text.", False, "model_retry"),
        ([{}], True, "validation_error"),
        ([{}], False, "validation_error"),
    ],
)
def test_framework_causes_are_the_loaders(content: object, tool_bound: bool, cause: str | None) -> None:
    assert framework_cause(content, tool_bound=tool_bound).cause == cause


def test_unknown_tool_name() -> None:
    assert unknown_tool_name("Unknown tool name: 'get_wether'. Available tools: get_weather") == "get_wether"
    assert unknown_tool_name("Unknown tool: 'x'") is None
    assert unknown_tool_name(["not", "text"]) is None
