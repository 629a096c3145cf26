"""What the tool-pairing rules (HM401-HM407) share: how tool calls and their results pair up,
in pydantic-ai 2.68's own terms, and the interrupted return the framework synthesizes.

The analysis (:func:`analyse`) is 2.68's ordered matching walk (``messages.py``,
``_dangling_tool_calls_by_response``, ``_drop_orphaned_tool_results``): a *call* is a
``tool-call`` part of a response; a *result* is a ``tool-return`` part of a request (any
``outcome``, retried ones included) or a tool-bound ``retry-prompt`` (which 2.68 treats the same
way). Native parts (``builtin-tool-call``/``builtin-tool-return``) are left alone. A result
answers the oldest open call with its ``tool_call_id`` (calls repeating an id within one response
are answered FIFO); a result whose id no earlier call has is *orphaned* (2.68 drops it before
sending); a call still open at the end is *dangling* (2.68 answers it, before every request,
with an ``outcome: "interrupted"`` return; the calls of the last response only with
``repair_last_response``, being the live frontier a resumed run may still answer); a call whose id
a later response reuses while it is open is shadowed, and so dangling.

:func:`found` is what the rules' :class:`~histmig.rules.base.HistoryLook` asks of a whole
history (a quick walk first: a history where every response's calls are answered by the request
right after it needs none of these rules), :func:`skeleton` what the screen asks of a record's
skeleton.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from histmig.rules.base import (
    ABSENT_PART,
    Certainty,
    Change,
    Context,
    Find,
    Finding,
    Fix,
    HistoryLook,
    Message,
    Messages,
    Part,
    is_json,
)
from histmig.schema.releases import TOOL_PAIRING, Span

INTERRUPTED_CONTENT = "The tool call was interrupted before a result was produced."
"""2.68's ``INTERRUPTED_TOOL_RETURN_CONTENT``: the content of a synthesized return."""

SYNTHESIZED_KEY = "pydantic_ai_synthesized_tool_return"
"""2.68's ``SYNTHESIZED_TOOL_RETURN_METADATA_KEY``: set to ``true`` in a synthesized return's
``metadata``."""

Place = tuple[int, int]
"""``(message index, part index)``."""


def is_call(message: Any, part: Any) -> bool:
    """A ``tool-call`` part of a response (a regular, locally executed call)."""
    return message.get("kind") == "response" and part.get("part_kind") == "tool-call"


def is_result(message: Any, part: Any) -> bool:
    """A result answering a call: a request's ``tool-return`` part (any outcome), or its
    tool-bound ``retry-prompt`` part (2.68's ``_is_tool_result_part``)."""
    if message.get("kind") != "request":
        return False
    kind = part.get("part_kind")
    return kind == "tool-return" or (kind == "retry-prompt" and part.get("tool_name") is not None)


def fragment(messages: Messages) -> bool:
    """Whether ``messages`` look like a piece of a conversation stored over several records (one
    record a run, or a message), not a whole one: the record starts with a response (a), or a
    request before its first response answers calls it does not hold (b: it holds a result,
    :func:`is_result`, any ``tool_call_id``, and no response comes before it to hold the call;
    the next run's record may put the user's prompt or a system prompt before its results). A
    run of the framework starts with a request (``ModelRequest`` of the user prompt or of a
    deferred tool's results, ``Agent.run``), and a result of a whole history answers a call of
    an earlier response, so a history the framework wrote whole is neither. Pairing a fragment
    as if it were whole finds its calls dangling and its results orphaned; its findings carry
    certainty ``fragment`` and no fix acts on them (:func:`whole_only`)."""
    first = messages[0] if messages else None
    return type(first) is dict and (
        first.get("kind") == "response" or next(_leading_results(messages), None) is not None
    )


def _leading_results(messages: Messages) -> Iterator[Any]:
    """The results (:func:`is_result`) of the requests before the first response of
    ``messages``: each answers a call no message of them holds."""
    for message in messages:
        if type(message) is not dict:
            continue
        kind = message.get("kind")
        if kind == "response":
            return
        parts = message.get("parts")
        if kind == "request" and type(parts) is list:
            yield from (p for p in parts if type(p) is dict and is_result(message, p))


CALL_NAME = "tool_call_id="
"""What starts the :func:`call_names` of a record."""

