"""Problem: one error or warning line about a record, its path inside the record and its
message apart. At the ground floor: the schema's validation, the rules, the engine and the
report all make or read them."""

from __future__ import annotations

from typing import Any, cast

import orjson


class Problem(str):
    """One error or warning line about a record: the ``path`` inside the record
    (``messages[2].parts[0].tool_call_id``; ``None`` when the problem is the whole record, as
    invalid JSON) and the ``message``, as one ``str`` (``path: message``) for every line a
    user reads, and apart for the JSON report (README "Report")."""

    path: str | None
    message: str

    def __new__(cls, path: str | None, message: str) -> Problem:
        line = super().__new__(cls, f"{path}: {message}" if path else message)
        line.path, line.message = path, message
        return line

    def __reduce__(self) -> tuple[Any, ...]:
        return (Problem, (self.path, self.message))

    def under(self, prefix: str) -> Problem:
        """This problem with a path that starts at ``messages`` starting at ``prefix`` (the
        envelope field the history came from) instead."""
        if self.path is None or not self.path.startswith("messages") or prefix == "messages":
            return self
        return Problem(prefix + self.path[len("messages") :], self.message)


class InvalidJson(Problem):
    """A record that is not JSON histmig reads (``invalid JSON: ...``, a problem of the whole
    record); ``more``: its first line is a whole JSON document and more follows on the next
    (JSONL read as one JSON document), which a note tells apart by this type, not by the
    message (README "Bad input")."""

    more: bool

    def __new__(cls, message: str, more: bool = False) -> InvalidJson:
        line = cast(InvalidJson, super().__new__(cls, None, message))
        line.more = more
        return line

    def __reduce__(self) -> tuple[Any, ...]:
        return (InvalidJson, (self.message, self.more))

    @classmethod
    def of(cls, raw: bytes, why: str) -> InvalidJson:
        """The problem of ``raw``, which does not parse (``why``, after ``invalid JSON: ``)."""
        first, _, rest = raw.partition(b"\n")
        try:
            raw.decode()
            orjson.loads(first)
            more = bool(rest.partition(b"\n")[0].strip())
        except (UnicodeDecodeError, orjson.JSONDecodeError):
            more = False
        return cls(f"invalid JSON: {why}", more)


CONVERSATION = "conversation"
"""The :attr:`Warned.rule` of what every record of a conversation is told."""


class Warned(Problem):
    """A warning line of a record but a part of an unknown ``part_kind`` carried unchanged, of
    what ``rule`` says: a rule's code, whose fix was not applied as it is not applicable to how
    the conversation is stored over records (it would empty a record, move a part to another
    record, add a message where a record holds one: :func:`histmig.engine.process_conversation`),
    or :data:`CONVERSATION`, what every record of a conversation is told
    (:attr:`histmig.records.Conversation.note`: a null key). The ``message`` is the whole line;
    what it is of is told by this type, not by the message (:func:`histmig.report.warning_rule`)."""

    rule: str

    def __new__(cls, rule: str, message: str) -> Warned:
        line = cast(Warned, super().__new__(cls, None, message))
        line.rule = rule
        return line

    def __reduce__(self) -> tuple[Any, ...]:
        return (Warned, (self.rule, self.message))


def parts_of(line: str) -> tuple[str | None, str]:
    """``(path, message)`` of an error or warning line: a :class:`Problem`'s, or ``None`` and
    the whole line for any other (a problem of the whole record)."""
    return (line.path, line.message) if isinstance(line, Problem) else (None, line)
