"""HM401: a result whose ``tool_call_id`` no call has (an orphaned result)."""

from __future__ import annotations

from histmig.rules.base import PAIR, Change, Context, Docs, Finding, Messages, Rule
from histmig.rules.pairing import LOOK, TARGETS, analyse, describe, drop_parts, is_call, lift_stand_ins, whole_only


def find_orphans(messages: Messages, ctx: Context) -> list[Finding]:
    """Each result whose ``tool_call_id`` no call of the history has (2.68's
    ``_drop_orphaned_tool_results`` drops it before every request)."""
    pairing = analyse(messages)
    return [
        Finding("HM401", m, p, f"{describe(messages, m, p)} answers no call", "orphaned", pairing.certainty)
        for m, p in pairing.orphaned
    ]


@whole_only(find_orphans)
def repair_or_drop(messages: Messages, ctx: Context) -> list[Change]:
    """Re-pair each orphaned result that is the only candidate for the only unanswered call of
    the same tool in the response right before its request (its content is kept, where 2.68
    would drop it and answer the call with an interrupted return); drop the others, as 2.68
    does before sending (an interior request left empty goes, the last message stays, as in
    ``_drop_orphaned_tool_results``), each written whole into its change (a re-paired part as
    it was). The interrupted returns a safe run synthesized go first
    (:func:`~histmig.rules.pairing.lift_stand_ins`): the call one answered is open again, so
    ``convert --unsafe-fixes`` after ``convert`` re-pairs as one run with the unsafe fixes."""
    lifted = lift_stand_ins(messages, "HM401")
    pairing = analyse(messages)
    orphans = pairing.orphaned
    unanswered = set(pairing.dangling + pairing.frontier)
    changes: list[Change] = lifted
    rebound: set[tuple[int, int]] = set()
    for m_index, p_index in orphans:
        call = _only_call(messages, m_index, p_index, orphans, unanswered)
        if call is not None:
            part = messages[m_index]["parts"][p_index]
            was = dict(part)
            part["tool_call_id"] = messages[call[0]]["parts"][call[1]]["tool_call_id"]
            rebound.add((m_index, p_index))
            changes.append(
                Change(
                    "HM401",
                    m_index,
                    p_index,
                    part["part_kind"],
                    part["part_kind"],
                    "only-open-call",
                    "derived",
                    tool_call_id=part["tool_call_id"],
                    removed=was,
                )
            )
    return changes + drop_parts(messages, [place for place in orphans if place not in rebound], "HM401", "orphaned")


def _only_call(
    messages: Messages, m_index: int, p_index: int, orphans: list[tuple[int, int]], unanswered: set[tuple[int, int]]
) -> tuple[int, int] | None:
    """The place of the one unanswered call of the orphan's tool in the response right before
    its request, when the orphan is that request's only orphan of that tool; else ``None``."""
    if m_index == 0 or not isinstance(messages[m_index - 1], dict) or messages[m_index - 1].get("kind") != "response":
        return None
    name = messages[m_index]["parts"][p_index].get("tool_name")
    response = messages[m_index - 1]
    calls = [
        (m_index - 1, i)
        for i, part in enumerate(response.get("parts") or ())
        if isinstance(part, dict) and is_call(response, part) and part.get("tool_name") == name
    ]
    open_calls = [place for place in calls if place in unanswered]
    rivals = [
        place
        for place in orphans
        if place[0] == m_index and messages[m_index]["parts"][place[1]].get("tool_name") == name
    ]
    return open_calls[0] if len(open_calls) == 1 and rivals == [(m_index, p_index)] else None


RULE = Rule(
    code="HM401",
    name="orphaned-result",
    summary="tool result answering no call -> re-paired to the only open "
    "call of its tool, else dropped (written whole into the report)",
    source="pydantic-ai 2.68 pydantic_ai/messages.py _drop_orphaned_tool_results (a result whose id no earlier call "
    "has is dropped before every request)",
    facts="docs/framework.md §2.6 (the pairing passes before every request: _clean_message_history)",
    docs=Docs(
        what=(
            "Finds a tool-return (retried or not) whose tool_call_id no call of the history has: context eviction, "
            "a mis-built id or an adapter round-trip left a result without its call. The fix re-pairs it with the "
            "call when it is the only candidate for the only unanswered call of the same tool in the response just "
            "before it (keeping its content), and otherwise drops it as 2.68 does before sending; a dropped part is "
            "written whole into the report's change row, so nothing is lost. An interrupted return a safe run "
            "synthesized (HM406) is no result: the fix lifts it first, so convert --unsafe-fixes after convert "
            "writes what one run with --unsafe-fixes writes."
        ),
        why=(
            "Providers reject a result without its call ('No tool call found for function call output'); 2.68 drops "
            "it before every request, so the stored history says one thing and the model sees another."
        ),
        safety=(
            "Unsafe: the fix either re-pairs the result with a call (a judgement: the only open call of its tool "
            "in the response before it) or drops the result, which removes stored content from the history (it is "
            "written whole into the report's change row). 2.68 drops it before every request anyway, but the "
            "stored history is changed."
        ),
        before=(
            '[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"Weather in Oslo?"}]},'
            '{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"get_weather","args":{"city":"Oslo"},'
            '"tool_call_id":"call_1"}]},'
            '{"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"get_weather","content":"12 C",'
            '"tool_call_id":"call_X"}]}]'
        ),
        after=(
            '[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"Weather in Oslo?"}]},'
            '{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"get_weather","args":{"city":"Oslo"},'
            '"tool_call_id":"call_1"}]},'
            '{"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"get_weather","content":"12 C",'
            '"tool_call_id":"call_1"}]}]'
        ),
        severity=(
            "Error: 2.68 drops the result before every request and a provider refuses it as it is, so what is "
            "stored is not what the model sees; the unsafe fix re-pairs or drops it."
        ),
    ),
    looks=(LOOK,),
    targets=TARGETS,
    fix=repair_or_drop,
    applicability="unsafe",
    phase=PAIR,
    find=find_orphans,
)
