"""The message history shape pydantic-ai 2.68.0 loads and writes (docs/framework.md §3.1).

These models validate the plain JSON data of a stored history; they are not used to rewrite it
(design.md: the hot path works on dicts). They reject what makes 2.68's `ModelMessagesTypeAdapter`
refuse a history (docs/framework.md §2, "Load failures a migrator must pre-empt"): a null
`tool_call_id` on a tool call or return, a null part `timestamp`, error details missing one of
`type`/`loc`/`msg`/`input`, an unknown `part_kind` (`'instruction'`, or the legacy `'retry-prompt'`,
which 2.68 still loads but translates, so a current history never holds one), a retry cause outside
its part's set, or a missing required field. They accept everything 2.68 writes.

Every model carries unknown fields (`extra='allow'`), so validating never drops data.

Deliberately looser than 2.68, because histmig never writes these and 2.68 wrote them itself: the
items of a user prompt's list content, tool-return content, instruction ids and baselines, recorded
model settings, citations, speech timestamps, and the typed `tool-search` / `capability-load` tool
parts (§3.1), which are checked as the plain part they extend.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Annotated, Any, Literal, TypeVar, Union

from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    model_validator,
)

_T = TypeVar("_T")

ToolRetryCause = Literal["validation_error", "model_retry", "unknown_tool", "unavailable_tool"]
"""Why a tool call was retried: the causes a `tool-return`'s `retry` may hold (docs/framework.md §2)."""
FeedbackRetryCause = Literal["validation_error", "no_output", "model_retry"]
"""Why the model's output was retried: the causes a `retry-feedback`'s `retry` may hold (docs/framework.md §2)."""


def _omittable() -> Any:
    """Default of a field 2.68 fills in when absent but rejects when null (docs/framework.md §2).

    The field's type stays non-nullable, so an explicit `null` fails; `None` on a model means absent.
    """
    return Field(default=None)


def _str_or_list_tag(value: Any) -> str | None:
    return "str" if isinstance(value, str) else "list" if isinstance(value, list) else None


StrOrList = Annotated[
    Union[Annotated[str, Tag("str")], Annotated[list[_T], Tag("list")]],
    Discriminator(
        _str_or_list_tag,
        custom_error_type="str_or_list",
        custom_error_message="Input should be a valid string or list",
    ),
]
"""`str | list[_T]`, picked by the input's type so an error names one branch rather than both."""


class OpenModel(BaseModel):
    """Base of every schema model: unknown fields are carried (`extra='allow'`), never dropped."""

    model_config = ConfigDict(extra="allow")


class ErrorDetails(OpenModel):
    """One pydantic validation error as stored in retry content (pydantic_core's `ErrorDetails`).

    `type`, `loc`, `msg` and `input` are required; `input` may be null but must be present, else
    2.68 fails to load the part (docs/framework.md §2, bug case BC3). `ctx` and `url` may be absent, not null.
    """

    type: str
    loc: list[str | int]
    msg: str
    input: Any
    ctx: dict[str, Any] = _omittable()
    url: str = _omittable()


class RetryInfo(OpenModel):
    """Why a retry happened and how far into its budget it is (2.60+, docs/framework.md §3.1).

    `attempt` and `max_retries` are independent: 2.68 does no cross-field check (docs/framework.md §2).
    Use `ToolRetryInfo` or `FeedbackRetryInfo`, which narrow `cause` to their part's set.
    """

    cause: str
    attempt: int | None = None
    max_retries: int | None = None


class ToolRetryInfo(RetryInfo):
    """`retry` of a `tool-return`: `cause` a `ToolRetryCause`, else 2.68 fails (docs/framework.md §2)."""

    cause: ToolRetryCause


class FeedbackRetryInfo(RetryInfo):
    """`retry` of a `retry-feedback`: `cause` a `FeedbackRetryCause`, else 2.68 fails (docs/framework.md §2)."""

    cause: FeedbackRetryCause


class BinaryContent(OpenModel):
    """Inline bytes (`kind: 'binary'`): `data` (base64 text) and `media_type` required (docs/framework.md §3.1)."""

    data: str
    media_type: str
    kind: Literal["binary"] = "binary"


