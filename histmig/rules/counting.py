"""Retry counting as the framework did it, release by release, replayed over a stored history
(docs/framework.md §4), for HM104.

A retry part's ``attempt`` is the count the agent loop had charged for it: a per-tool counter
keyed by the called name (``RunContext.retries``) for a tool-bound retry, the run-wide output
counter for tool-less feedback; both start afresh at every run start. How the counters moved
changed over the releases (§4 "History"); each range of releases that counted alike is one
:class:`Counting`, and :data:`ERAS` lists them oldest first, the last being today's (2.16.0+,
checked against pydantic-ai 2.68 and the corpus's 2.60.0/2.68.0 histories).

:class:`History` reads what the replay needs from a history once: its runs (from ``run_id``
where the messages carry it, else a start inferred from the shape: a request of prompts that
answers no call), its steps (a request and the results it holds) and its retry parts; then
:meth:`History.replay` counts them under one :class:`Counting`. Where the counters cannot be
known, a :class:`Counted` says why: a retry handed back through ``DeferredToolResults`` (its
call made by an earlier run: the framework charges no budget for it), or a history that does
not begin with its run's start (the counts carried in are not stored).

The release that wrote a run is told, where ``--counting writer`` asks for it, from the fields
its messages hold (:data:`FIELDS`, docs/framework.md §3.3): every release from the first that
writes a field on writes it, and some fields were written only until a release.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from histmig.rules.base import Messages, Part
from histmig.rules.causes import infer_cause
from histmig.rules.pairing import is_synthesized
from histmig.schema.releases import Release, release


@dataclass(frozen=True)
class Counting:
    """How the releases from ``first`` up to the next :class:`Counting`'s counted retries
    (docs/framework.md §4 "History"), named ``releases``:

    - ``per_call``: a tool's counter moved at each failing call (two failures of one tool in
      one response: attempts 1 and 2), else once per step for every tool that failed in it
      (both attempt 1);
    - ``reset_untouched``: at each step every tool that did not fail was reset, else only the
      tools that succeeded (untouched tools keep their count);
    - ``unknown``: an unknown tool name charged the ``run-wide`` output counter (its attempt
      and budget), ``both`` a counter of its own (the attempt) and the run-wide one once per
      step, or only its ``own``; ``unknown_limit_one``: its own budget was 1 whatever the
      agent's;
    - ``output_tools_run_wide``: an output (result) tool's failure charged only the run-wide
      counter (result tools were no tools before the tool manager of 0.4.4), else its own
      counter, the run-wide one bumped as well;
    - ``free_first_refusal``: the first refusal of an unavailable tool in a run is not
      charged (2.30.0+, §1.3; earlier releases wrote no such refusal)."""

    releases: str
    first: Release
    per_call: bool
    reset_untouched: bool
    unknown: Literal["run-wide", "both", "own"]
    unknown_limit_one: bool
    output_tools_run_wide: bool
    free_first_refusal: bool


ERAS: tuple[Counting, ...] = (
    Counting("0.0.1-0.4.3", Release(0, 0, 1), True, False, "run-wide", False, True, False),
    Counting("0.4.4-0.4.8", Release(0, 4, 4), True, False, "both", True, False, False),
    Counting("0.4.9-1.39.1", Release(0, 4, 9), False, True, "both", True, False, False),
    Counting("1.40.0-1.79.0", Release(1, 40, 0), False, True, "both", False, False, False),
    Counting("1.80.0-2.15.0", Release(1, 80, 0), False, True, "own", False, False, False),
    Counting("2.16.0+", Release(2, 16, 0), False, False, "own", False, False, True),
)
"""The counting of every release range, oldest first (docs/framework.md §4 "History"; the
output-tool row from the tool manager of 0.4.4). The 1.x line up to 1.107.10 counts as
1.80.0-2.15.0. The last is today's: what ``--counting current`` replays."""


