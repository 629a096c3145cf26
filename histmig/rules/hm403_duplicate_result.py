"""HM403: two results for one call."""

from __future__ import annotations

from histmig.rules.base import PAIR, Context, Docs, Finding, Messages, Rule
from histmig.rules.pairing import LOOK, TARGETS, analyse, describe


def find_duplicates(messages: Messages, ctx: Context) -> list[Finding]:
    """Each result whose id an earlier call had, that call being answered already: 2.68 keeps
    it and sends two results for one call. No fix: which of the two the model should have seen
    is not in the history."""
    pairing = analyse(messages)
    return [
        Finding(
            "HM403",
            m,
            p,
            f"{describe(messages, m, p)} answers the call at messages[{first[0]}].parts[{first[1]}], which an "
            "earlier result answered",
            "duplicate",
            pairing.certainty,
        )
        for (m, p), first in pairing.duplicate
    ]


RULE = Rule(
    code="HM403",
    name="duplicate-result",
    summary="a second result for one call (reported; no fix)",
    source="pydantic-ai 2.68 pydantic_ai/messages.py _dangling_tool_calls_by_response (a result answers the oldest "
    "open call with its id; a second one answers none)",
    facts="docs/framework.md §2.6 (the pairing passes before every request: _clean_message_history)",
    docs=Docs(
        what=(
            "Finds a tool-return whose call was already answered by an earlier result: the ordered matching walk "
            "2.68 uses finds no open call for it. Reported only: which of the two results the model should have "
            "seen is not in the history."
        ),
        why="The framework sends both; providers differ in what they "
        "make of two results for one call, and some refuse it.",
        safety=("No fix: which of the two results the model should have seen is not in the history."),
        before=(
            '[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"Weather in Oslo?"}]},'
            '{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"t","args":{},"tool_call_id":"c1"}]},'
            '{"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"t","content":"a","tool_call_id":"c1"},'
            '{"part_kind":"tool-return","tool_name":"t","content":"b","tool_call_id":"c1"}]}]'
        ),
        severity=(
            "Error: 2.68 sends both results, and providers differ on two results for one call (some refuse it); "
            "no fix can tell which one the tool gave."
        ),
    ),
    looks=(LOOK,),
    targets=TARGETS,
    phase=PAIR,
    find=find_duplicates,
)