class RequestUsage(OpenModel):
    """Token usage of one response (docs/framework.md §3.1, §3.3).

    Reads the pre-0.7.3 names `request_tokens` / `response_tokens` as `input_tokens` /
    `output_tokens`, and a null legacy count as 0; a null `details` as `{}`. Other keys (legacy
    `requests`, `total_tokens`, or anything else) are carried unvalidated, as 2.68 accepts them.
    A null `input_tokens` / `output_tokens` fails, as in 2.68.
    """

    input_tokens: int = Field(0, validation_alias=AliasChoices("input_tokens", "request_tokens"))
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    cache_read_tokens: int = 0
    output_tokens: int = Field(0, validation_alias=AliasChoices("output_tokens", "response_tokens"))
    unmeasured_requests: int = 0
    output_reasoning_tokens: int = 0
    input_audio_tokens: int = 0
    cache_audio_read_tokens: int = 0
    output_audio_tokens: int = 0
    audio_seconds: float = 0
    details: Annotated[dict[str, int] | None, BeforeValidator(lambda d: d or {})] = Field(default_factory=dict)
    cost: Decimal | None = None

    @model_validator(mode="before")
    @classmethod
    def _null_legacy_counts(cls, data: Any) -> Any:
        """2.68 reads a null `request_tokens` / `response_tokens` as 0 when the new name is absent."""
        if not isinstance(data, dict):
            return data
        return data | {
            legacy: 0
            for name, legacy in (("input_tokens", "request_tokens"), ("output_tokens", "response_tokens"))
            if name not in data and legacy in data and data[legacy] is None
        }


# --- request parts -----------------------------------------------------------------------------


class SystemPromptPart(OpenModel):
    """`part_kind: 'system-prompt'`: `content` required; `timestamp` absent or a datetime (docs/framework.md §3.1)."""

    content: str
    timestamp: datetime = _omittable()
    dynamic_ref: str | None = None
    context_id: str | None = None
    scope: Literal["conversation", "request"] = "conversation"
    metadata: dict[str, Any] | None = None
    part_kind: Literal["system-prompt"] = "system-prompt"


class UserPromptPart(OpenModel):
    """`part_kind: 'user-prompt'`: `content` a string or a list of (unchecked) items (docs/framework.md §3.1)."""

    content: StrOrList[Any]
    timestamp: datetime = _omittable()
    part_kind: Literal["user-prompt"] = "user-prompt"


class _ToolReturnFields(OpenModel):
    """Fields `tool-return` and `builtin-tool-return` share (docs/framework.md §3.1).

    `tool_call_id` may be absent (2.68 generates one) but not null (docs/framework.md §2, §3.3).
    `content_file_digests` is written by 2.68's serializer and ignored on load, so any value loads.
    """

    tool_name: str
    content: Any
    tool_call_id: str = _omittable()
    tool_kind: str | None = None
    metadata: Any = None
    timestamp: datetime = _omittable()
    outcome: Literal["success", "failed", "denied", "interrupted", "retried"] = "success"
    content_file_digests: Any = None


class ToolReturnPart(_ToolReturnFields):
    """`part_kind: 'tool-return'`; a retried call has `outcome: 'retried'` and `retry` (docs/framework.md §2, §3.1).

    `retry.cause` must be a `ToolRetryCause`; `retry` on any outcome loads (no cross-field check).
    """

    retry: ToolRetryInfo | None = None
    part_kind: Literal["tool-return"] = "tool-return"


class RetryFeedbackPart(OpenModel):
    """`part_kind: 'retry-feedback'` (2.60+): a tool-less retry of the model's output (docs/framework.md §2, §3.1).

    `content` (a string or full `ErrorDetails` list) and `retry` are required; `retry.cause` must be
    a `FeedbackRetryCause`. There are no tool fields.
    """

    content: StrOrList[ErrorDetails]
    retry: FeedbackRetryInfo
    timestamp: datetime = _omittable()
    part_kind: Literal["retry-feedback"] = "retry-feedback"


class ToolAvailabilityDeltaPart(OpenModel):
    """`part_kind: 'tool-availability-delta'` (2.23+); `tools_added` also read as `added` (docs/framework.md §3.3)."""

    tools_added: list[str] = Field(default_factory=list, validation_alias=AliasChoices("tools_added", "added"))
    tool_call_id: str | None = None
    part_kind: Literal["tool-availability-delta"] = "tool-availability-delta"