def counting_rules(mode: str) -> tuple[Counting, ...]:
    """The :class:`Counting`\\ s ``mode`` may replay: ``current`` today's, ``writer`` every
    one (each run then uses those of the releases that may have written it), a release the one
    of its range. Raises ``ValueError`` for any other ``mode``."""
    if mode == "current":
        return ERAS[-1:]
    if mode == "writer":
        return ERAS
    try:
        given = release(mode)
    except ValueError:
        raise ValueError(f"--counting must be current, writer or a release such as 1.0.18, not {mode!r}") from None
    return (next(era for era in reversed(ERAS) if era.first <= given),)


def eras_between(low: Release, high: Release | None) -> tuple[Counting, ...]:
    """The :class:`Counting`\\ s of the releases from ``low`` up to before ``high`` (``None``:
    no end); every one when the range is empty (the fields contradict each other)."""
    found = tuple(
        era
        for n, era in enumerate(ERAS)
        if (high is None or era.first < high) and (n + 1 == len(ERAS) or ERAS[n + 1].first > low)
    )
    return found or ERAS


Where = Literal["request", "response", "message", "usage", "tool-call", "tool-return", "thinking"]

FIELDS: tuple[tuple[Where, str | None, str, str | None], ...] = (
    ("request", "instructions", "0.1.0", None),
    ("response", "usage", "0.2.0", None),
    ("response", "vendor_details", "0.2.5", "0.7.2"),
    ("response", "vendor_id", "0.2.5", "0.7.2"),
    ("thinking", None, "0.3.0", None),
    ("tool-return", "metadata", "0.3.5", None),
    ("usage", "request_tokens", "0.2.0", "0.7.2"),
    ("usage", "input_tokens", "0.7.3", None),
    ("response", "provider_name", "0.7.5", None),
    ("response", "provider_response_id", "0.8.1", None),
    ("response", "finish_reason", "1.0.2", None),
    ("tool-call", "id", "1.0.18", None),
    ("message", "run_id", "1.15.0", None),
    ("message", "metadata", "1.20.0", None),
    ("response", "provider_url", "1.31.0", None),
    ("request", "timestamp", "1.38.0", None),
    ("message", "conversation_id", "1.89.0", None),
    ("response", "state", "1.92.0", None),
    ("tool-call", "tool_kind", "1.95.0", None),
    ("request", "state", "2.0.0", None),
    ("usage", "cost", "2.23.0", None),
    ("response", "history_digest", "2.58.0", None),
)
"""Where a field (``None``: the part itself) is, the first release that writes it and the
last, if it is no longer written (docs/framework.md §3.2, §3.3): a run holding it was written by
a release in that range."""

ALWAYS_WRITTEN = frozenset({("message", "run_id"), ("request", "state"), ("response", "state"), ("response", "usage")})
"""Fields every release from their first writes on every message of their kind, never as
``null`` (a run id, a state, a usage object): a run whose messages of that kind all lack one
was written before its first release (a history dumped without its ``null`` fields still
holds these)."""

_QUOTED_TOOLS = re.compile(r"Unknown tool name: '[^']*'\. Available tools: '")
_PLAIN_TOOLS = re.compile(r"Unknown tool name: '[^']*'\. Available tools: [^']")
"""The unknown-tool text listed the available names unquoted until 0.4.3, quoted from 0.4.4
(docs/framework.md §1.2)."""


def _places(message: dict[str, Any]) -> list[tuple[Where, dict[str, Any]]]:
    """The objects of ``message`` a field of :data:`FIELDS` may be on: the message (as itself
    and as ``message``), its usage, its parts."""
    kind = message.get("kind")
    found: list[tuple[Where, dict[str, Any]]] = [("message", message)]
    if kind in ("request", "response"):
        found.append((kind, message))
    if isinstance(message.get("usage"), dict):
        found.append(("usage", message["usage"]))
    parts = message.get("parts")
    for part in parts if isinstance(parts, list) else ():
        if isinstance(part, dict) and part.get("part_kind") in ("tool-call", "tool-return", "thinking"):
            found.append((part["part_kind"], part))
    return found


