"""HM302: a response's ``provider_request_id`` becomes ``provider_response_id``."""

from __future__ import annotations

from histmig.rules.base import MISREAD, AbsentField, Change, Context, Docs, Message, Messages, Rule, rename_field
from histmig.schema.releases import PROVIDER_REQUEST_ID, Span


def has_provider_request_id(message: Message, part: None = None) -> bool:
    """A response with ``provider_request_id`` and no (or a null) ``provider_response_id``."""
    return (
        message.get("kind") == "response"
        and "provider_request_id" in message
        and message.get("provider_response_id") is None
    )


def rename_provider_request_id(messages: Messages, ctx: Context) -> list[Change]:
    """Rename a response's ``provider_request_id`` to ``provider_response_id`` in place, when
    the latter is absent or ``null``. 0.8.1 renamed the field without a load alias, so 2.68
    drops the value (docs/framework.md §3.3)."""
    return rename_field(messages, "HM302", "provider_request_id", "provider_response_id", has_provider_request_id)


RULE = Rule(
    code="HM302",
    name="provider-request-id",
    summary="response provider_request_id -> provider_response_id",
    source="pydantic-ai 0.7.3-0.8.0 wrote ModelResponse.provider_request_id, renamed provider_response_id in 0.8.1; "
    "2.68 has no alias for it and drops the value",
    facts="docs/framework.md §3.3 (0.7.3–0.8.0 wrote provider_request_id; 2.68 has no alias for it)",
    docs=Docs(
        what="Renames a response's provider_request_id to "
        "provider_response_id, in place, when the latter is absent or null.",
        why="0.8.1 renamed the field without a load alias, so 2.68 silently drops the values 0.7.3-0.8.0 stored.",
        safety=(
            "Safe: the value moves, unchanged, to the field 0.8.1 renamed it to, in its place among the message's keys."
        ),
        before='[{"kind":"response","parts":[{"part_kind":"text","content":"hello"}],"provider_request_id":"req_81"}]',
        after='[{"kind":"response","parts":[{"part_kind":"text","content":"hello"}],"provider_response_id":"req_81"}]',
    ),
    looks=(AbsentField("provider_request_id", message="response", test=has_provider_request_id),),
    fix=rename_provider_request_id,
    phase=MISREAD,
    targets=Span(PROVIDER_REQUEST_ID.before, None),  # type: ignore[arg-type]  # that span has an end
)
