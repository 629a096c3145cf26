"""HM405: a call whose ``args`` text is not JSON (a stream cut mid-call)."""

from __future__ import annotations

from histmig.rules.base import PAIR, Context, Docs, Finding, Messages, Rule
from histmig.rules.pairing import LOOK, TARGETS, analyse, describe


def find_truncated_args(messages: Messages, ctx: Context) -> list[Finding]:
    """Each call whose ``args`` is text that is not JSON and that no retried result answers: a
    stream cut mid-call, which the run never validated (a call the framework answered with a
    validation retry is recorded history, not a finding). 2.68 keeps such a call as it is and
    closes it out like any other dangling call (``_repair_dangling_tool_calls``): no fix."""
    pairing = analyse(messages)
    return [
        Finding(
            "HM405", m, p, f"{describe(messages, m, p)} has args that are not JSON", "truncated-args", pairing.certainty
        )
        for m, p in pairing.truncated
    ]


RULE = Rule(
    code="HM405",
    name="truncated-args",
    summary="a tool call whose args text is not valid JSON, as a stream cut mid-call leaves it (reported; no fix)",
    source="pydantic-ai 2.68 pydantic_ai/messages.py _repair_dangling_tool_calls (a call whose args were cut "
    "mid-stream is kept and sent as it is)",
    facts="docs/framework.md §2.6 (the pairing passes before every request: _clean_message_history)",
    docs=Docs(
        what=(
            "Finds a tool call whose args is text that is not JSON and that no retried result answers: the response "
            "stream was cut in the middle of the call, and the run never validated it (a call the framework answered "
            "with a validation retry is history, not a finding). Reported only."
        ),
        why=(
            "The call's arguments are lost; 2.68 keeps the call verbatim (serializers degrade such args) and "
            "answers it as a dangling call if nothing did, so the history looks complete when it is not."
        ),
        safety=(
            "No fix: the arguments the model was producing are lost, and no fix could know them; 2.68 sends the "
            "call as it is."
        ),
        before=(
            '[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"Weather in Oslo?"}]},'
            '{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"get_weather",'
            '"args":"{\\"city\\": \\"Os","tool_call_id":"call_1"}]},'
            '{"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"get_weather","content":"12 C",'
            '"tool_call_id":"call_1"}]}]'
        ),
    ),
    looks=(LOOK,),
    targets=TARGETS,
    phase=PAIR,
    find=find_truncated_args,
)
