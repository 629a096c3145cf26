"""HM407: a call of the last response without a result (the live frontier)."""

from __future__ import annotations

from histmig.rules.base import ABSENT_PART, PAIR, Change, Context, Docs, Finding, Messages, Rule
from histmig.rules.pairing import LOOK, TARGETS, analyse, close_calls, frontier_finding, whole_only


def find_frontier(messages: Messages, ctx: Context) -> list[Finding]:
    """Each call of the last response without a result: the live frontier, which a run resumed
    with this history (or given ``deferred_tool_results``) may still answer. A warning, not an
    error: a run that ended waiting for a deferred tool's result is legitimate."""
    pairing = analyse(messages)
    return [
        frontier_finding(
            m,
            p,
            messages[m]["parts"][p].get("tool_name"),
            messages[m]["parts"][p].get("tool_call_id"),
            pairing.certainty,
        )
        for m, p in sorted(pairing.frontier)
    ]


@whole_only(find_frontier)
def close_frontier(messages: Messages, ctx: Context) -> list[Change]:
    """Answer each call of the last response with an interrupted return, as 2.68's
    ``repair_messages`` does with ``repair_last_response`` (the default of
    ``pydantic_ai.messages.repair_messages``): the run is abandoned, not resumed. Not on a
    fragment (:func:`~histmig.rules.pairing.whole_only`), nor on a record that names a
    conversation or whose calls another record answers (:meth:`histmig.engine.Plan.for_record`:
    its next run's record may answer them)."""
    calls = analyse(messages).frontier
    return [
        Change("HM407", m, p, ABSENT_PART, "tool-return", "frontier", "exact") for m, p in close_calls(messages, calls)
    ]


RULE = Rule(
    code="HM407",
    name="unanswered-last-call",
    summary="a call of the last response without a result (a warning: a resumed run may still answer it) -> closed "
    "with an interrupted return",
    source="pydantic-ai 2.68 pydantic_ai/messages.py repair_messages(repair_last_response=True) (the calls of the last "
    "response, left alone before a request)",
    facts="docs/framework.md §2.6 (the pairing passes before every request: _clean_message_history)",
    docs=Docs(
        what=(
            "Finds a tool call of the history's last response that no result answers: where a run stopped, crashed, "
            "or waits for a deferred tool's result. check reports it as a warning. The unsafe fix closes it with the "
            "interrupted return 2.68 synthesizes with repair_last_response, abandoning the run; not in a record that "
            "names a conversation (conversation_id, session_id, sessionId, ... in the record, or a column or "
            "partition directory of its table or file), whose next run may be in another record, nor in one whose "
            "calls another record of the input answers, a rejected one too (by tool_call_id; a call without one, by a "
            "record starting with a result without one), nor in a piece of a conversation, nor in a record whose "
            "--conversation key is missing or null."
        ),
        why=(
            "A provider refuses the history as it is, and Agent.run refuses to add a new prompt after it; but a "
            "resumed run may still answer the call, so closing it abandons work: only with --unsafe-fixes."
        ),
        safety=(
            "Unsafe: the calls of the last response are the live frontier that a resumed run or "
            "deferred_tool_results may still answer; closing them, as repair_messages(repair_last_response=True) "
            "does, abandons that work. Even with --unsafe-fixes a record that names a conversation keeps them "
            "open: its next run's record may hold their results. check reports them as a warning."
        ),
        before=(
            '[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"weather?"}]},'
            '{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"get_weather",'
            '"args":{"city":"Oslo"},"tool_call_id":"call_1"}],"timestamp":"2025-05-01T10:00:01Z"}]'
        ),
        after=(
            '[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"weather?"}]},'
            '{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"get_weather",'
            '"args":{"city":"Oslo"},"tool_call_id":"call_1"}],"timestamp":"2025-05-01T10:00:01Z"},'
            '{"parts":[{"tool_name":"get_weather",'
            '"content":"The tool call was interrupted before a result was produced.","tool_call_id":"call_1",'
            '"tool_kind":null,"metadata":{"pydantic_ai_synthesized_tool_return":true},'
            '"timestamp":"2025-05-01T10:00:01Z","outcome":"interrupted",'
            '"retry":null,"part_kind":"tool-return"}],"timestamp":null,"instructions":null,"kind":"request",'
            '"run_id":null,"conversation_id":null,'
            '"metadata":null,"state":"complete"}]'
        ),
        severity=(
            "Warning: 2.68 leaves the calls of the last response alone before a request (repair_last_response is "
            "off), as a resumed run or deferred_tool_results may still answer them; closing them is unsafe."
        ),
    ),
    looks=(LOOK,),
    targets=TARGETS,
    fix=close_frontier,
    applicability="unsafe",
    phase=PAIR,
    find=find_frontier,
    severity="warning",
)
