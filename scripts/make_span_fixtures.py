"""Write fixtures/otel-spans/: real pydantic-ai-slim 2.68.0 agent runs, their spans and their histories.

Each scenario (the corpus's, fixtures/corpus README) is run as a real ``Agent`` run driven by a
scripted ``FunctionModel``, once for every instrumentation version 2-6 with
``InstrumentationSettings(version=N, include_content=True)`` and once with version 6 and
``include_content=False``. The spans go to opentelemetry-sdk's ``InMemorySpanExporter`` and are
written as an OpenTelemetry Collector's file exporter writes them: one ``{"resourceSpans": [...]}``
export a line (the SDK's OTLP protobuf encoder, then protobuf's JSON mapping with the collector's
differences: hex trace and span ids, enums as numbers). Beside each span file is what the
framework itself stored: ``ModelMessagesTypeAdapter.dump_json`` of each run's ``all_messages()``
(a list, one per run), or of ``capture_run_messages()`` for a run that raised.

Files: ``v{N}/{scenario}.otlp.jsonl``, ``v{N}/{scenario}.messages.json`` (a JSON array, one history a
run), ``v6-no-content/...`` the same for content off, and ``logfire/v{N}/{scenario}.json``: the same
spans as rows of Logfire's ``records`` table (its query API's ``row_oriented`` JSON shape).

Run by hand: ``python scripts/make_span_fixtures.py`` with pydantic-ai-slim 2.68.0 and the test
extra installed. Span ids come from a counter and the run and conversation ids are given, so the
only things that change between two runs of the script are the clock's timestamps.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from pydantic import BaseModel, field_validator
from pydantic_ai import (
    Agent,
    BinaryContent,
    DeferredToolRequests,
    DeferredToolResults,
    ImageUrl,
    ModelRetry,
    RunContext,
    capture_run_messages,
)
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.exceptions import CallDeferred, UnexpectedModelBehavior
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.usage import RequestUsage

OUT = Path(__file__).resolve().parent.parent / "fixtures" / "otel-spans"
VERSIONS = (2, 3, 4, 5, 6)
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNg+M/A8B8ABQACAapftrsAAAAASUVORK5CYII="
)


class CountingIds(IdGenerator):
    """Trace and span ids from a counter: the same ids on every run of the script."""

    def __init__(self, seed: int) -> None:
        self.next = seed << 32

    def _step(self) -> int:
        self.next += 1
        return self.next

    def generate_span_id(self) -> int:
        return self._step()

    def generate_trace_id(self) -> int:
        return (0x4D16 << 96) | self._step()


def scripted(*replies: Callable[[list[ModelMessage], AgentInfo], ModelResponse] | ModelResponse) -> FunctionModel:
    """A FunctionModel answering each request with the next reply (a response or a function of the history)."""
    queue = list(replies)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        reply = queue.pop(0)
        return reply(messages, info) if callable(reply) else reply

    return FunctionModel(model, model_name="scripted_model")


def call(name: str, args: Any, call_id: str) -> ToolCallPart:
    return ToolCallPart(tool_name=name, args=args, tool_call_id=call_id)


def calls(*parts: Any) -> ModelResponse:
    return ModelResponse(parts=list(parts))


def text(content: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(content)])


class City(BaseModel):
    city: str
    population: int

    @field_validator("population")
    @classmethod
    def positive(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("population must be positive")
        return value


@dataclass
class Run:
    """One agent run of a scenario: the agent, its prompt and how to call it."""

    agent: Agent[Any, Any]
    prompt: Any
    kwargs: dict[str, Any]


def a_tool_model_retry(settings: InstrumentationSettings) -> list[Run]:
    agent = Agent(
        scripted(
            calls(call("get_weather", {"city": "Atlantis"}, "call_a1")),
            calls(call("get_weather", {"city": "Paris"}, "call_a2")),
            text("It is sunny in Paris."),
        ),
        capabilities=[Instrumentation(settings=settings)],
        system_prompt="You are a weather bot.",
    )

    @agent.tool_plain
    def get_weather(city: str) -> str:
        if city == "Atlantis":
            raise ModelRetry("Unknown city Atlantis; try a real one.")
        return f"Sunny in {city}"

    return [Run(agent, "Weather in Atlantis?", {})]


def a_tool_model_retry_provider_ids(settings: InstrumentationSettings) -> list[Run]:
    """The provider's response ids, finish reasons and cache usage, as a real model reports them."""
    usage = RequestUsage(input_tokens=40, output_tokens=7, cache_read_tokens=12, cache_write_tokens=3)
    agent = Agent(
        scripted(
            ModelResponse(
                parts=[call("get_weather", {"city": "Atlantis"}, "toolu_01")],
                usage=usage,
                provider_response_id="resp_1",
                finish_reason="tool_call",
            ),
            ModelResponse(
                parts=[TextPart("Sunny in Paris.")], usage=usage, provider_response_id="resp_2", finish_reason="stop"
            ),
        ),
        capabilities=[Instrumentation(settings=settings)],
    )

    @agent.tool_plain
    def get_weather(city: str) -> str:
        raise ModelRetry(f"Unknown city {city}.")

    return [Run(agent, "Weather in Atlantis?", {})]


