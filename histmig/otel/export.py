"""OpenTelemetry GenAI export of stored histories (docs/framework.md §5).

:func:`to_otel_messages` builds, on plain JSON data, the message list pydantic-ai 2.68's
``InstrumentationSettings(version=N, include_content=...).messages_to_otel_messages`` builds from
the loaded history (what a run span records as ``pydantic_ai.all_messages``), for instrumentation
versions 5 and 6. :func:`upgrade_v5_to_v6` moves an already exported version 5 array to the
version 6 roles.

The two versions differ only in roles (docs/framework.md §5, ``_otel_message_role``): version 6
puts every tool return, retried ones included, under ``"tool"`` and the framework's fixed
``'no_output'`` feedback under ``"system"``; versions 2–5 put both under ``"user"``.

The input must be a history as :func:`histmig.engine.migrate` leaves it: legacy
``retry-prompt`` parts are rejected, because how one renders depends on the cause the migration
decides. Nothing is taken from the clock or generated: a part the framework would give a random
id at load time (a tool part without ``tool_call_id``) is rejected rather than invented.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import html
import itertools
import mimetypes
import os
from typing import Any
from urllib.parse import urlparse

import pydantic_core

from histmig.errors import OtelExportError
from histmig.rules.causes import NO_OUTPUT_TEXTS
from histmig.rules.retry import dump_error_details

SUPPORTED_VERSIONS = (5, 6)
"""Instrumentation versions :func:`to_otel_messages` builds (4+ media shapes, 6 the tool role)."""

RETRY_FEEDBACK_FRAMING = (
    "Your previous response failed the application's validation "
    "(this is automated feedback, not a message from the user):"
)
"""The line 2.68 puts before fenced retry feedback (``messages._RETRY_FEEDBACK_FRAMING``)."""

VALIDATION_ERRORS_TAG = "pyai:validation_errors"
RETRY_FEEDBACK_TAG = "pyai:retry_feedback"
CONTEXT_TAG = "pyai:context"

_SYSTEM_PARTS = frozenset(
    {"system-prompt", "tool-availability-delta", "capability-load-delta", "instruction-delta", "model-settings-delta"}
)
_URL_MODALITY = {"image-url": "image", "audio-url": "audio", "video-url": "video"}
_YOUTUBE_HOSTS = ("youtu.be", "youtube.com", "www.youtube.com", "m.youtube.com")
_INSTRUCTION_ID_PREFIXES = ("agent:", "run:", "toolset:", "capability:")


def _mime_table() -> mimetypes.MimeTypes:
    """The media-type table 2.68 infers URL types with (``messages._mime_types``): the system
    tables, as ``mimetypes.init()`` reads them, plus the document types it adds."""
    table = mimetypes.MimeTypes()
    table.read_windows_registry()
    for name in mimetypes.knownfiles:
        if os.path.isfile(name):
            table.read(name)
    for media_type, ext in (
        ("application/rtf", ".rtf"),
        ("application/vnd.oasis.opendocument.presentation", ".odp"),
        ("application/vnd.oasis.opendocument.spreadsheet", ".ods"),
        ("application/vnd.oasis.opendocument.text", ".odt"),
        ("application/vnd.openxmlformats-officedocument.presentationml.presentation", ".pptx"),
        ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", ".xlsx"),
        ("application/vnd.openxmlformats-officedocument.wordprocessingml.document", ".docx"),
        ("text/markdown", ".mdx"),
        ("text/markdown", ".md"),
        ("text/x-asciidoc", ".asciidoc"),
    ):
        table.add_type(media_type, ext)
    return table


_MIME_TYPES = _mime_table()


def to_json_text(value: Any) -> str:
    """Compact JSON text of plain data, byte for byte as 2.68 writes it (``pydantic_core``
    serialization: no spaces, non-ASCII kept, floats in shortest form)."""
    return pydantic_core.to_json(value).decode()


def _text(content: Any, include_content: bool) -> dict[str, Any]:
    return {"type": "text", "content": content} if include_content else {"type": "text"}


def retry_feedback_speaks_for_the_harness(part: dict[str, Any]) -> bool:
    """Whether a ``retry-feedback`` part is the framework's own fixed no-output text
    (cause ``'no_output'`` and content one of the 12 ``'Please …'`` texts, docs/framework.md
    §1.1): rendered bare, and in the ``system`` role from version 6."""
    content = part.get("content")
    return (
        (part.get("retry") or {}).get("cause") == "no_output"
        and isinstance(content, str)
        and content in NO_OUTPUT_TEXTS
    )


def retry_feedback_text(part: dict[str, Any]) -> str:
    """The text a ``retry-feedback`` part is shown (and recorded) as, per 2.68's
    ``RetryFeedbackPart.model_response`` (docs/framework.md §5): the fixed no-output text bare;
    anything else behind :data:`RETRY_FEEDBACK_FRAMING` in a ``<pyai:validation_errors>``
    (cause ``'validation_error'``) or ``<pyai:retry_feedback>`` fence. An error list is
    cleaned like ``_dump_error_details`` (no ``ctx``, repeated root ``input`` dropped) and
    written as compact JSON."""
    content: Any = part.get("content")
    text = content if isinstance(content, str) else to_json_text(dump_error_details(content))
    if retry_feedback_speaks_for_the_harness(part):
        return text
    tag = VALIDATION_ERRORS_TAG if (part.get("retry") or {}).get("cause") == "validation_error" else RETRY_FEEDBACK_TAG
    return f"{RETRY_FEEDBACK_FRAMING}\n<{tag}>\n{text}\n</{tag}>"


def otel_role(part: dict[str, Any], version: int) -> str:
    """The GenAI role of the message a request part goes in (2.68 ``_otel_message_role``,
    docs/framework.md §5): ``system`` for system prompts and the four delta parts, and in
    version 6 for fixed no-output feedback; ``tool`` in version 6 for every ``tool-return``;
    ``user`` for everything else."""
    kind = part.get("part_kind")
    if kind in _SYSTEM_PARTS or (
        version >= 6 and kind == "retry-feedback" and retry_feedback_speaks_for_the_harness(part)
    ):
        return "system"
    if version >= 6 and kind == "tool-return":
        return "tool"
    return "user"


def _base64(data: Any, where: str) -> str:
    """Stored base64 (standard or URL-safe alphabet) re-encoded in the standard alphabet, as
    ``BinaryContent.base64`` gives it after loading."""
    if not isinstance(data, str):
        raise OtelExportError(f"{where}: binary data is not a base64 string")
    text = data.replace("-", "+").replace("_", "/")
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except binascii.Error as exc:
        raise OtelExportError(f"{where}: invalid base64 data: {exc}") from exc
    return base64.b64encode(raw).decode()


def _modality(media_type: str) -> str | None:
    for modality in ("image", "audio", "video"):
        if media_type.startswith(f"{modality}/"):
            return modality
    return None


def _blob(binary: Any, where: str, include_content: bool) -> dict[str, Any]:
    """A ``binary`` item (``BinaryContent``) as a version 4+ ``blob`` part."""
    if not isinstance(binary, dict) or not isinstance(binary.get("media_type"), str):
        raise OtelExportError(f"{where}: binary content without a media_type")
    media_type = binary["media_type"]
    blob: dict[str, Any] = {"type": "blob", "mime_type": media_type}
    modality = _modality(media_type)
    if modality is not None:
        blob["modality"] = modality
    if include_content:
        blob["content"] = _base64(binary.get("data"), where)
    return blob


def url_media_type(item: dict[str, Any]) -> str | None:
    """A media URL's type: the stored ``media_type``, else inferred from the URL the way 2.68
    does (YouTube videos are ``video/mp4``); ``None`` when it cannot be told (the framework then
    leaves ``mime_type`` out)."""
    if item.get("media_type"):
        return item["media_type"]
    url = item["url"]
    if item.get("kind") == "video-url" and urlparse(url).hostname in _YOUTUBE_HOSTS:
        return "video/mp4"
    return _MIME_TYPES.guess_type(url)[0]


def _uri(item: dict[str, Any], where: str, include_content: bool) -> dict[str, Any]:
    if not isinstance(item.get("url"), str):
        raise OtelExportError(f"{where}: media URL without a url")
    uri: dict[str, Any] = {"type": "uri"}
    modality = _URL_MODALITY.get(item["kind"])
    if modality is not None:
        uri["modality"] = modality
    media_type = url_media_type(item)
    if media_type is not None:
        uri["mime_type"] = media_type
    if include_content:
        uri["uri"] = item["url"]
    return uri


def _uploaded_file(item: dict[str, Any], include_content: bool) -> dict[str, Any]:
    media_type = (
        item.get("media_type")
        or _MIME_TYPES.guess_type(urlparse(item["file_id"]).path)[0]
        or "application/octet-stream"
    )
    category = media_type.split("/", 1)[0]
    part: dict[str, Any] = {
        "type": "file",
        "modality": category if category in ("image", "audio", "video") else "document",
        "mime_type": media_type,
    }
    if include_content:
        part["file_id"] = item["file_id"]
    return part


def _structured_text(item: dict[str, Any]) -> str:
    """``StructuredContent.content``, or, when stored empty, the default JSON rendering 2.68
    gives it on load (``StructuredContent._render_as('json')``)."""
    if item.get("content"):
        return item["content"]
    text = to_json_text(item.get("value")).replace("<", r"\u003c").replace(">", r"\u003e").replace("&", r"\u0026")
    if item.get("tag") is not None:
        text = f"<{item['tag']}>{text}</{item['tag']}>"
    return text if item.get("description") is None else f"{item['description']}\n{text}"


def _user_prompt(part: dict[str, Any], where: str, include_content: bool) -> list[dict[str, Any]]:
    content = part.get("content")
    items = [content] if isinstance(content, str) else content
    if not isinstance(items, list):
        raise OtelExportError(f"{where}: user-prompt content is neither a string nor a list")
    rendered: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        here = f"{where}.content[{index}]"
        kind = item.get("kind") if isinstance(item, dict) else None
        if isinstance(item, str):
            rendered.append(_text(item, include_content))
        elif kind == "text-content":
            rendered.append(_text(item.get("content"), include_content))
        elif kind == "structured-content":
            rendered.append(_text(_structured_text(item), include_content))
        elif kind in ("image-url", "audio-url", "video-url", "document-url"):
            rendered.append(_uri(item, here, include_content))
        elif kind == "binary":
            rendered.append(_blob(item, here, include_content))
        elif kind == "uploaded-file":
            rendered.append(_uploaded_file(item, include_content))
        elif kind != "cache-point":
            raise OtelExportError(f"{here}: unknown user content kind {kind!r}")
    return rendered


def _tool_call_id(part: dict[str, Any], where: str) -> str:
    if not isinstance(part.get("tool_call_id"), str):
        raise OtelExportError(
            f"{where}: {part.get('part_kind')} without a tool_call_id (2.68 would generate a random one)"
        )
    return part["tool_call_id"]


def _typed(value: dict[str, Any], declared: tuple[str, ...]) -> dict[str, Any]:
    """A mapping as 2.68 re-serializes it after validating it as one of its ``extra='allow'``
    ``TypedDict``s: the declared keys first, in declared order, then the others as stored."""
    typed = {key: value[key] for key in declared if key in value}
    typed.update((key, item) for key, item in value.items() if key not in typed)
    return typed


def _typed_args(part: dict[str, Any]) -> Any:
    """Tool-call arguments as the typed call parts hold them (docs/framework.md §3.1): a
    ``'tool-search'`` call's ``ToolSearchArgs`` (``queries`` first) or a ``'capability-load'``
    call's ``LoadCapabilityArgs`` (``id`` first), extra keys kept; a string as stored."""
    args, kind = part["args"], part.get("tool_kind")
    if not isinstance(args, dict):
        return args
    if kind == "tool-search":
        return _typed(args, ("queries",))
    if kind == "capability-load" and part.get("part_kind") == "tool-call":
        return _typed(args, ("id",))
    return args


