"""What HM101, HM102 and HM103 share: telling a legacy ``retry-prompt`` part's binding, and
building the part it always meant.

The dispatch follows pydantic-ai 2.68's loader (docs/framework.md §2, ``_legacy_retry_part_tag``):
a part whose ``tool_name`` is not ``None`` (``''`` included) answers a tool call and becomes
that call's ``ToolReturnPart`` with ``outcome: "retried"``; any other becomes a
``RetryFeedbackPart``. Unlike the loader, the cause comes from evidence (rules/causes.py), no
field is filled from the clock, a missing or ``''`` id is never replaced by a random one, and
every other key of the part keeps its value and position.
"""

from __future__ import annotations

from typing import Any

from histmig.errors import Malformed
from histmig.problems import Problem
from histmig.rules.base import Change, Context, Message, Messages, Part
from histmig.rules.causes import Verdict, framework_cause, infer_cause

RETRY_PROMPT = "retry-prompt"
_ERROR_DETAILS_KEYS = ("type", "loc", "msg", "input", "url")


def is_tool_bound_retry(message: Message, part: Part) -> bool:
    """A request's retry-prompt part with a ``tool_name`` (HM101)."""
    return message.get("kind") == "request" and part.get("tool_name") is not None


def is_tool_less_retry(message: Message, part: Part) -> bool:
    """A request's retry-prompt part without a ``tool_name`` (HM102, HM103)."""
    return message.get("kind") == "request" and part.get("tool_name") is None


def dump_error_details(errors: list[Any]) -> list[Any]:
    """Clean a tool-bound error list exactly as 2.68's ``_dump_error_details`` does
    (docs/framework.md §2): keep the ``ErrorDetails`` keys in their declared order
    (``type, loc, msg, input, url``; ``ctx`` and unknown keys dropped), and among root-level
    entries (``len(loc) <= 1``) drop a later ``input`` equal to the first root input.
    Entries that are not objects are kept as they are."""
    cleaned: list[Any] = []
    root_input: Any = None
    seen_root = False
    for detail in errors:
        if not isinstance(detail, dict):
            cleaned.append(detail)
            continue
        entry = {key: detail[key] for key in _ERROR_DETAILS_KEYS if key in detail}
        if len(detail.get("loc") or ()) <= 1:
            if not seen_root:
                root_input, seen_root = detail.get("input"), True
            elif detail.get("input") == root_input:
                entry.pop("input", None)
        cleaned.append(entry)
    return cleaned


def _retry_info(verdict: Verdict) -> dict[str, Any] | None:
    if verdict.cause is None:
        return None
    return {"cause": verdict.cause, "attempt": None, "max_retries": None}


def _rebuild(part: Part, part_kind: str, insert: dict[str, Any], drop: tuple[str, ...] = ()) -> Part:
    """A copy of ``part`` with ``part_kind`` replaced in place, the keys in ``drop`` removed
    and ``insert`` added: just before ``part_kind`` when that is the last key (where the
    framework writes ``outcome``/``retry``), else at the end."""
    rebuilt = dict(part)
    for key in (*drop, *insert):
        rebuilt.pop(key, None)
    if next(reversed(part), None) == "part_kind":
        del rebuilt["part_kind"]
        rebuilt.update(insert)
        rebuilt["part_kind"] = part_kind
    else:
        rebuilt["part_kind"] = part_kind
        rebuilt.update(insert)
    return rebuilt


def to_tool_return(part: Part, verdict: Verdict, **fields: Any) -> Part:
    """The retried ``ToolReturnPart`` for a tool-bound retry-prompt ``part`` (docs/framework.md
    §2): ``outcome: "retried"``, ``retry`` from ``verdict`` (``null`` when it has no cause),
    an error-list ``content`` cleaned by :func:`dump_error_details`; ``fields`` overwrite
    values in place (HM103 sets ``tool_name``/``tool_call_id``)."""
    rebuilt = _rebuild(part, "tool-return", {"outcome": "retried", "retry": _retry_info(verdict)})
    for key, value in fields.items():
        rebuilt[key] = value
    if isinstance(rebuilt.get("content"), list):
        rebuilt["content"] = dump_error_details(rebuilt["content"])
    return rebuilt