NO_CALL_ID = f"{CALL_NAME}null"
"""The :func:`call_names` name of the calls and results without a text ``tool_call_id``
(null or missing): no id tells which of them answers which, so each may answer any other (a
call whose id is the text ``null`` is taken for one of them too)."""


def call_names(messages: Messages) -> tuple[str, ...]:
    """The calls that may tie a record holding ``messages`` to another record of its
    conversation, as ``tool_call_id=<id>`` texts, distinct and sorted: of a :func:`fragment`,
    each result before its first response (the calls are in an earlier record); of any other
    history, each call of its last response without a result (the frontier, which the next
    run's record may answer). Parts without a text ``tool_call_id`` (null or missing) are
    :data:`NO_CALL_ID`: an id HM201 derives from one record's places is not the other record's,
    so a fragment starting with a result without an id may answer any call without one. A
    frontier call named by a fragment's result is answered there, which no record alone can
    tell (:meth:`histmig.report.Report.fragments`, :attr:`histmig.engine.Plan.answered`)."""
    if fragment(messages):
        ids = [p.get("tool_call_id") for p in _leading_results(messages)]  # a first response answers nothing
    else:
        ids = [messages[m]["parts"][p].get("tool_call_id") for m, p in analyse(messages).frontier]
        last = next((m for m in reversed(messages) if type(m) is dict and m.get("kind") == "response"), None)
        parts = last.get("parts") if last is not None else None
        nameless = (type(p) is dict and is_call(last, p) and p.get("tool_call_id") is None for p in parts or ())
        if type(parts) is list and any(nameless):
            ids.append(None)  # analyse passes it over: its result, if any, would be as nameless
    names = {f"{CALL_NAME}{call_id}" for call_id in ids if type(call_id) is str}
    return tuple(sorted(names | {NO_CALL_ID} if None in ids else names))


_MENTIONED = re.compile(
    rb'"tool_call_id"\s*:\s*(null|"(?:[^"\\]|\\.)*")|\\"tool_call_id\\"\s*:\s*(?:null|\\"([^"\\]*)\\")'
)
"""A ``tool_call_id`` of a record's bytes, a value of its own (group 1: ``null`` or a JSON
text) or of a history held as JSON text in a string (group 2, an id without escapes; none for
``null``)."""


def mentioned_call_names(raw: bytes) -> tuple[str, ...]:
    """The :func:`call_names` texts of every ``tool_call_id`` written in ``raw``, a record
    that could not be read or was rejected (invalid JSON, a key given twice): whichever of
    them it may answer, found without parsing it, distinct and sorted. A record a rejected
    record may answer keeps its last calls open (:meth:`histmig.report.Report.answered`): the
    rejected one is kept in the rejects file, and its real result answers them once it is
    mended."""
    names: set[str] = set()
    for text, escaped in _MENTIONED.findall(raw):
        if escaped:
            names.add(f"{CALL_NAME}{escaped.decode(errors='replace')}")
        elif text in (b"null", b""):
            names.add(NO_CALL_ID)
        else:
            try:
                call_id = orjson.loads(text)
            except orjson.JSONDecodeError:
                continue  # a broken escape: no id told
            names.add(f"{CALL_NAME}{call_id}")
    return tuple(sorted(names))


def whole_only(find: Find) -> Callable[[Fix], Fix]:
    """A pairing rule's fix, made to act only on a history that is not a :func:`fragment`: on a
    fragment it changes nothing and returns ``find``'s findings (certainty ``fragment``). What
    a fragment's pairing needs is in its other records: a part removed or added there would be
    wrong in the whole conversation."""

    def wrap(fix: Fix) -> Fix:
        @functools.wraps(fix)
        def fixed(messages: Messages, ctx: Context) -> Sequence[Change | Finding]:
            if not fragment(messages):
                return fix(messages, ctx)
            return [finding._replace(severity="warning") for finding in find(messages, ctx)]

        return fixed

    return wrap


@dataclass
class Pairing:
    """How the calls and results of one history pair up (see the module docstring), each list
    in history order: ``orphaned`` results whose id no call has (``before_call``: those whose
    call comes later); ``duplicate`` results answering no open call though an earlier call had
    their id, with the place of the call they repeat; ``reused`` calls whose id shadows an open
    call of an earlier response, with the place of the shadowed call; ``truncated`` calls whose
    ``args`` text is not JSON and that no retried result answers (a stream cut mid-call: a call
    the framework answered with a validation retry was seen, and is history); ``dangling`` calls
    before the last response and ``frontier`` calls of the last response, never answered;
    ``certainty``, that of every finding of the history: ``fragment`` for a :func:`fragment`, else ``exact``."""

    orphaned: list[Place] = field(default_factory=list)
    before_call: list[Place] = field(default_factory=list)
    duplicate: list[tuple[Place, Place]] = field(default_factory=list)
    reused: list[tuple[Place, Place]] = field(default_factory=list)
    truncated: list[Place] = field(default_factory=list)
    dangling: list[Place] = field(default_factory=list)
    frontier: list[Place] = field(default_factory=list)
    certainty: Certainty = "exact"