def _typed_result(part: dict[str, Any]) -> Any:
    """A successful typed return's content as its ``TypedDict`` (docs/framework.md §3.1):
    ``ToolSearchReturnContent`` (``discovered_tools`` with ``name`` first in each match, then
    ``message``) or ``LoadCapabilityReturn`` (``message``, ``instructions``), extra keys kept."""
    content, kind = part["content"], part.get("tool_kind")
    if not isinstance(content, dict) or part.get("outcome", "success") != "success":
        return None
    if kind == "tool-search":
        typed = _typed(content, ("discovered_tools", "message"))
        if isinstance(typed.get("discovered_tools"), list):
            typed["discovered_tools"] = [
                _typed(m, ("name",)) if isinstance(m, dict) else m for m in typed["discovered_tools"]
            ]
        return typed
    if kind == "capability-load" and part.get("part_kind") == "tool-return":
        return _typed(content, ("message", "instructions"))
    return None


_URL_KINDS = ("image-url", "audio-url", "video-url", "document-url")


def _tool_result(value: Any, digests: Any, where: str) -> Any:
    """A tool result's content as 2.68 records it after loading (``serialize_any`` of the
    validated content). A ``binary`` mapping anywhere in it is rebuilt as ``BinaryContent`` and
    dumped as such: ``data`` in URL-safe base64, ``media_type``, ``vendor_metadata``, ``kind``,
    ``identifier`` (stored, or the first 6 hex digits of the data's SHA-1), other keys dropped. A
    mapping shaped like a URL or uploaded file stays a mapping when the part recorded no files
    (``content_file_digests: []``), or, with no record, when it is an uploaded file or a
    non-HTTP URL; any other such mapping raises :class:`OtelExportError` (whether 2.68 rebuilds
    it depends on file digests histmig does not compute)."""
    if isinstance(value, list):
        return [_tool_result(item, digests, where) for item in value]
    if not isinstance(value, dict):
        return value
    kind = value.get("kind")
    if kind == "binary" and isinstance(value.get("media_type"), str) and isinstance(value.get("data"), str):
        try:
            raw = base64.b64decode(_base64(value["data"], where))
        except OtelExportError:
            raw = None
        if raw is not None:
            return {
                "data": base64.urlsafe_b64encode(raw).decode(),
                "media_type": value["media_type"],
                "vendor_metadata": value.get("vendor_metadata"),
                "kind": "binary",
                "identifier": value.get("identifier") or hashlib.sha1(raw, usedforsecurity=False).hexdigest()[:6],
            }
    if kind in (*_URL_KINDS, "uploaded-file"):
        url = value.get("url")
        unrecorded_kept = digests is None and (
            kind == "uploaded-file" or not (isinstance(url, str) and urlparse(url).scheme.lower() in ("http", "https"))
        )
        if digests != [] and not unrecorded_kept:
            raise OtelExportError(f"{where}: a {kind} item in a tool result is not supported by the export")
    return {key: _tool_result(item, digests, where) for key, item in value.items()}


