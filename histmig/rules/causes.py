"""The cause catalogue: every fixed text the framework wrote into a retry-prompt part.

Each entry maps a framework string (an exact text or an f-string template) to the
``RetryInfo.cause`` the newest framework records natively for the same event
(docs/framework.md §1; 2.60.0+ agent loop). :func:`infer_cause` walks the catalogue, then
falls back to the content shape (an error list is ``validation_error``, §1.5) and finally
to the default (free text is ``model_retry``, §1.5).

:func:`framework_cause` instead reproduces what pydantic-ai 2.68's loader writes
(``_translate_legacy_retry_part``, docs/framework.md §2), for ``--causes framework``.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from histmig.rules.base import Certainty

Binding = Literal["tool-bound", "tool-less"]


@dataclass(frozen=True)
class Entry:
    """One catalogue entry.

    ``name`` is the evidence label reported with every change it decides; ``binding`` says
    whether the framework wrote the text with ``tool_name`` set; ``pattern`` matches the
    whole content; ``certainty`` is ``exact`` for fixed strings and ``template`` for
    f-strings; ``releases`` and ``section`` say where the text comes from.
    """

    name: str
    binding: Binding
    cause: str
    certainty: Certainty
    pattern: re.Pattern[str]
    releases: str
    section: str


class Verdict(NamedTuple):
    """The cause chosen for one retry-prompt part and why: ``cause`` (``None`` only in
    framework mode for a tool-bound string, as the loader writes ``retry: null``), the
    ``evidence`` label and its ``certainty``."""

    cause: str | None
    evidence: str
    certainty: Certainty


def _exact(text: str) -> re.Pattern[str]:
    return re.compile(re.escape(text) + r"\Z", re.DOTALL)


def _template(regex: str) -> re.Pattern[str]:
    return re.compile(regex + r"\Z", re.DOTALL)


_NAME = r"'[^'\\]*'"
"""A tool or capability name as ``{name!r}`` renders a plain identifier."""

_NO_OUTPUT_SLOTS: tuple[tuple[str, ...], ...] = (
    ("return text",),
    ("include your response in a tool call", "call a tool"),
    ("return an image",),
)


def no_output_texts() -> frozenset[str]:
    """The 12 ``'Please …'`` texts of the no-output template, 1.0.15–2.68.0 (docs/framework.md
    §1.1; the same set as 2.68's ``_NO_OUTPUT_FEEDBACK_TEXTS``): every choice of at most one
    alternative per slot, joined by ``' or '``."""
    texts = set()
    for choice in itertools.product(*[(None, *slot) for slot in _NO_OUTPUT_SLOTS]):
        texts.add("Please " + " or ".join(a for a in choice if a is not None) + ".")
    return frozenset(texts)


NO_OUTPUT_TEXTS = no_output_texts()

_UNKNOWN_TOOL = (
    rf"Unknown tool name: (?P<name>{_NAME})\. "
    r"(?:Available tools: .*|No tools available\.|No tools are available yet: search for the tools you need\.)"
)
UNKNOWN_TOOL = re.compile(_UNKNOWN_TOOL + r"\Z", re.DOTALL)
"""``f'Unknown tool name: {name!r}. {msg}'`` (docs/framework.md §1.2); group ``name`` is the
quoted invented name."""

_ALREADY = (
    r" Use its existing instructions and (?:any tools it provides|tools); do not call `load_capability` for it again\."
)

CATALOGUE: tuple[Entry, ...] = (
    *(
        Entry("no-output:please", "tool-less", "no_output", "exact", _exact(text), "1.0.15–2.59.0", "§1.1")
        for text in sorted(NO_OUTPUT_TEXTS)
    ),
    Entry(
        "no-output:plain-text-functions",
        "tool-less",
        "no_output",
        "exact",
        _exact("Plain text responses are not permitted, please call one of the functions instead."),
        "0.0.1–0.0.55",
        "§1.1",
    ),
    Entry(
        "no-output:plain-text-tool-call",
        "tool-less",
        "no_output",
        "exact",
        _exact("Plain text responses are not permitted, please include your response in a tool call"),
        "0.1.0–1.0.14",
        "§1.1",
    ),
    Entry(
        "no-output:no-text-or-tool-calls",
        "tool-less",
        "no_output",
        "exact",
        _exact("Responses without text or tool calls are not permitted."),
        "0.7.2–1.0.14",
        "§1.1",
    ),
    Entry("unknown-tool", "tool-bound", "unknown_tool", "template", UNKNOWN_TOOL, "0.0.47–2.59.0", "§1.2"),
    Entry(
        "unavailable-tool:capability",
        "tool-bound",
        "unavailable_tool",
        "template",
        _template(
            rf"Tool {_NAME} is not available yet: it belongs to capability {_NAME}\. Call `load_capability` for it "
            r"first, then call the tool again once you've read the capability's instructions\."
        ),
        "2.30.0–2.59.0",
        "§1.3",
    ),
    Entry(
        "unavailable-tool:deferred",
        "tool-bound",
        "unavailable_tool",
        "template",
        _template(
            rf"Tool {_NAME} is not available yet: search for it first, then call it again once you've seen its schema\."
        ),
        "2.30.0–2.59.0",
        "§1.3",
    ),
    Entry(
        "tool-timeout",
        "tool-bound",
        "model_retry",
        "template",
        _template(r"Timed out after \S+ seconds\."),
        "1.32.0–2.59.0",
        "§1.4",
    ),
    Entry(
        "search-tools:keywords",
        "tool-bound",
        "model_retry",
        "exact",
        _exact("Please provide search keywords."),
        "1.77.0–1.94.0",
        "§1.4",
    ),
    Entry(
        "search-tools:query",
        "tool-bound",
        "model_retry",
        "exact",
        _exact("Please provide at least one non-empty search query."),
        "1.95.0–2.59.0",
        "§1.4",
    ),
    Entry(
        "load-capability:unknown",
        "tool-bound",
        "model_retry",
        "template",
        _template(rf"No capability found with id {_NAME}\."),
        "1.105.0–2.59.0",
        "§1.4",
    ),
    Entry(
        "load-capability:already-loaded",
        "tool-bound",
        "model_retry",
        "template",
        _template(rf"Capability {_NAME} is already (?:available|active)\." + _ALREADY),
        "1.105.0–2.59.0",
        "§1.4",
    ),
    Entry(
        "load-capability:being-loaded",
        "tool-bound",
        "model_retry",
        "template",
        _template(
            rf"Capability {_NAME} is already being loaded by an earlier `load_capability` call in this response; "
            r"do not call `load_capability` for it again\."
        ),
        "2.54.0–2.59.0",
        "§1.4",
    ),
    Entry(
        "mcp:call-failed",
        "tool-bound",
        "model_retry",
        "exact",
        _exact("MCP tool call failed"),
        "1.0.12–1.107.10",
        "§1.4",
    ),
    Entry(
        "mcp:returned-error",
        "tool-bound",
        "model_retry",
        "template",
        _template(rf"Tool {_NAME} returned an error"),
        "2.16.0–2.59.0",
        "§1.4",
    ),
    Entry(
        "web-fetch",
        "tool-bound",
        "model_retry",
        "template",
        _template(r"Failed to (?:fetch|decode|convert) \S+: .+"),
        "1.77.0–2.59.0",
        "§1.4",
    ),
    Entry(
        "rendered:validation-errors",
        "tool-bound",
        "validation_error",
        "template",
        _template(r"\d+ validation errors?:.*\n\nFix the errors and try again\."),
        "1.9.0–1.66.0 (Vercel AI UI round-trip)",
        "§1.5",
    ),
    Entry(
        "rendered:retry",
        "tool-bound",
        "model_retry",
        "template",
        _template(r".*\n\nFix the errors and try again\."),
        "1.9.0–1.66.0 (Vercel AI UI round-trip)",
        "§1.5",
    ),
    Entry(
        "invalid-kind", "tool-less", "model_retry", "template", _template(r"Invalid kind: .*"), "0.3.3–1.87.0", "§1.5"
    ),
)


_NAMED_GROUP = re.compile(r"\(\?P<\w+>")


def _matcher(binding: Binding) -> tuple[re.Pattern[str], tuple[Entry, ...]]:
    """The entries of ``binding`` in catalogue order and one regex that tries them all in
    that order: entry ``i``'s pattern is capturing group ``i + 1``, its own groups made
    non-capturing, so ``match.lastindex`` names the first entry that matches."""
    entries = tuple(entry for entry in CATALOGUE if entry.binding == binding)
    regex = "|".join(f"({_NAMED_GROUP.sub('(?:', entry.pattern.pattern)})" for entry in entries)
    return re.compile(regex, re.DOTALL), entries


_MATCHERS = {binding: _matcher(binding) for binding in ("tool-bound", "tool-less")}


def infer_cause(content: Any, *, tool_bound: bool) -> Verdict:
    """The cause of a legacy retry-prompt part, from evidence (docs/framework.md §1).

    ``content`` is the stored ``content`` (a string or a list of error details);
    ``tool_bound`` is whether ``tool_name`` was set (§2: non-null, ``''`` included). A list
    is ``validation_error`` (shape, §1.5); a string is looked up in :data:`CATALOGUE` among
    the entries of its binding; any other string is ``model_retry`` (default, §1.5: a
    ``ModelRetry`` raised by user code). Never raises.
    """
    if not isinstance(content, str):
        return Verdict("validation_error", "error-list", "shape")
    matcher, entries = _MATCHERS["tool-bound" if tool_bound else "tool-less"]
    match = matcher.match(content)
    if match is None:
        return Verdict("model_retry", "free-text", "default")
    entry = entries[match.lastindex - 1]  # type: ignore[operator]  # each alternative is a group: one matched
    return Verdict(entry.cause, entry.name, entry.certainty)


def framework_cause(content: Any, *, tool_bound: bool) -> Verdict:
    """The ``retry`` pydantic-ai 2.68's loader writes for a legacy part (docs/framework.md §2):
    a tool-bound string gets no cause (``retry: null``), a tool-less string ``model_retry``,
    any list ``validation_error``."""
    if not isinstance(content, str):
        return Verdict("validation_error", "loader:error-list", "shape")
    if tool_bound:
        return Verdict(None, "loader:tool-bound-text", "shape")
    return Verdict("model_retry", "loader:tool-less-text", "shape")


def unknown_tool_name(content: Any) -> str | None:
    """The invented tool name of an ``'Unknown tool name: …'`` text (§1.2), unquoted, or
    ``None`` when ``content`` is not that text."""
    if not isinstance(content, str):
        return None
    match = UNKNOWN_TOOL.match(content)
    return match["name"][1:-1] if match else None