def analyse(messages: Messages) -> Pairing:
    """The :class:`Pairing` of ``messages`` (a history as plain JSON data; entries that are not
    objects, ``parts`` that are not lists, and parts whose ``tool_call_id`` is not text are
    passed over: 2.68 gives a part without an id a random one when it loads it)."""
    pairing = Pairing(certainty="fragment" if fragment(messages) else "exact")
    opened: dict[Any, list[Place]] = {}
    answered: dict[Any, Place] = {}
    seen: set[Any] = set()
    results: list[tuple[Place, Any]] = []
    last_response = max(
        (i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("kind") == "response"), default=-1
    )
    for m_index, message, parts in _messages(messages):
        for p_index, part in enumerate(parts):
            if not isinstance(part, dict):
                continue
            call_id = part.get("tool_call_id")
            if type(call_id) is not str:  # 2.68 gives such a part a random id when it loads it: no pairing to tell
                continue
            if is_call(message, part):
                pending = opened.get(call_id)
                if pending and pending[-1][0] != m_index:
                    for shadowed in pending:
                        pairing.reused.append(((m_index, p_index), shadowed))
                        _dangles(pairing, shadowed, last_response)
                    pending.clear()
                opened.setdefault(call_id, []).append((m_index, p_index))
                seen.add(call_id)
                if _cut(part.get("args")):
                    pairing.truncated.append((m_index, p_index))
            elif is_result(message, part):
                if call_id not in seen:
                    results.append(((m_index, p_index), call_id))
                    continue
                pending = opened.get(call_id)
                if pending:
                    answered[call_id] = call = pending.pop(0)
                    if call in pairing.truncated and _is_retried(part):
                        pairing.truncated.remove(call)
                else:
                    pairing.duplicate.append(((m_index, p_index), answered.get(call_id, (-1, -1))))
    for place, call_id in results:
        (pairing.before_call if call_id in seen else pairing.orphaned).append(place)
    for calls in opened.values():
        for place in calls:
            _dangles(pairing, place, last_response)
    return pairing


def _is_retried(part: Part) -> bool:
    """A result saying the call was retried: ``outcome: "retried"``, or a legacy retry-prompt."""
    return part.get("outcome") == "retried" or part.get("part_kind") == "retry-prompt"


def _dangles(pairing: Pairing, place: Place, last_response: int) -> None:
    (pairing.frontier if place[0] == last_response else pairing.dangling).append(place)


def _messages(messages: Messages) -> Iterable[tuple[int, Message, list[Any]]]:
    for m_index, message in enumerate(messages):
        if isinstance(message, dict) and isinstance(message.get("parts"), list):
            yield m_index, message, message["parts"]


def _cut(args: Any) -> bool:
    """Whether tool-call ``args`` are text that is not JSON; legacy ``{"args_json": text}``
    args (0.0.13-0.0.20, which HM301 unwraps before the pairing rules run) are their text."""
    if type(args) is dict:
        if len(args) != 1 or type(args.get("args_json")) is not str:
            return False
        args = args["args_json"]
    return _cut_struct(args)


