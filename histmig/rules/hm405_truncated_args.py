"""HM405: a call whose ``args`` text is not JSON (a stream cut mid-call)."""

from __future__ import annotations

from histmig.rules.base import PAIR, Context, Docs, Finding, Messages, Rule
from histmig.rules.pairing import LOOK, TARGETS, analyse, describe


def find_truncated_args(messages: Messages, ctx: Context) -> list[Finding]:
    """Each call whose ``args`` is text that is not JSON and that no retried result answers: a
    stream cut mid-call, which the run never validated (a call the framework answered with a
    validation retry is recorded history, not a finding). 2.68 keeps such a call as it is and
    closes it out like any other dangling call (``_repair_dangling_tool_calls``): no fix.

    A warning, not an error, for the last part of the last response when that response's
    ``finish_reason`` is ``"length"``: the framework's own record of a run it ended with
    ``IncompleteToolCall`` (``_agent_graph.check_incomplete_tool_call``: the token limit cut
    the call), which it refuses to continue from, so no fix can make it more than it is. Any
    other cut call is an error: a stream cut mid-history that the history hides."""
    pairing = analyse(messages)
    last = max((m for m, message in enumerate(messages) if _is_response(message)), default=-1)
    return [
        Finding(
            "HM405",
            m,
            p,
            f"{describe(messages, m, p)} has args that are not JSON"
            + (" (the token limit cut it: finish_reason 'length')" if _limit_cut(messages, last, m, p) else ""),
            "truncated-args",
            pairing.certainty,
            "warning" if _limit_cut(messages, last, m, p) else "error",
        )
        for m, p in pairing.truncated
    ]


def _is_response(message: object) -> bool:
    return isinstance(message, dict) and message.get("kind") == "response"


def _limit_cut(messages: Messages, last: int, m_index: int, p_index: int) -> bool:
    """Whether the call at ``(m_index, p_index)`` is the last part of the last response
    (``last``), and that response ended for its token limit (``finish_reason: "length"``)."""
    response = messages[m_index]
    return m_index == last and response.get("finish_reason") == "length" and p_index == len(response["parts"]) - 1


RULE = Rule(
    code="HM405",
    name="truncated-args",
    summary="a tool call whose args text is not valid JSON, as a stream cut mid-call leaves it (reported; no fix; "
    "a warning when the token limit cut the last response's last call)",
    source="pydantic-ai 2.68 pydantic_ai/messages.py _repair_dangling_tool_calls (a call whose args were cut "
    "mid-stream is kept and sent as it is)",
    facts="docs/framework.md §2.6 (the pairing passes before every request: _clean_message_history)",
    docs=Docs(
        what=(
            "Finds a tool call whose args is text that is not JSON and that no retried result answers: the response "
            "stream was cut in the middle of the call, and the run never validated it (a call the framework answered "
            "with a validation retry is history, not a finding). Reported only: an error, but a warning for the "
            "last part of the last response when it ended with finish_reason 'length', which is how 2.68 records a "
            "run it stopped with IncompleteToolCall (the token limit cut the call): the framework's own outcome, "
            "which no fix can improve and check does not fail on."
        ),
        why=(
            "The call's arguments are lost; 2.68 keeps the call verbatim (serializers degrade such args) and "
            "answers it as a dangling call if nothing did, so the history looks complete when it is not. Cut by "
            "the token limit in the last response, the run itself said so (IncompleteToolCall) and stopped there."
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
        severity=(
            "Error: a call cut mid-stream inside the history, which 2.68 keeps verbatim and closes as dangling, "
            "so the history looks complete when it is not. A warning for the last response's last call when that "
            "response has finish_reason 'length': the run ended with IncompleteToolCall "
            "(_agent_graph.check_incomplete_tool_call), the framework's own record of its token limit, and no fix"
            " improves it."
        ),
    ),
    looks=(LOOK,),
    targets=TARGETS,
    phase=PAIR,
    find=find_truncated_args,
)
