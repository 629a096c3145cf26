"""HM203: error details without ``input`` in a retry part get ``"input": null``."""

from __future__ import annotations

from typing import Any, Union

import msgspec

from histmig.rules.base import REPAIR, Change, Context, Docs, Message, Messages, Rule, ValueField, iter_parts

_RETRY_PARTS = ("retry-prompt", "retry-feedback")


class _DetailWithInput(msgspec.Struct, gc=False):
    input: msgspec.Raw


def lacks_error_input(message: Message, part: Any) -> bool:
    """A request's retry part with an error-details entry without ``input``."""
    content = part.get("content")
    return (
        message.get("kind") == "request"
        and type(content) is list
        and any(isinstance(detail, dict) and "input" not in detail for detail in content)
    )


def _insert_input(detail: dict[str, Any]) -> dict[str, Any]:
    """``detail`` with ``"input": null`` placed after ``msg`` (``ErrorDetails`` order)."""
    rebuilt: dict[str, Any] = {}
    for key, value in detail.items():
        rebuilt[key] = value
        if key == "msg":
            rebuilt["input"] = None
    rebuilt.setdefault("input", None)
    return rebuilt


def add_missing_error_input(messages: Messages, ctx: Context) -> list[Change]:
    """Give every error-details entry of a ``retry-prompt`` or ``retry-feedback`` list content
    that lacks ``input`` an ``"input": null``. 2.68 requires ``input`` (docs/framework.md §2)
    though validators that drop inputs made the framework write such parts itself."""
    changes: list[Change] = []
    for m_index, p_index, message, part in iter_parts(messages, "request"):
        if part.get("part_kind") not in _RETRY_PARTS or not lacks_error_input(message, part):
            continue
        content = part["content"]
        missing = [i for i, d in enumerate(content) if isinstance(d, dict) and "input" not in d]
        for i in missing:
            content[i] = _insert_input(content[i])
        if missing:
            kind = part["part_kind"]
            changes.append(Change("HM203", m_index, p_index, kind, kind, f"missing-input:{len(missing)}", "shape"))
    return changes


RULE = Rule(
    code="HM203",
    name="error-details-input",
    summary="error details without 'input' in a retry part -> \"input\": null",
    source="pydantic-ai 2.68 validates a retry's error list as pydantic_core ErrorDetails, where input is required; "
    "older releases wrote lists without it",
    facts="docs/framework.md §2.4 (load failures), bug case BC3",
    docs=Docs(
        what="Adds 'input': null, after 'msg', to every error-details "
        "entry of a retry part's error list that has no input.",
        why=(
            "2.68 requires input in error details and refuses to load the history otherwise, though the "
            "framework wrote such parts itself when a validator dropped the inputs."
        ),
        safety=(
            "Safe: the error keeps its type, location and message; the input it lacks was never stored, and null "
            "says so, where 2.68 would refuse the whole history."
        ),
        before=(
            '[{"kind":"request","parts":[{"part_kind":"retry-feedback","content":[{"type":"missing",'
            '"loc":["city"],"msg":"Field required"}],'
            '"retry":{"cause":"validation_error","attempt":1,"max_retries":3}}]}]'
        ),
        after=(
            '[{"kind":"request","parts":[{"part_kind":"retry-feedback","content":[{"type":"missing",'
            '"loc":["city"],"msg":"Field required","input":null}],'
            '"retry":{"cause":"validation_error","attempt":1,"max_retries":3}}]}]'
        ),
    ),
    looks=(
        ValueField("content", parts=_RETRY_PARTS, quiet=Union[str, list[_DetailWithInput]], test=lacks_error_input),
    ),
    fix=add_missing_error_input,
    phase=REPAIR,
)