def b_tool_args_validation(settings: InstrumentationSettings) -> list[Run]:
    agent = Agent(
        scripted(
            calls(call("add", {"a": "x", "b": 1}, "call_b1")),
            calls(call("add", '{"a": 1, "b": ', "call_b2")),
            calls(call("add", {"a": 1, "b": 2}, "call_b3")),
            text("1 + 2 = 3"),
        ),
        capabilities=[Instrumentation(settings=settings)],
    )

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    return [Run(agent, "Add 1 and 2.", {})]


def c_unknown_tool(settings: InstrumentationSettings) -> list[Run]:
    agent = Agent(
        scripted(
            calls(call("get_wether", {"city": "Rome"}, "call_c1")),
            calls(call("get_weather", {"city": "Rome"}, "call_c2")),
            text("Warm."),
        ),
        capabilities=[Instrumentation(settings=settings)],
    )

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return f"Warm in {city}"

    return [Run(agent, "Weather in Rome?", {})]


def d_parallel_same_tool_fail(settings: InstrumentationSettings) -> list[Run]:
    agent = Agent(
        scripted(
            calls(
                call("lookup", {"key": "a"}, "call_d1"),
                call("lookup", {"key": "bad"}, "call_d2"),
                call("lookup", {"key": "bad2"}, "call_d3"),
            ),
            calls(call("lookup", {"key": "b"}, "call_d4")),
            text("Found a and b."),
        ),
        capabilities=[Instrumentation(settings=settings)],
        retries=3,
    )

    @agent.tool_plain
    def lookup(key: str) -> str:
        if key.startswith("bad"):
            raise ModelRetry(f"No key {key}.")
        return f"value of {key}"

    return [Run(agent, "Look up a, bad and bad2.", {})]


def e_output_tool_validation(settings: InstrumentationSettings) -> list[Run]:
    agent = Agent(
        scripted(
            calls(call("final_result", {"city": "Paris", "population": -1}, "call_e1")),
            calls(call("final_result", {"city": "Paris", "population": 2100000}, "call_e2")),
        ),
        capabilities=[Instrumentation(settings=settings)],
        output_type=City,
    )
    return [Run(agent, "Biggest French city?", {})]


def f_output_validator_text(settings: InstrumentationSettings) -> list[Run]:
    agent = Agent(scripted(text("maybe"), text("Yes, definitely.")), capabilities=[Instrumentation(settings=settings)])

    @agent.output_validator
    def decisive(output: str) -> str:
        if output == "maybe":
            raise ModelRetry("Be decisive: answer yes or no.")
        return output

    return [Run(agent, "Is water wet?", {})]


def g_text_output(settings: InstrumentationSettings) -> list[Run]:
    agent = Agent(
        scripted(text("Hello there!")), capabilities=[Instrumentation(settings=settings)], instructions="Greet warmly."
    )
    return [Run(agent, "Hi", {})]


def h_empty_response(settings: InstrumentationSettings) -> list[Run]:
    agent = Agent(
        scripted(ModelResponse(parts=[]), text("Here you go.")), capabilities=[Instrumentation(settings=settings)]
    )
    return [Run(agent, "Say something.", {})]


def i_multi_run(settings: InstrumentationSettings) -> list[Run]:
    agent = Agent(
        scripted(
            calls(call("remember", {"fact": "sky is blue"}, "call_i1")),
            text("Noted."),
            text("You told me the sky is blue."),
        ),
        capabilities=[Instrumentation(settings=settings)],
    )

    @agent.tool_plain
    def remember(fact: str) -> str:
        return f"remembered: {fact}"

    return [Run(agent, "Remember: sky is blue.", {}), Run(agent, "What did I tell you?", {"continue": True})]


