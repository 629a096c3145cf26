"""HM202: a ``"timestamp": null`` 2.68 refuses is removed (never filled from the clock)."""

from __future__ import annotations

from typing import Any

from histmig.rules.base import ANY_PART, REPAIR, Change, Context, Docs, Message, Messages, NullField, Rule, iter_parts


def has_null_timestamp(message: Message, part: Any) -> bool:
    """``"timestamp": null`` on a part of a request (or of any message that is not a
    response), or on a response's ``builtin-tool-return``."""
    return part.get("timestamp", 0) is None and (
        message.get("kind") != "response" or part.get("part_kind") == "builtin-tool-return"
    )


def drop_null_timestamps(messages: Messages, ctx: Context) -> list[Change]:
    """Remove ``"timestamp": null`` where 2.68 rejects it: on request parts, on
    ``builtin-tool-return`` parts and on responses. An absent timestamp loads (the framework
    then uses the load time; histmig never writes one). ``ModelRequest.timestamp`` may be
    ``null`` and is left alone."""
    changes: list[Change] = []
    for m_index, message in enumerate(messages):
        if isinstance(message, dict) and message.get("kind") == "response" and message.get("timestamp", 0) is None:
            del message["timestamp"]
            changes.append(Change("HM202", m_index, None, "response", "response", "null-timestamp", "exact"))
    for m_index, p_index, message, part in iter_parts(messages):
        if has_null_timestamp(message, part):
            del part["timestamp"]
            kind = part.get("part_kind", "")
            changes.append(Change("HM202", m_index, p_index, kind, kind, "null-timestamp", "exact"))
    return changes


RULE = Rule(
    code="HM202",
    name="null-timestamp",
    summary="null timestamp on a request part or a response -> field removed (never the clock)",
    source="pydantic-ai 2.68 (the request part models and ModelResponse "
    "in pydantic_ai/messages.py) refuses timestamp: null",
    facts="docs/framework.md §2.4 (load failures)",
    docs=Docs(
        what=(
            "Removes 'timestamp': null from request parts, builtin-tool-return parts and responses. A request's "
            "own timestamp may be null and is left alone."
        ),
        why=(
            "2.68 refuses to load a null timestamp there; an absent one loads (the framework then takes the load "
            "time, so histmig never writes one: the same archive converts to the same bytes on any day)."
        ),
        safety=(
            "Safe: 2.68 refuses a null timestamp and loads an absent one (taking the load time, as for any "
            "history that never stored one); removing the null loses no value, and histmig never writes the "
            "clock."
        ),
        before=(
            '[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi","timestamp":null}]},'
            '{"kind":"response","parts":[{"part_kind":"text","content":"hello"}],"timestamp":null}]'
        ),
        after='[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi"}]},{"kind":"response",'
        '"parts":[{"part_kind":"text","content":"hello"}]}]',
    ),
    looks=(NullField("timestamp", parts=ANY_PART, test=has_null_timestamp), NullField("timestamp", message="response")),
    fix=drop_null_timestamps,
    phase=REPAIR,
)
