"""Problem: an error or warning line with its path and message apart."""

from __future__ import annotations

import pickle

from histmig.problems import InvalidJson, Problem, parts_of


def test_a_problem_is_its_line_and_keeps_path_and_message_apart() -> None:
    problem = Problem("messages[2].parts[0].tool_call_id", "Field required")
    assert (problem, problem.path, problem.message) == (
        "messages[2].parts[0].tool_call_id: Field required",
        "messages[2].parts[0].tool_call_id",
        "Field required",
    )
    assert Problem(None, "invalid JSON") == "invalid JSON"
    again = pickle.loads(pickle.dumps(problem))  # workers send them to the parent
    assert (type(again), again.path, again.message) == (Problem, problem.path, problem.message)


def test_under_moves_a_messages_path_under_the_envelope_field() -> None:
    problem = Problem("messages[0].parts", "not a list")
    assert problem.under("payload.msgs") == "payload.msgs[0].parts: not a list"
    assert problem.under("payload.msgs").path == "payload.msgs[0].parts"
    assert problem.under("messages") is problem
    assert Problem(None, "x").under("payload") == "x"


def test_parts_of_a_line() -> None:
    assert parts_of(Problem("messages[1]", "bad")) == ("messages[1]", "bad")
    assert parts_of("no release 0.0.13-2.68 wrote this shape") == (None, "no release 0.0.13-2.68 wrote this shape")


def test_invalid_json_is_its_own_type_and_tells_jsonl_given_as_one_document() -> None:
    several = InvalidJson.of(b'{"a": 1}\n{"b": 2}\n', "unexpected content after document: line 2 column 1 (char 9)")
    assert (str(several), several.path, several.more) == (
        "invalid JSON: unexpected content after document: line 2 column 1 (char 9)",
        None,
        True,
    )
    assert [
        InvalidJson.of(raw, "x").more for raw in (b"{oops\n{}", b'{"a": 1}\n\n{}', b'{"a": 1}', b'{"a": "\xff"}\n{}')
    ] == [
        False,
        False,
        False,
        False,
    ]
    again = pickle.loads(pickle.dumps(several))
    assert type(again) is InvalidJson and (again, again.more) == (several, True)
    assert parts_of(several) == (None, str(several))