class CapabilityLoadDeltaPart(OpenModel):
    """`part_kind: 'capability-load-delta'` (2.64+) (docs/framework.md §3.1)."""

    loaded: list[str] = Field(default_factory=list)
    tool_call_id: str | None = None
    part_kind: Literal["capability-load-delta"] = "capability-load-delta"


class ModelSettingsDeltaPart(OpenModel):
    """`part_kind: 'model-settings-delta'` (2.62+): `settings` required (docs/framework.md §3.1)."""

    settings: dict[str, Any]
    top_level: bool = False
    part_kind: Literal["model-settings-delta"] = "model-settings-delta"


class InstructionDeltaPart(OpenModel):
    """`part_kind: 'instruction-delta'` (2.59+): `id` (any shape 2.68 accepts) and `content`
    (nullable) required (docs/framework.md §3.1)."""

    id: Any
    content: str | None
    base_hash: str | None = None
    part_kind: Literal["instruction-delta"] = "instruction-delta"


class InstructionBaselinePart(OpenModel):
    """`part_kind: 'instruction-baseline'` (2.59+): `instructions` required (docs/framework.md §3.1)."""

    instructions: list[dict[str, Any]]
    part_kind: Literal["instruction-baseline"] = "instruction-baseline"


class CompactionPart(OpenModel):
    """`part_kind: 'compaction'`, in requests (2.62+) and responses (1.80+) (docs/framework.md §3.1)."""

    content: str | None = None
    id: str | None = None
    provider_name: str | None = None
    provider_details: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    part_kind: Literal["compaction"] = "compaction"


class SpeechPart(OpenModel):
    """`part_kind: 'speech'` (2.28+), in requests and responses: `speaker` required (docs/framework.md §3.1)."""

    speaker: Literal["user", "assistant"]
    transcript: str | None = None
    audio: BinaryContent | None = None
    interrupted_at_ms: int | None = None
    timestamps: list[dict[str, Any]] | None = None
    id: str | None = None
    provider_name: str | None = None
    provider_details: dict[str, Any] | None = None
    part_kind: Literal["speech"] = "speech"


# --- response parts ----------------------------------------------------------------------------


class TextPart(OpenModel):
    """`part_kind: 'text'`: `content` required (docs/framework.md §3.1)."""

    content: str
    id: str | None = None
    provider_name: str | None = None
    provider_details: dict[str, Any] | None = None
    citations: list[dict[str, Any]] | None = None
    part_kind: Literal["text"] = "text"


class ThinkingPart(OpenModel):
    """`part_kind: 'thinking'` (0.3.0+): `content` required (docs/framework.md §3.1)."""

    content: str
    id: str | None = None
    signature: str | None = None
    provider_name: str | None = None
    provider_details: dict[str, Any] | None = None
    part_kind: Literal["thinking"] = "thinking"


class _ToolCallFields(OpenModel):
    """Fields `tool-call` and `builtin-tool-call` share (docs/framework.md §3.1).

    `args` is a JSON string, an object or null; a legacy `{"args_json": ...}` wrapper is an object
    too and loads, misread as a literal argument (docs/framework.md §3.3). `tool_call_id` may be
    absent (2.68 generates one) but not null (docs/framework.md §2).
    """

    tool_name: str
    args: str | dict[str, Any] | None = None
    tool_call_id: str = _omittable()
    tool_kind: str | None = None
    id: str | None = None
    provider_name: str | None = None
    provider_details: dict[str, Any] | None = None


class ToolCallPart(_ToolCallFields):
    """`part_kind: 'tool-call'` (docs/framework.md §3.1)."""

    part_kind: Literal["tool-call"] = "tool-call"


class NativeToolCallPart(_ToolCallFields):
    """`part_kind: 'builtin-tool-call'` (0.6.2+) (docs/framework.md §3.1).

    2.68 renamed the class `NativeToolCallPart`; the wire value stayed `builtin-…`.
    """

    part_kind: Literal["builtin-tool-call"] = "builtin-tool-call"


