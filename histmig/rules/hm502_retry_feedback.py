"""HM502: for a target before 2.60.0, a ``retry-feedback`` part becomes the tool-less
``retry-prompt`` that release wrote."""

from __future__ import annotations

from histmig.rules.base import ROLLBACK, Change, Context, Docs, Messages, PartKind, Rule, conversation_key, iter_parts
from histmig.rules.rollback import evidence, lost, to_retry_prompt, tool_less_id
from histmig.schema.releases import OLDEST, RETRY_PARTS, Span


def rollback_retry_feedback(messages: Messages, ctx: Context) -> list[Change]:
    """Rewrite every ``retry-feedback`` part of a request as the tool-less ``retry-prompt``
    releases before 2.60.0 wrote (docs/framework.md §2, read backwards): ``content`` as stored
    (a validation error's list of error details stays that list), ``tool_name`` null, a
    ``tool_call_id`` null before 0.0.45, else derived (those releases generated a random
    one), ``timestamp`` kept. Its ``retry`` (cause, attempt, max_retries) has no place there
    and is reported as lost. Raises :class:`~histmig.errors.Malformed` for a content
    that is neither text nor a list."""
    changes: list[Change] = []
    conversation = conversation_key(messages)
    for m_index, p_index, message, part in iter_parts(messages, "request"):
        if part.get("part_kind") != "retry-feedback":
            continue
        tool_call_id = tool_less_id(ctx.target, conversation, m_index, p_index)
        message["parts"][p_index] = to_retry_prompt(part, f"messages[{m_index}].parts[{p_index}]", None, tool_call_id)
        notes = ("tool_call_id derived",) if tool_call_id is not None else ()
        said = evidence(lost(part), *notes)
        changes.append(
            Change("HM502", m_index, p_index, "retry-feedback", "retry-prompt", said, "derived" if notes else "exact")
        )
    return changes


RULE = Rule(
    code="HM502",
    name="retry-feedback",
    summary="(--target before 2.60.0) retry-feedback -> the tool-less "
    "retry-prompt that release wrote; retry reported lost",
    source="pydantic-ai 2.60.0 added RetryFeedbackPart (pydantic_ai/messages.py); the releases before it wrote a retry "
    "answering no call as a tool-less RetryPromptPart",
    facts="docs/framework.md §2, §3.2 (retry-feedback from 2.60.0), §3.3 (tool_call_id)",
    docs=Docs(
        what=(
            "For a --target before 2.60.0, rewrites a retry-feedback part as the tool-less retry-prompt those releases "
            "wrote: the content as stored (a list of error details for a validation error), tool_name null, a "
            "tool_call_id derived from the part's place (null for a target before 0.0.45), the timestamp kept; the "
            "retry's cause, attempt and max_retries are reported as lost."
        ),
        why="Releases before 2.60.0 do not know the retry-feedback part kind: a history holding one fails to load.",
        safety=(
            "Safe: it writes the tool-less part the target release wrote for the same feedback, content as "
            "stored; the RetryInfo, which that release has no place for, is named in the change's evidence, and "
            "the id it needs is derived from its place (null before 0.0.45, as those releases wrote it)."
        ),
        before=(
            '[{"kind":"request","parts":[{"content":"Please return text or call a tool.",'
            '"timestamp":"2025-05-01T10:00:04Z",'
            '"retry":{"cause":"no_output","attempt":1,"max_retries":1},"part_kind":"retry-feedback"}]}]'
        ),
        after=(
            '[{"kind":"request","parts":[{"content":"Please return text or call a tool.","tool_name":null,'
            '"tool_call_id":"pyd_ai_c6b0e831238c518caac2b432272bde71","timestamp":"2025-05-01T10:00:04Z",'
            '"part_kind":"retry-prompt"}]}]'
        ),
        target="2.59.0",
    ),
    looks=(PartKind("retry-feedback", message="request"),),
    fix=rollback_retry_feedback,
    phase=ROLLBACK,
    targets=Span(OLDEST, RETRY_PARTS),
)
