"""HM201: a null ``tool_call_id`` gets a derived id, paired with its call."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from histmig.rules.base import (
    REPAIR,
    Change,
    Context,
    Docs,
    Finding,
    Message,
    Messages,
    NullField,
    Part,
    PartKind,
    Rule,
    conversation_key,
    derived_tool_call_id,
    iter_parts,
)
from histmig.rules.pairing import fragment
from histmig.schema.releases import RETRY_PARTS, STRING_TOOL_CALL_ID, Span

_ID_PARTS = ("tool-call", "tool-return")


def needs_id(part: Part, tool_less: bool = False) -> bool:
    """A ``tool-call`` / ``tool-return`` with ``"tool_call_id": null``, or a tool-bound
    ``retry-prompt`` whose ``tool_call_id`` is null or missing; with ``tool_less``, a
    tool-less ``retry-prompt`` with ``"tool_call_id": null`` too."""
    kind = part.get("part_kind")
    if kind == "retry-prompt":
        if part.get("tool_name") is None:
            return tool_less and "tool_call_id" in part and part["tool_call_id"] is None
        return part.get("tool_call_id") is None
    return kind in _ID_PARTS and "tool_call_id" in part and part["tool_call_id"] is None


def _retry_needs_id(message: Message, part: Part) -> bool:
    return needs_id(part, tool_less=True)


def derive_tool_call_ids(messages: Messages, ctx: Context) -> list[Change | Finding]:
    """Give every ``null``-id ``tool-call`` a derived id (:func:`derived_tool_call_id`, of
    the conversation's :func:`conversation_key` and the call's place), then give each
    ``null``-id ``tool-return`` and id-less tool-bound ``retry-prompt`` the id of the earliest
    call of the same ``tool_name`` before it that no result has answered yet (0.0.x answered
    calls in order). A result with no such call gets an id derived from its own place. Each
    change carries the id it wrote (``Change.tool_call_id``). 2.68 rejects ``null`` ids and
    replaces absent ones with random ids, which orphans the result (docs/framework.md §2). For a
    ``--target`` before 2.60.0, where a tool-less ``retry-prompt`` stays one (HM102 does not
    run), its ``null`` id gets an id derived from its place too: releases from 0.0.45 refuse
    it.

    A :func:`~histmig.rules.pairing.fragment` (a piece of a conversation stored over several
    records) keeps its null ids, each a finding of certainty ``fragment``: the ids derived from
    the fragment's own opening and places would not be those of the whole conversation, and a
    result's call is in another record."""
    tool_less = ctx.target < RETRY_PARTS
    if fragment(messages):
        return [
            Finding(
                "HM201",
                m_index,
                p_index,
                f"{part.get('part_kind')} {part.get('tool_name')!r} has no tool_call_id; left as it is (its call "
                "or its results may be in another record of the conversation)",
                "fragment",
                "fragment",
                "warning",
            )
            for m_index, p_index, _, part in iter_parts(messages)
            if needs_id(part, tool_less)
        ]
    changes: list[Change | Finding] = []
    conversation = conversation_key(messages)
    unanswered: dict[Any, list[str]] = defaultdict(list)
    for m_index, p_index, _, part in iter_parts(messages):
        kind = part.get("part_kind", "")
        name = part.get("tool_name")
        if not isinstance(name, (str, type(None))):  # no release wrote it (validation says so): a key all the same
            name = repr(name)
        if not needs_id(part, tool_less):
            if kind == "tool-call" and isinstance(part.get("tool_call_id"), str):
                unanswered[name].append(part["tool_call_id"])
            elif kind in ("tool-return", "retry-prompt") and part.get("tool_call_id") in unanswered[name]:
                unanswered[name].remove(part["tool_call_id"])
            continue
        if kind == "tool-call":
            new_id, evidence = derived_tool_call_id(conversation, m_index, p_index, name), "position"
            unanswered[name].append(new_id)
        elif name is None and kind == "retry-prompt":
            new_id, evidence = derived_tool_call_id(conversation, m_index, p_index, name), "position:tool-less"
        elif unanswered[name]:
            new_id, evidence = unanswered[name].pop(0), "paired-call"
        else:
            new_id, evidence = derived_tool_call_id(conversation, m_index, p_index, name), "position:no-call"
        part["tool_call_id"] = new_id
        changes.append(Change("HM201", m_index, p_index, kind, kind, evidence, "derived", tool_call_id=new_id))
    return changes


RULE = Rule(
    code="HM201",
    name="null-tool-call-id",
    summary="null tool_call_id on tool-call / tool-return, null or missing on tool-bound retry-prompt -> paired, "
    "derived id",
    source="pydantic-ai 0.0.13-0.0.44 wrote tool_call_id: null; 2.68 (ToolCallPart, ToolReturnPart in "
    "pydantic_ai/messages.py) refuses it, and gives a missing one a random id at every load",
    facts="docs/framework.md §2.4 (load failures), §3.3 (ids nullable in 0.0.13–0.0.44)",
    docs=Docs(
        what=(
            "Gives every tool-call whose tool_call_id is null a derived id ('pyd_ai_' and 32 hex digits of a "
            "SHA-256 of the conversation's opening prompts and their timestamps, the call's place and its tool name: "
            "the same on every run, distinct across conversations), then gives each tool-return with a null id, "
            "and each tool-bound "
            "retry-prompt with a null or missing one, the id of the earliest unanswered call of the same tool "
            "before it (0.0.x answered calls in order); a result with no such call gets an id of its own place. "
            "For a --target before 2.60.0, a tool-less retry-prompt's null id gets an id of its own place too."
        ),
        why=(
            "0.0.13-0.0.44 wrote null ids; 2.68 refuses to load a null id, and replaces a missing one with a "
            "random id at every load, which orphans the result: 2.68 drops it before sending."
        ),
        safety=(
            "Safe: the history cannot load as it is. A call gets an id derived from the conversation and its "
            "place (the same on every run, where the framework would draw a random one), and a result the id of "
            "the call it answers, found as the releases that wrote null ids answered calls: in order, by tool (an "
            "id of its own place when no call is open). On a likely fragment of a conversation it derives none: "
            "the fragment's own opening and places are not the whole conversation's."
        ),
        before=(
            '[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"Weather in Oslo?"}]},'
            '{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"get_weather",'
            '"args":"{\\"city\\": \\"Oslo\\"}","tool_call_id":null}]},'
            '{"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"get_weather","content":"12 C",'
            '"tool_call_id":null,'
            '"timestamp":"2024-10-01T10:00:02Z"}]}]'
        ),
        after=(
            '[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"Weather in Oslo?"}]},'
            '{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"get_weather",'
            '"args":"{\\"city\\": \\"Oslo\\"}",'
            '"tool_call_id":"pyd_ai_22db58bd249acb76b45821006c5e1bc6"}]},'
            '{"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"get_weather","content":"12 C",'
            '"tool_call_id":"pyd_ai_22db58bd249acb76b45821006c5e1bc6","timestamp":"2024-10-01T10:00:02Z"}]}]'
        ),
    ),
    looks=(NullField("tool_call_id", parts=_ID_PARTS), PartKind("retry-prompt", test=_retry_needs_id)),
    fix=derive_tool_call_ids,
    phase=REPAIR,
    targets=Span(STRING_TOOL_CALL_ID, None),
)
