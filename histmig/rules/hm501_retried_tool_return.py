"""HM501: for a target before 2.60.0, a retried ``tool-return`` becomes the ``retry-prompt``
that release wrote."""

from __future__ import annotations

from typing import Any

from histmig.rules.base import (
    ROLLBACK,
    Change,
    Context,
    Docs,
    Message,
    Messages,
    Rule,
    ValueField,
    conversation_key,
    iter_parts,
)
from histmig.rules.rollback import ABSENT, QUIET_OUTCOME, evidence, lost, to_retry_prompt, tool_less_id
from histmig.schema.releases import OLDEST, RETRY_PARTS, TOOL_BOUND_UNKNOWN_TOOL, Span


def is_retried_return(message: Message, part: Any) -> bool:
    """A request's ``tool-return`` with ``outcome: "retried"``."""
    return message.get("kind") == "request" and part.get("outcome") == "retried"


def rollback_retried_returns(messages: Messages, ctx: Context) -> list[Change]:
    """Rewrite every retried ``tool-return`` of a request as the tool-bound ``retry-prompt``
    releases before 2.60.0 wrote for it (docs/framework.md §2, read backwards): ``content``,
    ``tool_name``, ``tool_call_id`` and ``timestamp`` kept, in the order those releases wrote
    them. Its ``retry`` (cause, attempt, max_retries) and a ``tool_kind`` or ``metadata`` have
    no place there and are reported as lost. An ``unknown_tool`` retry for a target before
    0.0.47 becomes the tool-less part those releases wrote (docs/framework.md §1.2): ``tool_name``
    null, ``tool_call_id`` null before 0.0.45, else derived. Raises
    :class:`~histmig.errors.Malformed` for a content that is neither text nor a list."""
    changes: list[Change] = []
    conversation = conversation_key(messages)
    for m_index, p_index, message, part in iter_parts(messages, "request"):
        if part.get("part_kind") != "tool-return" or not is_retried_return(message, part):
            continue
        where = f"messages[{m_index}].parts[{p_index}]"
        values = lost(part)
        if values.get("retry.cause") == "unknown_tool" and ctx.target < TOOL_BOUND_UNKNOWN_TOOL:
            tool_call_id = tool_less_id(ctx.target, conversation, m_index, p_index)
            message["parts"][p_index] = to_retry_prompt(part, where, None, tool_call_id)
            notes = (
                ("tool-less before 0.0.47", "tool_call_id derived")
                if tool_call_id is not None
                else ("tool-less before 0.0.47",)
            )
            said = evidence(lost(part, "tool_name", "tool_call_id"), *notes)
        else:
            tool_call_id = None
            message["parts"][p_index] = to_retry_prompt(
                part, where, part.get("tool_name"), part.get("tool_call_id", ABSENT)
            )
            said = evidence(values)
        changes.append(
            Change(
                "HM501",
                m_index,
                p_index,
                "tool-return",
                "retry-prompt",
                said,
                "exact" if tool_call_id is None else "derived",
            )
        )
    return changes


RULE = Rule(
    code="HM501",
    name="retried-tool-return",
    summary="(--target before 2.60.0) retried tool-return -> the "
    "tool-bound retry-prompt that release wrote; retry reported lost",
    source="pydantic-ai 0.0.13-2.59.0 wrote a retried tool call as the call's tool-bound RetryPromptPart "
    "(pydantic_ai/messages.py); 2.60.0 writes ToolReturnPart with outcome 'retried' and a RetryInfo",
    facts="docs/framework.md §2, §3.2, §3.3 (outcome 'retried' and retry from 2.60.0)",
    docs=Docs(
        what=(
            "For a --target before 2.60.0, rewrites a tool-return with outcome 'retried' as the tool-bound "
            "retry-prompt "
            "those releases wrote: content, tool_name, tool_call_id and timestamp kept, outcome and retry removed; "
            "the retry's cause, attempt and max_retries (and a tool_kind or metadata) are reported as lost. An "
            "unknown_tool retry for a target before 0.0.47 becomes the tool-less retry-prompt those releases wrote."
        ),
        why=(
            "Releases before 2.60.0 refuse outcome 'retried' from 1.67.0 (so the whole history fails to load) and "
            "read it as a successful tool result before 1.67.0; they wrote a retry as a retry-prompt part."
        ),
        safety=(
            "Safe: it writes the part the target release wrote for the same retry, keeping content, tool_name, "
            "tool_call_id and timestamp; what that release has no place for (the RetryInfo, a tool_kind or "
            "metadata) is named in the change's evidence, and converting forward again infers the cause from the "
            "content."
        ),
        before=(
            '[{"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"get_weather",'
            '"content":"Unknown city, use the full name.",'
            '"tool_call_id":"call_1","timestamp":"2025-05-01T10:00:02Z","outcome":"retried",'
            '"retry":{"cause":"model_retry","attempt":1,"max_retries":3}}]}]'
        ),
        after=(
            '[{"kind":"request","parts":[{"content":"Unknown city, use the full name.","tool_name":"get_weather",'
            '"tool_call_id":"call_1","timestamp":"2025-05-01T10:00:02Z","part_kind":"retry-prompt"}]}]'
        ),
        target="2.59.0",
    ),
    looks=(ValueField("outcome", parts="tool-return", message="request", quiet=QUIET_OUTCOME, test=is_retried_return),),
    fix=rollback_retried_returns,
    phase=ROLLBACK,
    targets=Span(OLDEST, RETRY_PARTS),
)
