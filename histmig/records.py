"""Record: one stored conversation as it travels through the engine, and its Outcome.

A record is the bytes a source read (a JSONL line, a whole ``.json`` file, a Parquet or
DuckDB cell) plus where they came from, so every message can name the file and the line
or row. The envelope (every field around the messages) is never touched by rules. An
:class:`Outcome` is what the engine made of it, which the source writes and the report
counts.
"""

from __future__ import annotations

import hashlib
import operator
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import msgspec
import orjson

from histmig.errors import BadFieldPath, NotAHistory
from histmig.schema.releases import Release, Spans, includes

if TYPE_CHECKING:
    from histmig.rules.base import Change, Finding

MESSAGE_FIELD_CANDIDATES = ("messages", "all_messages", "history", "message_history", "conversation")
"""Envelope fields tried, in order, when ``--messages-field`` is not given."""


class Record(NamedTuple):
    """One record read from a source.

    ``raw`` is the record's JSON text as stored (UTF-8 bytes, no line terminator);
    ``source`` the file name (``-`` for stdin); ``location`` a human position such as
    ``line 12`` or ``row 5``; ``record_id`` the record's id: a Parquet or DuckDB id
    column's, given with the record, else the envelope's (:func:`envelope_id`), filled in
    once the pipeline has parsed the record (:meth:`_replace`). (A named tuple: a grouped
    input makes one for every record it reads, before the screen.)
    """

    raw: bytes
    source: str
    location: str
    record_id: str | None = None

    @property
    def name(self) -> str:
        """``file:location`` (and ``[id]`` when known), as used in every error line."""
        suffix = f" [{self.record_id}]" if self.record_id else ""
        return f"{self.source}:{self.location}{suffix}"


class Conversation:
    """The records of one conversation, in its order (design.md "The unit of work"): what
    ``--conversation`` groups and ``--order`` sorts. ``records`` as read, each with where it
    came from; ``name`` the conversation as error lines name it (``session_id='s1'``, ``the
    table``); ``note``, what every record of it is told (a null key: a conversation of its
    own), or ``None``; ``refused``, why it is rejected whole unread (past
    ``--max-conversation-bytes``), or ``None``. Made of its records, or of their bytes alone
    (:meth:`read`), its records then made only when :attr:`records` is first asked for: the
    screen reads the bytes (:attr:`raws`), and passes most conversations with none made."""

    __slots__ = ("_made", "_raws", "_records", "name", "note", "refused")

    def __init__(
        self, records: Sequence[Record], name: str, note: str | None = None, refused: str | None = None
    ) -> None:
        self.name, self.note, self.refused = name, note, refused
        self._records: tuple[Record, ...] | None = tuple(records)
        self._raws: Sequence[bytes] | None = None
        self._made: tuple[Callable[[bytes, Any], Record], Sequence[Any]] | None = None

    @classmethod
    def read(
        cls,
        raws: Sequence[bytes],
        record: Callable[[bytes, Any], Record],
        places: Sequence[Any],
        name: str,
        note: str | None = None,
        refused: str | None = None,
    ) -> Conversation:
        """The conversation of the records whose bytes are ``raws``, each at its place of
        ``places`` in the source, ``record(raw, place)`` making its :class:`Record`."""
        conversation = cls((), name, note, refused)
        conversation._records, conversation._raws, conversation._made = None, raws, (record, places)
        return conversation

    @property
    def records(self) -> tuple[Record, ...]:
        """The records, in order (made on the first call for one :meth:`read`)."""
        if self._records is None:
            record, places = self._made  # type: ignore[misc]  # read: made from its bytes
            self._records = tuple(map(record, self._raws, places))  # type: ignore[arg-type]  # read: its bytes
        return self._records

    @property
    def raws(self) -> Sequence[bytes]:
        """Each record's bytes, in order."""
        if self._raws is None:
            self._raws = [record.raw for record in self.records]
        return self._raws