def to_retry_feedback(part: Part, verdict: Verdict) -> Part:
    """The ``RetryFeedbackPart`` for a tool-less retry-prompt ``part`` (docs/framework.md §2):
    ``retry`` from ``verdict``, ``tool_name``/``tool_call_id`` removed (the part has no tool
    fields), ``content`` kept as stored (an error list keeps ``ctx`` and repeated inputs)."""
    return _rebuild(part, "retry-feedback", {"retry": _retry_info(verdict)}, drop=("tool_name", "tool_call_id"))


_DETAIL_FIELDS: tuple[tuple[str, type, bool, str], ...] = (
    ("type", str, True, "a string"),
    ("loc", list, True, "a list of strings and integers"),
    ("msg", str, True, "a string"),
    ("ctx", dict, False, "an object"),
    ("url", str, False, "a string"),
)
"""The fields of an error-details entry the legacy loader checks (pydantic_core's
``ErrorDetails``; ``input`` is any value, and may be missing: HM203): name, type, required,
in words."""


def _content_problem(content: Any) -> tuple[str, str] | None:
    """Where (``""``, ``[1].loc``) and what is wrong with a retry-prompt ``content`` no release
    loads (``_LegacyRetryPromptFields``: ``str | list[ErrorDetails]``, docs/framework.md §2), or
    ``None``: a string, or a list of error-details objects."""
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        return "", "a retry-prompt content must be a string or a list of error details"
    for index, detail in enumerate(content):
        if not isinstance(detail, dict):
            return f"[{index}]", "an error-details entry must be an object (type, loc, msg, input)"
        for name, kind, required, words in _DETAIL_FIELDS:
            if name not in detail:
                if required:
                    return f"[{index}]", f"an error-details entry must have {name!r}"
                continue
            value = detail[name]
            if not isinstance(value, kind) or (
                isinstance(value, list) and not all(type(item) in (str, int) for item in value)
            ):  # loc: its items too
                return f"[{index}].{name}", f"{name!r} of an error-details entry must be {words}"
    return None


def legacy_parts(messages: Messages, *, tool_bound: bool) -> list[tuple[int, int, Message, Part]]:
    """The retry-prompt parts of one binding in requests, as ``(message index, part index,
    message, part)``, in order. Raises :class:`~histmig.errors.Malformed` for one whose
    ``content`` is neither a string nor a list of error details (the loader's
    ``_LegacyRetryPromptFields`` rejects it too, docs/framework.md §2: :func:`_content_problem`)."""
    binding = is_tool_bound_retry if tool_bound else is_tool_less_retry
    found = []
    for m_index, message in enumerate(messages):
        parts = message.get("parts") if isinstance(message, dict) and message.get("kind") == "request" else None
        if not isinstance(parts, list):
            continue
        for p_index, part in enumerate(parts):
            if not isinstance(part, dict) or part.get("part_kind") != RETRY_PROMPT or not binding(message, part):
                continue
            wrong = _content_problem(part.get("content"))
            if wrong is not None:
                at, what = wrong
                raise Malformed(Problem(f"messages[{m_index}].parts[{p_index}].content{at}", what))
            found.append((m_index, p_index, message, part))
    return found


def rewrite_legacy(messages: Messages, ctx: Context, code: str, *, tool_bound: bool) -> list[Change]:
    """Rewrite every retry-prompt part of one binding (:func:`legacy_parts`) as the part it
    always meant: a tool-bound one as the call's retried ``ToolReturnPart``
    (:func:`to_tool_return`), a tool-less one as a ``RetryFeedbackPart``
    (:func:`to_retry_feedback`), its cause from :func:`verdict`; the changes are reported as
    rule ``code``'s. Raises :class:`~histmig.errors.Malformed` for a content that is
    neither text nor a list."""
    changes: list[Change] = []
    after = "tool-return" if tool_bound else "retry-feedback"
    for m_index, p_index, message, part in legacy_parts(messages, tool_bound=tool_bound):
        found = verdict(part, ctx, tool_bound=tool_bound)
        message["parts"][p_index] = to_tool_return(part, found) if tool_bound else to_retry_feedback(part, found)
        changes.append(
            Change(code, m_index, p_index, RETRY_PROMPT, after, found.evidence, found.certainty, found.cause)
        )
    return changes


def verdict(part: Part, ctx: Context, *, tool_bound: bool) -> Verdict:
    """The cause of ``part`` under the user's cause mode (rules/causes.py)."""
    judge = framework_cause if ctx.causes == "framework" else infer_cause
    return judge(part.get("content"), tool_bound=tool_bound)
