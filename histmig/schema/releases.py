"""The catalogue of the schema history: which part kinds, fields and values each pydantic-ai
release loads (docs/framework.md §3.2, §3.3), as data, and what follows from it for a history.

A release is a :class:`Release` (``2.59.0``), ordered as versions are; the 1.107.x maintenance
line (1.107.6-1.107.10, published beside 2.x) sorts before 2.0.0 and behaves like 1.x, which is
what its place in that order gives for everything catalogued here (checked against 1.107.10).
What a release loads is told by :class:`Spans`: the ranges of releases, ``since`` (included)
up to ``before`` (excluded; ``None``: up to :data:`NEWEST`), that load a value. Each table
below gives, for one thing a history may hold, the releases that load it:

- a part kind, by message kind (:data:`PART_KINDS`, docs/framework.md §3.2); ``retry-prompt`` is
  loaded by every release but written only before 2.60.0 (:data:`WRITTEN_UNTIL`);
- a field whose values older releases refuse (§3.3): a null ``tool_call_id`` (loaded only
  before 0.0.45, which made the field a string), ``tool-call`` arguments (the
  ``{"args_json": ...}`` / ``{"args_dict": ...}`` wrappers of 0.0.13-0.0.20, bare arguments
  from 0.0.21, null or absent ones from 0.2.7), a list ``user-prompt`` content (0.0.26), the
  values of ``tool-return`` ``outcome`` (:data:`OUTCOMES`: the field came in 1.67.0; a release
  before it ignores any value), ``ModelResponse.state`` (:data:`RESPONSE_STATES`, field from
  1.92.0; ``incomplete`` 1.97.0, ``suspended`` 2.10.0), ``ModelRequest.state`` (2.0.0) and
  ``finish_reason`` (1.0.2), checked against the releases' ``messages.py``;
- what no release loads: a null ``timestamp`` on a request part (a ``system-prompt`` has had
  one only since 0.0.43), a builtin tool return or a response; error details without
  ``input``; an ``instruction`` part (docs/framework.md §2, bug cases BC3, BC5).

A field a release does not know is ignored when it loads (pydantic dataclasses; checked
against 2.59.0, 2.0.0 and 1.107.10), so it does not stop a load; it is lost only if that
release saves the history again. Everything else a history must be to load (required fields,
types) is the same in every release since 0.0.13 as far as histmig reads it: the legacy
schema (:mod:`histmig.schema.legacy`) checks it, this catalogue only what differs by release.
Releases before 0.0.13 stored another schema (docs/framework.md §3.4) and are not catalogued.
Pure data and plain Python: importing this module imports neither pydantic nor msgspec.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from histmig.problems import Problem


class Release(NamedTuple):
    """A pydantic-ai release, ``major.minor.patch``; ``str()`` gives ``2.59.0``."""

    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


OLDEST = Release(0, 0, 13)
"""The oldest release whose histories histmig reads (docs/framework.md §3.4)."""

NEWEST = Release(2, 68, 0)
"""The newest release histmig knows, the one it migrates to (docs/framework.md §3.1)."""

_RELEASE = re.compile(r"v?(\d+)\.(\d+)\.(\d+)\Z")


def release(text: str) -> Release:
    """The :class:`Release` ``text`` names (``2.59.0``, or ``v2.59.0``). Raises ``ValueError``
    for anything else, and for a release before :data:`OLDEST` or after :data:`NEWEST`."""
    found = _RELEASE.match(text.strip())
    if found is None:
        raise ValueError(f"{text!r} is not a release: give major.minor.patch, e.g. 2.59.0")
    named = Release(*map(int, found.groups()))
    if not OLDEST <= named <= NEWEST:
        raise ValueError(
            f"histmig knows releases {OLDEST} to {NEWEST}, not {named} (before {OLDEST} histories were another schema)"
        )
    return named


class Span(NamedTuple):
    """The releases from ``since`` (included) up to ``before`` (excluded; ``None``: every
    release from ``since`` on)."""

    since: Release
    before: Release | None


Spans = tuple[Span, ...]
"""Releases as disjoint :class:`Span`\\ s in order; ``()`` is no release."""

EVERY: Spans = (Span(OLDEST, None),)
NONE: Spans = ()


def since(first: Release) -> Spans:
    """Every release from ``first`` on."""
    return (Span(first, None),)


def before(end: Release) -> Spans:
    """Every release before ``end``."""
    return (Span(OLDEST, end),)


def but(start: Release, end: Release) -> Spans:
    """Every release but those from ``start`` up to ``end`` (excluded): a field a release before
    ``start`` ignores, whose value releases from ``end`` know."""
    return (Span(OLDEST, start), Span(end, None))


def from_pairs(pairs: Iterable[Iterable[str | None]]) -> Spans:
    """:data:`Spans` from ``[since, before]`` pairs of release texts (``before`` ``None``: every
    later release), as a report row holds them."""
    return tuple(
        Span(release(since), None if end is None else release(end))  # type: ignore[arg-type]  # since is never None
        for since, end in pairs
    )


def includes(spans: Spans, target: Release) -> bool:
    """Whether ``target`` is one of ``spans``."""
    return any(span.since <= target and (span.before is None or target < span.before) for span in spans)


def intersect(first: Spans, second: Spans) -> Spans:
    """The releases in both ``first`` and ``second``."""
    found = []
    for a in first:
        for b in second:
            start = max(a.since, b.since)
            ends = [end for end in (a.before, b.before) if end is not None]
            end = min(ends) if ends else None
            if end is None or start < end:
                found.append(Span(start, end))
    return tuple(sorted(found))


def oldest(spans: Spans) -> Release | None:
    """The oldest release of ``spans`` (``None``: no release)."""
    return spans[0].since if spans else None


def describe(spans: Spans) -> str:
    """``spans`` in words: ``from 2.60.0``, ``before 0.0.45``, ``before 1.67.0 and from
    2.60.0``, ``0.7.3 to before 0.8.1``, ``every release``, ``no release``."""
    if spans == EVERY:
        return "every release"
    if not spans:
        return "no release"
    words = []
    for span in spans:
        if span.since == OLDEST and span.before is not None:
            words.append(f"before {span.before}")
        elif span.before is None:
            words.append(f"from {span.since}")
        else:
            words.append(f"{span.since} to before {span.before}")
    return " and ".join(words)


RETRY_PARTS = Release(2, 60, 0)
"""The release that writes a retry as a retried ``tool-return`` or a ``retry-feedback`` part,
and no longer ``retry-prompt`` parts (docs/framework.md §2, §3.2)."""

PART_KINDS: dict[str, dict[str, Release]] = {
    "request": {
        "system-prompt": OLDEST,
        "user-prompt": OLDEST,
        "tool-return": OLDEST,
        "retry-prompt": OLDEST,
        "tool-availability-delta": Release(2, 23, 0),
        "speech": Release(2, 28, 0),
        "instruction-delta": Release(2, 59, 0),
        "instruction-baseline": Release(2, 59, 0),
        "retry-feedback": RETRY_PARTS,
        "model-settings-delta": Release(2, 62, 0),
        "compaction": Release(2, 62, 0),
        "capability-load-delta": Release(2, 64, 0),
    },
    "response": {
        "text": OLDEST,
        "tool-call": OLDEST,
        "thinking": Release(0, 3, 0),
        "builtin-tool-call": Release(0, 6, 2),
        "builtin-tool-return": Release(0, 6, 2),
        "file": Release(1, 0, 15),
        "compaction": Release(1, 80, 0),
        "speech": Release(2, 28, 0),
    },
}
"""By message kind, each ``part_kind`` and the release that first loads it (docs/framework.md
§3.2; the typed ``tool-search`` and ``capability-load`` returns and calls keep the wire kinds
``tool-return`` / ``tool-call``). No release loads any other kind, ``instruction`` included."""

WRITTEN_UNTIL: dict[str, Release] = {"retry-prompt": RETRY_PARTS}
"""Part kinds releases still load but no longer write from the given release on: 2.60.0
translates ``retry-prompt`` at load time and never writes one (docs/framework.md §2)."""

STRING_TOOL_CALL_ID = Release(0, 0, 45)
"""From this release ``tool_call_id`` is a string on a ``tool-call``, ``tool-return`` and
``retry-prompt`` (generated when absent, so a tool-less retry has one); before it the field
was ``str | None``, and a tool-less retry's was ``null`` (docs/framework.md §3.3)."""

