"""Stored histories rebuilt from pydantic-ai's spans: the inverse of :mod:`histmig.otel.export`.

A pydantic-ai agent run (instrumentation versions 2-6, pydantic-ai 2.68
``InstrumentationSettings``) leaves one run span (``agent run`` in version 2, ``invoke_agent
{agent}`` from 3) holding ``pydantic_ai.all_messages`` (the OTel GenAI message list of the whole
conversation up to the run's end) and ``final_result``; a ``chat`` span a model request,
holding ``gen_ai.input.messages`` and ``gen_ai.output.messages`` and the response's model name,
usage, finish reason and provider response id; an ``execute_tool`` (``running tool`` in version
2) span a tool call, holding ``pydantic_ai.tool.retry.*`` when the call was retried. Every span
of a run carries ``gen_ai.agent.call.id`` (the run id) and ``gen_ai.conversation.id``.

:func:`rebuild` turns one run's spans (and those of the earlier runs of its conversation that
are given) into the messages ``ModelMessagesTypeAdapter.dump_json`` writes, field for field and
in its key order. What the spans never carry is filled from evidence and named in the
history's :class:`Rebuilt` ``derived`` (filled by a rule, as ``convert`` fills it) and
``unknowable`` (left at the framework's default) lists:

- every timestamp: a request's is its model request span's start, a response's that span's
  end, a part's its message's;
- a thinking part's ``signature``, a response's ``provider_name``, ``provider_details`` and usage
  beyond the token counts the span records;
- a retried tool return's ``retry`` when no tool span recorded it (an unknown tool, a call
  answered through ``DeferredToolResults``): the cause from the content
  (:func:`histmig.rules.causes.infer_cause`); the ``attempt`` of every retry no span recorded
  (retry feedback parts always) counted by HM104 as ``convert --attempts`` counts it, its
  ``max_retries`` (the agent's budget) unknowable unless the budgets are given
  (``--max-retries``: filled by HM104 with the attempt, as ``convert --attempts --max-retries``
  fills it);
- a ``tool_call_id`` a span left out: derived as HM201 derives it
  (:func:`histmig.rules.base.derived_tool_call_id`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

import orjson

from histmig.engine import migrate
from histmig.errors import RebuildError
from histmig.options import Options
from histmig.otel.export import RETRY_FEEDBACK_FRAMING, RETRY_FEEDBACK_TAG, VALIDATION_ERRORS_TAG, url_media_type
from histmig.otel.spans import Span
from histmig.rules.base import Budgets, conversation_key, derived_tool_call_id
from histmig.rules.causes import NO_OUTPUT_TEXTS, infer_cause

RUN_SPAN_NAMES = ("agent run", "invoke_agent")
ALL_MESSAGES = "pydantic_ai.all_messages"
_TOOL_OPERATION = "execute_tool"
_MODALITY_KIND = {"image": "image-url", "audio": "audio-url", "video": "video-url"}
_PYDANTIC_AI_MARKS = ("logfire.msg", "agent_name", ALL_MESSAGES, "final_result")
_RUN_FIELDS_LEFT_OUT = frozenset({ALL_MESSAGES, "logfire.json_schema"})


def is_run_span(span: Span) -> bool:
    """Whether ``span`` is an agent run span by its name or operation (any framework's)."""
    return (
        span.name == RUN_SPAN_NAMES[0]
        or span.name.startswith(RUN_SPAN_NAMES[1])
        or span.attributes.get("gen_ai.operation.name") == "invoke_agent"
    )


def is_pydantic_ai_run(span: Span) -> bool:
    """Whether a run span is pydantic-ai's: it carries one of the attributes only pydantic-ai's
    run span sets (``logfire.msg``, ``agent_name``, ``pydantic_ai.all_messages``,
    ``final_result``)."""
    return any(key in span.attributes for key in _PYDANTIC_AI_MARKS)


@dataclass
class RunSpans:
    """One agent run: its run span, its model request (``chat``) spans in start order, and its
    tool spans by ``gen_ai.tool.call.id``."""

    run: Span
    chats: list[Span] = field(default_factory=list)
    tools: dict[str, Span] = field(default_factory=dict)

    @property
    def run_id(self) -> str | None:
        return self.run.attributes.get("gen_ai.agent.call.id")

    @property
    def conversation_id(self) -> str:
        """``gen_ai.conversation.id``, or the trace id for a run that recorded none."""
        value = self.run.attributes.get("gen_ai.conversation.id")
        return value if isinstance(value, str) else self.run.trace_id


def group_runs(spans: Iterable[Span]) -> tuple[list[RunSpans], list[Span]]:
    """The pydantic-ai runs among ``spans``, in start order, each with its model request and tool
    spans (matched by run id, else by parent span), and the run spans of another framework."""
    spans = list(spans)
    runs: dict[tuple[str, str], RunSpans] = {}
    by_run_id: dict[tuple[str, str], RunSpans] = {}
    foreign: list[Span] = []
    for span in spans:
        if not is_run_span(span):
            continue
        if not is_pydantic_ai_run(span):
            foreign.append(span)
            continue
        run = RunSpans(span)
        runs[(span.trace_id, span.span_id)] = run
        if run.run_id is not None:
            by_run_id[(span.trace_id, run.run_id)] = run
    for span in spans:
        if is_run_span(span):
            continue
        run_id = span.attributes.get("gen_ai.agent.call.id")
        owner = by_run_id.get((span.trace_id, run_id)) if isinstance(run_id, str) else None
        owner = owner or runs.get((span.trace_id, span.parent_span_id or ""))
        if owner is None:
            continue
        operation = span.attributes.get("gen_ai.operation.name")
        if operation == "chat":
            owner.chats.append(span)
        elif operation == _TOOL_OPERATION and isinstance(span.attributes.get("gen_ai.tool.call.id"), str):
            owner.tools[span.attributes["gen_ai.tool.call.id"]] = span
    ordered = sorted(runs.values(), key=lambda r: (r.run.start_ns, r.run.span_id))
    for run in ordered:
        run.chats.sort(key=lambda s: (s.start_ns, s.span_id))
    return ordered, foreign


@dataclass
class Rebuilt:
    """A history rebuilt from spans: ``messages`` in the stored shape, ``source`` the attribute
    they came from, ``derived`` and ``unknowable`` the fields filled by evidence or left at the
    framework default (sorted, each once)."""

    messages: list[dict[str, Any]]
    source: str
    derived: list[str]
    unknowable: list[str]


def timestamp(ns: int) -> str:
    """Nanoseconds since the epoch as the ISO 8601 text 2.68 dumps a datetime as (UTC, ``Z``,
    microseconds when not zero)."""
    moment = datetime.fromtimestamp(ns // 1000 / 1_000_000, tz=timezone.utc)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}.{moment.microsecond:06d}Z" if moment.microsecond else f"{text}Z"


def _json_attribute(span: Span, key: str) -> Any:
    value = span.attributes.get(key)
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise RebuildError(f"span {span.span_id}: {key} is not JSON: {exc}") from exc
    return value


def _otel_list(span: Span, key: str) -> list[dict[str, Any]] | None:
    value = _json_attribute(span, key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("parts"), list) for m in value
    ):
        raise RebuildError(f"span {span.span_id}: {key} is not a list of OpenTelemetry messages")
    return value


def recorded_content(otel_messages: list[dict[str, Any]]) -> bool:
    """Whether an OTel message list was recorded with ``include_content``: a text or thinking
    part without ``content``, or a tool call without ``arguments``, says it was not."""
    for message in otel_messages:
        for part in message["parts"]:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in ("text", "thinking") and "content" not in part:
                return False
            if kind == "tool_call" and "arguments" not in part:
                return False
    return True


def summary(otel_messages: list[dict[str, Any]]) -> dict[str, Any]:
    """What a content-off run recorded: the roles in order, the part types by count, the tool
    calls by name and id."""
    types: dict[str, int] = {}
    calls: list[dict[str, Any]] = []
    for message in otel_messages:
        for part in message["parts"]:
            kind = str(part.get("type"))
            types[kind] = types.get(kind, 0) + 1
            if kind == "tool_call":
                calls.append({"id": part.get("id"), "name": part.get("name")})
    return {"roles": [m["role"] for m in otel_messages], "part_types": types, "tool_calls": calls}


def conversation_messages(run: RunSpans) -> tuple[list[dict[str, Any]], str]:
    """The OTel message list of the conversation up to ``run``'s end and the attribute it came
    from: the run span's ``pydantic_ai.all_messages``, or, when it is missing or shorter (a run
    that raised before recording its last response), its last model request span's
    ``gen_ai.input.messages`` with ``gen_ai.output.messages``. Raises :class:`RebuildError`
    when neither is there."""
    from_run = _otel_list(run.run, ALL_MESSAGES)
    from_chat: list[dict[str, Any]] | None = None
    if run.chats:
        last = run.chats[-1]
        inputs, outputs = _otel_list(last, "gen_ai.input.messages"), _otel_list(last, "gen_ai.output.messages")
        if inputs is not None and outputs is not None:
            from_chat = inputs + outputs
    if from_run is not None and (from_chat is None or len(from_run) >= len(from_chat)):
        return from_run, ALL_MESSAGES
    if from_chat is not None:
        return from_chat, "gen_ai.input.messages+gen_ai.output.messages"
    raise RebuildError(f"run span {run.run.span_id} has no {ALL_MESSAGES} and no model request span with messages")


class _Builder:
    """The state of one rebuild: the spans of the conversation and what was derived."""

    def __init__(self, runs: list[RunSpans]) -> None:
        self.runs = runs
        self.last = runs[-1]
        self.chats = [chat for run in runs for chat in run.chats]
        self.tools = {call_id: span for run in runs for call_id, span in run.tools.items()}
        self.derived: set[str] = set()
        self.unknowable: set[str] = set()
        self.open_calls: list[tuple[Any, str]] = []

    # Request parts

    def _user_item(self, part: dict[str, Any], where: str) -> Any:
        kind = part.get("type")
        if kind == "text":
            return part.get("content")
        if kind in ("blob", "binary"):
            media_type = part.get("mime_type") if kind == "blob" else part.get("media_type")
            return _binary(part.get("content"), media_type, where)
        if kind == "uri":
            modality = part.get("modality")
            return _url(part.get("uri"), _MODALITY_KIND.get(modality or "", "document-url"), part.get("mime_type"))
        if kind in ("image-url", "audio-url", "video-url", "document-url"):
            return _url(part.get("url"), kind, None)
        raise RebuildError(f"{where}: user content of type {kind!r} cannot be rebuilt")

    def _feedback(self, text: str, role: str, previous: dict[str, Any] | None, stamp: str) -> dict[str, Any] | None:
        """A ``retry-feedback`` part when ``text`` is one (fenced feedback; the fixed no-output
        text in the ``system`` role, or in ``user`` after a response with nothing to act on)."""
        for tag, cause in ((VALIDATION_ERRORS_TAG, "validation_error"), (RETRY_FEEDBACK_TAG, None)):
            opening, closing = f"{RETRY_FEEDBACK_FRAMING}\n<{tag}>\n", f"\n</{tag}>"
            if text.startswith(opening) and text.endswith(closing):
                inner = text[len(opening) : -len(closing)]
                content: Any = inner
                if cause == "validation_error":
                    try:
                        content = orjson.loads(inner)
                    except orjson.JSONDecodeError:
                        content = inner
                else:
                    cause = infer_cause(inner, tool_bound=False).cause
                    self.derived.add("retry-feedback.retry.cause")
                return _feedback_part(content, cause, stamp)
        if text in NO_OUTPUT_TEXTS and (role == "system" or _answers_nothing(previous)):
            if role != "system":
                self.derived.add("retry-feedback.part_kind")
            return _feedback_part(text, "no_output", stamp)
        return None

    def _tool_return(
        self, part: dict[str, Any], stamp: str, where: str, key: str, index: tuple[int, int]
    ) -> dict[str, Any]:
        call_id = part.get("id")
        if not isinstance(call_id, str):
            # the open call of the same tool, first called first answered (as HM201 pairs them)
            call_id = next((c for name, c in self.open_calls if name == part.get("name")), None)
            if call_id is None:
                call_id = derived_tool_call_id(key, index[0], index[1], part.get("name"))
            self.derived.add("tool-return.tool_call_id")
        self.open_calls = [(name, c) for name, c in self.open_calls if c != call_id]
        content = part.get("result")
        span = self.tools.get(call_id)
        attrs = span.attributes if span is not None else {}
        retry: dict[str, Any] | None = None
        if "pydantic_ai.tool.retry.cause" in attrs:
            retry = {
                "cause": attrs["pydantic_ai.tool.retry.cause"],
                "attempt": attrs.get("pydantic_ai.tool.retry.attempt"),
                "max_retries": attrs.get("pydantic_ai.tool.retry.max_retries"),
            }
        elif span is None or "pydantic_ai.tool.deferral.name" in attrs:
            verdict = infer_cause(content, tool_bound=True)
            if verdict.certainty in ("exact", "template", "shape"):
                retry = {"cause": verdict.cause, "attempt": None, "max_retries": None}
                self.derived.add("tool-return.retry.cause")
            elif span is not None:
                self.unknowable.add("tool-return.outcome")
        stored: dict[str, Any] = {
            "tool_name": part.get("name"),
            "content": content,
            "tool_call_id": call_id,
            "tool_kind": None,
            "metadata": None,
            "timestamp": stamp,
            "outcome": "success" if retry is None else "retried",
            "retry": retry,
            "part_kind": "tool-return",
        }
        if isinstance(content, (list, dict)):
            if _holds_file(content):
                raise RebuildError(f"{where}: a tool result holding a file item cannot be rebuilt")
            stored["content_file_digests"] = []
        return stored

    def request_parts(
        self, group: list[dict[str, Any]], previous: dict[str, Any] | None, stamp: str, key: str, m_index: int
    ) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        pending: list[Any] = []

        def flush() -> None:
            if pending:
                content = pending[0] if len(pending) == 1 and isinstance(pending[0], str) else list(pending)
                parts.append({"content": content, "timestamp": stamp, "part_kind": "user-prompt"})
                pending.clear()

        for message in group:
            role = message["role"]
            for p_index, part in enumerate(message["parts"]):
                where = f"messages[{m_index}]: {role} part {p_index}"
                kind = part.get("type")
                if kind == "tool_call_response":
                    flush()
                    parts.append(self._tool_return(part, stamp, where, key, (m_index, len(parts))))
                    continue
                if role == "system" and kind == "text":
                    feedback = self._feedback(part.get("content") or "", role, previous, stamp)
                    if feedback is None:
                        parts.append(_system_prompt(part.get("content"), stamp))
                    else:
                        parts.append(feedback)
                    continue
                if kind == "text" and isinstance(part.get("content"), str):
                    feedback = self._feedback(part["content"], role, previous, stamp)
                    if feedback is not None:
                        flush()
                        parts.append(feedback)
                        continue
                pending.append(self._user_item(part, where))
        flush()
        return parts

    # Responses

    def response(self, message: dict[str, Any], chat: Span | None, key: str, m_index: int) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        for p_index, part in enumerate(message["parts"]):
            kind = part.get("type")
            if kind == "text":
                parts.append(_text_part(part.get("content")))
            elif kind == "thinking":
                self.unknowable.add("thinking.signature")
                parts.append(_thinking_part(part.get("content")))
            elif kind == "tool_call":
                call_id = part.get("id")
                if not isinstance(call_id, str):
                    call_id = derived_tool_call_id(key, m_index, p_index, part.get("name"))
                    self.derived.add("tool-call.tool_call_id")
                self.open_calls.append((part.get("name"), call_id))
                parts.append(_tool_call_part(part.get("name"), part.get("arguments"), call_id))
            else:
                raise RebuildError(f"messages[{m_index}]: assistant part of type {kind!r} cannot be rebuilt")
        attrs = chat.attributes if chat is not None else {}
        if chat is None:
            self.unknowable.update(("response.model_name", "response.usage", "response.timestamp"))
        else:
            self.derived.add("response.timestamp")
        self.unknowable.update(("response.provider_name", "response.provider_details", "response.usage.details"))
        finish = attrs.get("gen_ai.response.finish_reasons")
        model = attrs.get("gen_ai.response.model", attrs.get("gen_ai.request.model"))
        system = attrs.get("gen_ai.system", attrs.get("gen_ai.provider.name"))
        if chat is not None:
            self.derived.add("response.model_id")
        return {
            "parts": parts,
            "usage": _usage(attrs),
            "model_name": model,
            "model_id": f"{system}:{attrs.get('gen_ai.request.model', model)}" if chat is not None else None,
            "timestamp": timestamp(chat.end_ns) if chat is not None else None,
            "kind": "response",
            "provider_name": None,
            "provider_url": None,
            "canonical_system": None,
            "provider_details": None,
            "provider_response_id": attrs.get("gen_ai.response.id"),
            "finish_reason": message.get("finish_reason", finish[0] if isinstance(finish, list) and finish else None),
            "run_id": attrs.get("gen_ai.agent.call.id", self.last.run_id),
            "conversation_id": self.last.conversation_id,
            "metadata": None,
            "workspace_ref": None,
            "history_digest": None,
            "failed_attempts": None,
            "state": "complete",
        }


def _answers_nothing(response: dict[str, Any] | None) -> bool:
    """Whether a response left the run nothing to act on (no text, no tool call): what the
    framework's no-output feedback answers (docs/framework.md §1.1)."""
    if response is None:
        return False
    return not any(p["part_kind"] in ("text", "tool-call") and p.get("content", True) for p in response["parts"])


def _holds_file(value: Any) -> bool:
    if isinstance(value, list):
        return any(_holds_file(item) for item in value)
    if isinstance(value, dict):
        kind = value.get("kind")
        return kind in ("binary", "image-url", "audio-url", "video-url", "document-url", "uploaded-file") or any(
            _holds_file(item) for item in value.values()
        )
    return False


def _binary(data: Any, media_type: Any, where: str) -> dict[str, Any]:
    """An OTel ``blob`` (version 4+) or ``binary`` (versions 2-3) as the stored ``BinaryContent``:
    URL-safe base64 data and the first 6 hex digits of its SHA-1 as ``identifier`` (what 2.68
    gives an item stored without one)."""
    if not isinstance(data, str) or not isinstance(media_type, str):
        raise RebuildError(f"{where}: binary content without data or a media type")
    try:
        raw = base64.b64decode(data, validate=True)
    except binascii.Error as exc:
        raise RebuildError(f"{where}: binary content is not base64: {exc}") from exc
    return {
        "data": base64.urlsafe_b64encode(raw).decode(),
        "media_type": media_type,
        "vendor_metadata": None,
        "kind": "binary",
        "identifier": hashlib.sha1(raw, usedforsecurity=False).hexdigest()[:6],
    }


def _url(url: Any, kind: str, media_type: Any) -> dict[str, Any]:
    """A media URL as 2.68 dumps it: the media type inferred as the export infers it when the
    span left it out, and the first 6 hex digits of the URL's SHA-1 as ``identifier``."""
    if not isinstance(url, str):
        raise RebuildError(f"a {kind} without a URL cannot be rebuilt")
    return {
        "url": url,
        "force_download": False,
        "vendor_metadata": None,
        "kind": kind,
        "media_type": media_type if isinstance(media_type, str) else url_media_type({"url": url, "kind": kind}),
        "identifier": hashlib.sha1(url.encode(), usedforsecurity=False).hexdigest()[:6],
    }


def _system_prompt(content: Any, stamp: str) -> dict[str, Any]:
    return {
        "content": content,
        "timestamp": stamp,
        "dynamic_ref": None,
        "context_id": None,
        "scope": "conversation",
        "metadata": None,
        "part_kind": "system-prompt",
    }


def _feedback_part(content: Any, cause: str | None, stamp: str) -> dict[str, Any]:
    return {
        "content": content,
        "retry": {"cause": cause, "attempt": None, "max_retries": None},
        "timestamp": stamp,
        "part_kind": "retry-feedback",
    }


def _text_part(content: Any) -> dict[str, Any]:
    return {
        "content": content,
        "id": None,
        "provider_name": None,
        "provider_details": None,
        "citations": None,
        "part_kind": "text",
    }


def _thinking_part(content: Any) -> dict[str, Any]:
    return {
        "content": content,
        "id": None,
        "signature": None,
        "provider_name": None,
        "provider_details": None,
        "part_kind": "thinking",
    }


def _tool_call_part(name: Any, args: Any, call_id: str) -> dict[str, Any]:
    return {
        "tool_name": name,
        "args": args,
        "tool_call_id": call_id,
        "tool_kind": None,
        "id": None,
        "provider_name": None,
        "provider_details": None,
        "part_kind": "tool-call",
    }


def _usage(attrs: dict[str, Any]) -> dict[str, Any]:
    """A response's ``RequestUsage`` from a model request span's ``gen_ai.usage.*`` (2.68
    ``RequestUsage.opentelemetry_attributes``): a count the span left out was zero."""

    def count(key: str) -> int:
        value = attrs.get(key, 0)
        return value if isinstance(value, int) else 0

    return {
        "input_tokens": count("gen_ai.usage.input_tokens"),
        "cache_write_tokens": count("gen_ai.usage.cache_creation.input_tokens"),
        "cache_write_1h_tokens": 0,
        "cache_read_tokens": count("gen_ai.usage.cache_read.input_tokens"),
        "output_tokens": count("gen_ai.usage.output_tokens"),
        "output_reasoning_tokens": 0,
        "input_audio_tokens": count("gen_ai.usage.details.input_audio_tokens"),
        "cache_audio_read_tokens": count("gen_ai.usage.details.cache_audio_read_tokens"),
        "output_audio_tokens": count("gen_ai.usage.details.output_audio_tokens"),
        "audio_seconds": 0.0,
        "details": {},
        "cost": None,
    }


def _instructions(chat: Span | None) -> str | None:
    if chat is None:
        return None
    value = _json_attribute(chat, "gen_ai.system_instructions")
    if not isinstance(value, list):
        return None
    texts = [part["content"] for part in value if isinstance(part, dict) and isinstance(part.get("content"), str)]
    return "\n\n".join(texts) if texts else None


def rebuild(runs: list[RunSpans], budgets: Budgets = Budgets()) -> Rebuilt:
    """The stored history at the end of the last of ``runs`` (the runs of one conversation, in
    start order; the earlier ones supply the model request spans of earlier responses), the
    agent's retry ``budgets`` (``--max-retries``; none: every ``max_retries`` no span recorded
    is left null) filling the retries whose attempt is counted (:func:`_count_attempts`).

    Responses are matched to the conversation's model request spans from the end (the last
    response to the last span), so a conversation whose earlier runs' spans are missing still
    rebuilds, its earlier responses' span fields unknowable. Raises :class:`RebuildError` when
    the run recorded no messages, recorded them without content, or holds a part that cannot be
    rebuilt."""
    last = runs[-1]
    otel, source = conversation_messages(last)
    if not recorded_content(otel):
        raise RebuildError(f"run span {last.run.span_id} was recorded without content (include_content=False)")
    builder = _Builder(runs)
    groups: list[tuple[str, list[dict[str, Any]]]] = []
    for message in otel:
        kind = "response" if message["role"] == "assistant" else "request"
        if kind == "request" and groups and groups[-1][0] == "request":
            groups[-1][1].append(message)
        else:
            groups.append((kind, [message]))
    responses = sum(1 for kind, _ in groups if kind == "response")
    known: list[Span | None] = list(builder.chats[-responses:]) if responses else []
    chats = [None] * (responses - len(known)) + known
    first_texts = [
        part.get("content")
        for message in (groups[0][1] if groups and groups[0][0] == "request" else [])
        for part in message["parts"]
        if part.get("type") == "text"
    ]
    key = conversation_key([{"parts": [{"part_kind": "user-prompt", "content": t} for t in first_texts]}])
    messages: list[dict[str, Any]] = []
    response_index = 0
    previous: dict[str, Any] | None = None
    for kind, group in groups:
        m_index = len(messages)
        if kind == "response":
            chat = chats[response_index] if response_index < len(chats) else None
            response_index += 1
            previous = builder.response(group[0], chat, key, m_index)
            messages.append(previous)
            continue
        chat = chats[response_index] if response_index < len(chats) else None
        if chat is not None:
            stamp, run_id, instructions = (
                timestamp(chat.start_ns),
                chat.attributes.get("gen_ai.agent.call.id"),
                _instructions(chat),
            )
        else:
            stamp, run_id, instructions = timestamp(last.run.end_ns), last.run_id, None
        builder.derived.add("request.timestamp")
        builder.derived.add("part.timestamp")
        messages.append(
            {
                "parts": builder.request_parts(group, previous, stamp, key, m_index),
                "timestamp": stamp,
                "instructions": instructions,
                "kind": "request",
                "run_id": run_id,
                "conversation_id": last.conversation_id,
                "metadata": None,
                "state": "complete",
            }
        )
    _count_attempts(messages, builder, budgets)
    return Rebuilt(messages, source, sorted(builder.derived), sorted(builder.unknowable))


_COUNT_ATTEMPTS = Options(attempts=True, select=("HM104",)).plan()
"""HM104 alone: the ``attempt`` of each retry no span recorded, counted as ``convert --attempts``
counts it (docs/framework.md §4, the current counting rules)."""


def _count_attempts(messages: list[dict[str, Any]], builder: _Builder, budgets: Budgets) -> None:
    """Fill the ``attempt`` of every retry left without one by HM104 (derived), with its
    ``max_retries`` from ``budgets`` when given (derived: HM104 writes it with the attempt, as
    ``convert --attempts --max-retries`` does, docs/framework.md §4.1), and name what still has
    none, and every ``max_retries`` left null (the agent's budget: unknowable)."""
    retries = _retries(messages)
    open_before = {id(part) for part in retries if part["retry"].get("attempt") is None}
    unbudgeted = {id(part) for part in retries if part["retry"].get("max_retries") is None}
    migrate(messages, _COUNT_ATTEMPTS if not budgets else replace(_COUNT_ATTEMPTS, budgets=budgets))
    for part in _retries(messages):
        kind = part["part_kind"]
        if id(part) in open_before:
            attempt = part["retry"].get("attempt")
            (builder.derived if attempt is not None else builder.unknowable).add(f"{kind}.retry.attempt")
        if part["retry"].get("max_retries") is None:
            builder.unknowable.add(f"{kind}.retry.max_retries")
        elif id(part) in unbudgeted:
            builder.derived.add(f"{kind}.retry.max_retries")


def _retries(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [part for message in messages for part in message["parts"] if isinstance(part.get("retry"), dict)]


def run_fields(run: RunSpans) -> dict[str, Any]:
    """The run span's own attributes, plain, without the message list (it is the history)."""
    return {key: value for key, value in run.run.attributes.items() if key not in _RUN_FIELDS_LEFT_OUT}