def _answered_in_turn(messages: Messages) -> bool | None:
    """Whether every response's calls are answered, in any order, by the results of the message
    right after it (a request), no request holds another result, the last response has no call,
    and a call whose args text is cut is answered by a retried result: then the history needs
    no pairing rule. The quick walk :func:`found` tries first (a framework-written history is
    this shape; :func:`skeleton` asks as much of the screen's skeleton). ``None`` when a call
    or result has no text id (HM201 gives it one before the pairing rules run: their findings
    cannot be told before)."""
    calls: list[Any] = []
    cut: set[Any] = set()
    for message in messages:
        parts = message.get("parts") if type(message) is dict else None
        if type(parts) is not list:
            return False
        if message.get("kind") == "response":
            if calls:
                return False
            for part in parts:
                if type(part) is dict and part.get("part_kind") == "tool-call":
                    call_id = part.get("tool_call_id")
                    if type(call_id) is not str:
                        return None
                    calls.append(call_id)
                    if _cut(part.get("args")):
                        cut.add(call_id)
        else:
            ids: list[Any] = []
            retried: list[bool] = []
            for part in parts:
                if type(part) is dict:
                    kind = part.get("part_kind")
                    if kind == "tool-return" or (kind == "retry-prompt" and part.get("tool_name") is not None):
                        call_id = part.get("tool_call_id")
                        if type(call_id) is not str:
                            return None
                        ids.append(call_id)
                        retried.append(kind == "retry-prompt" or part.get("outcome") == "retried")
            if (calls or ids) and not _paired(calls, ids, cut, retried):
                return False
            calls, cut = [], set()
    return not calls


def _paired(calls: list[Any], ids: list[Any], cut: set[Any], retried: list[bool]) -> bool:
    """Whether results with ``ids`` (each ``retried`` or not) answer ``calls`` one each, the
    calls whose args are ``cut`` by retried results."""
    if ids != calls and sorted(ids) != sorted(calls):
        return False
    return not cut or all(done for call_id, done in zip(ids, retried) if call_id in cut)


CODES = {
    "orphaned": "HM401",
    "before_call": "HM402",
    "duplicate": "HM403",
    "reused": "HM404",
    "truncated": "HM405",
    "dangling": "HM406",
    "frontier": "HM407",
}
"""The rule each kind of finding of a :class:`Pairing` belongs to."""


_NONE: frozenset[str] = frozenset()


def found(messages: Messages) -> frozenset[str]:
    """The codes of the pairing rules that may act on ``messages`` once the earlier phases ran:
    none when every call is answered in turn (:func:`_answered_in_turn`); all when a call or
    result has no id yet (HM201 gives it one first); else those whose kind of finding
    :func:`analyse` finds."""
    quick = _answered_in_turn(messages)
    if quick:
        return _NONE
    if quick is None:
        return frozenset(CODES.values())
    pairing = analyse(messages)
    return frozenset(code for name, code in CODES.items() if getattr(pairing, name))


def skeleton(messages: list[Any], tools: list[Any]) -> list[Finding] | None:
    """:func:`found` asked of a record's skeleton (:mod:`histmig.screen`: the decoded message
    structs, each class's kind in ``_kind``; ``tools``, its ``tool-call`` and ``tool-return``
    parts in history order, a call's ``tool_call_id``, ``tool_name`` and ``args``, a result's
    ``tool_call_id`` and ``outcome``): ``[]`` when the tool parts are runs of calls each
    answered by the run of results right after it, one result a call (then 2.68's walk finds
    nothing: no call is left open, no result is without its call); HM407's findings when the
    one thing missing is the results of the last response's calls; else ``None``, the record
    going the full way. The screen's hot path: most histories are calls each answered by the
    one result right after it, which the first loop passes without building a run."""
    at, count = 0, len(tools)
    while at < count:
        call = tools[at]
        if at + 1 == count or call._kind != "tool-call":
            break
        result = tools[at + 1]
        if (
            result._kind == "tool-call"
            or result.tool_call_id != call.tool_call_id
            or (at + 2 < count and tools[at + 2]._kind != "tool-call")
        ):
            break
        if call.args.__class__ is str and result.outcome != "retried" and _cut_struct(call.args):
            break
        at += 2
    else:
        return []
    start = 0
    calls = 0
    for n, part in enumerate(tools):
        if part._kind == "tool-call":
            if n > start + calls:  # a run of results ended at n
                if not _answer(tools[start : start + calls], tools[start + calls : n]):
                    return None
                start, calls = n, 0
            calls += 1
    if len(tools) > start + calls:
        return [] if _answer(tools[start : start + calls], tools[start + calls :]) else None
    at = next(
        m for m in range(len(messages) - 1, -1, -1) if messages[m]._kind == "response"
    )  # by place: an equal earlier response is another one
    last = messages[at]
    pending = tools[start:]
    if [part for part in last.parts if part._kind == "tool-call"] != pending or any(
        _cut_struct(call.args) for call in pending
    ):
        return None
    certainty: Certainty = "fragment" if messages[0]._kind == "response" else "exact"  # fragment (a); (b) came here not
    return [
        frontier_finding(at, p_index, part.tool_name, part.tool_call_id, certainty)
        for p_index, part in enumerate(last.parts)
        if part._kind == "tool-call"
    ]