def written_between(messages: Messages) -> tuple[Release, Release | None]:
    """The releases that may have written ``messages`` (one run's), from their fields
    (:data:`FIELDS`, :data:`ALWAYS_WRITTEN`) and their unknown-tool texts: ``(low, high)``,
    from ``low`` up to before ``high`` (``None``: no end)."""
    low, high = Release(0, 0, 1), None
    seen: set[tuple[Where, str | None]] = set()
    held: set[Where] = set()

    def until(bound: Release) -> None:
        nonlocal high
        high = bound if high is None else min(high, bound)

    for message in messages:
        if not isinstance(message, dict):
            continue
        for where, obj in _places(message):
            held.add(where)
            seen.update((where, key) for key in obj)
            seen.add((where, None))
        for part in message.get("parts") or ():
            content = part.get("content") if isinstance(part, dict) else None
            if isinstance(content, str) and _QUOTED_TOOLS.match(content):
                low = max(low, Release(0, 4, 4))
            elif isinstance(content, str) and _PLAIN_TOOLS.match(content):
                until(Release(0, 4, 4))
    for where, name, first, last in FIELDS:
        if (where, name) in seen:
            low = max(low, release(first))
            if last is not None:
                major, minor, patch = release(last)
                until(Release(major, minor, patch + 1))
        elif (where, name) in ALWAYS_WRITTEN and where in held:
            until(release(first))
    return low, high


def release_range(low: Release, high: Release | None) -> str:
    """The releases from ``low`` up to before ``high`` as a user reads them: ``0.3.5-0.7.2``,
    ``1.0.18-1.14.x``, ``2.0.0+``."""
    start = ".".join(map(str, low))
    if high is None:
        return f"{start}+"
    major, minor, patch = high
    return f"{start}-" + (
        f"{major}.{minor}.{patch - 1}" if patch else f"{major}.{minor - 1}.x" if minor else f"{major - 1}.x"
    )


Why = Literal["deferred", "cut", "free"]
Budget = tuple[Literal["tool", "output-tool", "output", "unknown", "one"], str | None]
"""Which budget limits a count: a tool's (``tools`` or its own), an output tool's (``output``
or its own), the run-wide ``output`` one, an unknown name's (``tools``), or the hard-coded
``1`` of unknown names until 1.39.1."""


@dataclass(frozen=True)
class Counted:
    """What one :class:`Counting` makes of one retry part: its ``attempt`` (``None`` when not
    charged or not known, ``why``: ``deferred``, ``cut`` or ``free``, the first refusal of an
    unavailable tool), the ``budget`` it was checked against and the ``counter`` that counted
    it (``tool``, ``output``, ``unknown tool``)."""

    attempt: int | None
    budget: Budget
    counter: str
    why: Why | None = None


@dataclass(frozen=True)
class Run:
    """One run of a history: messages ``start`` to ``end`` (exclusive), how its start is known
    (``run_id``, ``inferred`` from the shape, ``history`` for the first message), whether the
    history begins after it began (``cut``), and the releases that may have written it."""

    start: int
    end: int
    how: Literal["run_id", "inferred", "history"]
    cut: bool
    written: tuple[Release, Release | None] = (Release(0, 0, 1), None)


Kind = Literal["tool", "output-tool", "unknown", "unavailable", "feedback"]


@dataclass(frozen=True)
class Retry:
    """A retry part the replay counts: where it is, the ``run`` (an index of
    :attr:`History.runs`) it is in, the tool ``name`` it answers (``None``: tool-less), its
    ``kind``, the attempt already stored (``stored``), and whether its call was made by an
    earlier run (``deferred``: handed back through ``DeferredToolResults``)."""

    message: int
    part: int
    run: int
    name: str | None
    kind: Kind
    stored: int | None
    deferred: bool


_NOT_RUN = frozenset(
    {
        "Tool not executed - a final result was already processed.",
        "Output tool not used - a final result was already processed.",
        "Result tool not used - a final result was already processed.",
        "Output tool not used - result failed validation.",
        "Output tool not used - output failed validation.",
        "Output tool not used - output function execution failed.",
        "Output not used as the final result - addressing tool retries from this round first.",
        "The tool call was denied.",
    }
)
"""Status texts of a tool-return whose tool did not run (docs/framework.md §1.6): no success
resets a counter."""