def field_path(spec: str) -> tuple[str, ...]:
    """The keys a ``--messages-field`` path names, from the record down: ``payload.messages``
    is ``("payload", "messages")``; ``\\.`` is a dot inside a key (``chat\\.v1`` is the key
    ``chat.v1``) and ``\\\\`` a backslash. Raises :class:`BadFieldPath` for an empty path or
    key, or a ``\\`` before anything but a dot or a backslash."""
    keys: list[str] = []
    key: list[str] = []
    escaped = False
    for char in spec:
        if escaped:
            if char not in ".\\":
                raise BadFieldPath(f"--messages-field {spec!r}: a backslash escapes a dot or a backslash, not {char!r}")
            key.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ".":
            keys.append("".join(key))
            key = []
        else:
            key.append(char)
    if escaped:
        raise BadFieldPath(f"--messages-field {spec!r}: ends with a lone backslash")
    keys.append("".join(key))
    if not all(keys):
        raise BadFieldPath(f"--messages-field {spec!r}: names an empty key (a dot inside a key is written \\.)")
    return tuple(keys)


def struct_key(key: str) -> bool:
    """Whether JSON key ``key`` can name a field of a msgspec struct (a renamed field) that a
    field path reads: not when it holds a ``\\``, a ``"`` or a control character (U+0000 to
    U+001F), which msgspec refuses, nor the empty key, which no field path spells."""
    return bool(key) and not any(char in '\\"' or char < " " for char in key)


WHOLE_INPUT = "*"
"""``--conversation`` of an input whose every record belongs to one conversation (the
pydantic-ai chat-app example's table)."""

MAX_CONVERSATION_BYTES = 64 << 20
"""``--max-conversation-bytes`` by default: the records of one conversation held at once."""


@dataclass(frozen=True)
class Grouping:
    r"""How an input's records make conversations (``--conversation``, ``--order``,
    ``--max-conversation-bytes``; design.md "The unit of work"): the ``keys`` naming a
    conversation (columns, or :func:`field_path`\ s of a JSON record; several: a composite
    key; ``()`` with :data:`WHOLE_INPUT`: the whole input is one), the ``order`` of its
    records (``None``: the input's own, key or line order) and the ``limit`` of its records'
    bytes (past it, a conversation is rejected whole)."""

    keys: tuple[str, ...]
    order: str | None = None
    limit: int = MAX_CONVERSATION_BYTES

    @property
    def whole(self) -> bool:
        """Whether every record of an input is one conversation (``--conversation '*'``)."""
        return self.keys == (WHOLE_INPUT,)

    @property
    def paths(self) -> tuple[tuple[str, ...], ...]:
        """The keys as paths into a JSON record (:func:`field_path`)."""
        return () if self.whole else tuple(field_path(key) for key in self.keys)

    @property
    def fields(self) -> tuple[tuple[str, ...], ...]:
        """The paths into a JSON record of the keys and the order (:func:`field_path`): what
        grouping reads of it."""
        return self.paths + ((field_path(self.order),) if self.order is not None else ())

    def refusal(self, name: str, held: int, count: int, what: str = "records") -> str | None:
        """Why the conversation ``name``, whose ``count`` records (``what``: ``rows``) hold
        ``held`` bytes, is rejected whole unread (:attr:`Conversation.refused`): past
        :attr:`limit`; ``None`` within it."""
        if held <= self.limit:
            return None
        return (
            f"conversation {name} holds {held} bytes in {count} {what}, past --max-conversation-bytes {self.limit}: "
            "rejected whole, nothing written for it"
        )

    def named(self, values: tuple[Any, ...]) -> str:
        """A conversation as error lines name it: ``session_id='s1'`` (``the input`` for
        :data:`WHOLE_INPUT`)."""
        if self.whole:
            return "the whole input"
        if len(values) == 1:  # once a conversation: the common key of one field without a join
            return f"{self.keys[0]}={values[0]!r}"
        return ",".join(f"{key}={value!r}" for key, value in zip(self.keys, values))


