"""The legacy history shape: anything releases 0.0.13 to 2.59 wrote, plus the current shape.

A legacy history is what histmig reads before migrating it. It is the 2.68 shape
(histmig.schema.current) loosened where old releases wrote differently (docs/framework.md §3.2,
§3.3):

- `retry-prompt` parts (0.0.13-2.59; load-only since 2.60), tool-bound or tool-less;
- a null `tool_call_id` on `tool-call`, `tool-return` and `retry-prompt` (0.0.13-0.0.44);
- `tool-call` arguments wrapped as `{"args_json": str}` / `{"args_dict": {...}}` (0.0.13-0.0.20);
- old usage and response keys: `request_tokens`, `response_tokens`, `requests`, `total_tokens`,
  `vendor_details`, `vendor_id`, `provider_request_id`;
- an `instruction` part inside a request's parts (hand-built and durable-execution histories);
- a null `timestamp` on a message or a timestamped part.

Pre-0.0.13 archives (messages keyed by `role`, docs/framework.md §3.4) are not covered.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Union

from pydantic import Field

from histmig.schema.current import (
    CapabilityLoadDeltaPart,
    CompactionPart,
    ErrorDetails,
    FilePart,
    InstructionBaselinePart,
    InstructionDeltaPart,
    ModelRequest,
    ModelResponse,
    ModelSettingsDeltaPart,
    NativeToolCallPart,
    NativeToolReturnPart,
    OpenModel,
    RequestUsage,
    RetryFeedbackPart,
    SpeechPart,
    StrOrList,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolAvailabilityDeltaPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)


class LegacyErrorDetails(ErrorDetails):
    """An error detail in a legacy `retry-prompt`: `input` may be missing (docs/framework.md §2, bug case BC3).

    2.68 requires `input`; a missing one is told apart from a null one by `model_fields_set`.
    """

    input: Any = None


class LegacyRetryPromptPart(OpenModel):
    """`part_kind: 'retry-prompt'` (0.0.13-2.59): the retry part old releases wrote (docs/framework.md §2, §3.1).

    `content` (a string or a list of error details) is required. `tool_name` set (even `''`) means
    tool-bound; null or absent means tool-less. `tool_call_id` was null in 0.0.13-0.0.44.
    """

    content: StrOrList[LegacyErrorDetails]
    tool_name: str | None = None
    tool_call_id: str | None = None
    timestamp: datetime | None = None
    part_kind: Literal["retry-prompt"] = "retry-prompt"


class LegacyInstructionPart(OpenModel):
    """`part_kind: 'instruction'` inside a request's parts: 2.68 dumps it but cannot load it (bug case BC5).

    Fields as 2.68's `InstructionPart` (docs/framework.md §3.1, `instruction-baseline`); `content` required.
    """

    content: str
    dynamic: bool = False
    on_change: Literal["rewrite", "append"] = "rewrite"
    name: str | None = None
    id: dict[str, Any] | None = None
    part_kind: Literal["instruction"] = "instruction"


class LegacySystemPromptPart(SystemPromptPart):
    """A `system-prompt` whose `timestamp` may be null."""

    timestamp: datetime | None = None


class LegacyUserPromptPart(UserPromptPart):
    """A `user-prompt` whose `timestamp` may be null."""

    timestamp: datetime | None = None


class LegacyToolReturnPart(ToolReturnPart):
    """A `tool-return` whose `tool_call_id` (0.0.13-0.0.44) or `timestamp` may be null (docs/framework.md §3.3)."""

    tool_call_id: str | None = None
    timestamp: datetime | None = None


class LegacyNativeToolReturnPart(NativeToolReturnPart):
    """A `builtin-tool-return` whose `timestamp` may be null."""

    timestamp: datetime | None = None


class ArgsJson(OpenModel):
    """The 0.0.13-0.0.20 `tool-call` arguments wrapper `{"args_json": "<JSON text>"}` (docs/framework.md §3.3)."""

    args_json: str


class ArgsDict(OpenModel):
    """The 0.0.13-0.0.20 `tool-call` arguments wrapper `{"args_dict": {...}}` (docs/framework.md §3.3)."""

    args_dict: dict[str, Any]


class LegacyToolCallPart(ToolCallPart):
    """A `tool-call` whose `tool_call_id` may be null and whose `args` may be wrapped (docs/framework.md §3.3).

    `args` tries the wrappers first, so a wrapped value validates as `ArgsJson` / `ArgsDict`.
    """

    args: ArgsJson | ArgsDict | str | dict[str, Any] | None = Field(None, union_mode="left_to_right")
    tool_call_id: str | None = None


class LegacyRequestUsage(RequestUsage):
    """Usage with the pre-0.7.3 `requests` and `total_tokens` counts declared (docs/framework.md §3.3)."""

    requests: int | None = None
    total_tokens: int | None = None


LegacyModelRequestPart = Annotated[
    Union[
        LegacySystemPromptPart,
        LegacyUserPromptPart,
        LegacyToolReturnPart,
        LegacyRetryPromptPart,
        LegacyInstructionPart,
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
"""A request part any release wrote, by `part_kind` (docs/framework.md §3.2)."""

LegacyModelResponsePart = Annotated[
    Union[
        TextPart,
        ThinkingPart,
        LegacyToolCallPart,
        NativeToolCallPart,
        LegacyNativeToolReturnPart,
        FilePart,
        CompactionPart,
        SpeechPart,
    ],
    Field(discriminator="part_kind"),
]
"""A response part any release wrote, by `part_kind` (docs/framework.md §3.2)."""


class LegacyModelRequest(ModelRequest):
    """`kind: 'request'` holding legacy request parts."""

    parts: list[LegacyModelRequestPart]


class LegacyModelResponse(ModelResponse):
    """`kind: 'response'` holding legacy response parts, legacy usage and a nullable `timestamp`.

    `provider_request_id` (0.7.3-0.8.0) is declared: 2.68 has no alias for it and drops it on
    load (docs/framework.md §3.3).
    """

    parts: list[LegacyModelResponsePart]
    usage: LegacyRequestUsage = Field(default_factory=LegacyRequestUsage)
    timestamp: datetime | None = None
    provider_request_id: str | None = None


LegacyModelMessage = Annotated[Union[LegacyModelRequest, LegacyModelResponse], Field(discriminator="kind")]
"""One message of a history any release 0.0.13-2.68 wrote, by `kind`."""