_OUTPUT_TOOL_TEXTS = (
    "Final result processed.",
    "Output tool ",
    "Result tool not used",
    "Output not used as the final result",
)
"""Status texts only an output (result) tool's return carries (docs/framework.md §1.6)."""

_ANSWERS = frozenset({"tool-return", "retry-prompt", "retry-feedback"})


def _retry_of(part: Part) -> dict[str, Any] | None:
    retry = part.get("retry")
    return retry if isinstance(retry, dict) else None


def is_retry(part: Any) -> bool:
    """A request part the counters charged: a legacy ``retry-prompt``, a ``retry-feedback``,
    or a ``tool-return`` with ``outcome: "retried"``."""
    if not isinstance(part, dict):
        return False
    kind = part.get("part_kind")
    return kind in ("retry-prompt", "retry-feedback") or (kind == "tool-return" and part.get("outcome") == "retried")


def _succeeded(part: Any) -> bool:
    """A ``tool-return`` of a tool that ran and succeeded (no outcome before 1.67.0)."""
    if (
        not isinstance(part, dict)
        or part.get("part_kind") != "tool-return"
        or part.get("outcome", "success") not in (None, "success")
    ):
        return False
    content = part.get("content")
    return not (isinstance(content, str) and content in _NOT_RUN)


class History:
    """What the replay needs from a history (plain JSON data), read once: its :attr:`runs`,
    its :attr:`steps` (``(message index, run index, [(part index, part)])`` for every request;
    an empty request that answers a response, an empty response re-sent, holds a ``None``
    part: docs/framework.md §1.1, it was charged to the output budget) and its :attr:`retries`
    in order (:class:`Retry`). An interrupted return synthesized for a dangling call (HM406's,
    2.68's: docs/framework.md §2.6) is no part of a step: it stands for nothing the run did, so
    a history counts the same before HM406 closes its calls and after."""

    def __init__(self, messages: Messages) -> None:
        self.runs = _runs(messages)
        run_of = [0] * len(messages)
        for n, run in enumerate(self.runs):
            run_of[run.start : run.end] = [n] * (run.end - run.start)
        calls: dict[Any, int] = {}
        outputs = _output_tools(messages)
        self.steps: list[tuple[int, int, list[tuple[int, Part | None]]]] = []
        self.retries: list[Retry] = []
        for m_index, message in enumerate(messages):
            if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
                continue
            parts: list[tuple[int, Any]] = [  # a return 2.68 synthesizes stands for no step the run took (§2.6)
                (p_index, part)
                for p_index, part in enumerate(message["parts"])
                if isinstance(part, dict) and not is_synthesized(part)
            ]
            if message.get("kind") == "response":
                calls.update(
                    (part["tool_call_id"], m_index)
                    for _, part in parts
                    if part.get("part_kind") == "tool-call" and isinstance(part.get("tool_call_id"), str)
                )
            elif message.get("kind") == "request":
                resent = (
                    not parts
                    and m_index > 0
                    and isinstance(messages[m_index - 1], dict)
                    and messages[m_index - 1].get("kind") == "response"
                )
                self.steps.append((m_index, run_of[m_index], [(-1, None)] if resent else parts))
                for p_index, part in parts:
                    if is_retry(part):
                        name, call_id = part.get("tool_name"), part.get("tool_call_id")
                        called = calls.get(call_id) if name is not None and isinstance(call_id, str) else None
                        deferred = called is not None and run_of[called] != run_of[m_index]
                        stored = (_retry_of(part) or {}).get("attempt")
                        name = (
                            name if name is None or isinstance(name, str) else repr(name)
                        )  # validation names a tool_name no release wrote
                        self.retries.append(
                            Retry(
                                m_index,
                                p_index,
                                run_of[m_index],
                                name,
                                _kind(part, outputs),
                                stored if isinstance(stored, int) else None,
                                deferred,
                            )
                        )

    def replay(self, counting: Counting) -> dict[tuple[int, int], Counted]:
        """Each retry part's :class:`Counted` under ``counting``, by ``(message, part)``."""
        counted: dict[tuple[int, int], Counted] = {}
        retries = {(retry.message, retry.part): retry for retry in self.retries}
        run = -1
        state = _Counters(known=True)
        for m_index, run_index, parts in self.steps:
            if run_index != run:
                run = run_index
                state = _Counters(known=not self.runs[run].cut)
            state.step(counting, [(part, retries.get((m_index, p_index))) for p_index, part in parts], counted)
        return counted


