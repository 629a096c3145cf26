"""HM104: each retry's ``attempt`` (and, given the agent's budgets, ``max_retries``), as the
framework counted it; only with ``--attempts``."""

from __future__ import annotations

from typing import Any, Optional, Union, get_args

import msgspec

from histmig.rules.base import (
    RECOUNT,
    Budgets,
    Change,
    Context,
    Docs,
    Finding,
    Message,
    Messages,
    Part,
    PartKind,
    Rule,
    ValueField,
)
from histmig.rules.counting import Budget, Counted, Counting, History, Run, counting_rules, eras_between, release_range
from histmig.rules.retry import RETRY_PROMPT
from histmig.schema.releases import RETRY_PARTS, Span

CODE = "HM104"


class _Counted(msgspec.Struct, gc=False):
    """A ``retry`` whose ``attempt`` is a number: nothing to fill."""

    attempt: int


class AttemptLook(ValueField):
    """HM104's look at ``retry``: the screen passes a ``retry`` that is ``null`` or holds an
    ``attempt`` (:class:`_Counted`); the settled check takes 2.68's own ``RetryInfo`` with the
    ``attempt`` required, so a history holding a retry HM104 could still count is not settled
    (one whose attempt cannot be known then goes through validation and a second pass)."""

    __slots__ = ()

    def settled_type(self, declared: Any) -> Any:
        members = get_args(declared) if type(None) in get_args(declared) else (declared,)
        counted = tuple(_attempt_required(member) for member in members if member is not type(None))
        return Union[counted + ((type(None),) if len(counted) < len(members) else ())]


def _attempt_required(struct: Any) -> Any:
    """``struct`` (a msgspec struct of ``RetryInfo``) with ``attempt`` an ``int``, required."""
    fields = [
        (f.name, int) if f.name == "attempt" else (f.name, f.type) if f.required else (f.name, f.type, f.default)
        for f in msgspec.structs.fields(struct)
    ]
    return msgspec.defstruct(f"{struct.__name__}Counted", fields, kw_only=True, gc=False)


def has_null_attempt(message: Message, part: Part) -> bool:
    """A retried ``tool-return`` or a ``retry-feedback`` whose ``retry`` is an object with no
    ``attempt``: what HM101-HM103 write, and what 2.60+ writes for a retry it did not count."""
    retry = part.get("retry")
    return (
        isinstance(retry, dict)
        and retry.get("attempt") is None
        and (part.get("part_kind") == "retry-feedback" or part.get("outcome") == "retried")
    )


_HOW = {
    "run_id": "run start by run_id",
    "inferred": "run start inferred",
    "history": "run start at the history's start",
}
_WHY = {
    "deferred": (
        "deferred-retry",
        "a retry handed back through DeferredToolResults (its call was made by an earlier run): the framework "
        "charges no budget for it, attempt stays null",
    ),
    "cut": (
        "history-cut",
        "the history does not begin with its run's start (it opens on results of calls it does not hold: cut "
        "short, or resumed with deferred tool results): the count is not known, attempt stays null",
    ),
}
"""Why an attempt is not known: the evidence and the text of the finding."""


def _limit(budget: Budget, budgets: Budgets) -> int | None:
    """The budget a count is checked against, from the agent's ``budgets`` (``None``: not
    given): a tool's own or ``tools``, an output tool's own or ``output``, the run-wide
    ``output``, ``tools`` for an unknown name, or the hard-coded 1 of unknown names until
    1.39.1 (docs/framework.md §4)."""
    if not budgets:
        return None
    kind, name = budget
    if kind == "tool":
        return budgets.of_tool(name or "", budgets.tools)
    if kind == "output-tool":
        return budgets.of_tool(name or "", budgets.output)
    if kind == "output":
        return budgets.output
    return budgets.tools if kind == "unknown" else 1


def _evidence(counted: list[Counted], run: Run, eras: tuple[Counting, ...], counting: str) -> str:
    """The counter, how the run's start is known, and whose counting rules, e.g. ``tool
    counter, run start by run_id`` or ``output counter, run start inferred, counted as
    1.0.18-1.14.x did``."""
    counters = "/".join(sorted({c.counter for c in counted}))
    how = "history cut, count known since a reset" if run.cut else _HOW[run.how]
    if counting == "current":
        return f"{counters} counter, {how}"
    whose = release_range(*run.written) if counting == "writer" else eras[0].releases
    return f"{counters} counter, {how}, counted as {whose} did"


