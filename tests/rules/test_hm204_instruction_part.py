"""HM204 (docs/framework.md §3.1 request part tags, bug case BC5)."""

from __future__ import annotations

from histmig.rules.base import Change
from tests.rules.conftest import check_noop, check_transformed, run

PROMPT = {"part_kind": "user-prompt", "content": "hi"}


def _moved(part: int) -> Change:
    return Change("HM204", 0, part, "instruction", "instructions", "instruction-part", "exact")


def test_hm204_joins_existing_instructions_and_keeps_unmovable_parts() -> None:
    messages = [
        {
            "kind": "request",
            "instructions": "Be kind.",
            "parts": [
                {"part_kind": "instruction", "content": "Be concise."},
                {"part_kind": "instruction", "content": "Dynamic.", "dynamic": True},
                {"part_kind": "instruction", "content": "Cite.", "name": None},
            ],
        }
    ]
    assert run(messages, "HM204") == [("HM204", 0, 0, "instruction-part"), ("HM204", 0, 2, "instruction-part")]
    assert messages[0]["instructions"] == "Be kind.\n\nBe concise.\n\nCite."
    assert messages[0]["parts"] == [{"part_kind": "instruction", "content": "Dynamic.", "dynamic": True}]


def test_hm204_moves_the_part_as_the_framework_dumps_it() -> None:
    dumped = {
        "content": "Be concise.",
        "dynamic": False,
        "on_change": "rewrite",
        "name": None,
        "id": None,
        "part_kind": "instruction",
    }
    messages = [
        {"parts": [{"content": "hi", "part_kind": "user-prompt"}, dumped], "instructions": None, "kind": "request"}
    ]
    assert run(messages, "HM204") == [("HM204", 0, 1, "instruction-part")]
    assert messages == [
        {"parts": [{"content": "hi", "part_kind": "user-prompt"}], "instructions": "Be concise.", "kind": "request"}
    ]


def test_hm204_adds_instructions_after_the_requests_other_fields() -> None:
    check_transformed(
        "HM204",
        [{"kind": "request", "parts": [{"part_kind": "instruction", "content": "Be concise."}, PROMPT]}],
        [{"kind": "request", "parts": [PROMPT], "instructions": "Be concise."}],
        [_moved(0)],
    )


def test_hm204_joins_two_parts_with_a_blank_line_in_order() -> None:
    first, second = (
        {"part_kind": "instruction", "content": "Be concise."},
        {"part_kind": "instruction", "content": "Answer in French."},
    )
    check_transformed(
        "HM204",
        [{"kind": "request", "parts": [first, PROMPT, second]}],
        [{"kind": "request", "parts": [PROMPT], "instructions": "Be concise.\n\nAnswer in French."}],
        [_moved(0), _moved(2)],
    )


def test_hm204_replaces_empty_instructions_without_a_leading_blank_line() -> None:
    check_transformed(
        "HM204",
        [{"kind": "request", "instructions": "", "parts": [PROMPT, {"part_kind": "instruction", "content": "Cite."}]}],
        [{"kind": "request", "instructions": "Cite.", "parts": [PROMPT]}],
        [_moved(1)],
    )


def test_hm204_leaves_a_dynamic_instruction_for_validation_to_report() -> None:
    check_noop(
        "HM204", [{"kind": "request", "parts": [PROMPT, {"part_kind": "instruction", "content": "x", "dynamic": True}]}]
    )


def test_hm204_leaves_a_named_instruction_alone() -> None:
    check_noop(
        "HM204", [{"kind": "request", "parts": [{"part_kind": "instruction", "content": "x", "name": "policy"}]}]
    )


def test_hm204_leaves_an_instruction_part_of_a_response_alone() -> None:
    check_noop("HM204", [{"kind": "response", "parts": [{"part_kind": "instruction", "content": "x"}]}])


def test_hm204_leaves_a_request_with_instructions_and_no_such_part_alone() -> None:
    check_noop("HM204", [{"kind": "request", "instructions": "Be concise.", "parts": [PROMPT]}])