def _answer(calls: list[Any], results: list[Any]) -> bool:
    """Whether skeleton ``results`` answer skeleton ``calls`` one each (no two calls sharing
    an id, which could be two responses' calls, one shadowing the other), a call whose args
    are cut by a retried result (:func:`_paired`)."""
    if len(calls) == 1:
        call = calls[0]
        if len(results) != 1 or results[0].tool_call_id != call.tool_call_id:
            return False
        return type(call.args) is not str or results[0].outcome == "retried" or not _cut_struct(call.args)
    ids = [call.tool_call_id for call in calls]
    answering = [result.tool_call_id for result in results]
    if (ids != answering and Counter(ids) != Counter(answering)) or len(set(ids)) != len(ids):
        return False  # counted, not sorted: a result without an id (None) beside a text one
    cut = {call.tool_call_id for call in calls if _cut_struct(call.args)}
    return not cut or all(result.outcome == "retried" for result in results if result.tool_call_id in cut)


def _cut_struct(args: Any) -> bool:
    """Whether ``args`` are text that is not JSON: a skeleton call's as they are (text, or a
    struct: never a wrapper there, HM301's look decodes one as itself), a parsed call's once
    :func:`_cut` unwrapped a legacy one."""
    return type(args) is str and args != "" and not is_json(args)


def frontier_finding(
    m_index: int, p_index: int, tool_name: Any, call_id: Any, certainty: Certainty = "exact"
) -> Finding:
    """HM407's finding for the call at ``messages[m_index].parts[p_index]`` (a warning)."""
    return Finding(
        "HM407",
        m_index,
        p_index,
        f"tool-call {tool_name!r} ({call_id}) of the last response has no result yet",
        "frontier",
        certainty,
        "warning",
    )


def interrupted_return(call: Part, response: Message) -> Part:
    """The return 2.68 synthesizes for a dangling ``call`` of ``response``
    (``_synthesized_tool_returns``), as 2.68 dumps it: the call's ``tool_name``,
    ``tool_call_id`` and ``tool_kind``, :data:`INTERRUPTED_CONTENT`, the :data:`SYNTHESIZED_KEY`
    marker in ``metadata``, the response's ``timestamp`` (absent when the response has none:
    never the clock), ``outcome: "interrupted"``, ``retry: null``."""
    part: Part = {
        "tool_name": call.get("tool_name"),
        "content": INTERRUPTED_CONTENT,
        "tool_call_id": call.get("tool_call_id"),
    }
    part["tool_kind"] = call.get("tool_kind")
    part["metadata"] = {SYNTHESIZED_KEY: True}
    if response.get("timestamp") is not None:
        part["timestamp"] = response["timestamp"]
    part.update({"outcome": "interrupted", "retry": None, "part_kind": "tool-return"})
    return part


def is_synthesized(part: Any) -> bool:
    """An interrupted return synthesized for a dangling call (:func:`interrupted_return`, by
    HM406 or 2.68: the :data:`SYNTHESIZED_KEY` marker of its ``metadata``): it stands for no
    result the tool gave."""
    metadata = part.get("metadata")
    return (
        part.get("part_kind") == "tool-return"
        and part.get("outcome") == "interrupted"
        and type(metadata) is dict
        and metadata.get(SYNTHESIZED_KEY) is True
    )


def lift_stand_ins(messages: Messages, code: str) -> list[Change]:
    """Remove every synthesized interrupted return of the requests (:func:`is_synthesized`),
    and a request one made up (:func:`new_request`'s, left empty), before a rule whose fix is
    unsafe (HM401, HM402) pairs the history: such a return is no result a re-pair or a drop
    must respect, and HM406, after them, answers again each call still dangling, as one run
    with those fixes would (so runs whose options widen give the bytes of one run with the
    widest). Returns ``code``'s changes (evidence ``synthesized``), each with what it removed,
    at its place before the removal."""
    changes: list[Change] = []
    made_up = new_request([])
    for m_index in range(len(messages) - 1, -1, -1):
        message = messages[m_index]
        if type(message) is not dict or message.get("kind") != "request" or type(message.get("parts")) is not list:
            continue
        parts = message["parts"]
        lifted = [p_index for p_index, part in enumerate(parts) if type(part) is dict and is_synthesized(part)]
        if not lifted:
            continue
        found = [
            Change(code, m_index, p_index, "tool-return", ABSENT_PART, "synthesized", "exact", removed=parts[p_index])
            for p_index in lifted
        ]
        message["parts"] = [part for p_index, part in enumerate(parts) if p_index not in lifted]
        if not message["parts"] and message == made_up:
            del messages[m_index]
            found.append(Change(code, m_index, None, "request", ABSENT_PART, "synthesized", "exact", removed=message))
        changes[:0] = found
    return changes