def _tool_call_response(
    part: dict[str, Any], where: str, include_content: bool, *, builtin: bool = False
) -> dict[str, Any]:
    """A tool return as ``tool_call_response``: its content as ``result`` (a retried return's
    string or error list, not the ``{"error": …}`` wrapper; typed and file content as
    :func:`_typed_result` and :func:`_tool_result` say), none when ``null``."""
    response: dict[str, Any] = {
        "type": "tool_call_response",
        "id": _tool_call_id(part, where),
        "name": part.get("tool_name"),
    }
    if builtin:
        response["builtin"] = True
    if include_content and part.get("content") is not None:
        typed = _typed_result(part)
        response["result"] = (
            typed
            if typed is not None
            else _tool_result(part["content"], part.get("content_file_digests"), f"{where}.content")
        )
    return response


def _tool_call(part: dict[str, Any], where: str, include_content: bool, *, builtin: bool = False) -> dict[str, Any]:
    call: dict[str, Any] = {"type": "tool_call", "id": _tool_call_id(part, where), "name": part.get("tool_name")}
    if builtin:
        call["builtin"] = True
    if include_content and part.get("args") is not None:
        call["arguments"] = _typed_args(part)
    return call


def _instruction_delta(part: dict[str, Any]) -> str:
    """``InstructionDeltaPart.render()`` with no previous text: the replacement (or the
    withdrawal note) in a ``<pyai:context>`` element whose ``id`` is the stored id when 2.68
    can address it (``agent``, ``agent:…``, ``run:…``, ``toolset:…``, ``capability:…``)."""
    ident: Any = part.get("id")
    addressable = isinstance(ident, str) and (ident == "agent" or ident.startswith(_INSTRUCTION_ID_PREFIXES))
    attrs = f' id="{html.escape(ident)}"' if addressable else ""
    content = part["content"] if part.get("content") is not None else "This context has been withdrawn."
    return f"<{CONTEXT_TAG}{attrs}>\n{content}\n</{CONTEXT_TAG}>"