def j_rich_content(settings: InstrumentationSettings) -> list[Run]:
    agent = Agent(
        scripted(
            ModelResponse(
                parts=[
                    ThinkingPart("The image is one pixel; check the price too.", signature="sig-1"),
                    TextPart("Let me check."),
                    ToolCallPart("stock_price", {"ticker": "ACME"}, tool_call_id="call_j1"),
                    ToolCallPart("stock_price", {"ticker": "NOPE"}, tool_call_id="call_j2"),
                ]
            ),
            ModelResponse(parts=[ThinkingPart("Done."), TextPart("ACME is at 12; the image is a pixel.")]),
        ),
        capabilities=[Instrumentation(settings=settings)],
    )

    @agent.tool_plain
    def stock_price(ticker: str) -> float:
        if ticker == "NOPE":
            raise ModelRetry("Unknown ticker NOPE.")
        return 12.0

    prompt = [
        "Describe this image and get the ACME price.",
        BinaryContent(PNG, media_type="image/png"),
        ImageUrl("https://example.invalid/cat.png"),
    ]
    return [Run(agent, prompt, {})]


def l_no_retry(settings: InstrumentationSettings) -> list[Run]:
    agent = Agent(
        scripted(calls(call("get_time", {}, "call_l1")), text("It is noon.")),
        capabilities=[Instrumentation(settings=settings)],
    )

    @agent.tool_plain
    def get_time() -> str:
        return "12:00"

    return [Run(agent, "What time is it?", {})]


def m_deferred_tool(settings: InstrumentationSettings) -> list[Run]:
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        scripted(
            calls(call("run_job", {"cmd": "rm -rf /tmp/x"}, "call_m1")),
            calls(call("run_job", {"cmd": "ls /tmp/x"}, "call_m2")),
            text("Listed."),
        ),
        capabilities=[Instrumentation(settings=settings)],
        output_type=[str, DeferredToolRequests],
    )

    @agent.tool
    def run_job(ctx: RunContext[None], cmd: str) -> str:
        if not ctx.tool_call_approved and cmd.startswith("rm"):
            raise CallDeferred()
        return f"ran {cmd}"

    results = DeferredToolResults(calls={"call_m1": ModelRetry("Refused: destructive command; list first.")})
    return [Run(agent, "Clean up /tmp/x.", {}), Run(agent, None, {"continue": True, "deferred_tool_results": results})]


def k_tool_retries_exhausted(settings: InstrumentationSettings) -> list[Run]:
    agent = Agent(
        scripted(
            calls(call("flaky", {"n": 1}, "call_k1")),
            calls(call("flaky", {"n": 2}, "call_k2")),
            calls(call("flaky", {"n": 3}, "call_k3")),
        ),
        capabilities=[Instrumentation(settings=settings)],
        retries=1,
    )

    @agent.tool_plain
    def flaky(n: int) -> str:
        raise ModelRetry(f"Attempt {n} failed.")

    return [Run(agent, "Call flaky.", {})]


SCENARIOS = {
    f.__name__: f
    for f in (
        a_tool_model_retry,
        a_tool_model_retry_provider_ids,
        b_tool_args_validation,
        c_unknown_tool,
        d_parallel_same_tool_fail,
        e_output_tool_validation,
        f_output_validator_text,
        g_text_output,
        h_empty_response,
        i_multi_run,
        j_rich_content,
        l_no_retry,
        m_deferred_tool,
        k_tool_retries_exhausted,
    )
}


def _hex(value: str) -> str:
    return base64.b64decode(value).hex()


