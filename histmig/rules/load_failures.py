"""HM2xx: what makes a stored history fail to load in pydantic-ai 2.68 (framework-facts §2,
"Load failures a migrator must pre-empt", and §3.3).

Each rule repairs one cause of failure deterministically: nothing comes from the clock or a
random generator, and a derived value says how it was derived in the change's evidence.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Any

from histmig.rules.base import Change, Context, Messages, iter_parts, register

_ID_PARTS = ("tool-call", "tool-return")



def lacks_error_input(message: dict[str, Any], part: dict[str, Any]) -> bool:
    """HM203's test: a request's retry part with an error-details entry without ``input``."""
    content = part.get("content")
    return (
        message.get("kind") == "request"
        and type(content) is list
        and any(isinstance(detail, dict) and "input" not in detail for detail in content)
    )


def has_null_timestamp(message: dict[str, Any], part: dict[str, Any]) -> bool:
    """HM202's part test: ``"timestamp": null`` on a part of a request (or of any message that
    is not a response), or on a response's ``builtin-tool-return``."""
    return part.get("timestamp", 0) is None and (message.get("kind") != "response" or part.get("part_kind") == "builtin-tool-return")


def derived_tool_call_id(m_index: int, p_index: int, tool_name: Any) -> str:
    """A deterministic ``tool_call_id`` for the call at ``messages[m_index].parts[p_index]``:
    ``'pyd_ai_'`` + 32 hex digits of a SHA-256 of the position and tool name, the same shape
    the framework generates from 0.0.45 (framework-facts §3.3), but reproducible."""
    digest = hashlib.sha256(f"histmig:{m_index}:{p_index}:{tool_name}".encode()).hexdigest()
    return "pyd_ai_" + digest[:32]


def needs_id(part: dict[str, Any]) -> bool:
    """HM201's test: a ``tool-call`` / ``tool-return`` with ``"tool_call_id": null``, or a
    tool-bound ``retry-prompt`` whose ``tool_call_id`` is null or missing."""
    kind = part.get("part_kind")
    if kind == "retry-prompt":
        return part.get("tool_name") is not None and part.get("tool_call_id") is None
    return kind in _ID_PARTS and "tool_call_id" in part and part["tool_call_id"] is None


@register(
    "HM201",
    "null tool_call_id on tool-call / tool-return, null or missing on tool-bound retry-prompt -> paired, derived id",
    "framework-facts §2 (load failures), §3.3 (ids nullable in 0.0.13–0.0.44)",
)
def derive_tool_call_ids(messages: Messages, ctx: Context) -> list[Change]:
    """Give every ``null``-id ``tool-call`` a derived id (:func:`derived_tool_call_id`), then
    give each ``null``-id ``tool-return`` and id-less tool-bound ``retry-prompt`` the id of
    the earliest call of the same ``tool_name`` before it that no result has answered yet
    (0.0.x answered calls in order). A result with no such call gets an id derived from its
    own position. 2.68 rejects ``null`` ids and replaces absent ones with random ids, which
    orphans the result (framework-facts §2)."""
    changes: list[Change] = []
    unanswered: dict[Any, list[str]] = defaultdict(list)
    for m_index, p_index, _, part in iter_parts(messages):
        kind = part.get("part_kind", "")
        name = part.get("tool_name")
        if not needs_id(part):
            if kind == "tool-call" and isinstance(part.get("tool_call_id"), str):
                unanswered[name].append(part["tool_call_id"])
            elif kind in ("tool-return", "retry-prompt") and part.get("tool_call_id") in unanswered[name]:
                unanswered[name].remove(part["tool_call_id"])
            continue
        if kind == "tool-call":
            new_id, evidence = derived_tool_call_id(m_index, p_index, name), "position"
            unanswered[name].append(new_id)
        elif unanswered[name]:
            new_id, evidence = unanswered[name].pop(0), "paired-call"
        else:
            new_id, evidence = derived_tool_call_id(m_index, p_index, name), "position:no-call"
        part["tool_call_id"] = new_id
        changes.append(Change("HM201", m_index, p_index, kind, kind, evidence, "derived"))
    return changes