def new_request(parts: list[Part]) -> Message:
    """A request holding ``parts`` alone, as 2.68 dumps ``ModelRequest(parts=...)``."""
    return {
        "parts": parts,
        "timestamp": None,
        "instructions": None,
        "kind": "request",
        "run_id": None,
        "conversation_id": None,
        "metadata": None,
        "state": "complete",
    }


def close_calls(messages: Messages, calls: list[Place]) -> list[Place]:
    """Answer each call of ``calls`` (places of dangling ``tool-call`` parts, in the order of a
    :class:`Pairing`) with its :func:`interrupted_return`, placed where 2.68's ``_repair_dangling_tool_calls``
    places it: after the existing results of the request right after the call's response, or in
    a new request (:func:`new_request`) when another response or the end comes first. Edits
    ``messages`` in place; returns the places of the returns it added, in the history as it now
    is."""
    by_response: dict[int, list[Part]] = {}
    for m_index, p_index in calls:
        by_response.setdefault(m_index, []).append(
            interrupted_return(messages[m_index]["parts"][p_index], messages[m_index])
        )
    added: list[Place] = []
    shift = 0
    for m_index in sorted(by_response):
        at = m_index + shift + 1
        returns = by_response[m_index]
        following = messages[at] if at < len(messages) else None
        if (
            isinstance(following, dict)
            and following.get("kind") == "request"
            and isinstance(following.get("parts"), list)
        ):
            parts = following["parts"]
            insert_at = next(
                (
                    i + 1
                    for i in range(len(parts) - 1, -1, -1)
                    if isinstance(parts[i], dict) and is_result(following, parts[i])
                ),
                0,
            )
            parts[insert_at:insert_at] = returns
            added += [(at, insert_at + n) for n in range(len(returns))]
        else:
            messages.insert(at, new_request(returns))
            shift += 1
            added += [(at, n) for n in range(len(returns))]
    return added


TARGETS = Span(TOOL_PAIRING, None)
"""The targets every pairing rule runs for (:data:`~histmig.schema.releases.TOOL_PAIRING`)."""

LOOK = HistoryLook(
    found,
    skeleton,
    {
        "tool-call": (("tool_call_id", str), ("args", Any), ("tool_name", Any)),
        "tool-return": (("tool_call_id", str), ("outcome", Any)),
    },
)
"""The look every pairing rule shares: asked once a record for the whole family."""


def describe(messages: Messages, m_index: int, p_index: int) -> str:
    """``tool-call 'get_weather' (call_1)``: the part at a place, in words."""
    part = messages[m_index]["parts"][p_index]
    return f"{part.get('part_kind')} {part.get('tool_name')!r} ({part.get('tool_call_id')})"


def drop_parts(messages: Messages, places: list[Place], code: str, evidence: str) -> list[Change]:
    """Remove the parts at ``places`` as 2.68's ``_drop_orphaned_tool_results`` does: a request
    they leave empty goes, unless it is the last message (2.68 keeps an empty last request, so
    the history still ends on a request). Returns ``code``'s changes, each with what it
    removed, whole: a part's, then a gone request's (its fields, ``parts`` empty), each at its
    place before the drop."""
    changes: list[Change] = []
    by_message: dict[int, set[int]] = {}
    for m_index, p_index in places:
        by_message.setdefault(m_index, set()).add(p_index)
        part = messages[m_index]["parts"][p_index]
        changes.append(
            Change(code, m_index, p_index, part.get("part_kind", ""), ABSENT_PART, evidence, "exact", removed=part)
        )
    last = len(messages) - 1
    for m_index in sorted(by_message, reverse=True):
        message = messages[m_index]
        message["parts"] = [part for i, part in enumerate(message["parts"]) if i not in by_message[m_index]]
        if not message["parts"] and m_index != last:
            del messages[m_index]
            changes.append(Change(code, m_index, None, "request", ABSENT_PART, "emptied", "exact", removed=message))
    return changes