def fill_attempts(messages: Messages, ctx: Context) -> list[Change | Finding]:
    """Fill ``retry.attempt`` of every retry part that has none by replaying the counters of
    docs/framework.md §4 (:mod:`histmig.rules.counting`) under ``ctx.counting`` (today's rules,
    the writing releases', or a release's), and ``retry.max_retries`` from ``ctx.budgets``
    where it is null. An attempt already stored is never changed (the replay follows it).

    Where the attempt cannot be known it stays null and a :class:`Finding` says why: a retry
    handed back through ``DeferredToolResults``, a history that begins after its run began,
    releases that may have written the run but count it differently, an attempt above the
    budget given (a contradiction: neither value is written). The first refusal of an
    unavailable tool stays null without a finding: the framework does not charge it."""
    history = History(messages)
    found: list[Change | Finding] = []
    replays: dict[Counting, dict[tuple[int, int], Counted]] = {}
    modes = counting_rules(ctx.counting)
    for retry in history.retries:
        part = messages[retry.message]["parts"][retry.part]
        if not has_null_attempt(messages[retry.message], part):
            continue
        run = history.runs[retry.run]
        eras = eras_between(*run.written) if ctx.counting == "writer" else modes
        for era in eras:
            if era not in replays:
                replays[era] = history.replay(era)
        counted = [replays[era][retry.message, retry.part] for era in eras]
        place = (CODE, retry.message, retry.part)
        if len({(c.attempt, c.why) for c in counted}) > 1:
            each = "; ".join(
                f"{'null' if c.attempt is None else c.attempt} as {era.releases} counted"
                for era, c in zip(eras, counted)
            )
            text = (
                f"the releases that may have written this run ({release_range(*run.written)}, from its fields) count "
                f"it differently ({each}): attempt stays null"
            )
            found.append(Finding(*place, text, "writer-ambiguous", "derived"))
            continue
        attempt, why = counted[0].attempt, counted[0].why
        if attempt is None:
            if why in _WHY:
                evidence, text = _WHY[why]
                found.append(Finding(*place, text, evidence, "derived"))
            continue
        info = part["retry"]
        limits = {_limit(c.budget, ctx.budgets) for c in counted}
        stored = info.get("max_retries") if isinstance(info.get("max_retries"), int) else None
        limit = stored if stored is not None else next(iter(limits)) if len(limits) == 1 else None
        if limit is not None and attempt > limit:
            text = (
                f"attempt {attempt} is above the budget {limit} it was checked against: a contradiction (another "
                "budget, or other counting rules), neither is written"
            )
            found.append(Finding(*place, text, "budget-contradiction", "derived"))
            continue
        info["attempt"] = attempt
        after = f"attempt={attempt}"
        if stored is None and limit is not None:
            info["max_retries"] = limit
            after += f" max_retries={limit}"
        elif stored is None and len(limits) > 1:
            each = "; ".join(
                f"{limit} as {era.releases} counted"
                for era, limit in zip(eras, (_limit(c.budget, ctx.budgets) for c in counted))
            )
            found.append(
                Finding(
                    *place,
                    "max_retries stays null: the releases that may have written this run checked it against "
                    f"different budgets ({each})",
                    "writer-ambiguous",
                    "derived",
                )
            )
        found.append(
            Change(
                CODE,
                retry.message,
                retry.part,
                "attempt=null",
                after,
                _evidence(counted, run, eras, ctx.counting),
                "derived",
            )
        )
    return found


_NULL = '"retry":{"cause":"model_retry","attempt":null,"max_retries":null}'
_CALL = (
    '{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"fetch_page","args":{},"tool_call_id":"c%d"}]}'
)
_RETURN = (
    '{"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"fetch_page","content":"Timed out.",'
    '"tool_call_id":"c%d","outcome":"retried",%s}]}'
)
_PROMPT = '{"kind":"request","parts":[{"part_kind":"user-prompt","content":"Fetch the page."}]}'


def _example(*retries: Any) -> str:
    steps = [f"{_CALL % n},{_RETURN % (n, retry)}" for n, retry in enumerate(retries, start=1)]
    return f"[{_PROMPT},{','.join(steps)}]"


RULE = Rule(
    code=CODE,
    name="retry-attempt",
    summary="retry part whose retry.attempt is null -> the attempt the framework counted (only with --attempts)",
    source="pydantic-ai RetryInfo.attempt (2.60.0, pydantic_ai/messages.py) and the retry counters of the agent graph "
    "(pydantic_ai/_agent_graph.py, _tool_manager.py), release by release",
    facts="docs/framework.md §4",
    docs=Docs(
        what=(
            "With --attempts, fills retry.attempt of every retried tool-return and retry-feedback part that has none "
            "(the parts HM101-HM103 make, and native ones) by replaying the framework's counters: a counter per tool "
            "name, moved at step boundaries (a failed tool +1, a succeeded one reset), shared by several failing calls "
            "of one tool in one response; unknown tool names on their own; the run-wide output counter for tool-less "
            "feedback and output tools; the first refusal of an unavailable tool not charged; every counter reset at "
            "each run start (run_id, else a request of prompts). --counting picks today's rules or those of the "
            "releases that wrote the history; --max-retries gives the budgets that fill max_retries. An attempt "
            "already stored is never changed; one that cannot be known stays null and the report says why."
        ),
        why=(
            "Since 2.60 the framework records which retry each part was and the limit it was checked against, so "
            "attempt == max_retries marks the last retry before a run would raise. A migrated legacy history has "
            "attempt null, as the framework's own loader leaves it, so years of history drop out of every audit of "
            "flaky tools and output validators."
        ),
        safety=(
            "Safe: it writes only an attempt (and a budget given with --max-retries) where the part has none, as "
            "the framework's counters would have recorded it; a value already stored is never changed, and where "
            "the count cannot be known the attempt stays null and a finding says why. Opt-in (--attempts): the "
            "loader itself leaves attempt null."
        ),
        before=_example(_NULL, _NULL),
        after=_example(_NULL.replace('"attempt":null', '"attempt":1'), _NULL.replace('"attempt":null', '"attempt":2')),
    ),
    looks=(
        AttemptLook(
            "retry",
            parts=("tool-return", "retry-feedback"),
            message="request",
            quiet=Optional[_Counted],
            test=has_null_attempt,
        ),
        PartKind(RETRY_PROMPT, message="request"),
    ),
    fix=fill_attempts,
    phase=RECOUNT,
    opt_in="attempts",
    targets=Span(RETRY_PARTS, None),  # the parts whose retry.attempt it fills are 2.60.0's
)