def _collector_json(node: Any) -> Any:
    """protobuf's JSON mapping as the collector writes OTLP: ids as hex, not base64."""
    if isinstance(node, list):
        return [_collector_json(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {
        key: _hex(value) if key in ("traceId", "spanId", "parentSpanId") and value else _collector_json(value)
        for key, value in node.items()
    }


async def run_scenario(name: str, version: int, include_content: bool, seed: int) -> tuple[list[str], list[Any]]:
    """Run one scenario; the OTLP JSON lines of its spans (one export a run) and each run's stored history."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=CountingIds(seed))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings = InstrumentationSettings(version=version, include_content=include_content, tracer_provider=provider)
    lines: list[str] = []
    histories: list[Any] = []
    history: list[ModelMessage] | None = None
    for index, run in enumerate(SCENARIOS[name](settings)):
        kwargs = dict(run.kwargs)
        if kwargs.pop("continue", False):
            kwargs["message_history"] = history
        else:
            kwargs["conversation_id"] = f"conv-{name}"
        kwargs["run_id"] = f"run-{name}-{index}"
        with capture_run_messages() as captured:
            try:
                result = await run.agent.run(run.prompt, **kwargs)
                history = result.all_messages()
            except UnexpectedModelBehavior:
                history = captured
        histories.append(json.loads(ModelMessagesTypeAdapter.dump_json(history)))
        spans = exporter.get_finished_spans()
        exporter.clear()
        request = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
        lines.append(json.dumps(_collector_json(request), separators=(",", ":"), ensure_ascii=False))
    return lines, histories


_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}


def _logfire_attributes(attributes: list[dict[str, Any]]) -> dict[str, Any]:
    """A span's attributes as a Logfire ``records`` row holds them: plain values, and those its
    ``logfire.json_schema`` declares objects or arrays parsed from their JSON text."""
    plain: dict[str, Any] = {}
    for item in attributes:
        ((kind, value),) = item["value"].items()
        plain[item["key"]] = int(value) if kind == "intValue" else value
    schema = json.loads(plain.get("logfire.json_schema", "{}")).get("properties", {})
    for key, declared in schema.items():
        if declared.get("type") in ("object", "array") and isinstance(plain.get(key), str):
            with contextlib.suppress(json.JSONDecodeError):  # a text final_result stays text
                plain[key] = json.loads(plain[key])
    return plain


def _iso(ns: str) -> str:
    moment = datetime.fromtimestamp(int(ns) // 1000 / 1_000_000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def logfire_rows(lines: list[str]) -> dict[str, Any]:
    """The spans of OTLP JSON ``lines`` as Logfire's query API returns ``SELECT * FROM records``
    with ``row_oriented=true`` (``RowQueryResults``: ``columns`` and ``rows``), the columns its
    SQL reference documents for a span."""
    rows = []
    for line in lines:
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    rows.append(
                        {
                            "trace_id": span["traceId"],
                            "span_id": span["spanId"],
                            "parent_span_id": span.get("parentSpanId"),
                            "kind": "span",
                            "span_name": span["name"],
                            "start_timestamp": _iso(span["startTimeUnixNano"]),
                            "end_timestamp": _iso(span["endTimeUnixNano"]),
                            "otel_status_code": _STATUS[span.get("status", {}).get("code", 0)],
                            "attributes": _logfire_attributes(span.get("attributes", [])),
                        }
                    )
    columns = [
        {"name": name, "datatype": datatype, "nullable": nullable}
        for name, datatype, nullable in (
            ("trace_id", "Utf8", False),
            ("span_id", "Utf8", False),
            ("parent_span_id", "Utf8", True),
            ("kind", "Utf8", False),
            ("span_name", "Utf8", False),
            ("start_timestamp", {"Timestamp": ["Microsecond", "UTC"]}, False),
            ("end_timestamp", {"Timestamp": ["Microsecond", "UTC"]}, False),
            ("otel_status_code", "Utf8", True),
            ("attributes", "Utf8", True),
        )
    ]
    return {"columns": columns, "rows": rows}


def write_logfire(folder: str) -> None:
    """``logfire/{folder}/{scenario}.json`` from the span files of ``folder``."""
    out = OUT / "logfire" / folder
    out.mkdir(parents=True, exist_ok=True)
    for spans in sorted((OUT / folder).glob("*.otlp.jsonl")):
        rows = logfire_rows(spans.read_text().splitlines())
        name = spans.name.removesuffix(".otlp.jsonl")
        (out / f"{name}.json").write_text(json.dumps(rows, ensure_ascii=False, separators=(",", ":")) + "\n")


def main() -> None:
    warnings.simplefilter("ignore")
    targets = [(f"v{v}", v, True) for v in VERSIONS] + [("v6-no-content", 6, False)]
    for seed, (folder, version, include_content) in enumerate(targets, start=1):
        out = OUT / folder
        out.mkdir(parents=True, exist_ok=True)
        for index, name in enumerate(SCENARIOS):
            lines, histories = asyncio.run(run_scenario(name, version, include_content, seed * 100 + index))
            (out / f"{name}.otlp.jsonl").write_text("".join(line + "\n" for line in lines))
            (out / f"{name}.messages.json").write_text(json.dumps(histories, indent=1, ensure_ascii=False) + "\n")
        if include_content:
            write_logfire(folder)


if __name__ == "__main__":
    main()