OLDER_FORMS: dict[str, str] = {"retry-feedback": "retry-prompt"}
"""Newer part kinds and the kind releases before them wrote for the same thing (docs/framework.md
§2): a ``retry-feedback`` part was a tool-less ``retry-prompt``. The other newer kinds have
no older form."""

NULL_TOOL_CALL_ID = before(STRING_TOOL_CALL_ID)
"""The releases that load ``"tool_call_id": null`` on the parts of :data:`ID_PARTS`."""

ID_PARTS = frozenset({"tool-call", "tool-return", "retry-prompt"})

TOOL_BOUND_UNKNOWN_TOOL = Release(0, 0, 47)
"""From this release an unknown tool's retry answers the call (``tool_name`` and the call's
id); before it, the retry was tool-less (docs/framework.md §1.2)."""

INSTRUCTIONS_FIELD = Release(0, 1, 0)
"""From this release a request has ``instructions`` (docs/framework.md §3.3)."""

PROVIDER_REQUEST_ID = Span(Release(0, 7, 3), Release(0, 8, 1))
"""The releases that store a response's id as ``provider_request_id``; later ones call it
``provider_response_id`` (docs/framework.md §3.3)."""

BARE_ARGS = Release(0, 0, 21)
"""From this release ``tool-call`` arguments are stored bare (a JSON text or an object);
before it, as ``{"args_json": str}`` / ``{"args_dict": object}`` (docs/framework.md §3.3)."""

