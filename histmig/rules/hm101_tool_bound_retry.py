"""HM101: a tool-bound ``retry-prompt`` part becomes the call's retried ``ToolReturnPart``."""

from __future__ import annotations

from histmig.rules.base import MIGRATE, Change, Context, Docs, Messages, PartKind, Rule
from histmig.rules.retry import RETRY_PROMPT, is_tool_bound_retry, rewrite_legacy
from histmig.schema.releases import RETRY_PARTS, Span


def migrate_tool_bound(messages: Messages, ctx: Context) -> list[Change]:
    """Rewrite every tool-bound retry-prompt part (``tool_name`` not ``None``, ``''``
    included; docs/framework.md §2) as the retried ``ToolReturnPart`` of the call it answers,
    keeping ``tool_name``, ``tool_call_id``, ``timestamp`` and every other key; the cause
    comes from :mod:`histmig.rules.causes`. Raises :class:`~histmig.errors.Malformed`
    for a content that is neither text nor a list."""
    return rewrite_legacy(messages, ctx, "HM101", tool_bound=True)


RULE = Rule(
    code="HM101",
    name="tool-bound-retry",
    summary="tool-bound retry-prompt -> ToolReturnPart with outcome 'retried' and a RetryInfo cause",
    source="pydantic-ai 2.68 pydantic_ai/messages.py _translate_legacy_retry_part (a tool-bound retry-prompt loads as "
    "the call's ToolReturnPart, outcome retried); the retry texts releases 0.0.x-2.59 wrote",
    facts="docs/framework.md §1, §2.1, §2.2",
    docs=Docs(
        what=(
            "Rewrites a retry-prompt part that answers a tool call (its tool_name is set, '' included) as that "
            "call's tool-return with outcome 'retried' and a retry (RetryInfo) whose cause comes from evidence: "
            "every fixed text the framework wrote, then the content's shape (an error list is validation_error), "
            "then the default (model_retry). tool_name, tool_call_id, timestamp and every other key keep their "
            "values and places; an error list is cleaned as the framework's _dump_error_details cleans it."
        ),
        why=(
            "pydantic-ai 2.60 deprecated RetryPromptPart. 2.68 still loads it, but only translates it at load "
            "time, with retry null for any text (the cause is lost) and a random id where the stored one is "
            "missing or '', which orphans the return from its call."
        ),
        safety=(
            "Safe: it stores once what 2.68's loader makes of the part at every load, the call's retried "
            "tool-return, keeping the stored tool_call_id and timestamp where the loader would take a random id "
            "and the clock. The cause is the one thing added, from the evidence of the text; --causes framework "
            "writes the loader's own values instead."
        ),
        before=(
            '[{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"get_weather",'
            '"args":{"city":"Londn"},"tool_call_id":"call_1"}]},'
            '{"kind":"request","parts":[{"part_kind":"retry-prompt",'
            '"content":"Unknown city \'Londn\', use the full name.",'
            '"tool_name":"get_weather","tool_call_id":"call_1","timestamp":"2025-05-01T10:00:02Z"}]}]'
        ),
        after=(
            '[{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"get_weather",'
            '"args":{"city":"Londn"},"tool_call_id":"call_1"}]},'
            '{"kind":"request","parts":[{"part_kind":"tool-return",'
            '"content":"Unknown city \'Londn\', use the full name.",'
            '"tool_name":"get_weather","tool_call_id":"call_1","timestamp":"2025-05-01T10:00:02Z","outcome":"retried",'
            '"retry":{"cause":"model_retry","attempt":null,"max_retries":null}}]}]'
        ),
    ),
    looks=(PartKind(RETRY_PROMPT, message="request", test=is_tool_bound_retry),),
    fix=migrate_tool_bound,
    phase=MIGRATE,
    targets=Span(RETRY_PARTS, None),
)
