"""HM402: a result placed before the call it answers."""

from __future__ import annotations

from histmig.rules.base import PAIR, Change, Context, Docs, Finding, Messages, Rule
from histmig.rules.pairing import LOOK, TARGETS, analyse, describe, drop_parts, lift_stand_ins, whole_only


def find_early_results(messages: Messages, ctx: Context) -> list[Finding]:
    """Each result whose call comes later in the history: no earlier call has its id, so 2.68
    drops it before every request (``_drop_orphaned_tool_results``) and answers the call with an
    interrupted return."""
    pairing = analyse(messages)
    return [
        Finding(
            "HM402", m, p, f"{describe(messages, m, p)} comes before its call", "result-before-call", pairing.certainty
        )
        for m, p in pairing.before_call
    ]


@whole_only(find_early_results)
def drop_early_results(messages: Messages, ctx: Context) -> list[Change]:
    """Drop each result placed before its call, as 2.68 does before sending, written whole into
    its change (the call it meant to answer is then dangling: HM406 answers it as 2.68 would).
    The interrupted returns a safe run synthesized go first (:func:`~histmig.rules.pairing.lift_stand_ins`)."""
    lifted = lift_stand_ins(messages, "HM402")
    return lifted + drop_parts(messages, analyse(messages).before_call, "HM402", "result-before-call")


RULE = Rule(
    code="HM402",
    name="result-before-call",
    summary="tool result placed before the call it answers -> dropped (written whole into the report)",
    source="pydantic-ai 2.68 pydantic_ai/messages.py _drop_orphaned_tool_results "
    "(a result placed before its call is dropped as orphaned)",
    facts="docs/framework.md §2.6 (the pairing passes before every request: _clean_message_history)",
    docs=Docs(
        what=(
            "Finds a tool-return whose call comes later in the history (a hand-built or reordered history). The fix "
            "drops it, as 2.68 does before sending, writing it whole into the report; the call it meant to answer is "
            "then answered as 2.68 answers a dangling call (HM406)."
        ),
        why="No earlier call has its id, so providers reject it; 2.68 drops it before every request.",
        safety=(
            "Unsafe: the result is dropped, which removes stored content (written whole into the report's change "
            "row), as 2.68 drops it before every request; moving it after its call would reorder the "
            "conversation, which the framework does not do either."
        ),
        before=(
            '[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"go"}]},'
            '{"kind":"response","parts":[{"part_kind":"text","content":"On it."}]},'
            '{"kind":"request","parts":[{"part_kind":"user-prompt","content":"now"},{"part_kind":"tool-return",'
            '"tool_name":"t","content":"early","tool_call_id":"c1"}]},'
            '{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"t","args":{},"tool_call_id":"c1"}]},'
            '{"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"t","content":"42",'
            '"tool_call_id":"c1"}]}]'
        ),
        after=(
            '[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"go"}]},'
            '{"kind":"response","parts":[{"part_kind":"text","content":"On it."}]},'
            '{"kind":"request","parts":[{"part_kind":"user-prompt","content":"now"}]},'
            '{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"t","args":{},"tool_call_id":"c1"}]},'
            '{"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"t","content":"42",'
            '"tool_call_id":"c1"}]}]'
        ),
        severity=(
            "Error: 2.68 drops the result as orphaned before every request and answers its call with an "
            "interrupted return; providers refuse a result before its call."
        ),
    ),
    looks=(LOOK,),
    targets=TARGETS,
    fix=drop_early_results,
    applicability="unsafe",
    phase=PAIR,
    find=find_early_results,
)
