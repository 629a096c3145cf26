"""HM301: legacy ``{"args_json": ...}`` / ``{"args_dict": ...}`` tool-call arguments are unwrapped."""

from __future__ import annotations

from typing import Any, Union

import msgspec

from histmig.rules.base import ABSENT, MISREAD, Change, Context, Docs, Message, Messages, Rule, ValueField, iter_parts
from histmig.schema.releases import BARE_ARGS, Span

_ARGS_WRAPPERS = {"args_json": str, "args_dict": dict}


class _Unwrapped(msgspec.Struct, gc=False):
    """Tool-call arguments as an object with neither wrapper key."""

    args_json: ABSENT = 0
    args_dict: ABSENT = 0


def is_args_wrapper(message: Message, part: Any) -> bool:
    """A response's tool call whose ``args`` is a one-key ``args_json`` (text) or
    ``args_dict`` (object) wrapper."""
    args = part.get("args")
    if message.get("kind") != "response" or type(args) is not dict or len(args) != 1:
        return False
    ((key, value),) = args.items()
    return isinstance(value, _ARGS_WRAPPERS.get(key, ()))


def unwrap_tool_call_args(messages: Messages, ctx: Context) -> list[Change]:
    """Replace ``args`` of ``{"args_json": "<json text>"}`` by the text and of
    ``{"args_dict": {...}}`` by the object. 0.0.13–0.0.20 wrote these wrappers; 2.68 loads
    them as a literal one-key argument object, so the call is replayed with the wrong
    arguments (docs/framework.md §3.3)."""
    changes: list[Change] = []
    for m_index, p_index, message, part in iter_parts(messages, "response"):
        if part.get("part_kind") == "tool-call" and is_args_wrapper(message, part):
            ((key, value),) = part["args"].items()
            part["args"] = value
            changes.append(Change("HM301", m_index, p_index, "tool-call", "tool-call", key, "exact"))
    return changes


RULE = Rule(
    code="HM301",
    name="args-wrapper",
    summary="tool-call args wrapped as {'args_json': ...} / {'args_dict': ...} -> the bare arguments",
    source='pydantic-ai 0.0.13-0.0.20 stored ToolCallPart.args as {"args_json": …} or {"args_dict": …}; 2.68 reads the '
    "wrapper as a literal argument",
    facts="docs/framework.md §3.3 (ToolCallPart.args, 0.0.13–0.0.20)",
    docs=Docs(
        what="Replaces a tool call's args {'args_json': '<json text>'} "
        "by the text, and {'args_dict': {...}} by the object.",
        why=(
            "0.0.13-0.0.20 wrote these wrappers; 2.68 loads them silently as a literal one-key argument object, so "
            "the call is replayed with the wrong arguments."
        ),
        safety=(
            "Safe: the wrapper is how 0.0.13-0.0.20 stored the arguments, and unwrapping it gives exactly the "
            "arguments the call was made with (the JSON text, or the object)."
        ),
        before='[{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"get_weather",'
        '"args":{"args_json":"{\\"city\\": \\"Oslo\\"}"},"tool_call_id":"call_1"}]}]',
        after='[{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"get_weather",'
        '"args":"{\\"city\\": \\"Oslo\\"}","tool_call_id":"call_1"}]}]',
    ),
    looks=(
        ValueField("args", parts="tool-call", quiet=Union[str, None, _Unwrapped], test=is_args_wrapper, settles=True),
    ),
    fix=unwrap_tool_call_args,
    phase=MISREAD,
    targets=Span(BARE_ARGS, None),
)