class NativeToolReturnPart(_ToolReturnFields):
    """`part_kind: 'builtin-tool-return'` (0.6.2+): a tool return without `retry` (docs/framework.md §3.1)."""

    provider_name: str | None = None
    provider_details: dict[str, Any] | None = None
    part_kind: Literal["builtin-tool-return"] = "builtin-tool-return"


class FilePart(OpenModel):
    """`part_kind: 'file'` (1.0.15+): `content` (inline bytes) required (docs/framework.md §3.1)."""

    content: BinaryContent
    id: str | None = None
    provider_name: str | None = None
    provider_details: dict[str, Any] | None = None
    part_kind: Literal["file"] = "file"


# --- messages ----------------------------------------------------------------------------------

ModelRequestPart = Annotated[
    Union[
        SystemPromptPart,
        UserPromptPart,
        ToolReturnPart,
        RetryFeedbackPart,
        ToolAvailabilityDeltaPart,
        CapabilityLoadDeltaPart,
        ModelSettingsDeltaPart,
        InstructionDeltaPart,
        InstructionBaselinePart,
        CompactionPart,
        SpeechPart,
    ],
    Field(discriminator="part_kind"),
]
"""A request part, by `part_kind` (docs/framework.md §3.1, §3.2)."""

ModelResponsePart = Annotated[
    Union[
        TextPart,
        ThinkingPart,
        ToolCallPart,
        NativeToolCallPart,
        NativeToolReturnPart,
        FilePart,
        CompactionPart,
        SpeechPart,
    ],
    Field(discriminator="part_kind"),
]
"""A response part, by `part_kind` (docs/framework.md §3.1, §3.2)."""


class ModelRequest(OpenModel):
    """`kind: 'request'`: `parts` required; `timestamp` may be null (2.68 leaves it so) (docs/framework.md §3.1)."""

    parts: list[ModelRequestPart]
    timestamp: datetime | None = None
    instructions: str | None = None
    run_id: str | None = None
    conversation_id: str | None = None
    metadata: dict[str, Any] | None = None
    state: Literal["complete", "interrupted"] = "complete"
    kind: Literal["request"] = "request"


class WorkspaceRef(OpenModel):
    """`ModelResponse.workspace_ref` (2.52+): `provider` and `id` required (docs/framework.md §3.1)."""

    provider: str
    id: str


class ModelRequestAttempt(OpenModel):
    """An entry of `ModelResponse.failed_attempts` (2.55+) (docs/framework.md §3.1)."""

    model_name: str
    provider_name: str | None = None
    outcome: Literal["error", "rejected"]
    error: str | None = None
    timestamp: datetime
    duration: timedelta
    usage: RequestUsage | None = None


class ModelResponse(OpenModel):
    """`kind: 'response'`: `parts` required; `timestamp` may be absent, not null (docs/framework.md §3.1, §3.3).

    `provider_details` is also read as `vendor_details` and `provider_response_id` as `vendor_id`;
    a 0.7.3–0.8.0 `provider_request_id` has no alias and is only carried along (docs/framework.md §3.3).
    """

    parts: list[ModelResponsePart]
    usage: RequestUsage = Field(default_factory=RequestUsage)
    model_name: str | None = None
    model_id: str | None = None
    timestamp: datetime = _omittable()
    provider_name: str | None = None
    provider_url: str | None = None
    canonical_system: str | None = None
    provider_details: dict[str, Any] | None = Field(
        None, validation_alias=AliasChoices("provider_details", "vendor_details")
    )
    provider_response_id: str | None = Field(None, validation_alias=AliasChoices("provider_response_id", "vendor_id"))
    finish_reason: Literal["stop", "length", "content_filter", "tool_call", "error"] | None = None
    run_id: str | None = None
    conversation_id: str | None = None
    metadata: dict[str, Any] | None = None
    workspace_ref: WorkspaceRef | None = None
    history_digest: str | None = None
    failed_attempts: list[ModelRequestAttempt] | None = None
    state: Literal["complete", "incomplete", "suspended", "interrupted"] = "complete"
    kind: Literal["response"] = "response"


ModelMessage = Annotated[Union[ModelRequest, ModelResponse], Field(discriminator="kind")]
"""One message of a 2.68 history, by `kind` (docs/framework.md §3.1)."""