class _Counters:
    """The counters of one run: per tool name (``None``: not known, in a history that begins
    after its run began, until the tool is reset), the run-wide output counter, and the
    unavailable tools refused once already."""

    def __init__(self, *, known: bool) -> None:
        self.tools: dict[str, int | None] = {}
        self.default: int | None = 0 if known else None
        self.output: int | None = 0 if known else None
        self.refused: set[str] = set()

    def tool(self, name: str) -> int | None:
        return self.tools.get(name, self.default)

    def step(
        self, counting: Counting, parts: list[tuple[Part | None, Retry | None]], counted: dict[tuple[int, int], Counted]
    ) -> None:
        """Count the retries of one request (a step's results; ``None`` for an empty response
        re-sent), then move the counters at the step's end as ``counting`` says."""
        failed: dict[str, int | None] = {}
        succeeded: set[str] = set()
        unknown_in_step = False
        for part, retry in parts:
            if part is None:
                self.output = _plus(self.output)
                continue
            if retry is None:
                if _succeeded(part) and isinstance(part.get("tool_name"), str):
                    succeeded.add(part["tool_name"])
                    if counting.per_call:
                        self.tools[part["tool_name"]] = 0
                continue
            if retry.deferred:
                counted[retry.message, retry.part] = Counted(
                    None, _budget(counting, retry), _counter(counting, retry), "deferred"
                )
                continue
            counted[retry.message, retry.part] = self._count(counting, retry, failed)
            unknown_in_step |= retry.kind == "unknown"
        for name, before in failed.items():
            if not counting.per_call:
                self.tools[name] = None if before is None else before + 1
        if counting.reset_untouched:
            self.tools = {name: count for name, count in self.tools.items() if name in failed}
            self.default = 0
        else:
            for name in succeeded - failed.keys():
                self.tools[name] = 0
        if counting.unknown == "both" and unknown_in_step:
            self.output = _plus(self.output)

    def _count(self, counting: Counting, retry: Retry, failed: dict[str, int | None]) -> Counted:
        """The :class:`Counted` of one (not deferred) retry, charging its counter."""
        budget, counter = _budget(counting, retry), _counter(counting, retry)
        name = retry.name or ""
        if counter == "output":
            self.output = retry.stored if retry.stored is not None else _plus(self.output)
            return Counted(self.output, budget, counter, None if self.output is not None else "cut")
        if retry.kind == "unavailable" and counting.free_first_refusal and name not in self.refused:
            self.refused.add(name)
            return Counted(None, budget, counter, "free")
        if retry.kind == "output-tool":
            self.output = _plus(self.output)
        if retry.stored is not None:
            # an attempt the framework stored tells the count: the counter follows it
            if counting.per_call:
                self.tools[name] = failed[name] = retry.stored
            else:
                failed[name] = retry.stored - 1
            return Counted(retry.stored, budget, counter)
        if counting.per_call:
            attempt = self.tools[name] = failed[name] = _plus(self.tool(name))
        else:
            attempt = _plus(failed.setdefault(name, self.tool(name)))
        return Counted(attempt, budget, counter, None if attempt is not None else "cut")


def _plus(count: int | None) -> int | None:
    return None if count is None else count + 1


def _counter(counting: Counting, retry: Retry) -> str:
    """The counter that counts ``retry`` under ``counting``: ``output`` (run-wide), ``tool``
    or ``unknown tool``."""
    if retry.kind == "feedback" or (retry.kind == "unknown" and counting.unknown == "run-wide"):
        return "output"
    if retry.kind == "output-tool" and counting.output_tools_run_wide:
        return "output"
    return "unknown tool" if retry.kind == "unknown" else "tool"