def _speech(part: dict[str, Any], where: str, include_content: bool) -> list[dict[str, Any]]:
    rendered: list[dict[str, Any]] = []
    if part.get("transcript") is not None:
        rendered.append(_text(part["transcript"], include_content))
    if part.get("audio") is not None:
        rendered.append(_blob(part["audio"], f"{where}.audio", include_content))
    return rendered


def _request_part(part: dict[str, Any], where: str, include_content: bool) -> list[dict[str, Any]]:
    kind = part.get("part_kind")
    if kind == "system-prompt":
        return [_text(part.get("content"), include_content)]
    if kind == "user-prompt":
        return _user_prompt(part, where, include_content)
    if kind == "tool-return":
        return [_tool_call_response(part, where, include_content)]
    if kind == "retry-feedback":
        return [_text(retry_feedback_text(part), include_content)]
    if kind == "tool-availability-delta":
        names = part.get("tools_added", part.get("added", []))
        return [{"type": "text", "content": "Tool availability changed: " + ", ".join(f"+{n}" for n in names)}]
    if kind == "capability-load-delta":
        return [
            {
                "type": "text",
                "content": "Loaded capabilities changed: " + ", ".join(f"+{c}" for c in part.get("loaded", [])),
            }
        ]
    if kind == "model-settings-delta":
        changes = ", ".join(f"{key}={value!r}" for key, value in part["settings"].items() if key == "thinking")
        return [{"type": "text", "content": f"Model settings changed: {changes}"}]
    if kind == "instruction-delta":
        return [{"type": "text", "content": _instruction_delta(part)}] if include_content else []
    if kind == "compaction":
        return [_text(part["content"], include_content)] if part.get("content") else []
    if kind == "speech":
        return _speech(part, where, include_content)
    if kind == "retry-prompt":
        raise OtelExportError(f"{where}: legacy retry-prompt part (run histmig.engine.migrate first)")
    raise OtelExportError(f"{where}: unknown request part_kind {kind!r}")


