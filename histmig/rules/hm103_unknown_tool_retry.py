"""HM103: a tool-less ``'Unknown tool name'`` retry is re-bound to the call it answers."""

from __future__ import annotations

from typing import Any

from histmig.rules.base import REBIND, Change, Context, Docs, Messages, PartKind, Rule
from histmig.rules.causes import Verdict, unknown_tool_name
from histmig.rules.retry import RETRY_PROMPT, is_tool_less_retry, legacy_parts, to_tool_return
from histmig.schema.releases import RETRY_PARTS, Span


def rebind_unknown_tool(messages: Messages, ctx: Context) -> list[Change]:
    """Re-bind a tool-less ``'Unknown tool name: …'`` retry to the call it answers.

    0.0.3–0.0.46 wrote this text with no ``tool_name``/``tool_call_id`` (docs/framework.md
    §1.2); the loader turns it into ``model_retry`` feedback. Its quoted name is matched
    against the ``tool-call`` parts of the nearest preceding response (each call used once,
    in order); on a match the part becomes that call's retried ``ToolReturnPart`` with cause
    ``unknown_tool``, as 2.60+ records natively. Not applied with ``--causes framework``.
    """
    if ctx.causes == "framework":
        return []
    changes: list[Change] = []
    used: set[int] = set()
    for m_index, p_index, message, part in legacy_parts(messages, tool_bound=False):
        name = unknown_tool_name(part.get("content"))
        call = _preceding_call(messages, m_index, name, used) if name is not None else None
        if call is None:
            continue
        used.add(id(call))
        found = Verdict("unknown_tool", "unknown-tool+preceding-call", "template")
        message["parts"][p_index] = to_tool_return(part, found, tool_name=name, tool_call_id=call["tool_call_id"])
        changes.append(
            Change(
                "HM103",
                m_index,
                p_index,
                RETRY_PROMPT,
                "tool-return",
                found.evidence,
                found.certainty,
                "unknown_tool",
                call["tool_call_id"],
            )
        )
    return changes


def _preceding_call(messages: Messages, m_index: int, name: str, used: set[int]) -> dict[str, Any] | None:
    """The first call of tool ``name`` with an id in the nearest response before message
    ``m_index`` that no earlier retry took (``used``), else ``None``."""
    for earlier in reversed(messages[:m_index]):
        if not isinstance(earlier, dict) or earlier.get("kind") != "response":
            continue
        for part in earlier.get("parts") or ():
            if (
                isinstance(part, dict)
                and part.get("part_kind") == "tool-call"
                and part.get("tool_name") == name
                and isinstance(part.get("tool_call_id"), str)
                and id(part) not in used
            ):
                return part
        return None
    return None


RULE = Rule(
    code="HM103",
    name="unknown-tool-retry",
    summary="tool-less 'Unknown tool name' retry-prompt (releases "
    "before 0.0.47) -> the invented call's retried tool-return",
    source="pydantic-ai 0.0.3-0.0.46 wrote 'Unknown tool name: …' retries without tool_name; 2.60+ records them as the "
    "call's ToolReturnPart, cause unknown_tool",
    facts="docs/framework.md §1.2",
    docs=Docs(
        what=(
            "Re-binds a tool-less 'Unknown tool name: ...' retry-prompt (written with no tool_name nor tool_call_id "
            "by 0.0.3-0.0.46) to the call it answers: the quoted name is matched against the tool calls of the "
            "nearest preceding response, each call used once, in order; on a match the part becomes that call's "
            "tool-return with outcome 'retried', the invented tool_name, the call's tool_call_id and cause "
            "unknown_tool. Without a matching call HM102 makes it feedback. Off with --causes framework."
        ),
        why=(
            "2.68's loader makes it model_retry feedback answering no call, so the call it answers is left "
            "dangling, and the cause is lost; 2.60+ records this event as the call's retried return."
        ),
        safety=(
            "Safe: the text names the tool the model invented, and the part is bound only to an unanswered call "
            "of that name in the response just before it, each call used once; the result is what 2.60+ records "
            "for the same event. Where no call matches, the part is left to HM102. Off with --causes framework, "
            "which keeps the loader's reading."
        ),
        before=(
            '[{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"get_wether",'
            '"args":{"city":"Oslo"},"tool_call_id":"call_7"}]},'
            '{"kind":"request","parts":[{"part_kind":"retry-prompt",'
            '"content":"Unknown tool name: \'get_wether\'. Available tools: get_weather",'
            '"tool_name":null,"tool_call_id":null}]}]'
        ),
        after=(
            '[{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"get_wether",'
            '"args":{"city":"Oslo"},"tool_call_id":"call_7"}]},'
            '{"kind":"request","parts":[{"part_kind":"tool-return",'
            '"content":"Unknown tool name: \'get_wether\'. Available tools: get_weather",'
            '"tool_name":"get_wether","tool_call_id":"call_7","outcome":"retried",'
            '"retry":{"cause":"unknown_tool","attempt":null,"max_retries":null}}]}]'
        ),
    ),
    looks=(PartKind(RETRY_PROMPT, message="request", test=is_tool_less_retry),),
    fix=rebind_unknown_tool,
    phase=REBIND,
    targets=Span(RETRY_PARTS, None),
)