def _budget(counting: Counting, retry: Retry) -> Budget:
    """The budget ``retry``'s count is checked against under ``counting``."""
    if _counter(counting, retry) == "output":
        return ("output", None)
    if retry.kind == "unknown":
        return ("one", None) if counting.unknown_limit_one else ("unknown", retry.name)
    return ("output-tool" if retry.kind == "output-tool" else "tool", retry.name)


def _kind(part: Part, outputs: frozenset[str]) -> Kind:
    """What charged a retry part: tool-less ``feedback``; an ``unknown`` or ``unavailable``
    tool (its ``retry.cause``, else its text, docs/framework.md §1.2, §1.3); an ``output-tool``;
    else a ``tool``."""
    name = part.get("tool_name")
    if part.get("part_kind") == "retry-feedback" or name is None:
        return "feedback"
    retry = _retry_of(part)
    cause = retry.get("cause") if retry is not None else infer_cause(part.get("content"), tool_bound=True).cause
    if cause == "unknown_tool":
        return "unknown"
    if cause == "unavailable_tool":
        return "unavailable"
    return "output-tool" if name in outputs else "tool"


def _output_tools(messages: Messages) -> frozenset[str]:
    """The output (result) tools of a history: ``final_result`` and ``final_result_*`` (the
    framework's names), and every tool whose return carries an output-tool status text."""
    names = set()
    for message in messages:
        for part in (message.get("parts") or ()) if isinstance(message, dict) else ():
            if not isinstance(part, dict) or not isinstance(part.get("tool_name"), str):
                continue
            name, content = part["tool_name"], part.get("content")
            if (
                name == "final_result"
                or name.startswith("final_result_")
                or (
                    part.get("part_kind") == "tool-return"
                    and isinstance(content, str)
                    and content.startswith(_OUTPUT_TOOL_TEXTS)
                )
            ):
                names.add(name)
    return frozenset(names)


def _opens_run(message: Any, *, first: bool) -> bool:
    """A request that answers no call and carries no feedback, and (unless it is the
    history's ``first`` message) holds a user prompt: how a run starts (docs/framework.md §4
    "Run boundaries"; within a run every request answers the response before it)."""
    if not isinstance(message, dict) or message.get("kind") != "request" or not isinstance(message.get("parts"), list):
        return False
    kinds = {part.get("part_kind") for part in message["parts"] if isinstance(part, dict)}
    return (first or "user-prompt" in kinds) and not kinds & _ANSWERS


def _runs(messages: Messages) -> list[Run]:
    """The runs of ``messages``: a run starts where ``run_id`` changes between two messages
    that both carry one, else (docs/framework.md §4: no run id before 1.15.0) at a request of
    prompts (:func:`_opens_run`). The first run is ``cut`` unless the history opens with such
    a request. Each run's writing releases are bounded by its own fields and by the runs
    around it: releases only move forward within a conversation."""
    if not messages:
        return []
    starts: list[tuple[int, Literal["run_id", "inferred", "history"]]] = [(0, "history")]
    for m_index in range(1, len(messages)):
        before, here = messages[m_index - 1], messages[m_index]
        ids = [m.get("run_id") if isinstance(m, dict) else None for m in (before, here)]
        if None not in ids:
            if ids[0] != ids[1]:
                starts.append((m_index, "run_id"))
        elif _opens_run(here, first=False):
            starts.append((m_index, "inferred"))
    ends = [start for start, _ in starts[1:]] + [len(messages)]
    bounds = [written_between(messages[start:end]) for (start, _), end in zip(starts, ends)]
    runs = []
    for n, ((start, how), end) in enumerate(zip(starts, ends)):
        low = max(bound[0] for bound in bounds[: n + 1])
        highs = [bound[1] for bound in bounds[n:] if bound[1] is not None]
        cut = start == 0 and not _opens_run(messages[0], first=True)
        runs.append(Run(start, end, how, cut, (low, min(highs) if highs else None)))
    return runs