def _response_part(part: dict[str, Any], where: str, include_content: bool) -> list[dict[str, Any]]:
    kind = part.get("part_kind")
    if kind == "text":
        return [_text(part.get("content"), include_content)]
    if kind == "thinking":
        return [{"type": "thinking", "content": part.get("content")} if include_content else {"type": "thinking"}]
    if kind == "file":
        return [_blob(part.get("content"), f"{where}.content", include_content)]
    if kind == "tool-call":
        return [_tool_call(part, where, include_content)]
    if kind == "builtin-tool-call":
        return [_tool_call(part, where, include_content, builtin=True)]
    if kind == "builtin-tool-return":
        return [_tool_call_response(part, where, include_content, builtin=True)]
    if kind == "speech":
        return _speech(part, where, include_content)
    if kind == "compaction":
        return []
    raise OtelExportError(f"{where}: unknown response part_kind {kind!r}")


def to_otel_messages(messages: list[dict[str, Any]], *, version: int, include_content: bool) -> list[dict[str, Any]]:
    """The GenAI message list for a migrated history, equal to what 2.68's
    ``InstrumentationSettings(version=version, include_content=include_content).messages_to_otel_messages``
    returns for the loaded history (docs/framework.md §5; default ``include_binary_content``).

    Shapes: a request becomes one ``{"role", "parts"}`` message per run of consecutive parts
    sharing a role (:func:`otel_role`), in stored order, ``instruction-baseline`` parts left
    out (an empty request gives no message); a response becomes
    ``{"role": "assistant", "parts", "finish_reason"?}``. Parts are ``text``, ``thinking``,
    ``tool_call``, ``tool_call_response`` (``builtin: true`` for native tools), ``uri``, ``blob``
    and ``file``; with ``include_content=False`` every content field (text, arguments, result,
    uri, blob data, file id) is left out, but the delta parts' change notes are kept.

    ``messages`` is read, never modified; values inside it (tool arguments and results) are
    shared with the result, not copied. Raises :class:`OtelExportError` for what cannot be
    rendered faithfully and ``ValueError`` for a ``version`` outside :data:`SUPPORTED_VERSIONS`.
    """
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(f"instrumentation version must be one of {SUPPORTED_VERSIONS}, got {version!r}")
    result: list[dict[str, Any]] = []
    for m_index, message in enumerate(messages):
        where = f"messages[{m_index}]"
        kind = message.get("kind") if isinstance(message, dict) else None
        parts = message.get("parts") if isinstance(message, dict) else None
        if kind not in ("request", "response") or not isinstance(parts, list):
            raise OtelExportError(f"{where}: not a request or response message")
        numbered = [(p_index, part) for p_index, part in enumerate(parts) if isinstance(part, dict)]
        if len(numbered) != len(parts):
            raise OtelExportError(f"{where}: a part is not an object")
        if kind == "response":
            otel_parts = [
                otel
                for p_index, part in numbered
                for otel in _response_part(part, f"{where}.parts[{p_index}]", include_content)
            ]
            response: dict[str, Any] = {"role": "assistant", "parts": otel_parts}
            if message.get("finish_reason") is not None:
                response["finish_reason"] = message["finish_reason"]
            result.append(response)
            continue
        kept = [(p_index, part) for p_index, part in numbered if part.get("part_kind") != "instruction-baseline"]
        for role, group in itertools.groupby(kept, key=lambda item: otel_role(item[1], version)):
            otel_parts = [
                otel
                for p_index, part in group
                for otel in _request_part(part, f"{where}.parts[{p_index}]", include_content)
            ]
            result.append({"role": role, "parts": otel_parts})
    return result