NULL_ARGS = Release(0, 2, 7)
"""From this release ``args`` may be null or absent (``str | dict | None = None``)."""

LIST_USER_CONTENT = Release(0, 0, 26)
"""From this release a ``user-prompt`` content may be a list (multimodal, docs/framework.md §3.3)."""

OUTCOME_FIELD = Release(1, 67, 0)
OUTCOMES: dict[str, Spans] = {
    "success": EVERY,
    "failed": EVERY,
    "denied": EVERY,
    "interrupted": but(OUTCOME_FIELD, Release(2, 10, 0)),
    "retried": but(OUTCOME_FIELD, RETRY_PARTS),
}
"""A ``tool-return``'s ``outcome`` values: the field came in 1.67.0 (``success``, ``failed``,
``denied``; a release before it ignores the field), ``interrupted`` in 2.10.0, ``retried``
in 2.60.0 (docs/framework.md §3.3)."""

TOOL_PAIRING = Release(2, 10, 0)
"""The first release that loads the return the tool-pairing rules (HM4xx) write for a dangling
call (``outcome`` ``interrupted``, 2.68's repair): they run for targets from it. An older
target's history keeps the pairing its release wrote (before 0.0.47 an unknown tool's call was
answered by a tool-less retry, which 2.68's pairing counts as no answer)."""

STATE_FIELD = Release(1, 92, 0)
RESPONSE_STATES: dict[str, Spans] = {
    "complete": EVERY,
    "interrupted": EVERY,
    "incomplete": but(STATE_FIELD, Release(1, 97, 0)),
    "suspended": but(STATE_FIELD, Release(2, 10, 0)),
}
"""``ModelResponse.state`` values: the field came in 1.92.0 (``complete``, ``interrupted``),
``incomplete`` in 1.97.0, ``suspended`` in 2.10.0 (the releases' ``ModelResponseState``)."""

REQUEST_STATE_FIELD = Release(2, 0, 0)
REQUEST_STATES: dict[str, Spans] = {"complete": EVERY, "interrupted": EVERY}
"""``ModelRequest.state`` values, unchanged since the field came in 2.0.0."""

FINISH_REASON_FIELD = Release(1, 0, 2)
FINISH_REASONS: dict[str, Spans] = dict.fromkeys(("stop", "length", "content_filter", "tool_call", "error"), EVERY)
"""``ModelResponse.finish_reason`` values, unchanged since the field came in 1.0.2."""

SYSTEM_PROMPT_TIMESTAMP = Release(0, 0, 43)
"""From this release a ``system-prompt`` has a ``timestamp`` (docs/framework.md §3.3)."""

_ERROR_DETAILS_PARTS = frozenset({"retry-prompt", "retry-feedback"})


def written_kinds(target: Release, message_kind: str) -> frozenset[str]:
    """The part kinds ``target`` writes in messages of ``message_kind`` (``request`` or
    ``response``): those it loads (:data:`PART_KINDS`) but the load-only ones
    (:data:`WRITTEN_UNTIL`)."""
    return frozenset(
        kind
        for kind, first in PART_KINDS.get(message_kind, {}).items()
        if first <= target and not (kind in WRITTEN_UNTIL and WRITTEN_UNTIL[kind] <= target)
    )


def newer_kinds(message_kind: str) -> frozenset[str]:
    """The part kinds of ``message_kind`` messages that some release since :data:`OLDEST`
    cannot load."""
    return frozenset(kind for kind, first in PART_KINDS[message_kind].items() if first > OLDEST)


class Feature(NamedTuple):
    """One thing a history holds that not every release loads: where it is (``path``, inside
    the record, ``messages[2].parts[0].outcome``), what it is in words, and the releases that
    load it."""

    path: str
    what: str
    spans: Spans


def _args_spans(part: dict[str, Any]) -> tuple[str, Spans] | None:
    if "args" not in part or part["args"] is None:
        return "null arguments", since(NULL_ARGS)
    args = part["args"]
    if isinstance(args, dict) and (isinstance(args.get("args_json"), str) or isinstance(args.get("args_dict"), dict)):
        return None
    if isinstance(args, (str, dict)):
        return "bare arguments", since(BARE_ARGS)
    return None


