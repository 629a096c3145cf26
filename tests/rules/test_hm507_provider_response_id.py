"""HM507 (docs/framework.md §3.3)."""

from __future__ import annotations

from histmig.options import Options
from histmig.rules.base import Change
from tests.rules.conftest import check_noop, check_transformed, migrate

TEXT = {"part_kind": "text", "content": "hello"}
RENAMED = Change("HM507", 0, None, "provider_response_id", "provider_request_id", "field-rename", "exact")


def test_hm507_renames_the_id_in_place_for_0_7_3_to_0_8_0_and_hm302_renames_it_back() -> None:
    messages = [
        {"kind": "response", "parts": [], "provider_response_id": "r1", "finish_reason": None},
        {"kind": "response", "parts": [], "provider_response_id": None},
    ]
    changes = migrate(messages, Options(target="0.8.0"))
    assert [list(message) for message in messages] == [
        ["kind", "parts", "provider_request_id", "finish_reason"],
        ["kind", "parts", "provider_response_id"],
    ]
    assert [(c.rule, c.message, c.before, c.after) for c in changes] == [
        ("HM507", 0, "provider_response_id", "provider_request_id")
    ]
    assert migrate(messages, Options(target="0.8.1")) and messages[0]["provider_response_id"] == "r1"
    assert migrate(messages, Options(target="0.7.2")) == []


def test_hm507_renames_the_id_where_it_stands() -> None:
    check_transformed(
        "HM507",
        [{"kind": "response", "parts": [TEXT], "provider_response_id": "req_81", "model_name": "gpt-4o"}],
        [{"kind": "response", "parts": [TEXT], "provider_request_id": "req_81", "model_name": "gpt-4o"}],
        [RENAMED],
        target="0.8.0",
    )


def test_hm507_renames_it_for_the_first_release_that_stored_it() -> None:
    check_transformed(
        "HM507",
        [{"kind": "response", "parts": [TEXT], "provider_response_id": "req_1"}],
        [{"kind": "response", "parts": [TEXT], "provider_request_id": "req_1"}],
        [RENAMED],
        target="0.7.3",
    )


def test_hm507_leaves_a_null_id_alone() -> None:
    check_noop("HM507", [{"kind": "response", "parts": [TEXT], "provider_response_id": None}], target="0.8.0")


def test_hm507_leaves_a_response_without_the_field_alone() -> None:
    check_noop("HM507", [{"kind": "response", "parts": [TEXT]}], target="0.8.0")


def test_hm507_leaves_a_provider_request_id_alone() -> None:
    check_noop("HM507", [{"kind": "response", "parts": [TEXT], "provider_request_id": "req_1"}], target="0.8.0")


def test_hm507_leaves_a_requests_field_of_that_name_alone() -> None:
    prompt = {"part_kind": "user-prompt", "content": "x"}
    check_noop("HM507", [{"kind": "request", "parts": [prompt], "provider_response_id": "r"}], target="0.8.0")


def test_hm507_renames_every_response_s_id() -> None:
    check_transformed(
        "HM507",
        [
            {"kind": "response", "parts": [TEXT], "provider_response_id": "req_1"},
            {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "and?"}]},
            {"kind": "response", "parts": [TEXT], "provider_response_id": "req_2"},
        ],
        [
            {"kind": "response", "parts": [TEXT], "provider_request_id": "req_1"},
            {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "and?"}]},
            {"kind": "response", "parts": [TEXT], "provider_request_id": "req_2"},
        ],
        [RENAMED, RENAMED._replace(message=2)],
        target="0.8.0",
    )
