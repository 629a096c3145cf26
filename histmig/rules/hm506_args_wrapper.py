"""HM506: for a target before 0.0.21, tool-call arguments are wrapped as
``{"args_json": ...}`` / ``{"args_dict": ...}``, as those releases stored them."""

from __future__ import annotations

from typing import Any

import msgspec

from histmig.rules.base import ROLLBACK, Change, Context, Docs, Message, Messages, Rule, ValueField, iter_parts
from histmig.rules.rollback import evidence
from histmig.schema.releases import BARE_ARGS, OLDEST, Span


class _ArgsJson(msgspec.Struct, gc=False):
    """Tool-call arguments already wrapped as ``{"args_json": str}`` (the screen's quiet type;
    an ``args_dict`` wrapper goes the full way, where the rule's test passes it)."""

    args_json: str


def is_bare_args(message: Message, part: Any) -> bool:
    """A response's tool call whose ``args`` is not a ``{"args_json": str}`` /
    ``{"args_dict": object}`` wrapper: a JSON text, another object, or null."""
    args = part.get("args")
    return message.get("kind") == "response" and not (
        isinstance(args, dict) and (isinstance(args.get("args_json"), str) or isinstance(args.get("args_dict"), dict))
    )


def wrap_tool_call_args(messages: Messages, ctx: Context) -> list[Change]:
    """Wrap every response ``tool-call``'s bare ``args`` as 0.0.13-0.0.20 stored them
    (docs/framework.md §3.3): a JSON text as ``{"args_json": text}``, an object as
    ``{"args_dict": object}``, null as ``{"args_dict": {}}`` (no arguments; those releases
    had no null). The reverse of HM301."""
    changes: list[Change] = []
    for m_index, p_index, message, part in iter_parts(messages, "response"):
        if part.get("part_kind") != "tool-call" or "args" not in part or not is_bare_args(message, part):
            continue
        args = part["args"]
        key = "args_json" if isinstance(args, str) else "args_dict"
        part["args"] = {key: {} if args is None else args}
        changes.append(
            Change("HM506", m_index, p_index, "tool-call", "tool-call", evidence({}, f"wrapped as {key}"), "exact")
        )
    return changes


RULE = Rule(
    code="HM506",
    name="args-wrapper-back",
    summary="(--target before 0.0.21) bare tool-call args -> {'args_json': ...} / {'args_dict': ...}",
    source="pydantic-ai 0.0.13-0.0.20 ToolCallPart.args (pydantic_ai/messages.py): the ArgsJson and ArgsDict wrappers",
    facts="docs/framework.md §3.3 (ToolCallPart.args, 0.0.13-0.0.20)",
    docs=Docs(
        what=(
            "For a --target before 0.0.21, wraps a tool call's args as those releases stored them: a JSON text as "
            "{'args_json': text}, an object as {'args_dict': object}, null as {'args_dict': {}}. The reverse of HM301."
        ),
        why="0.0.13-0.0.20 read args only as one of the two wrappers: "
        "bare arguments fail the load of the whole history.",
        safety=("Safe: the reverse of HM301: the arguments are wrapped as 0.0.13-0.0.20 stored them, value for value."),
        before='[{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"get_weather","args":{"city":"Oslo"},'
        '"tool_call_id":null}]}]',
        after='[{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"get_weather",'
        '"args":{"args_dict":{"city":"Oslo"}},"tool_call_id":null}]}]',
        target="0.0.20",
    ),
    looks=(ValueField("args", parts="tool-call", message="response", quiet=_ArgsJson, test=is_bare_args),),
    fix=wrap_tool_call_args,
    phase=ROLLBACK,
    targets=Span(OLDEST, BARE_ARGS),
)
