"""HM204 (framework-facts §3.1 request part tags, bug case BC5)."""

from __future__ import annotations

from tests.rules.conftest import run


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
