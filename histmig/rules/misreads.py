"""HM3xx: what pydantic-ai 2.68 loads but silently misreads or drops (framework-facts §3.3)."""

from __future__ import annotations

from typing import Any

from histmig.rules.base import Change, Context, Messages, iter_parts, register

_ARGS_WRAPPERS = {"args_json": str, "args_dict": dict}


def is_args_wrapper(message: dict[str, Any], part: dict[str, Any]) -> bool:
    """HM301's test: a response's tool call whose ``args`` is a one-key ``args_json`` (text)
    or ``args_dict`` (object) wrapper."""
    args = part.get("args")
    if message.get("kind") != "response" or type(args) is not dict or len(args) != 1:
        return False
    (key, value), = args.items()
    return isinstance(value, _ARGS_WRAPPERS.get(key, ()))


def has_provider_request_id(message: dict[str, Any]) -> bool:
    """HM302's test: a response with ``provider_request_id`` and no ``provider_response_id``."""
    return message.get("kind") == "response" and "provider_request_id" in message and message.get("provider_response_id") is None


@register(
    "HM301",
    "tool-call args wrapped as {'args_json': ...} / {'args_dict': ...} -> the bare arguments",
    "framework-facts §3.3 (ToolCallPart.args, 0.0.13–0.0.20)",
)
def unwrap_tool_call_args(messages: Messages, ctx: Context) -> list[Change]:
    """Replace ``args`` of ``{"args_json": "<json text>"}`` by the text and of
    ``{"args_dict": {...}}`` by the object. 0.0.13–0.0.20 wrote these wrappers; 2.68 loads
    them as a literal one-key argument object, so the call is replayed with the wrong
    arguments."""
    changes: list[Change] = []
    for m_index, p_index, message, part in iter_parts(messages, "response"):
        if part.get("part_kind") == "tool-call" and is_args_wrapper(message, part):
            (key, value), = part["args"].items()
            part["args"] = value
            changes.append(Change("HM301", m_index, p_index, "tool-call", "tool-call", key, "exact"))
    return changes


def _rename_key(obj: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    return {(new if key == old else key): value for key, value in obj.items()}


@register(
    "HM302",
    "response provider_request_id -> provider_response_id",
    "framework-facts §3.3 (0.7.3–0.8.0 wrote provider_request_id; 2.68 has no alias for it)",
)
def rename_provider_request_id(messages: Messages, ctx: Context) -> list[Change]:
    """Rename a response's ``provider_request_id`` to ``provider_response_id`` in place, when
    the latter is absent or ``null``. 0.8.1 renamed the field without a load alias, so 2.68
    drops the value (framework-facts §3.3)."""
    changes: list[Change] = []
    for m_index, message in enumerate(messages):
        if not isinstance(message, dict) or not has_provider_request_id(message):
            continue
        message.pop("provider_response_id", None)
        messages[m_index] = _rename_key(message, "provider_request_id", "provider_response_id")
        changes.append(Change("HM302", m_index, None, "provider_request_id", "provider_response_id", "field-rename", "exact"))
    return changes
