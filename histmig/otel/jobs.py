"""The jobs behind ``histmig otel`` and ``histmig otel-upgrade``: what each record of a JSON or
JSONL input goes through (:class:`~histmig.sources.base.Job`), in the same record loop and with
the same readers and writers as ``convert`` (:mod:`histmig.api`).

A record is a bare array or an envelope object: an envelope keeps every other field and gets
its messages field replaced. A record that cannot be handled is rejected: it is named in the
report and copied, unchanged, to the rejects file (``OUTPUT.rejects.jsonl`` by default; none
for stdout, where it is left out of the output: an export is not the archive).

With ``--conversation`` (``histmig otel``) the records of one conversation are migrated as one
history (:func:`histmig.engine.process_conversation`) and each is exported on its own messages
(:func:`export_conversation`, docs/otel.md "A conversation of several records").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from histmig.engine import Plan, migrate, process_conversation
from histmig.errors import ExportRejected, NotAHistory, OtelExportError
from histmig.otel.export import to_otel_messages, upgrade_v5_to_v6
from histmig.problems import InvalidJson
from histmig.records import (
    Conversation,
    Located,
    Outcome,
    Record,
    check_messages,
    envelope_id,
    locate_in_conversation,
    locate_messages,
)
from histmig.rules.base import CauseMode
from histmig.rules.pairing import fragment
from histmig.schema import current_errors


def export_record(
    obj: Any, *, version: int, include_content: bool, causes: CauseMode = "inferred", messages_field: str | None = None
) -> Any:
    """One parsed record with its history replaced by the OTel message list: the history is
    located (histmig.records), migrated by :func:`histmig.engine.migrate` with ``causes``,
    checked against the current schema and exported by :func:`histmig.otel.export.to_otel_messages`.
    A bare array becomes the OTel array; an envelope object keeps its other fields (a history
    held as JSON text becomes the OTel array as JSON text). Raises
    :class:`ExportRejected` when the record holds no history, the migrated history would not load in
    pydantic-ai 2.68, or the export cannot render it (a likely fragment, whose null ids are not
    derived, is told to give ``--conversation``)."""
    try:
        located = locate_messages(obj, messages_field)
        check_messages(located.messages, located.name or "messages")
    except NotAHistory as exc:
        raise ExportRejected(str(exc)) from exc
    messages = located.messages
    migrate(messages, Plan(causes=causes))
    try:
        return located.put(obj, _exported(messages, version, include_content))
    except ExportRejected as exc:
        if fragment(messages):  # its null ids were not derived: its other records decide them
            raise ExportRejected(f"{exc} ({FRAGMENT_HINT})") from exc
        raise


FRAGMENT_HINT = "a likely piece of a conversation stored over several records: give --conversation, docs/otel.md"
"""What a rejected record that looks like a fragment (:func:`histmig.rules.pairing.fragment`) is told."""


def _exported(messages: list[Any], version: int, include_content: bool) -> list[dict[str, Any]]:
    """The OTel message list of a migrated history (:func:`to_otel_messages`). Raises
    :class:`ExportRejected` when pydantic-ai 2.68 would not load it or the export cannot render it."""
    errors = current_errors(messages)
    if errors:
        raise ExportRejected("; ".join(errors))
    try:
        return to_otel_messages(messages, version=version, include_content=include_content)
    except OtelExportError as exc:
        raise ExportRejected(str(exc)) from exc


def export_conversation(
    conversation: Conversation,
    *,
    version: int,
    include_content: bool,
    causes: CauseMode = "inferred",
    messages_field: str | None = None,
) -> list[Outcome]:
    """The records of ``conversation`` (``--conversation``) exported, an :class:`Outcome` a
    record in order: the conversation migrated as one history with ``causes``
    (:func:`histmig.engine.process_conversation`: pairing, derived ``tool_call_id`` values
    and causes from the whole conversation, each record given back its own messages), then each
    record's messages replaced by their OTel message list (a record that is one message becomes
    that message's list). The lists put together in order are the export of the whole history,
    what the conversation's last run span records as ``pydantic_ai.all_messages``
    (docs/framework.md §5: the framework maps each message on its own). A record that cannot be
    migrated or exported rejects the whole conversation, every record kept as it was, as
    ``convert`` rejects it. Never raises for bad input."""
    outcomes = process_conversation(conversation, Plan(causes=causes, messages_field=messages_field, grouped=True))
    if any(outcome.status == "rejected" for outcome in outcomes):
        return outcomes  # the engine rejected the whole conversation, each record told why
    exported: list[Outcome] = []
    for at, outcome in enumerate(outcomes):
        obj = orjson.loads(outcome.output)  # type: ignore[arg-type]  # not rejected: it has its bytes
        located = locate_in_conversation(obj, messages_field)
        try:
            otel = _exported(located.messages, version, include_content)
        except ExportRejected as exc:
            said = f"rejected with its conversation ({conversation.name}): {outcome.record.name} cannot be exported"
            return [
                Outcome(other.record, "rejected", None, errors=[str(exc) if i == at else said])
                for i, other in enumerate(outcomes)
            ]
        output = orjson.dumps(located._replace(single=False).put(obj, otel))
        exported.append(Outcome(outcome.record, "changed", output, warnings=outcome.warnings))
    return exported


def _looks_like_otel(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and isinstance(value[0], dict)
        and "role" in value[0]
        and "parts" in value[0]
    )


def locate_otel_messages(obj: Any, messages_field: str | None = None) -> Located:
    """Find the OTel message array in a parsed record, as
    :func:`~histmig.records.locate_messages` finds a history, a field being recognised by its
    ``{"role", "parts"}`` objects. Raises :class:`ExportRejected` when there is none."""
    try:
        return locate_messages(obj, messages_field, _looks_like_otel, "OpenTelemetry messages")
    except NotAHistory as exc:
        raise ExportRejected(str(exc)) from exc


def upgrade_record(obj: Any, messages_field: str | None = None) -> Any | None:
    """One parsed record with its version 5 OTel array moved to version 6 roles
    (:func:`histmig.otel.export.upgrade_v5_to_v6`), or ``None`` when nothing moves (the caller
    then keeps the record's bytes). Raises :class:`ExportRejected` when the record holds no OTel
    array."""
    located = locate_otel_messages(obj, messages_field)
    try:
        upgraded = upgrade_v5_to_v6(located.messages)
    except ValueError as exc:
        raise ExportRejected(str(exc)) from exc
    if upgraded == located.messages:
        return None
    return located.put(obj, upgraded)


class _Converter:
    """A record processor (:class:`~histmig.engine.Processor`) running ``convert`` on each
    parsed record: no screen (every record is converted), an :class:`~histmig.engine.Outcome`
    ``changed`` with the converted record, ``unchanged`` when ``convert`` returns ``None``,
    ``rejected`` with the reason."""

    def __init__(self, job: ExportJob | UpgradeJob) -> None:
        self.job = job

    def screened(self, raw: bytes) -> None:
        return None

    def passed(self, record: Record, findings: tuple[Any, ...]) -> Outcome:
        return Outcome(record, "unchanged", record.raw, findings=list(findings))

    def screen(self, conversation: Conversation) -> None:
        """No screen (:class:`~histmig.engine.ConversationProcessor`): every conversation
        is converted."""
        return None

    def conversation(self, conversation: Conversation, verdict: object = "ask") -> list[Outcome]:
        """The outcomes of ``conversation``'s records (``--conversation``): the job's
        :meth:`ExportJob.conversation` (``verdict``: :meth:`screen`'s, which says nothing)."""
        return self.job.conversation(conversation)  # type: ignore[union-attr]  # the plan refuses otel-upgrade's

    def full(self, record: Record) -> Outcome:
        try:
            obj = orjson.loads(record.raw)
        except orjson.JSONDecodeError as exc:
            return Outcome(record, "rejected", None, errors=[InvalidJson.of(record.raw, str(exc))])
        record = record._replace(record_id=envelope_id(obj))
        try:
            converted = self.job.convert(obj)
        except ExportRejected as exc:
            return Outcome(record, "rejected", None, errors=[str(exc)])
        if converted is None:
            return Outcome(record, "unchanged", record.raw)
        return Outcome(record, "changed", orjson.dumps(converted))


@dataclass(frozen=True)
class ExportJob:
    """``histmig otel``: every record exported by :func:`export_record` with these options."""

    version: int
    include_content: bool = True
    causes: CauseMode = "inferred"
    messages_field: str | None = None

    def convert(self, obj: Any) -> Any:
        return export_record(
            obj,
            version=self.version,
            include_content=self.include_content,
            causes=self.causes,
            messages_field=self.messages_field,
        )

    def conversation(self, conversation: Conversation) -> list[Outcome]:
        """:func:`export_conversation` with these options."""
        return export_conversation(
            conversation,
            version=self.version,
            include_content=self.include_content,
            causes=self.causes,
            messages_field=self.messages_field,
        )

    def processor(self) -> _Converter:
        return _Converter(self)


@dataclass(frozen=True)
class UpgradeJob:
    """``histmig otel-upgrade``: every record through :func:`upgrade_record`; a record with
    nothing to move (already version 6 roles) is written byte for byte."""

    messages_field: str | None = None

    def convert(self, obj: Any) -> Any | None:
        return upgrade_record(obj, self.messages_field)

    def processor(self) -> _Converter:
        return _Converter(self)
