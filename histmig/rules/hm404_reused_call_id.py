"""HM404: a call reusing the id of an unanswered call of an earlier response."""

from __future__ import annotations

from histmig.rules.base import PAIR, Context, Docs, Finding, Messages, Rule
from histmig.rules.pairing import LOOK, TARGETS, analyse, describe


def find_reused_ids(messages: Messages, ctx: Context) -> list[Finding]:
    """Each call whose ``tool_call_id`` is that of a call of an earlier response still without
    a result: the earlier call can no longer be answered (any later result answers the new one),
    so it is dangling (HM406). No fix of its own: the ids are what the provider wrote."""
    pairing = analyse(messages)
    return [
        Finding(
            "HM404",
            m,
            p,
            f"{describe(messages, m, p)} reuses the id of the unanswered call at messages[{old[0]}].parts[{old[1]}]",
            "reused-id",
            pairing.certainty,
        )
        for (m, p), old in pairing.reused
    ]


RULE = Rule(
    code="HM404",
    name="reused-call-id",
    summary="a call reusing the id of an earlier response's unanswered "
    "call, which it shadows (reported; the shadowed call is HM406's)",
    source="pydantic-ai 2.68 pydantic_ai/messages.py _open_tool_calls (a call reusing an open call's id shadows it)",
    facts="docs/framework.md §2.6 (the pairing passes before every request: _clean_message_history)",
    docs=Docs(
        what=(
            "Finds a tool call whose tool_call_id is that of a call of an earlier response still without a result "
            "(some providers write call_1 in every response). The earlier call is shadowed: any later result answers "
            "the new call instead, so the earlier one is dangling, and HM406 answers it as 2.68 does. Reported only."
        ),
        why="The shadowed call never gets a result: providers reject the "
        "history, and analytics joining calls to results by id go wrong.",
        safety=(
            "No fix: the id is what the provider sent; renaming either call would need knowing which result was "
            "meant for which."
        ),
        before=(
            '[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"Weather in Oslo?"}]},'
            '{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"t","args":{},"tool_call_id":"call_1"}]},'
            '{"kind":"request","parts":[{"part_kind":"user-prompt","content":"never mind"}]},'
            '{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"t","args":{},"tool_call_id":"call_1"}]},'
            '{"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"t","content":"ok",'
            '"tool_call_id":"call_1"}]}]'
        ),
        severity=(
            "Error: the shadowed call never gets a result (2.68 pairs by id, oldest open call first), and "
            "providers refuse the history."
        ),
    ),
    looks=(LOOK,),
    targets=TARGETS,
    phase=PAIR,
    find=find_reused_ids,
)
