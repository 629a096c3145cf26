"""HM102: a tool-less ``retry-prompt`` part becomes a ``RetryFeedbackPart``."""

from __future__ import annotations

from histmig.rules.base import MIGRATE, Change, Context, Docs, Messages, PartKind, Rule
from histmig.rules.retry import RETRY_PROMPT, is_tool_less_retry, rewrite_legacy
from histmig.schema.releases import RETRY_PARTS, Span


def migrate_tool_less(messages: Messages, ctx: Context) -> list[Change]:
    """Rewrite every tool-less retry-prompt part (``tool_name`` ``None`` or absent;
    docs/framework.md §2) as a ``RetryFeedbackPart``; the cause comes from
    :mod:`histmig.rules.causes` (a fixed no-output text is ``no_output``, not the loader's
    ``model_retry``). Raises :class:`~histmig.errors.Malformed` for a content that is
    neither text nor a list."""
    return rewrite_legacy(messages, ctx, "HM102", tool_bound=False)


RULE = Rule(
    code="HM102",
    name="tool-less-retry",
    summary="tool-less retry-prompt -> RetryFeedbackPart with a RetryInfo cause",
    source="pydantic-ai 2.68 pydantic_ai/messages.py _translate_legacy_retry_part (a tool-less retry-prompt loads as a "
    "RetryFeedbackPart); the retry texts releases 0.0.x-2.59 wrote",
    facts="docs/framework.md §1, §2.1, §2.2",
    docs=Docs(
        what=(
            "Rewrites a retry-prompt part that answers no tool call (tool_name null or absent) as a retry-feedback "
            "part whose retry cause comes from evidence: the fixed no-output texts the framework wrote across "
            "releases ('Please return text or call a tool.' and the others) are no_output, an error list "
            "validation_error, any other text model_retry. "
            "tool_name and tool_call_id are removed (the part has no tool fields); the content is kept as stored."
        ),
        why=(
            "2.68's loader calls every tool-less text model_retry, so the model later reads the framework's own "
            "'Please return text or call a tool.' as fenced user text saying its output failed validation."
        ),
        safety=(
            "Safe: it stores once the RetryFeedbackPart 2.68's loader makes of the part, its content as stored; "
            "the legacy tool_call_id, which the loader drops too, goes. Only the cause is chosen, from evidence "
            "(a fixed no-output text is no_output); --causes framework writes the loader's model_retry or "
            "validation_error."
        ),
        before=(
            '[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":"Please return text or call a tool.",'
            '"tool_name":null,"tool_call_id":"pyd_ai_1","timestamp":"2025-05-01T10:00:04Z"}]}]'
        ),
        after=(
            '[{"kind":"request","parts":[{"part_kind":"retry-feedback","content":"Please return text or call a tool.",'
            '"timestamp":"2025-05-01T10:00:04Z","retry":{"cause":"no_output","attempt":null,"max_retries":null}}]}]'
        ),
    ),
    looks=(PartKind(RETRY_PROMPT, message="request", test=is_tool_less_retry),),
    fix=migrate_tool_less,
    phase=MIGRATE,
    targets=Span(RETRY_PARTS, None),
)