def _part_features(path: str, message_kind: Any, part: dict[str, Any]) -> Iterator[Feature]:
    kind = part.get("part_kind")
    kinds = PART_KINDS.get(message_kind, {}) if isinstance(message_kind, str) else {}
    if not isinstance(kind, str) or kind not in kinds:  # a kind that is an object or a list is no key either
        if isinstance(kind, str):
            yield Feature(f"{path}.part_kind", f"a {kind!r} part", NONE)
        return
    if kinds[kind] > OLDEST:
        yield Feature(f"{path}.part_kind", f"a {kind!r} part", since(kinds[kind]))
    if kind in ID_PARTS and "tool_call_id" in part and part["tool_call_id"] is None:
        yield Feature(f"{path}.tool_call_id", "a null tool_call_id", NULL_TOOL_CALL_ID)
    if part.get("timestamp", 0) is None and (message_kind == "request" or kind == "builtin-tool-return"):
        yield Feature(
            f"{path}.timestamp",
            "a null timestamp",
            before(SYSTEM_PROMPT_TIMESTAMP) if kind == "system-prompt" else NONE,
        )
    if kind == "tool-call":
        args = _args_spans(part)
        if args is not None:
            yield Feature(f"{path}.args", args[0], args[1])
    elif kind == "tool-return" and "outcome" in part:
        spans = _value_spans(part["outcome"], OUTCOMES, OUTCOME_FIELD)
        if spans != EVERY:
            yield Feature(f"{path}.outcome", f"outcome {part['outcome']!r}", spans)
    elif kind == "user-prompt" and isinstance(part.get("content"), list):
        yield Feature(f"{path}.content", "a list content", since(LIST_USER_CONTENT))
    if kind in _ERROR_DETAILS_PARTS and isinstance(part.get("content"), list):
        for index, detail in enumerate(part["content"]):
            if isinstance(detail, dict) and "input" not in detail:
                yield Feature(f"{path}.content[{index}]", "error details without input", NONE)


def _value_spans(value: Any, values: dict[str, Spans], field: Release) -> Spans:
    """The releases that load ``value`` of a field that came in ``field``, whose known values
    are ``values`` (any other value: only the releases that ignore the field)."""
    return values.get(value, before(field)) if isinstance(value, str) else before(field)


def _message_features(path: str, message: dict[str, Any]) -> Iterator[Feature]:
    kind = message.get("kind")
    if kind == "response":
        if message.get("timestamp", 0) is None:
            yield Feature(f"{path}.timestamp", "a null timestamp", NONE)
        if "state" in message and _value_spans(message["state"], RESPONSE_STATES, STATE_FIELD) != EVERY:
            yield Feature(
                f"{path}.state",
                f"state {message['state']!r}",
                _value_spans(message["state"], RESPONSE_STATES, STATE_FIELD),
            )
        reason = message.get("finish_reason")
        if reason is not None and _value_spans(reason, FINISH_REASONS, FINISH_REASON_FIELD) != EVERY:
            yield Feature(f"{path}.finish_reason", f"finish_reason {reason!r}", before(FINISH_REASON_FIELD))
    elif (
        kind == "request"
        and "state" in message
        and _value_spans(message["state"], REQUEST_STATES, REQUEST_STATE_FIELD) != EVERY
    ):
        yield Feature(f"{path}.state", f"state {message['state']!r}", before(REQUEST_STATE_FIELD))


def features(messages: Iterable[Any]) -> Iterator[Feature]:
    """Every :class:`Feature` of a history (plain JSON data) that not every release loads, in
    order. Entries that are not messages are passed over (the legacy schema names them)."""
    for m_index, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        path = f"messages[{m_index}]"
        yield from _message_features(path, message)
        parts = message.get("parts")
        if not isinstance(parts, list):
            continue
        for p_index, part in enumerate(parts):
            if isinstance(part, dict):
                yield from _part_features(f"{path}.parts[{p_index}]", message.get("kind"), part)


def readers(messages: Iterable[Any]) -> Spans:
    """The releases that load ``messages`` as far as this catalogue tells (what every release
    refuses, :mod:`histmig.schema.legacy` tells: check it first)."""
    spans = EVERY
    for feature in features(messages):
        spans = intersect(spans, feature.spans)
        if not spans:
            break
    return spans


def load_errors(messages: Iterable[Any], target: Release) -> list[Problem]:
    """Why ``target`` would refuse ``messages`` for what this catalogue tells: one
    :class:`~histmig.problems.Problem` per feature it cannot load, at its path
    (``messages[3].parts[1].part_kind: 2.0.0 cannot load a 'retry-feedback' part (loaded from
    2.60.0)``)."""
    return [
        Problem(
            feature.path,
            f"{target} cannot load {feature.what} (loaded "
            f"{'by ' if not feature.spans else ''}{describe(feature.spans)})",
        )
        for feature in features(messages)
        if not includes(feature.spans, target)
    ]
