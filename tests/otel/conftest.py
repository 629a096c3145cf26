"""What pydantic-ai 2.68.0's instrumentation records for a history: the export's oracle."""

from __future__ import annotations

from typing import Any

from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.models.instrumented import InstrumentationSettings


def framework_otel(messages: list[Any], version: int, include_content: bool) -> list[dict[str, Any]]:
    """What pydantic-ai 2.68.0 records as ``pydantic_ai.all_messages`` for ``messages``."""
    settings = InstrumentationSettings(version=version, include_content=include_content)
    return settings.messages_to_otel_messages(ModelMessagesTypeAdapter.validate_python(messages))


def tcr(call_id: str) -> dict[str, Any]:
    """An OTel ``tool_call_response`` part."""
    return {"type": "tool_call_response", "id": call_id, "name": "t", "result": 1}


def text(content: str) -> dict[str, Any]:
    """An OTel ``text`` part."""
    return {"type": "text", "content": content}
