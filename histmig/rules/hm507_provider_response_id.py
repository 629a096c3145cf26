"""HM507: for a target from 0.7.3 before 0.8.1, a response's ``provider_response_id``
becomes the ``provider_request_id`` those releases stored."""

from __future__ import annotations

from histmig.rules.base import ROLLBACK, Change, Context, Docs, Message, Messages, Rule, ValueField, rename_field
from histmig.schema.releases import PROVIDER_REQUEST_ID


def has_provider_response_id(message: Message, part: None = None) -> bool:
    """A response whose ``provider_response_id`` is not null."""
    return message.get("kind") == "response" and message.get("provider_response_id") is not None


def rename_provider_response_id(messages: Messages, ctx: Context) -> list[Change]:
    """Rename a response's non-null ``provider_response_id`` to ``provider_request_id``, in
    place (replacing one already there): 0.7.3-0.8.0 stored the id under that name and ignore
    the later one (docs/framework.md §3.3). The reverse of HM302."""
    return rename_field(messages, "HM507", "provider_response_id", "provider_request_id", has_provider_response_id)


RULE = Rule(
    code="HM507",
    name="provider-response-id",
    summary="(--target 0.7.3 to before 0.8.1) response provider_response_id -> provider_request_id",
    source="pydantic-ai 0.7.3-0.8.0 ModelResponse.provider_request_id (pydantic_ai/messages.py), renamed "
    "provider_response_id in 0.8.1",
    facts="docs/framework.md §3.3 (provider_request_id 0.7.3-0.8.0, renamed in 0.8.1)",
    docs=Docs(
        what="For a --target from 0.7.3 before 0.8.1, renames a response's provider_response_id to "
        "provider_request_id, in place. The reverse of HM302.",
        why="Those releases stored the provider's id as provider_request_id "
        "and ignore provider_response_id: the id would be lost.",
        safety=("Safe: the reverse of HM302: the value moves, unchanged, to the field 0.7.3-0.8.0 stored it in."),
        before='[{"kind":"response","parts":[{"part_kind":"text","content":"hello"}],"provider_response_id":"req_81"}]',
        after='[{"kind":"response","parts":[{"part_kind":"text","content":"hello"}],"provider_request_id":"req_81"}]',
        target="0.8.0",
    ),
    looks=(ValueField("provider_response_id", message="response", quiet=None, test=has_provider_response_id),),
    fix=rename_provider_response_id,
    phase=ROLLBACK,
    targets=PROVIDER_REQUEST_ID,
)