def path_value(obj: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` of a parsed JSON record (``None`` when a key is missing or a
    step is no object)."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


class FieldReader:
    r"""Reads the values at ``paths`` (:func:`field_path`\ s) of a JSON record's bytes
    without building the rest of it: msgspec decodes the objects along the paths into small
    structs and skips every other field. A record where that does not fit (not an object, a
    step that is no object), or every record when a key cannot name a struct field
    (:func:`struct_key`), is decoded whole and walked (:func:`path_value`). ``None`` for a
    value that is missing or null, and every value ``None`` for a record that is not JSON."""

    def __init__(self, paths: tuple[tuple[str, ...], ...]) -> None:
        self._paths = paths
        tree: dict[str, Any] = {}
        fits = True
        for path in paths:
            node = tree
            for key in path[:-1]:
                found = node.setdefault(key, {})
                fits = fits and found is not None
                node = found if isinstance(found, dict) else {}
            fits = fits and not node.get(path[-1]) and all(map(struct_key, path))
            node.setdefault(path[-1], None)
        self._fast = msgspec.json.Decoder(_struct_of(tree, "_Fields")) if fits else None
        self._steps = [tuple(_attribute(tree, path[: i + 1]) for i in range(len(path))) for path in paths]
        flat = all(len(path) == 1 for path in paths) and len(paths) > 1
        self._flat = operator.attrgetter(*(steps[0] for steps in self._steps)) if flat else None
        self._one = operator.attrgetter(self._steps[0][0]) if len(paths) == 1 and len(paths[0]) == 1 else None

    def __call__(self, raw: bytes) -> tuple[Any, ...]:
        if self._fast is not None:
            try:
                obj = self._fast.decode(raw)
            except (msgspec.DecodeError, RecursionError):
                pass
            else:
                if self._flat is not None:  # top-level keys alone: read at once
                    return self._flat(obj)
                return tuple(_walked(obj, steps) for steps in self._steps)
        try:
            whole = _DECODER.decode(raw)
        except (msgspec.DecodeError, RecursionError):
            return tuple(None for _ in self._paths)
        return tuple(path_value(whole, path) for path in self._paths)

    def lines(self, raws: list[bytes]) -> list[tuple[Any, ...]] | None:
        """What :meth:`__call__` reads of each of ``raws`` (a file's lines, none blank), in
        one go: each decoded by the same small structs, ``None`` as soon as one does not fit
        (then each is read alone)."""
        if self._fast is None:
            return None
        try:
            objs = list(map(self._fast.decode, raws))
        except (msgspec.DecodeError, RecursionError):
            return None
        if self._flat is not None:
            return list(map(self._flat, objs))
        if self._one is not None:
            return list(zip(map(self._one, objs)))
        return [tuple(_walked(obj, steps) for steps in self._steps) for obj in objs]


def _attribute(tree: dict[str, Any], path: tuple[str, ...]) -> str:
    """The struct attribute of the last key of ``path`` (:func:`_struct_of` names them by
    their place among their siblings)."""
    node = tree
    for key in path[:-1]:
        node = node[key]
    return f"f{list(node).index(path[-1])}"


def _walked(obj: Any, steps: tuple[str, ...]) -> Any:
    for step in steps:
        if obj is None:
            return None
        obj = getattr(obj, step)
    return obj


def _struct_of(tree: dict[str, Any], name: str) -> Any:
    """A msgspec struct type holding the keys of ``tree`` (each a value, or an object of its
    subtree), every one optional (a missing key is ``None``)."""
    fields = [
        (f"f{i}", Any if sub is None else _struct_of(sub, f"{name}_{i}") | None, None)
        for i, sub in enumerate(tree.values())
    ]
    return msgspec.defstruct(name, fields, rename={f"f{i}": key for i, key in enumerate(tree)}, gc=False)


@lru_cache(maxsize=64)
def spelled(path: tuple[str, ...]) -> str:
    """A path written as :func:`field_path` reads it (``("chat.v1",)`` is ``chat\\.v1``)."""
    return ".".join(key.replace("\\", "\\\\").replace(".", "\\.") for key in path)


def dumps(obj: Any) -> bytes:
    """The compact JSON text of ``obj``: orjson's, or for a value holding an integer beyond
    64 bits, which orjson refuses, msgspec's (the same text, the integer exact)."""
    try:
        return orjson.dumps(obj)
    except orjson.JSONEncodeError:
        return _ENCODER.encode(obj)


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder()


class Located(NamedTuple):
    """Where a record's history is: the ``messages`` (a list, as parsed), the ``path`` of
    keys leading to them from the record (``()``: the record is the history), and whether
    they are held as JSON ``text`` in a string field (``"messages": "[{...}]"``, as database
    exports write them), which :meth:`put` writes back as JSON text, and whether the record
    is a ``single`` message (a store of one message a row, in a conversation: the history of
    that message alone, written back as the message). (A named tuple: one is
    made for every record that goes the full way.)"""

    messages: list[Any]
    path: tuple[str, ...] = ()
    text: bool = False
    single: bool = False

    @property
    def name(self) -> str | None:
        """The path as ``--messages-field`` spells it (``None`` for a bare history): the
        prefix of every error path inside the record."""
        return spelled(self.path) if self.path else None

    def put(self, obj: Any, value: Any) -> Any:
        """``obj`` with ``value`` (a history, or for a text-held one its JSON text, a
        ``str``; a list is encoded) in the history's place; the value itself for a bare
        history."""
        if self.single:
            (value,) = value
        if self.text and not isinstance(value, str):
            value = dumps(value).decode()
        if not self.path:
            return value
        node = obj
        for key in self.path[:-1]:
            node = node[key]
        node[self.path[-1]] = value
        return obj


def _looks_like_history(value: Any) -> bool:
    return isinstance(value, list) and (
        not value or (isinstance(value[0], dict) and "kind" in value[0] and "parts" in value[0])
    )


def _held(value: Any, path: tuple[str, ...], looks_like: Callable[[Any], bool] | None = None) -> Located | None:
    """``value`` as the history at ``path``: a list (that ``looks_like`` accepts, when
    given), or a string holding one as JSON text; else ``None``."""
    if isinstance(value, list):
        return Located(value, path) if looks_like is None or looks_like(value) else None
    if isinstance(value, str) and value.lstrip(" \t\r\n")[:1] == "[":
        try:
            parsed = _DECODER.decode(value)
        except (msgspec.DecodeError, RecursionError):
            return None
        if isinstance(parsed, list) and (looks_like is None or looks_like(parsed)):
            return Located(parsed, path, text=True)
    return None


def _unparsed(value: Any) -> str | None:
    """Why a string that opens a JSON array is not one, in words a report line can end with
    (``truncated JSON text``, or msgspec's words); ``None`` for any other value, or one that
    parses."""
    if not (isinstance(value, str) and value.lstrip(" \t\r\n")[:1] == "["):
        return None
    try:
        _DECODER.decode(value)
    except msgspec.DecodeError as exc:
        return "truncated JSON text" if "truncated" in str(exc) else f"JSON text that does not parse ({exc})"
    except RecursionError:
        return f"JSON text nested deeper than {sys.getrecursionlimit()} levels"
    return None


def _held_in(obj: dict[str, Any], path: tuple[str, ...], looks_like: Callable[[Any], bool]) -> list[Located]:
    """Every non-empty history ``looks_like`` accepts among the fields of ``obj`` (which is at
    ``path``)."""
    return [
        found
        for key, value in obj.items()
        if value and (found := _held(value, (*path, key), looks_like)) is not None and found.messages
    ]


def locate_messages(
    obj: Any, field: str | None = None, looks_like: Callable[[Any], bool] = _looks_like_history, what: str = "messages"
) -> Located:
    """Find the history inside a parsed record.

    A bare array is its own history; an object's history is at ``field`` (a
    :func:`field_path`, maybe nested: ``payload.messages``) when it is given, else in the
    first candidate field (:data:`MESSAGE_FIELD_CANDIDATES`) holding a list, else in the only
    non-empty field ``looks_like`` accepts (a list of messages; the OTel export passes its own
    test and ``what``), else in the only such field of an object one level down
    (``{"payload": {"msgs": [...]}}``). The list may be held as JSON text in a string field. Raises
    :class:`NotAHistory` naming what was found instead (or :class:`BadFieldPath` for a
    ``field`` that names no key).
    """
    if isinstance(obj, list):
        return Located(obj)
    if not isinstance(obj, dict):
        raise NotAHistory(f"expected a JSON array or object, got {_json_kind(obj)}")
    if field is not None:
        path = field_path(field)
        node: Any = obj
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        value = node.get(path[-1]) if isinstance(node, dict) else None
        found = _held(value, path)
        if found is None and isinstance(value, dict) and _is_message(value):
            raise NotAHistory(_ONE_MESSAGE.format(f"holds one message (field {field!r})"))
        if found is None:
            said = _unparsed(value) or (
                "a string that is not a JSON array" if isinstance(value, str) else "missing or not an array"
            )
            raise NotAHistory(f"field {field!r} is {said}")
        return found
    for candidate in MESSAGE_FIELD_CANDIDATES:
        value = obj.get(candidate)
        if value.__class__ is list:
            return Located(value, (candidate,))
        found = _held(value, (candidate,)) if value is not None else None
        if found is not None:
            return found
    held = _held_in(obj, (), looks_like)
    if not held:  # one level down: an event's {"payload": {"messages": [...]}}
        held = [
            found
            for key, value in obj.items()
            if isinstance(value, dict)
            for found in _held_in(value, (key,), looks_like)
        ]
    if len(held) == 1:
        return held[0]
    present = next((key for key in MESSAGE_FIELD_CANDIDATES if key in obj), None)
    if present is not None and (problem := _unparsed(obj[present])) is not None:
        raise NotAHistory(f"field {present!r} is {problem}")
    if present is not None:
        raise NotAHistory(
            f"field {present!r} is not an array (if the {what} are in another field, name it with --messages-field)"
        )
    if _is_message(obj):
        raise NotAHistory(_ONE_MESSAGE.format("is one message"))
    ones = [key for key, value in obj.items() if isinstance(value, dict) and _is_message(value)]
    if len(ones) == 1:
        raise NotAHistory(_ONE_MESSAGE.format(f"holds one message (field {ones[0]!r})"))
    raise NotAHistory(f"no {what} field found (name it with --messages-field)")


_ONE_MESSAGE = (
    "the record {}, not a history (a store of one message a record: convert, audit, check and otel put each "
    "conversation together with --conversation KEY --order KEY, docs/layouts.md)"
)
"""What a record of one message is told read as a whole history."""


def _is_message(obj: dict[str, Any]) -> bool:
    """Whether ``obj`` is one ``ModelRequest``/``ModelResponse`` object (a ``kind`` of
    :data:`MESSAGE_KINDS` and a ``parts`` list)."""
    return obj.get("kind") in MESSAGE_KINDS and isinstance(obj.get("parts"), list)


def locate_in_conversation(obj: Any, field: str | None = None) -> Located:
    """:func:`locate_messages` for a record of a conversation (``--conversation``), which
    may also be one message, a ``ModelRequest``/``ModelResponse`` object (a store of one
    message a row): its history is that message alone (:attr:`Located.single`), the record
    itself, the object at ``field``, or without ``field`` the one field of the record that
    holds a message (``{"conversation_id": "c", "seq": 2, "message": {...}}``)."""
    if not isinstance(obj, dict):
        return locate_messages(obj, field)
    if field is None and _is_message(obj):
        return Located([obj], single=True)
    if field is not None:
        path = field_path(field)
        node: Any = obj
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and _is_message(node):
            return Located([node], path, single=True)
        return locate_messages(obj, field)
    try:
        return locate_messages(obj)
    except NotAHistory:
        held = [key for key, value in obj.items() if isinstance(value, dict) and _is_message(value)]
        if len(held) != 1:
            raise
        return Located([obj[held[0]]], (held[0],), single=True)


MESSAGE_KINDS = ("request", "response")
"""The ``kind`` of a ``ModelRequest`` and of a ``ModelResponse``."""


def conversation_envelope(messages: Any) -> msgspec.json.Decoder:
    """A decoder of a record of a conversation as it is read when its history is put together
    with the others' from their bytes (:func:`histmig.engine.joined_history`), in one pass: its
    ``kind`` and ``parts`` (raw: whether it is one message, :func:`one_message`) and its
    candidate messages fields (:data:`MESSAGE_FIELD_CANDIDATES`, attributes ``f0``, ``f1``...),
    the first (``messages``) decoded as the type ``messages``, every other an array of raw
    items or null (a candidate holding anything else does not decode); a missing field is
    ``None``."""
    return msgspec.json.Decoder(
        msgspec.defstruct(
            "_Envelope",
            [
                ("kind", Any, None),
                ("parts", msgspec.Raw, msgspec.Raw(b"null")),
                ("f0", messages, None),
                *((f"f{i}", list[msgspec.Raw] | None, None) for i in range(1, len(MESSAGE_FIELD_CANDIDATES))),
            ],
            rename={f"f{i}": name for i, name in enumerate(MESSAGE_FIELD_CANDIDATES)},
            gc=False,
        )
    )


def one_message(envelope: Any) -> bool:
    """Whether a record :func:`conversation_envelope` decoded is one message: a ``kind`` of
    :data:`MESSAGE_KINDS` and a ``parts`` array (as :func:`locate_in_conversation` reads it;
    then its candidate fields do not count)."""
    return envelope.kind in MESSAGE_KINDS and bytes(envelope.parts)[:1] == b"["


RAW_ENVELOPE = conversation_envelope(list[msgspec.Raw] | None)
""":func:`conversation_envelope` with every candidate's items as their bytes."""

_KIND = msgspec.json.Decoder(
    msgspec.defstruct("_Kind", [("kind", Any, None), ("parts", msgspec.Raw, msgspec.Raw(b"null"))], gc=False)
)
"""Reads a record's ``kind`` and ``parts`` alone: whether it is one message."""


def is_one_message(raw: bytes) -> bool:
    """Whether the record ``raw`` (JSON text) is one message, a ``ModelRequest`` or
    ``ModelResponse`` object (a store of one message a row; :func:`one_message`), not a
    history nor an envelope: its ``kind`` and ``parts`` decoded alone. ``False`` for a record
    that does not decode."""
    try:
        return one_message(_KIND.decode(raw))
    except (msgspec.DecodeError, RecursionError):
        return False


def check_messages(messages: list[Any], prefix: str = "messages") -> None:
    """Raise :class:`NotAHistory` unless each item of ``messages`` is a message: an object
    holding ``kind`` and a ``parts`` list (every release's ``ModelRequest``/``ModelResponse``,
    docs/framework.md §3); the error names the first item that is not, under ``prefix``. A
    list of histories or of scalars is not a history: it is rejected, not copied as
    unchanged."""
    for index, message in enumerate(messages):
        if isinstance(message, list):
            raise NotAHistory(
                f"{prefix}[{index}] is a list, not a message: a record holds one history (many histories go in a "
                "JSONL file, one a line)"
            )
        if not isinstance(message, dict) or "kind" not in message:
            raise NotAHistory(f"{prefix}[{index}] is not a message (an object with 'kind' and a 'parts' list)")
        if not isinstance(message.get("parts"), list):
            raise NotAHistory(f"{prefix}[{index}].parts is not a list")


def _json_kind(value: Any) -> str:
    """What ``value``, parsed from JSON, is in JSON's words: a string, a number, true, false or null."""
    if value is None or isinstance(value, bool):
        return orjson.dumps(value).decode()
    return "a string" if isinstance(value, str) else "a number"


def messages_digest(raw: bytes, field: str | None = None) -> str:
    """What names a record without an id in a baseline: the SHA-256 (hex, first 16 digits)
    of its history as compact JSON text (:func:`dumps` of the messages
    :func:`locate_messages` finds at ``field``), so the envelope around it and where the
    record lies do not count; of the record's bytes when it is no JSON or holds no history."""
    try:
        held: Any = dumps(locate_messages(_DECODER.decode(raw), field).messages)
    except (msgspec.DecodeError, RecursionError, NotAHistory, BadFieldPath):
        held = raw
    return hashlib.sha256(held).hexdigest()[:16]


ID_FIELDS = ("id", "conversation_id", "record_id")


def envelope_id(obj: Any) -> str | None:
    """The record's own id, for reports: the first of :data:`ID_FIELDS` an envelope object
    holds as a string or integer; ``None`` for a bare history or an envelope without one."""
    if not isinstance(obj, dict):
        return None
    for key in ID_FIELDS:
        value = obj.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            return str(value)
    return None


CONVERSATION_FIELDS = frozenset({"conversation_id", "session_id", "thread_id", "chat_id"})
"""The envelope fields (or columns) that name the conversation a record belongs to, in any case
and with or without the underscore (:func:`names_conversations`: ``SESSION_ID``, ``sessionId``);
a message's own ``conversation_id`` (2.68 writes one on every message, the same on every run of
a conversation: ``Agent.run`` takes it from ``message_history``) names it too."""

_CONVERSATION_WORDS = frozenset(name.replace("_", "") for name in CONVERSATION_FIELDS)


def names_conversations(name: str) -> bool:
    """Whether the field or column ``name`` is one of :data:`CONVERSATION_FIELDS`, as an
    application may spell it: any case, with or without the underscore (a SQLite or DuckDB
    identifier is the same in any case; JavaScript writes ``sessionId``)."""
    return name.replace("_", "").lower() in _CONVERSATION_WORDS


def conversation_names(obj: Any, messages: Any) -> tuple[str, ...]:
    """The conversations a record says it belongs to, as ``field=value`` texts, distinct and
    sorted: each field of an envelope object ``obj``, or of an object within it (not within an
    array: ``meta.session_id``, the field as ``--conversation`` names it), that
    :func:`names_conversations` and is not null (a value that is no string or integer as its
    JSON text), and each string ``conversation_id`` of the ``messages`` (a history as plain
    JSON data). Two records naming one conversation may be two pieces of it."""
    names = set()
    objects: list[tuple[tuple[str, ...], dict[Any, Any]]] = [((), obj)] if type(obj) is dict else []
    while objects:  # the envelope's objects, none twice: parsed JSON holds no cycle
        path, found = objects.pop()
        for key, value in found.items():
            if type(key) is not str or value is None:
                continue
            if type(value) is dict:
                objects.append(((*path, key), value))
            if names_conversations(key):
                text = value if type(value) in (str, int) else dumps(value).decode()
                names.add(f"{spelled((*path, key))}={text}")
    if type(messages) is list:
        for message in messages:
            value = message.get("conversation_id") if type(message) is dict else None
            if type(value) is str:
                names.add(f"conversation_id={value}")
    return tuple(sorted(names))


Status = Literal["unchanged", "changed", "rejected"]


class Readers(NamedTuple):
    """Which releases load a record as it was read (``check --reader``, docs/framework.md §3):
    the ``reader`` release asked about, and the ``spans`` of releases that load the record
    (:mod:`histmig.schema.releases`; none for a record that is no history). A release may load
    a record that a newer one refuses (a retried ``tool-return``: ignored before 1.67.0,
    refused from 1.67.0 before 2.60.0)."""

    reader: Release
    spans: Spans

    @property
    def loads(self) -> bool:
        """Whether the ``reader`` release loads the record."""
        return includes(self.spans, self.reader)

    @property
    def oldest(self) -> str | None:
        """The oldest release that loads the record (``None``: none does)."""
        return str(self.spans[0].since) if self.spans else None

    def row(self) -> tuple[str, bool, str | None, list[list[str | None]]]:
        """``(reader, loads, oldest, releases)`` as plain data, ``releases`` as ``[since,
        before]`` pairs (``before`` ``None``: every later release)."""
        return (
            str(self.reader),
            self.loads,
            self.oldest,
            [[str(span.since), span.before and str(span.before)] for span in self.spans],
        )


@dataclass(slots=True)
class Outcome:
    """What the engine made of one record: ``status``; ``output``, the bytes to write (the
    original bytes unless ``changed``; ``None`` when ``rejected``); the ``changes``;
    ``findings`` of rules whose fix was not applied; ``errors``, one ``path: message`` line
    per problem (why it was rejected, or, for an unchanged record under ``validate_all``, why
    it is not valid); ``warnings``, parts carried unchanged that no release up to 2.68 wrote
    (an unknown ``part_kind``); ``readers``, which releases load it (``check --reader``);
    ``conversations``, the conversations it names (:func:`conversation_names`) and the calls
    that may tie it to another record (:func:`histmig.rules.pairing.call_names`), told only of
    a record whose findings say it may be a piece of one (a fragment, or a last response's
    calls without results), and of a rejected record every call it may answer
    (:func:`~histmig.rules.pairing.mentioned_call_names`): the report tells which pieces
    another record continues; ``digest``, its
    messages' (:func:`messages_digest`, ``check --baseline``)."""

    record: Record
    status: Status
    output: bytes | None
    changes: list[Change] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    readers: Readers | None = None
    conversations: tuple[str, ...] = ()
    digest: str | None = None

    @property
    def quiet(self) -> bool:
        """Unchanged, valid, and nothing to say: only counted in a report."""
        return (
            self.status == "unchanged"
            and not self.errors
            and not self.warnings
            and not self.findings
            and self.readers is None
        )