def upgrade_v5_to_v6(otel_messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An OTel message array exported with version 5 roles, in version 6 roles (docs/framework.md §5).

    A ``"user"`` message holding ``tool_call_response`` parts is split, in order, into runs:
    consecutive ``tool_call_response`` parts become a ``"tool"`` message, the parts between
    them ``"user"`` messages; any other key of the split message is copied onto each piece.
    Every other message is returned as the same object, so the function is idempotent (a
    version 6 array has no ``"user"`` message holding a tool result) and returns an equal list
    when nothing needed moving.

    Not moved: fixed ``'no_output'`` feedback, which version 6 records under ``"system"``. In a
    version 5 array it is a ``"user"`` text part that cannot be told from a user who typed the
    same words (and has no text at all without content), so it stays ``"user"``.

    Raises ``ValueError`` when ``otel_messages`` is not a list of objects with a ``role`` and a
    ``parts`` list.
    """
    if not isinstance(otel_messages, list):
        raise ValueError("expected an array of OpenTelemetry messages")
    upgraded: list[dict[str, Any]] = []
    for index, message in enumerate(otel_messages):
        if (
            not isinstance(message, dict)
            or not isinstance(message.get("role"), str)
            or not isinstance(message.get("parts"), list)
        ):
            raise ValueError(f"otel_messages[{index}]: not an OpenTelemetry message (an object with role and parts)")
        parts = message["parts"]
        if message["role"] != "user" or not any(_is_tool_result(p) for p in parts):
            upgraded.append(message)
            continue
        rest = {key: value for key, value in message.items() if key not in ("role", "parts")}
        for is_tool, run in itertools.groupby(parts, key=_is_tool_result):
            upgraded.append({"role": "tool" if is_tool else "user", "parts": list(run), **rest})
    return upgraded


def _is_tool_result(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "tool_call_response"
