"""The file-level functions behind ``histmig otel`` and ``histmig otel-upgrade`` (sqlite-utils
style: the commands are thin shells over these).

Both read the same sources as ``convert`` (histmig.sources: ``.json``, ``.jsonl``/``.jsonl.gz``,
stdin) and write their output atomically (histmig.sources.atomic_output), in input order, blank
JSONL lines carried. A record is a bare array or an envelope object: an envelope keeps every
other field and gets its messages field replaced. A record that cannot be handled is rejected:
it is named in the result and copied, unchanged, to the rejects file (``OUTPUT.rejects.jsonl``
by default; none for stdout, where it is left out of the output).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO

import orjson

from histmig.otel import OtelExportError, to_otel_messages, upgrade_v5_to_v6
from histmig.pipeline import Options, migrate
from histmig.records import NotAHistory, Record, envelope_id, locate_messages
from histmig.rules.base import CauseMode
from histmig.runner import default_rejects_path
from histmig.schema import current_errors
from histmig.sources import atomic_output, detect_format, open_input
from histmig.sources.json import read_document, write_document
from histmig.sources.jsonl import read_lines, write_line


class Rejected(ValueError):
    """One record could not be converted; the message says why."""


@dataclass
class OtelResult:
    """What a file-level run did: ``written`` records, of which ``unchanged`` were copied byte
    for byte (``otel-upgrade`` only), and ``rejected`` as ``(record name, reason)`` pairs."""

    written: int = 0
    unchanged: int = 0
    rejected: list[tuple[str, str]] = field(default_factory=list)


def export_record(obj: Any, *, version: int, include_content: bool, causes: CauseMode = "inferred", messages_field: str | None = None) -> Any:
    """One parsed record with its history replaced by the OTel message list: the history is
    located (histmig.records), migrated by :func:`histmig.pipeline.migrate` with ``causes``,
    checked against the current schema and exported by :func:`histmig.otel.to_otel_messages`.
    A bare array becomes the OTel array; an envelope object keeps its other fields. Raises
    :class:`Rejected` when the record holds no history, the migrated history would not load in
    pydantic-ai 2.68, or the export cannot render it."""
    try:
        messages, field_name = locate_messages(obj, messages_field)
    except NotAHistory as exc:
        raise Rejected(str(exc)) from exc
    migrate(messages, Options(causes=causes))
    errors = current_errors(messages)
    if errors:
        raise Rejected("; ".join(errors))
    try:
        exported = to_otel_messages(messages, version=version, include_content=include_content)
    except OtelExportError as exc:
        raise Rejected(str(exc)) from exc
    if field_name is None:
        return exported
    obj[field_name] = exported
    return obj


def _looks_like_otel(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and isinstance(value[0], dict) and "role" in value[0] and "parts" in value[0]


def locate_otel_messages(obj: Any, messages_field: str | None = None) -> tuple[list[Any], str | None]:
    """Find the OTel message array in a parsed record, as
    :func:`~histmig.records.locate_messages` finds a history, a field being recognised by its
    ``{"role", "parts"}`` objects. Raises :class:`Rejected` when there is none."""
    try:
        return locate_messages(obj, messages_field, _looks_like_otel, "OpenTelemetry messages")
    except NotAHistory as exc:
        raise Rejected(str(exc)) from exc


def upgrade_record(obj: Any, messages_field: str | None = None) -> Any | None:
    """One parsed record with its version 5 OTel array moved to version 6 roles
    (:func:`histmig.otel.upgrade_v5_to_v6`), or ``None`` when nothing moves (the caller then
    keeps the record's bytes). Raises :class:`Rejected` when the record holds no OTel array."""
    otel, field_name = locate_otel_messages(obj, messages_field)
    try:
        upgraded = upgrade_v5_to_v6(otel)
    except ValueError as exc:
        raise Rejected(str(exc)) from exc
    if upgraded == otel:
        return None
    if field_name is None:
        return upgraded
    obj[field_name] = upgraded
    return obj


def _records(stream: BinaryIO, source: str, fmt: str) -> Iterator[Record | bytes]:
    return read_lines(stream, source) if fmt == "jsonl" else read_document(stream, source)


def _run(input_path: str, output_path: str, convert: Callable[[Any], Any | None], *, fmt: str | None, rejects_path: str | None) -> OtelResult:
    fmt_ = detect_format(input_path, fmt)
    write = write_line if fmt_ == "jsonl" else write_document
    rejects_path = rejects_path if rejects_path is not None else default_rejects_path(output_path)
    result = OtelResult()
    with ExitStack() as stack:
        stream = stack.enter_context(open_input(input_path))
        out = stack.enter_context(atomic_output(output_path))
        rejects: BinaryIO | None = None
        for item in _records(stream, input_path, fmt_):
            if isinstance(item, bytes):
                write_line(out, item)
                continue
            try:
                try:
                    obj = orjson.loads(item.raw)
                except orjson.JSONDecodeError as exc:
                    raise Rejected(f"invalid JSON: {exc}") from exc
                item = replace(item, record_id=envelope_id(obj))
                converted = convert(obj)
            except Rejected as exc:
                result.rejected.append((item.name, str(exc)))
                if rejects_path is not None:
                    rejects = rejects or stack.enter_context(atomic_output(rejects_path, keep=True))
                    write_line(rejects, item.raw)
                continue
            if converted is None:
                result.unchanged += 1
                write(out, item.raw)
            else:
                write(out, orjson.dumps(converted))
            result.written += 1
    return result


def export_file(
    input_path: str,
    output_path: str,
    *,
    version: int,
    include_content: bool = True,
    causes: CauseMode = "inferred",
    messages_field: str | None = None,
    fmt: str | None = None,
    rejects_path: str | None = None,
) -> OtelResult:
    """``histmig otel``: every record of ``input_path`` exported by :func:`export_record` to
    ``output_path`` (``-`` for stdout), same format. Raises
    :class:`~histmig.sources.UnreadableInput` when the input cannot be opened or its format told."""
    return _run(
        input_path,
        output_path,
        lambda obj: export_record(obj, version=version, include_content=include_content, causes=causes, messages_field=messages_field),
        fmt=fmt,
        rejects_path=rejects_path,
    )


def upgrade_file(input_path: str, output_path: str, *, messages_field: str | None = None, fmt: str | None = None, rejects_path: str | None = None) -> OtelResult:
    """``histmig otel-upgrade``: every record of ``input_path`` through :func:`upgrade_record`;
    a record with nothing to move (already version 6 roles) is written byte for byte. Raises
    :class:`~histmig.sources.UnreadableInput` like :func:`export_file`."""
    return _run(input_path, output_path, lambda obj: upgrade_record(obj, messages_field), fmt=fmt, rejects_path=rejects_path)
