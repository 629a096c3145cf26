"""Chat-app databases, written the way pydantic-ai's chat-app example writes its own.

``python scripts/make_chat_app_fixture.py [DIR]`` (default ``fixtures/chat_app``) runs real
pydantic-ai-slim 2.68.0 agents (a scripted ``FunctionModel``: only the model's replies are
scripted; every request, id, timestamp and part comes from the framework) and stores each run as
the example (``examples/pydantic_ai_examples/chat_app.py`` of pydantic/pydantic-ai) does: its
``Database`` class's SQL, ``CREATE TABLE IF NOT EXISTS messages (id INT PRIMARY KEY,
message_list TEXT)`` and ``INSERT INTO messages (message_list) VALUES (?)`` with
``result.new_messages_json()`` (bytes, so a BLOB; ``id`` never set, so NULL: SQLite does not
alias an ``INT PRIMARY KEY`` to the rowid), and each run is given the table's messages so far,
read ``ORDER BY id``, as ``message_history``. The example keeps one conversation a database:

- ``deferred.sqlite``: a tool that needs a person's approval (human-in-the-loop): run 1 asks
  for it and ends with the call unanswered (row 1), run 2 starts with the person's refusal as
  the call's result (row 2), run 3 lists the folder and answers (row 3);
- ``weather.sqlite``: a tool that raises ``ModelRetry`` once, then answers (row 1), and a
  second prompt (row 2).

and ``sessions.sqlite`` holds both conversations in one table, the way forks of the example
keep several (a ``session_id`` column), their runs interleaved. The files are committed; the
ids and timestamps are the framework's, so a new run of this script writes other bytes.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ModelRetry, ToolDenied
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

SCHEMA = "CREATE TABLE IF NOT EXISTS messages (id INT PRIMARY KEY, message_list TEXT);"
INSERT = "INSERT INTO messages (message_list) VALUES (?);"
SESSIONS_SCHEMA = "CREATE TABLE IF NOT EXISTS messages (id INT PRIMARY KEY, session_id TEXT, message_list TEXT);"
SESSIONS_INSERT = "INSERT INTO messages (session_id, message_list) VALUES (?, ?);"


def _last_request_parts(messages: list[ModelMessage]) -> list[Any]:
    return list(messages[-1].parts)


def admin_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model of the deferred-tool conversation: asks to delete, then to list, then answers."""
    kinds = [part.part_kind for part in _last_request_parts(messages)]
    prompt = next((p.content for p in _last_request_parts(messages) if p.part_kind == "user-prompt"), None)
    if prompt == "Clean up /tmp/x.":
        return ModelResponse(parts=[ToolCallPart("run_command", {"command": "rm -rf /tmp/x"})])
    if prompt == "List it first, then.":
        return ModelResponse(parts=[ToolCallPart("list_folder", {"path": "/tmp/x"})])
    if "tool-return" in kinds and any(getattr(p, "tool_name", None) == "list_folder" for p in messages[-1].parts):
        return ModelResponse(parts=[TextPart("/tmp/x holds a.log and b.log.")])
    return ModelResponse(parts=[TextPart("Understood: I will not delete /tmp/x without a listing.")])


def weather_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model of the weather conversation: a call retried once, then the answer."""
    parts = _last_request_parts(messages)
    kinds = [part.part_kind for part in parts]
    if "user-prompt" in kinds and parts[-1].content == "Weather in Oslo?":
        return ModelResponse(parts=[ToolCallPart("get_weather", {"city": "oslo"})])
    if any(p.part_kind == "tool-return" and getattr(p, "outcome", None) == "retried" for p in parts):
        return ModelResponse(parts=[ToolCallPart("get_weather", {"city": "Oslo"})])
    if "tool-return" in kinds:
        return ModelResponse(parts=[TextPart("12 C and cloudy in Oslo.")])
    return ModelResponse(parts=[TextPart("You are welcome.")])


admin = Agent(FunctionModel(admin_model), output_type=[str, DeferredToolRequests])


@admin.tool_plain(requires_approval=True)
def run_command(command: str) -> str:
    """Run a shell command (a person approves it first)."""
    return f"ran {command}"


@admin.tool_plain
def list_folder(path: str) -> str:
    """List a folder."""
    return "a.log\nb.log"


weather = Agent(FunctionModel(weather_model))


@weather.tool_plain
def get_weather(city: str) -> str:
    """The weather in a city (its name capitalised)."""
    if city != city.title():
        raise ModelRetry(f"write the city as {city.title()!r}")
    return "12 C, cloudy"


class Database:
    """The example's ``Database``, synchronously: its SQL, a connection to one file."""

    def __init__(self, path: Path) -> None:
        self.con = sqlite3.connect(path)
        self.con.execute(SCHEMA)
        self.con.commit()

    def add_messages(self, messages: bytes) -> None:
        self.con.execute(INSERT, (messages,))
        self.con.commit()

    def get_messages(self) -> list[ModelMessage]:
        messages: list[ModelMessage] = []
        for (row,) in self.con.execute("SELECT message_list FROM messages order by id").fetchall():
            messages.extend(ModelMessagesTypeAdapter.validate_json(row))
        return messages


def main(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("deferred.sqlite", "weather.sqlite", "sessions.sqlite"):
        (directory / name).unlink(missing_ok=True)
    deferred, plain = Database(directory / "deferred.sqlite"), Database(directory / "weather.sqlite")
    runs: list[tuple[str, bytes]] = []

    def run(database: Database, session: str, agent: Agent[Any, Any], prompt: str | None, **given: Any) -> Any:
        result = agent.run_sync(prompt, message_history=database.get_messages(), **given)
        stored = result.new_messages_json()
        database.add_messages(stored)
        runs.append((session, stored))
        return result

    asked = run(deferred, "admin", admin, "Clean up /tmp/x.")
    assert isinstance(asked.output, DeferredToolRequests), asked.output
    run(plain, "weather", weather, "Weather in Oslo?")
    call = asked.output.approvals[0]
    refusal = ToolDenied("Refused: destructive command; list first.")
    run(
        deferred,
        "admin",
        admin,
        None,
        deferred_tool_results=DeferredToolResults(approvals={call.tool_call_id: refusal}),
    )
    run(plain, "weather", weather, "Thanks!")
    run(deferred, "admin", admin, "List it first, then.")
    sessions = sqlite3.connect(directory / "sessions.sqlite")
    sessions.execute(SESSIONS_SCHEMA)
    sessions.executemany(SESSIONS_INSERT, runs)
    sessions.commit()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent.parent / "fixtures" / "chat_app")
