"""HM302 (docs/framework.md §3.3)."""

from __future__ import annotations

from histmig.rules.base import Change
from tests.rules.conftest import check_noop, check_transformed, run

TEXT = {"part_kind": "text", "content": "hello"}
RENAMED = Change("HM302", 0, None, "provider_request_id", "provider_response_id", "field-rename", "exact")


def test_hm302_renames_in_place() -> None:
    messages = [
        {
            "kind": "response",
            "parts": [],
            "provider_request_id": "req_1",
            "provider_response_id": None,
            "model_name": "m",
        },
        {"kind": "response", "parts": [], "provider_request_id": "req_2", "provider_response_id": "resp_2"},
    ]
    assert run(messages, "HM302") == [("HM302", 0, None, "field-rename")]
    assert list(messages[0].items()) == [
        ("kind", "response"),
        ("parts", []),
        ("provider_response_id", "req_1"),
        ("model_name", "m"),
    ]
    assert messages[1]["provider_request_id"] == "req_2"


def test_hm302_renames_the_field_where_it_stands() -> None:
    check_transformed(
        "HM302",
        [{"kind": "response", "parts": [TEXT], "provider_request_id": "req_81", "model_name": "gpt-4o"}],
        [{"kind": "response", "parts": [TEXT], "provider_response_id": "req_81", "model_name": "gpt-4o"}],
        [RENAMED],
    )


def test_hm302_a_null_provider_response_id_before_it_gives_way() -> None:
    check_transformed(
        "HM302",
        [{"kind": "response", "parts": [TEXT], "provider_response_id": None, "provider_request_id": "req_1"}],
        [{"kind": "response", "parts": [TEXT], "provider_response_id": "req_1"}],
        [RENAMED],
    )


def test_hm302_renames_a_null_provider_request_id_too() -> None:
    check_transformed(
        "HM302",
        [{"kind": "response", "parts": [TEXT], "provider_request_id": None}],
        [{"kind": "response", "parts": [TEXT], "provider_response_id": None}],
        [RENAMED],
    )


def test_hm302_leaves_a_response_with_both_ids_alone() -> None:
    check_noop(
        "HM302", [{"kind": "response", "parts": [TEXT], "provider_request_id": "r", "provider_response_id": "s"}]
    )


def test_hm302_leaves_a_current_response_alone() -> None:
    check_noop("HM302", [{"kind": "response", "parts": [TEXT], "provider_response_id": "resp_1"}])


def test_hm302_leaves_a_request_with_such_a_field_alone() -> None:
    prompt = {"part_kind": "user-prompt", "content": "x"}
    check_noop("HM302", [{"kind": "request", "parts": [prompt], "provider_request_id": "req_1"}])


def test_hm302_leaves_a_parts_field_of_that_name_alone() -> None:
    check_noop("HM302", [{"kind": "response", "parts": [TEXT | {"provider_request_id": "req_1"}]}])
