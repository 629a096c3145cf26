"""HM406: a call before the last response that no result answers (a dangling call)."""

from __future__ import annotations

from histmig.rules.base import ABSENT_PART, PAIR, Change, Context, Docs, Finding, Messages, Rule
from histmig.rules.pairing import LOOK, TARGETS, analyse, close_calls, describe, whole_only


def find_dangling(messages: Messages, ctx: Context) -> list[Finding]:
    """Each call of a response before the last one that no later result answers (a run that
    crashed or timed out, a shadowed id)."""
    pairing = analyse(messages)
    return [
        Finding("HM406", m, p, f"{describe(messages, m, p)} has no result", "dangling", pairing.certainty)
        for m, p in sorted(pairing.dangling)
    ]


@whole_only(find_dangling)
def answer_dangling(messages: Messages, ctx: Context) -> list[Change]:
    """Answer each dangling call before the last response with the interrupted return 2.68
    synthesizes before every request (``_repair_dangling_tool_calls``), built and placed as 2.68
    builds and places it (:func:`histmig.rules.pairing.close_calls`)."""
    calls = analyse(messages).dangling
    return [
        Change("HM406", m, p, ABSENT_PART, "tool-return", "dangling", "exact") for m, p in close_calls(messages, calls)
    ]


RULE = Rule(
    code="HM406",
    name="dangling-call",
    summary="a call before the last response without a result -> the interrupted return 2.68 adds before every request",
    source="pydantic-ai 2.68 pydantic_ai/messages.py _repair_dangling_tool_calls, _synthesized_tool_returns (the "
    "interrupted return added before every request)",
    facts="docs/framework.md §2.6 (the pairing passes before every request: _clean_message_history)",
    docs=Docs(
        what=(
            "Finds a tool call of a response before the last one that no later result answers (a run that crashed "
            "or timed out mid-tool, a shadowed id). The fix stores the return 2.68 synthesizes for it before every "
            "request: outcome 'interrupted', the framework's content, the call's tool_name, tool_call_id and "
            "tool_kind, "
            "a metadata marker, the timestamp of the response it repairs, placed after the results of the request "
            "that follows (or in a new request)."
        ),
        why=(
            "Providers reject a call without a result ('tool_use ids were found without tool_result blocks'); 2.68 "
            "repairs it again on every request, and nobody sees how many stored conversations are broken."
        ),
        safety=(
            "Safe: it stores once the return 2.68 adds before every request, built and placed exactly as 2.68 "
            "builds and places it (its content, outcome interrupted, the synthesized-return marker, the timestamp "
            "of the response it repairs), so the model sees what it already saw."
        ),
        before=(
            '[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"Weather in Oslo?"}]},'
            '{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"get_weather","args":{"city":"Oslo"},'
            '"tool_call_id":"call_1"}],"timestamp":"2025-05-01T10:00:01Z"},'
            '{"kind":"request","parts":[{"part_kind":"user-prompt","content":"still there?"}]},'
            '{"kind":"response","parts":[{"part_kind":"text","content":"Yes."}]}]'
        ),
        after=(
            '[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"Weather in Oslo?"}]},'
            '{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"get_weather","args":{"city":"Oslo"},'
            '"tool_call_id":"call_1"}],"timestamp":"2025-05-01T10:00:01Z"},'
            '{"kind":"request","parts":[{"tool_name":"get_weather",'
            '"content":"The tool call was interrupted before a result was produced.",'
            '"tool_call_id":"call_1","tool_kind":null,"metadata":{"pydantic_ai_synthesized_tool_return":true},'
            '"timestamp":"2025-05-01T10:00:01Z",'
            '"outcome":"interrupted","retry":null,"part_kind":"tool-return"},{"part_kind":"user-prompt",'
            '"content":"still there?"}]},'
            '{"kind":"response","parts":[{"part_kind":"text","content":"Yes."}]}]'
        ),
        severity=(
            "Error: providers refuse a call without a result; 2.68 answers it with an interrupted return before "
            "every request, which the safe fix stores."
        ),
    ),
    looks=(LOOK,),
    targets=TARGETS,
    fix=answer_dangling,
    phase=PAIR,
    find=find_dangling,
)
