"""The rewrite rules, registered in the order the pipeline runs them.

HM2xx repairs run first (HM201 gives every call an id the retry rules pair with), then
HM3xx, then the retry-prompt migration: HM103 before HM101/HM102 so that a re-bindable
unknown-tool retry is not turned into feedback first (design.md "Rules").
"""

from __future__ import annotations

from collections.abc import Sequence

from histmig.rules import load_failures, misreads, retry_prompt
from histmig.rules.base import REGISTRY, Change, Context, Messages, Rule
from histmig.rules.load_failures import has_null_timestamp, is_movable_instruction, lacks_error_input, needs_id
from histmig.rules.misreads import has_provider_request_id, is_args_wrapper
from histmig.rules.retry_prompt import is_tool_bound_retry, is_tool_less_retry

__all__ = ["REGISTRY", "Change", "Context", "Rule", "load_failures", "misreads", "pending", "retry_prompt", "rule_codes"]


def rule_codes() -> list[str]:
    """Every registered rule code, sorted (``HM101`` … ``HM302``)."""
    return sorted(rule.code for rule in REGISTRY)


def pending(messages: Messages, rules: Sequence[Rule] = REGISTRY) -> tuple[Rule, ...]:
    """The ``rules`` (in their order) that may change ``messages``, a history as plain JSON
    data, found in one walk of its messages and parts. Each rule's own test decides
    (``needs_id`` for HM201, ``has_null_timestamp`` for HM202, ``lacks_error_input`` for
    HM203, ``is_movable_instruction`` for HM204, ``is_args_wrapper`` for HM301,
    ``has_provider_request_id`` for HM302, ``is_tool_bound_retry`` / ``is_tool_less_retry``
    for HM101 / HM102 and HM103), asked only where a cheap look finds what it is about: a
    null ``timestamp`` or ``tool_call_id``, a ``provider_request_id``, or a part kind some
    rule rewrites. Entries that are not objects, and ``parts`` that are not lists, are
    passed over: no rule changes them (validation reports them).

    Sound for a whole run of the rules in registration order, not only for each rule alone,
    because no rule writes what a later rule's test looks for: the rules write ids,
    ``"input": null``, ``instructions``, ``provider_response_id``, bare ``args`` and
    ``tool-return`` / ``retry-feedback`` parts, and only HM203, which runs before HM101 to
    HM103, looks at ``retry-feedback`` parts (property test: the pending rules make the
    changes every rule would)."""
    codes: set[str] = set()
    for message in messages:
        if type(message) is not dict:
            continue
        if message.get("kind") == "response":
            if message.get("timestamp", 0) is None:
                codes.add("HM202")
            if "provider_request_id" in message and has_provider_request_id(message):
                codes.add("HM302")
        parts = message.get("parts")
        if type(parts) is not list:
            continue
        for part in parts:
            if type(part) is not dict:
                continue
            kind = part.get("part_kind")
            if (kind == "retry-prompt" or part.get("tool_call_id", 0) is None) and needs_id(part):
                codes.add("HM201")
            if part.get("timestamp", 0) is None and has_null_timestamp(message, part):
                codes.add("HM202")
            if kind == "tool-call":
                if type(part.get("args")) is dict and is_args_wrapper(message, part):
                    codes.add("HM301")
            elif kind == "retry-prompt" or kind == "retry-feedback":
                if lacks_error_input(message, part):
                    codes.add("HM203")
                if kind == "retry-prompt" and is_tool_bound_retry(message, part):
                    codes.add("HM101")
                elif kind == "retry-prompt" and is_tool_less_retry(message, part):
                    codes.update(("HM102", "HM103"))
            elif kind == "instruction" and message.get("kind") == "request" and is_movable_instruction(part):
                codes.add("HM204")
    return tuple([rule for rule in rules if rule.code in codes]) if codes else ()
