"""The screen: tells, without building the record, that no rule can change it.

Most records of an archive hold nothing to migrate. :class:`Screen` decodes a record's bytes
with msgspec into a typed skeleton of the history (the envelope's messages field, each
message's ``kind`` and ``parts``, each part's ``part_kind`` and the few fields a rule looks
at) and skips every other value without building a Python object: a few microseconds for a
3 KB record, against an orjson parse and a walk of its parts. The skeleton's types are
stricter than every rule's test (:func:`histmig.rules.base.pending`):

- ``part_kind`` is one 2.68 loads, other than ``retry-feedback`` (none of ``retry-prompt``,
  ``instruction``, or a newer release's kind; HM101-HM103, HM204);
- a ``retry-feedback`` part has text content, or error details that each hold ``input``
  (HM203);
- a part's ``tool_call_id`` and ``timestamp``, when present, are strings, and so is a
  response's ``timestamp`` (HM201, HM202);
- a tool call's ``args`` is text, ``null`` or an object without an ``args_json`` or
  ``args_dict`` key, and a response has no ``provider_request_id`` (HM301, HM302);

and a record it accepts is valid JSON in UTF-8 (checked apart: msgspec skips strings
unchecked) nested no deeper than msgspec's limit, which is below orjson's. The skeleton's
structs are untracked by the garbage collector (``gc=False``): a decoded skeleton holds no
cycle and is dropped at once. Whatever it refuses goes the full way
(:func:`histmig.pipeline.process`), which names what is wrong. One value the full way
refuses passes: a number beyond a double's range (``1e400``), which JSON allows and the
record carries unchanged (``check`` parses every record and names it).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any, Literal, Union

import msgspec

from histmig.schema import PLAIN_CURRENT, REQUEST_PART_KINDS, RESPONSE_PART_KINDS, Fields, msgspec_type

_Absent = Annotated[int, msgspec.Meta(ge=1, le=0)]
"""A type no JSON value satisfies: a field of this type must be absent."""

_QUIET_KINDS = Literal[tuple(sorted((REQUEST_PART_KINDS | RESPONSE_PART_KINDS) - {"retry-feedback"}))]  # type: ignore[valid-type]


class _Args(msgspec.Struct, gc=False):
    args_json: _Absent = 0
    args_dict: _Absent = 0


_ARGS = Union[str, None, _Args]


class _ErrorDetails(msgspec.Struct, gc=False):
    input: msgspec.Raw


class _FeedbackPart(msgspec.Struct, tag_field="part_kind", tag="retry-feedback", gc=False):
    content: Union[str, list[_ErrorDetails]]
    tool_call_id: str = ""
    timestamp: str = ""


def _tagged_parts() -> Any:
    """The skeleton's part: one struct per quiet ``part_kind`` (its ``tool_call_id``,
    ``timestamp`` and ``args``) and :class:`_FeedbackPart`, as one union tagged by
    ``part_kind``; any other ``part_kind`` (``retry-prompt`` among them) fails to decode."""
    members = [
        msgspec.defstruct(f"_Part_{kind}", [("tool_call_id", str, ""), ("timestamp", str, ""), ("args", _ARGS, None)], tag_field="part_kind", tag=kind, gc=False)
        for kind in _QUIET_KINDS.__args__
    ]
    return Union[tuple(members) + (_FeedbackPart,)]


def _skeleton(part: Any, field: str | None) -> msgspec.json.Decoder:
    request = msgspec.defstruct("_Request", [("parts", list[part])], tag_field="kind", tag="request", gc=False)
    response = msgspec.defstruct(
        "_Response", [("parts", list[part]), ("timestamp", str, ""), ("provider_request_id", _Absent, 0)], tag_field="kind", tag="response", gc=False
    )
    return _decoder(list[Union[request, response]], field)


def _decoder(messages: Any, field: str | None) -> msgspec.json.Decoder:
    """A decoder of a record holding ``messages`` at ``field``, or of a bare array of them
    (``field`` ``None``)."""
    if field is None:
        return msgspec.json.Decoder(messages)
    return msgspec.json.Decoder(msgspec.defstruct("_Envelope", [(field, messages)], gc=False))


class Screen:
    """``screen(raw) -> bool``: ``True`` only when ``raw``, the JSON text of a record (bytes),
    is an object whose ``field`` (default ``messages``, the first candidate
    :func:`~histmig.records.locate_messages` tries) holds a history no rule can change and
    that orjson reads (see the module docstring), or such a history as a bare array (its
    first byte ``[``, as a Parquet or DuckDB cell holds it). ``False`` says nothing: the
    record must go the full way. Never raises."""

    def __init__(self, field: str | None = None) -> None:
        part = _tagged_parts()
        self._record = _skeleton(part, field or "messages")
        self._array = _skeleton(part, None)

    def __call__(self, raw: bytes) -> bool:
        """Whether ``raw`` needs nothing (see the class docstring). One decode, no search of
        the bytes first: a record holding a ``retry-prompt`` part stops decoding there."""
        try:
            (self._array if raw[:1] == b"[" else self._record).decode(raw)
            if not raw.isascii():
                raw.decode()
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
            return False
        return True


@lru_cache(maxsize=16)
def screen_for(field: str | None) -> Screen:
    """The :class:`Screen` of ``field``, built once per process (building one takes about a
    millisecond)."""
    return Screen(field)


_NotNull = Union[str, int, float, bool, list[msgspec.Raw], dict[str, msgspec.Raw]]
"""Any JSON value but ``null``."""


def _without_pending(tag: tuple[str, str] | None, fields: Fields) -> Fields:
    """The fields of a settled history's struct (see :class:`Settled`): a part has no
    ``"timestamp": null`` (HM202) even where 2.68 declares no timestamp, a part's ``args`` is
    text, ``null`` or an object without an ``args_json`` or ``args_dict`` key (HM301), and a
    response has no ``provider_request_id`` (HM302)."""
    if tag is not None and tag[0] == "part_kind":
        fields = [(name, _ARGS, *rest[1:]) if name == "args" else (name, *rest) for name, *rest in fields]
        if all(name != "timestamp" for name, *_ in fields):
            fields.append(("timestamp", _NotNull, None))
    if tag == ("kind", "response"):
        fields = [*fields, ("provider_request_id", _Absent, 0)]
    return fields


_SETTLED_MESSAGES = msgspec_type(PLAIN_CURRENT, refine=_without_pending)


class Settled:
    """``settled(output) -> bool``: ``True`` only when ``output``, the JSON text histmig wrote
    for a migrated record (bytes), holds at ``field`` (``None``: the record is a bare array)
    a history pydantic-ai 2.68 loads on which a second pass of the rules changes nothing: it
    decodes with msgspec into the current schema (:data:`~histmig.schema.PLAIN_CURRENT`)
    made stricter by :func:`_without_pending`. The current schema itself rules out the
    shapes HM101-HM204 repair (a ``retry-prompt`` or ``instruction`` part, a null id or
    response timestamp, error details without ``input``); the stricter structs rule out
    what HM202, HM301 and HM302 look for where 2.68 would load it. ``False`` says nothing:
    the pipeline then validates with pydantic and runs the second pass."""

    def __init__(self, field: str | None = None) -> None:
        self._decoder = _decoder(_SETTLED_MESSAGES, field)

    def __call__(self, output: bytes) -> bool:
        try:
            self._decoder.decode(output)
        except (msgspec.DecodeError, RecursionError):
            return False
        return True


@lru_cache(maxsize=16)
def settled_for(field: str | None) -> Settled:
    """The :class:`Settled` check of ``field``, built once per process."""
    return Settled(field)
