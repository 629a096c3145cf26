"""HM505: for a target from 1.92.0 before 2.10.0, a response ``state`` that release cannot
load becomes the nearest one it can."""

from __future__ import annotations

from typing import Any, Literal, Optional

from histmig.rules.base import ROLLBACK, Change, Context, Docs, Message, Messages, Rule, ValueField
from histmig.rules.rollback import evidence
from histmig.schema.releases import EVERY, RESPONSE_STATES, STATE_FIELD, Span, includes

LOADED_STATES = tuple(state for state, spans in RESPONSE_STATES.items() if spans == EVERY)
"""The states every release loads (``complete``, ``interrupted``)."""


def has_newer_state(message: Message, part: Any = None) -> bool:
    """A response whose ``state`` is a value not every release with the field loads
    (``incomplete``, ``suspended``)."""
    state = message.get("state")
    return (
        message.get("kind") == "response"
        and isinstance(state, str)
        and state in RESPONSE_STATES
        and state not in LOADED_STATES
    )


def rollback_response_state(messages: Messages, ctx: Context) -> list[Change]:
    """Write the nearest ``state`` the target loads for one it cannot (``ModelResponseState``:
    ``complete``/``interrupted`` from 1.92.0, ``incomplete`` from 1.97.0, ``suspended`` from
    2.10.0): a response that did not complete is ``incomplete`` where the target has the value,
    else ``interrupted``; the value written over is reported as lost."""
    changes: list[Change] = []
    nearest = "incomplete" if includes(RESPONSE_STATES["incomplete"], ctx.target) else "interrupted"
    for m_index, message in enumerate(messages):
        if (
            isinstance(message, dict)
            and has_newer_state(message)
            and not includes(RESPONSE_STATES[message["state"]], ctx.target)
        ):
            said = evidence({"state": message["state"]}, f"written as {nearest!r}")
            message["state"] = nearest
            changes.append(Change("HM505", m_index, None, "state", "state", said, "exact"))
    return changes


RULE = Rule(
    code="HM505",
    name="response-state",
    summary="(--target 1.92.0 to before 2.10.0) response state 'suspended' "
    "/ 'incomplete' the target lacks -> the nearest it has",
    source="pydantic-ai ModelResponseState (pydantic_ai/messages.py) of releases 1.92.0, 1.97.0 and 2.10.0",
    facts="docs/framework.md §3.3 (state 1.92.0)",
    docs=Docs(
        what=(
            "For a --target from 1.92.0 before 2.10.0, writes state 'incomplete' (from 1.97.0) or else "
            "'interrupted' for "
            "a response state the target cannot load ('suspended' before 2.10.0, 'incomplete' before 1.97.0); the "
            "value written over is reported as lost."
        ),
        why="Those releases know the state field but not every value: any other fails the load of the whole history.",
        safety=(
            "Safe: the state becomes the nearest value the target has (incomplete, else interrupted), and the "
            "value it replaces is named in the change's evidence."
        ),
        before='[{"kind":"response","parts":[{"part_kind":"text","content":"Working on it"}],"state":"suspended"}]',
        after='[{"kind":"response","parts":[{"part_kind":"text","content":"Working on it"}],"state":"incomplete"}]',
        target="2.0.0",
    ),
    looks=(ValueField("state", message="response", quiet=Optional[Literal[LOADED_STATES]], test=has_newer_state),),
    fix=rollback_response_state,
    phase=ROLLBACK,
    targets=Span(STATE_FIELD, RESPONSE_STATES["suspended"][-1].since),
)
