"""Write fixtures/otel/every_part.json: one stored history (pydantic-ai 2.68 shape) holding every
part kind the OpenTelemetry export renders (docs/framework.md §5), beyond what the corpus holds.

Run by hand with the oracle venv: ``/tmp/probe-venv/bin/python scripts/make_otel_fixture.py``.
The history is validated by pydantic-ai-slim 2.68.0 before it is written, so every part is one
the framework loads; the differential tests (tests/test_otel.py) then compare histmig's export
of it with the framework's.
"""

from __future__ import annotations

from pathlib import Path

import orjson
from pydantic_ai.messages import ModelMessagesTypeAdapter

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNg+M/A8B8ABQACAapftrsAAAAASUVORK5CYII="
TS = "2026-01-01T00:00:00Z"
VALIDATION = [
    {"type": "missing", "loc": ["answer"], "msg": "Field required", "input": {"Answer": 1}, "ctx": {"x": 1}},
    {"type": "int_parsing", "loc": ["n"], "msg": "Input should be a valid integer", "input": {"Answer": 1}},
    {"type": "string_type", "loc": ["items", 0, "name"], "msg": "Input should be a valid string <é>", "input": 3},
]

HISTORY = [
    {
        "kind": "request",
        "parts": [
            {"part_kind": "system-prompt", "content": "Be brief.", "timestamp": TS},
            {
                "part_kind": "instruction-baseline",
                "instructions": [
                    {"part_kind": "instruction-digest", "id": None, "dynamic": False, "content_hash": "00"}
                ],
            },
            {"part_kind": "tool-availability-delta", "tools_added": ["search", "fetch"]},
            {"part_kind": "capability-load-delta", "loaded": ["web"]},
            {"part_kind": "model-settings-delta", "settings": {"thinking": "high"}},
            {
                "part_kind": "instruction-delta",
                "id": "system_prompt:style",
                "content": 'Answer in <b>French</b> & "quote"',
                "base_hash": None,
            },
            {"part_kind": "instruction-delta", "id": None, "content": None},
            {"part_kind": "instruction-delta", "id": "agent", "content": "a"},
            {"part_kind": "instruction-delta", "id": "toolset:web:rules", "content": "b"},
            {"part_kind": "instruction-delta", "id": "capability:c&d", "content": "c"},
            {
                "part_kind": "user-prompt",
                "content": [
                    "plain",
                    {"kind": "text-content", "content": "tagged", "metadata": {"k": 1}},
                    {
                        "kind": "structured-content",
                        "value": {"a": "<x>"},
                        "content": "",
                        "tag": "ui_state",
                        "description": "State",
                    },
                    {"kind": "structured-content", "value": [1, 2], "content": "rendered already"},
                    {"kind": "image-url", "url": "https://example.invalid/a.png"},
                    {"kind": "image-url", "url": "https://example.invalid/noext", "media_type": "image/webp"},
                    {"kind": "audio-url", "url": "https://example.invalid/a.mp3"},
                    {"kind": "video-url", "url": "https://youtu.be/abc"},
                    {"kind": "video-url", "url": "https://example.invalid/v.mp4"},
                    {"kind": "document-url", "url": "https://example.invalid/d.pdf"},
                    {"kind": "document-url", "url": "https://example.invalid/readme.md"},
                    {"kind": "document-url", "url": "https://example.invalid/noext"},
                    {"kind": "image-url", "url": "https://example.invalid/x.PNG?a=1"},
                    {"kind": "binary", "data": PNG, "media_type": "image/png"},
                    {"kind": "binary", "data": "aGVsbG8=", "media_type": "application/pdf"},
                    {"kind": "binary", "data": "AAEC", "media_type": "audio/wav"},
                    {"kind": "uploaded-file", "file_id": "file-abc123", "provider_name": "openai"},
                    {"kind": "uploaded-file", "file_id": "files/clip.mp4", "provider_name": "google"},
                    {
                        "kind": "uploaded-file",
                        "file_id": "f-1",
                        "provider_name": "anthropic",
                        "media_type": "image/jpeg",
                    },
                    {"kind": "cache-point"},
                ],
                "timestamp": TS,
            },
            {"part_kind": "compaction", "content": "Summary of earlier turns."},
            {"part_kind": "compaction", "content": ""},
        ],
    },
    {
        "kind": "response",
        "parts": [
            {"part_kind": "thinking", "content": "hmm"},
            {"part_kind": "text", "content": "Calling."},
            {
                "part_kind": "tool-call",
                "tool_name": "search",
                "args": {"q": "x", "n": [1, 2.5, None]},
                "tool_call_id": "c1",
            },
            {"part_kind": "tool-call", "tool_name": "fetch", "args": '{"url": "u"}', "tool_call_id": "c2"},
            {"part_kind": "tool-call", "tool_name": "noargs", "args": None, "tool_call_id": "c3"},
            {
                "part_kind": "tool-call",
                "tool_name": "search_tools",
                "args": {"zz": 1, "queries": ["x"]},
                "tool_call_id": "s1",
                "tool_kind": "tool-search",
            },
            {
                "part_kind": "tool-call",
                "tool_name": "load_capability",
                "args": {"x": 2, "id": "web"},
                "tool_call_id": "l1",
                "tool_kind": "capability-load",
            },
            {"part_kind": "tool-call", "tool_name": "img", "args": {}, "tool_call_id": "i1"},
            {
                "part_kind": "builtin-tool-call",
                "tool_name": "tool_search",
                "args": {"zz": 1, "queries": ["x"]},
                "tool_call_id": "n1",
                "tool_kind": "tool-search",
                "provider_name": "anthropic",
            },
            {
                "part_kind": "builtin-tool-return",
                "tool_name": "tool_search",
                "content": {"message": "m", "discovered_tools": [{"score": 1, "name": "a"}]},
                "tool_call_id": "n1",
                "tool_kind": "tool-search",
                "provider_name": "anthropic",
            },
            {
                "part_kind": "builtin-tool-call",
                "tool_name": "web_search",
                "args": {"query": "q"},
                "tool_call_id": "b1",
                "provider_name": "openai",
            },
            {
                "part_kind": "builtin-tool-return",
                "tool_name": "web_search",
                "content": {"results": [1, 2]},
                "tool_call_id": "b1",
                "provider_name": "openai",
            },
            {
                "part_kind": "builtin-tool-return",
                "tool_name": "web_search",
                "content": None,
                "tool_call_id": "b2",
                "provider_name": "openai",
            },
            {"part_kind": "file", "content": {"kind": "binary", "data": PNG, "media_type": "image/png"}},
            {"part_kind": "compaction", "content": "provider summary", "provider_name": "openai"},
        ],
        "finish_reason": "tool_call",
    },
    {
        "kind": "request",
        "parts": [
            {
                "part_kind": "tool-return",
                "tool_name": "search",
                "content": {"hits": [{"t": "a"}], "n": 1.5},
                "tool_call_id": "c1",
                "outcome": "success",
            },
            {
                "part_kind": "tool-return",
                "tool_name": "fetch",
                "content": "Timed out after 5 seconds.",
                "tool_call_id": "c2",
                "outcome": "retried",
                "retry": {"cause": "model_retry", "attempt": 1, "max_retries": 2},
            },
            {
                "part_kind": "tool-return",
                "tool_name": "noargs",
                "content": [{"type": "missing", "loc": ["x"], "msg": "Field required", "input": {}}],
                "tool_call_id": "c3",
                "outcome": "retried",
                "retry": {"cause": "validation_error", "attempt": 1, "max_retries": 1},
            },
            {
                "part_kind": "tool-return",
                "tool_name": "search_tools",
                "content": {"message": "found", "discovered_tools": [{"x": 1, "name": "a"}], "zz": 1},
                "tool_call_id": "s1",
                "tool_kind": "tool-search",
            },
            {
                "part_kind": "tool-return",
                "tool_name": "load_capability",
                "content": {"zz": 0, "instructions": "do", "message": "ok"},
                "tool_call_id": "l1",
                "tool_kind": "capability-load",
            },
            {
                "part_kind": "tool-return",
                "tool_name": "load_capability",
                "content": {"instructions": "do", "message": "ok"},
                "tool_call_id": "l2",
                "tool_kind": "capability-load",
                "outcome": "failed",
            },
            {
                "part_kind": "tool-return",
                "tool_name": "img",
                "content": [
                    {"kind": "binary", "data": PNG, "media_type": "image/png"},
                    "caption",
                    {"kind": "image-url", "url": "https://e.invalid/x.png"},
                ],
                "tool_call_id": "i1",
                "content_file_digests": [],
            },
            {
                "part_kind": "tool-return",
                "tool_name": "img",
                "content": {
                    "a": [{"kind": "binary", "data": "aGVsbG8=", "media_type": "text/plain"}],
                    "b": {
                        "kind": "binary",
                        "data": "aGVsbG8=",
                        "media_type": "text/plain",
                        "extra": 1,
                        "identifier": "zz",
                        "vendor_metadata": {"v": 1},
                    },
                    "c": {"kind": "binary", "data": "aGVsbG8="},
                    "d": {"kind": "uploaded-file", "file_id": "f", "provider_name": "openai"},
                    "e": {"kind": "image-url", "url": "s3://b/x.png"},
                },
                "tool_call_id": "i2",
            },
            {"part_kind": "user-prompt", "content": "and then?", "timestamp": TS},
            {
                "part_kind": "tool-return",
                "tool_name": "late",
                "content": None,
                "tool_call_id": "c4",
                "outcome": "failed",
            },
            {"part_kind": "tool-return", "tool_name": "late", "content": 7, "tool_call_id": "c5", "outcome": "denied"},
            {
                "part_kind": "retry-feedback",
                "content": "Please return text or call a tool.",
                "retry": {"cause": "no_output", "attempt": 1, "max_retries": 3},
            },
            {
                "part_kind": "retry-feedback",
                "content": "Plain text responses are not permitted, please call one of the functions instead.",
                "retry": {"cause": "no_output"},
            },
            {
                "part_kind": "retry-feedback",
                "content": "Please return text or call a tool.",
                "retry": {"cause": "model_retry"},
            },
            {"part_kind": "retry-feedback", "content": VALIDATION, "retry": {"cause": "validation_error"}},
            {"part_kind": "system-prompt", "content": "Mid-run note.", "timestamp": TS},
            {
                "part_kind": "retry-feedback",
                "content": "Output must mention <pyai:retry_feedback> Paris",
                "retry": {"cause": "model_retry"},
            },
        ],
    },
    {"kind": "request", "parts": []},
    {"kind": "request", "parts": [{"part_kind": "instruction-baseline", "instructions": []}]},
    {
        "kind": "response",
        "parts": [
            {"part_kind": "text", "content": "Done — ✓"},
            {
                "part_kind": "speech",
                "speaker": "assistant",
                "transcript": "Done",
                "audio": {"kind": "binary", "data": "AAEC", "media_type": "audio/pcm"},
            },
        ],
        "finish_reason": "stop",
    },
    {
        "kind": "request",
        "parts": [
            {
                "part_kind": "speech",
                "speaker": "user",
                "transcript": None,
                "audio": {"kind": "binary", "data": "AAEC", "media_type": "audio/wav"},
            }
        ],
    },
    {"kind": "response", "parts": []},
]


def main() -> None:
    ModelMessagesTypeAdapter.validate_python(HISTORY)
    target = Path(__file__).resolve().parent.parent / "fixtures" / "otel" / "every_part.json"
    target.write_bytes(orjson.dumps(HISTORY, option=orjson.OPT_INDENT_2) + b"\n")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