@register(
    "HM202",
    "null timestamp on a request part or a response -> field removed (never the clock)",
    "framework-facts §2 (load failures)",
)
def drop_null_timestamps(messages: Messages, ctx: Context) -> list[Change]:
    """Remove ``"timestamp": null`` where 2.68 rejects it: on request parts, on
    ``builtin-tool-return`` parts and on responses. An absent timestamp loads (the framework
    then uses the load time; histmig never writes one). ``ModelRequest.timestamp`` may be
    ``null`` and is left alone."""
    changes: list[Change] = []
    for m_index, message in enumerate(messages):
        if isinstance(message, dict) and message.get("kind") == "response" and _pop_null(message, "timestamp"):
            changes.append(Change("HM202", m_index, None, "response", "response", "null-timestamp", "exact"))
    for m_index, p_index, message, part in iter_parts(messages):
        if has_null_timestamp(message, part):
            del part["timestamp"]
            kind = part.get("part_kind", "")
            changes.append(Change("HM202", m_index, p_index, kind, kind, "null-timestamp", "exact"))
    return changes


def _pop_null(obj: dict[str, Any], key: str) -> bool:
    if key in obj and obj[key] is None:
        del obj[key]
        return True
    return False


def _insert_input(detail: dict[str, Any]) -> dict[str, Any]:
    """``detail`` with ``"input": null`` placed after ``msg`` (``ErrorDetails`` order)."""
    rebuilt: dict[str, Any] = {}
    for key, value in detail.items():
        rebuilt[key] = value
        if key == "msg":
            rebuilt["input"] = None
    rebuilt.setdefault("input", None)
    return rebuilt


@register(
    "HM203",
    "error details without 'input' in a retry part -> \"input\": null",
    "framework-facts §2 (load failures), bug case BC3",
)
def add_missing_error_input(messages: Messages, ctx: Context) -> list[Change]:
    """Give every error-details entry of a ``retry-prompt`` or ``retry-feedback`` list content
    that lacks ``input`` an ``"input": null``. 2.68 requires ``input`` (framework-facts §2)
    though validators that drop inputs made the framework write such parts itself."""
    changes: list[Change] = []
    for m_index, p_index, message, part in iter_parts(messages, "request"):
        if part.get("part_kind") not in ("retry-prompt", "retry-feedback") or not lacks_error_input(message, part):
            continue
        content = part["content"]
        missing = [i for i, d in enumerate(content) if isinstance(d, dict) and "input" not in d]
        for i in missing:
            content[i] = _insert_input(content[i])
        if missing:
            kind = part["part_kind"]
            changes.append(Change("HM203", m_index, p_index, kind, kind, f"missing-input:{len(missing)}", "shape"))
    return changes


_INSTRUCTION_KEYS = {"part_kind", "content"}
_INSTRUCTION_DEFAULTS = {"dynamic": False, "on_change": "rewrite", "name": None, "id": None}
"""The defaults of 2.68's ``InstructionPart`` fields besides ``content``: a part whose fields
all hold these (or null) says nothing ``instructions`` cannot."""


@register(
    "HM204",
    "'instruction' part inside a request's parts -> text moved to the request's instructions",
    "framework-facts §3.1 (request part tags), bug case BC5",
)
def move_instruction_parts(messages: Messages, ctx: Context) -> list[Change]:
    """Move each ``{"part_kind": "instruction", "content": str}`` out of a request's
    ``parts`` into its ``instructions`` (joined to existing text with a blank line, in
    order), also in the shape 2.68 dumps it (``dynamic: false``, ``on_change: "rewrite"``,
    ``name``/``id`` null). 2.68 dumps such parts but cannot load them (``'instruction'`` is
    not a request-part tag). A part carrying any other value (a dynamic or named part, a
    field no release wrote) is left for validation to report, so nothing is lost."""
    changes: list[Change] = []
    for m_index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("kind") != "request" or not isinstance(message.get("parts"), list):
            continue
        kept: list[Any] = []
        texts: list[str] = []
        for p_index, part in enumerate(message["parts"]):
            if is_movable_instruction(part):
                texts.append(part["content"])
                changes.append(Change("HM204", m_index, p_index, "instruction", "instructions", "instruction-part", "exact"))
            else:
                kept.append(part)
        if texts:
            existing = message.get("instructions")
            message["parts"] = kept
            message["instructions"] = "\n\n".join([existing, *texts] if isinstance(existing, str) and existing else texts)
    return changes


def is_movable_instruction(part: Any) -> bool:
    """HM204's test: an ``instruction`` part with text content and every other field absent,
    null or at 2.68's default (``dynamic: false``, ``on_change: "rewrite"``)."""
    return (
        isinstance(part, dict)
        and part.get("part_kind") == "instruction"
        and isinstance(part.get("content"), str)
        and all(value is None or value == _INSTRUCTION_DEFAULTS.get(key, None) for key, value in part.items() if key not in _INSTRUCTION_KEYS)
    )
