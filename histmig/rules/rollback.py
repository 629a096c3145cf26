"""What the rollback rules (HM5xx, ``--target`` an older release) share: the ``retry-prompt``
part the releases before 2.60.0 wrote, and the evidence of what a rewrite loses.

A rollback writes the shapes the target release writes (docs/framework.md §3.2, §3.3, the
catalogue :mod:`histmig.schema.releases`). What the older shape has no place for is never
dropped silently: each change's evidence names every field whose value it lost (``lost
retry.cause='validation_error', retry.attempt, retry.max_retries``) and every id it had to
derive.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from histmig.errors import Malformed
from histmig.rules.base import Part, derived_tool_call_id
from histmig.schema.releases import STRING_TOOL_CALL_ID, Release

QUIET_OUTCOME = Optional[Literal["success", "failed", "denied"]]
"""The ``tool-return`` ``outcome`` values no rollback rule rewrites, as the screen decodes
them (HM501 rewrites ``retried``, HM504 ``interrupted``; both looks give this one type, as
the screen needs one type a field)."""

RETRY_PROMPT_KEYS = ("content", "tool_name", "tool_call_id", "timestamp", "part_kind")
"""A ``retry-prompt`` part's keys, in the order every release 0.0.13-2.59.0 wrote them."""

_NEWER_KEYS = ("outcome", "retry", "tool_kind", "metadata", "content_file_digests")
"""Keys of a ``tool-return`` / ``retry-feedback`` a ``retry-prompt`` does not have:
``content_file_digests`` is derived from the content (nothing is lost); the others are
reported when they hold a value (:func:`lost`)."""

ABSENT: Any = object()
"""A ``tool_call_id`` to leave out (:func:`to_retry_prompt`)."""


def to_retry_prompt(part: Part, where: str, tool_name: str | None, tool_call_id: Any) -> Part:
    """The ``retry-prompt`` part for a retried ``tool-return`` or a ``retry-feedback``
    ``part`` at ``where`` (``messages[2].parts[0]``): its ``content`` and ``timestamp`` (when
    present), ``tool_name`` and ``tool_call_id`` as given (``tool_call_id`` left out when
    :data:`ABSENT`), keys in the order the releases wrote them (:data:`RETRY_PROMPT_KEYS`),
    then any key no release wrote, kept as it is (the target ignores it). Raises
    :class:`~histmig.errors.Malformed` for a content that is neither text nor a list (a
    ``retry-prompt`` content is one or the other, docs/framework.md §2)."""
    if not isinstance(part.get("content"), (str, list)):
        raise Malformed(
            f"{where}.content: a retry-prompt holds text or a list of error details, so this part has no older form"
        )
    values = {
        "content": part["content"],
        "tool_name": tool_name,
        "tool_call_id": tool_call_id,
        "part_kind": "retry-prompt",
    }
    if "timestamp" in part:
        values["timestamp"] = part["timestamp"]
    rebuilt = {key: values[key] for key in RETRY_PROMPT_KEYS if key in values and values[key] is not ABSENT}
    rebuilt.update(
        (key, value) for key, value in part.items() if key not in RETRY_PROMPT_KEYS and key not in _NEWER_KEYS
    )
    return rebuilt


def tool_less_id(target: Release, conversation: str, m_index: int, p_index: int) -> str | None:
    """The ``tool_call_id`` of a tool-less ``retry-prompt`` at ``messages[m_index].parts[p_index]``
    of the conversation whose :func:`~histmig.rules.base.conversation_key` is ``conversation``,
    as ``target`` writes it: ``null`` before 0.0.45, else a derived id (the release generated a
    random one; histmig never writes a random id)."""
    return None if target < STRING_TOOL_CALL_ID else derived_tool_call_id(conversation, m_index, p_index, None)


def lost(part: Part, *keys: str) -> dict[str, Any]:
    """The values of ``part`` a ``retry-prompt`` has no place for: each field of its ``retry``
    and its ``tool_kind`` and ``metadata`` that is not null, then ``keys`` of it (as named)."""
    retry = part.get("retry") if isinstance(part.get("retry"), dict) else {}
    values = {f"retry.{key}": value for key, value in retry.items()}  # type: ignore[union-attr]  # a dict: tested
    values.update((key, part.get(key)) for key in ("tool_kind", "metadata", *keys))
    return {key: value for key, value in values.items() if value is not None}


SHOWN = frozenset({"retry.cause", "outcome", "state"})
"""Lost fields whose value the evidence gives: each has a handful of values, so the report's
counts by evidence stay few; for the others (an attempt, an id) it names the field."""


def evidence(values: dict[str, Any], *notes: str) -> str:
    """A rollback change's evidence: what it lost (``lost retry.cause='validation_error',
    retry.attempt, retry.max_retries``: the value for the fields of :data:`SHOWN`, the name
    for others), or ``nothing lost``, then ``notes`` (``tool_call_id derived``), joined by
    ``; ``."""
    said = (
        "lost " + ", ".join(f"{key}={value!r}" if key in SHOWN else key for key, value in values.items())
        if values
        else "nothing lost"
    )
    return "; ".join((said, *notes))
