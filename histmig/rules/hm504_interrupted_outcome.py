"""HM504: for a target from 1.67.0 before 2.10.0, a tool return's ``outcome: "interrupted"``
becomes ``"failed"``."""

from __future__ import annotations

from typing import Any

from histmig.rules.base import ROLLBACK, Change, Context, Docs, Message, Messages, Rule, ValueField, iter_parts
from histmig.rules.rollback import QUIET_OUTCOME, evidence
from histmig.schema.releases import OUTCOME_FIELD, OUTCOMES, Span, includes

INTERRUPTED = "interrupted"


def is_interrupted_return(message: Message, part: Any) -> bool:
    """A request's ``tool-return`` with ``outcome: "interrupted"``."""
    return message.get("kind") == "request" and part.get("outcome") == INTERRUPTED


def rollback_interrupted_outcome(messages: Messages, ctx: Context) -> list[Change]:
    """Write ``outcome: "failed"`` for ``"interrupted"`` on every request ``tool-return``, for
    a target that has the field (1.67.0) but not the value (2.10.0; docs/framework.md §3.3):
    the call did not complete, which is what ``failed`` says there; ``interrupted`` is
    reported as lost."""
    changes: list[Change] = []
    if includes(OUTCOMES[INTERRUPTED], ctx.target):
        return changes
    for m_index, p_index, message, part in iter_parts(messages, "request"):
        if part.get("part_kind") == "tool-return" and is_interrupted_return(message, part):
            part["outcome"] = "failed"
            changes.append(
                Change(
                    "HM504",
                    m_index,
                    p_index,
                    "tool-return",
                    "tool-return",
                    evidence({"outcome": INTERRUPTED}, "written as 'failed'"),
                    "exact",
                )
            )
    return changes


RULE = Rule(
    code="HM504",
    name="interrupted-outcome",
    summary="(--target 1.67.0 to before 2.10.0) tool-return outcome 'interrupted' -> 'failed', reported lost",
    source="pydantic-ai ToolReturnPart.outcome (pydantic_ai/messages.py): the field from 1.67.0, its value "
    "'interrupted' from 2.10.0",
    facts="docs/framework.md §3.3 (outcome 1.67.0, 'interrupted' 2.10.0)",
    docs=Docs(
        what="For a --target from 1.67.0 before 2.10.0, writes outcome 'failed' for 'interrupted' on a tool-return; "
        "'interrupted' is reported as lost.",
        why="Those releases know outcome but only 'success', 'failed' and "
        "'denied': any other value fails the load of the whole history.",
        safety=(
            "Safe: failed is the nearest value those releases have for a call that produced no result; the "
            "interrupted it replaces is named in the change's evidence."
        ),
        before='[{"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"fetch","content":"",'
        '"tool_call_id":"call_4","outcome":"interrupted"}]}]',
        after='[{"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"fetch","content":"",'
        '"tool_call_id":"call_4","outcome":"failed"}]}]',
        target="2.0.0",
    ),
    looks=(
        ValueField("outcome", parts="tool-return", message="request", quiet=QUIET_OUTCOME, test=is_interrupted_return),
    ),
    fix=rollback_interrupted_outcome,
    phase=ROLLBACK,
    targets=Span(OUTCOME_FIELD, OUTCOMES[INTERRUPTED][-1].since),
)
