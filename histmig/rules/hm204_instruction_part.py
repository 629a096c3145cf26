"""HM204: an ``instruction`` part inside a request's parts moves to its ``instructions``."""

from __future__ import annotations

from typing import Any

from histmig.rules.base import REPAIR, Change, Context, Docs, Messages, PartKind, Rule
from histmig.schema.releases import INSTRUCTIONS_FIELD, Span

_INSTRUCTION_KEYS = {"part_kind", "content"}
_INSTRUCTION_DEFAULTS = {"dynamic": False, "on_change": "rewrite", "name": None, "id": None}
"""The defaults of 2.68's ``InstructionPart`` fields besides ``content``: a part whose fields
all hold these (or null) says nothing ``instructions`` cannot."""


def is_movable_instruction(part: Any) -> bool:
    """An ``instruction`` part with text content and every other field absent, null or at
    2.68's default (``dynamic: false``, ``on_change: "rewrite"``)."""
    return (
        isinstance(part, dict)
        and part.get("part_kind") == "instruction"
        and isinstance(part.get("content"), str)
        and all(
            value is None or value == _INSTRUCTION_DEFAULTS.get(key)
            for key, value in part.items()
            if key not in _INSTRUCTION_KEYS
        )
    )


def _movable(message: Any, part: Any) -> bool:
    return is_movable_instruction(part)


def move_instruction_parts(messages: Messages, ctx: Context) -> list[Change]:
    """Move each ``{"part_kind": "instruction", "content": str}`` out of a request's
    ``parts`` into its ``instructions`` (joined to existing text with a blank line, in
    order), also in the shape 2.68 dumps it (``dynamic: false``, ``on_change: "rewrite"``,
    ``name``/``id`` null). 2.68 dumps such parts but cannot load them (``'instruction'`` is
    not a request-part tag). A part carrying any other value (a dynamic or named part, a
    field no release wrote) is left for validation to report, so nothing is lost."""
    changes: list[Change] = []
    for m_index, message in enumerate(messages):
        if (
            not isinstance(message, dict)
            or message.get("kind") != "request"
            or not isinstance(message.get("parts"), list)
        ):
            continue
        kept: list[Any] = []
        texts: list[str] = []
        for p_index, part in enumerate(message["parts"]):
            if is_movable_instruction(part):
                texts.append(part["content"])
                changes.append(
                    Change("HM204", m_index, p_index, "instruction", "instructions", "instruction-part", "exact")
                )
            else:
                kept.append(part)
        if texts:
            existing = message.get("instructions")
            message["parts"] = kept
            message["instructions"] = "\n\n".join(
                [existing, *texts] if isinstance(existing, str) and existing else texts
            )
    return changes


RULE = Rule(
    code="HM204",
    name="instruction-part",
    summary="'instruction' part inside a request's parts -> text moved to the request's instructions",
    source="pydantic-ai 2.68 dumps an InstructionPart among a request's parts but cannot load it back "
    "(ModelRequestPart "
    "in pydantic_ai/messages.py has no 'instruction' tag); ModelRequest.instructions holds the text",
    facts="docs/framework.md §3.1 (request part tags), bug case BC5",
    docs=Docs(
        what=(
            "Moves the text of an 'instruction' part out of a request's parts into the request's instructions "
            "(after any text already there, with a blank line between), also in the shape 2.68 dumps it "
            "(dynamic false, on_change 'rewrite', name and id null). A dynamic or named part is left for check "
            "to report."
        ),
        why="2.68 dumps such parts but cannot load them back: 'instruction' is not a request-part tag.",
        safety=(
            "Safe: the text stays the request's instruction, in the field 2.68 reads it from, after any "
            "instructions already there; a dynamic or named part, whose meaning depends on the agent that wrote "
            "it, is left as it is for check to report."
        ),
        before='[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi"},{"part_kind":"instruction",'
        '"content":"Be concise."}]}]',
        after='[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi"}],"instructions":"Be concise."}]',
    ),
    looks=(PartKind("instruction", message="request", test=_movable),),
    fix=move_instruction_parts,
    phase=REPAIR,
    targets=Span(INSTRUCTIONS_FIELD, None),
)
