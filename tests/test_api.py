"""The Python API (histmig.api): one function per command, each returning the result the
verdict line and the exit code are made from; usage errors raised before any record is read;
the run driver hands workers tasks without the bytes they read themselves."""

from __future__ import annotations

import copy
import re
import pickle
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from histmig import api, parallel
from histmig.errors import MigrationError, NotAHistory, UnreadableInput, UnwritableOutput, UsageError
from histmig.options import Options
from histmig.run import local
from histmig.schema.releases import PART_KINDS
from tests.acceptance.test_gate import RECORD, _record
from tests.conftest import CORPUS, FIXTURES

ALL = CORPUS / "all.jsonl"
LEGACY = next(line for line in ALL.read_bytes().splitlines() if b"retry-prompt" in line)


def test_convert_audit_and_check_report_the_same_counts(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    converted, audited, checked = api.convert(str(ALL), str(out)), api.audit(str(ALL)), api.check(str(ALL))
    assert [r.report.summary() == converted.report.summary() for r in (audited, checked)] == [True, True]
    assert (converted.exit_code, audited.exit_code, checked.exit_code) == (0, 0, 1)
    assert (
        converted.verdict == f"histmig convert: 138 of 212 records migrated, 74 unchanged, 0 rejected; written to {out}"
    )
    assert (
        audited.verdict
        == "histmig audit: 138 of 212 records would be migrated, 74 need nothing, 0 would be rejected; nothing was written"
    )
    assert checked.verdict == (
        "histmig check: 138 of 212 records to migrate, 0 invalid, 0 rejected, 0 with findings only, 74 current and valid; 6 warnings"
    )
    clean = api.check(str(out))
    assert (clean.exit_code, clean.verdict) == (
        0,
        "histmig check: all 212 records are current and valid; 6 warnings (see the report)",
    )
    assert clean.report.summary()["findings_by_rule"] == {"HM407": 6}


def test_a_verdict_counts_one_warning_in_the_singular(tmp_path: Path) -> None:
    waiting = tmp_path / "waiting.jsonl"  # a last response's call, awaiting its result: HM407, a warning
    waiting.write_bytes(
        b'[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi","timestamp":"2025-01-01T00:00:00Z"}]},'
        b'{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"t","args":{},"tool_call_id":"c1"}],"timestamp":"2025-01-01T00:00:01Z"}]\n'
    )
    checked = api.check(str(waiting))
    assert (checked.exit_code, checked.verdict) == (
        0,
        "histmig check: the one record is current and valid; 1 warning (see the report)",
    )


def test_a_rejected_record_fails_convert_and_says_where_it_went(tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(LEGACY + b"\n{oops\n")
    result = api.convert(str(source), str(out))
    assert result.exit_code == 1
    assert result.verdict.endswith(f"1 rejected; written to {out}, rejected records to {out}.rejects.jsonl")
    assert result.rejected == [
        (f"{source}:line 2", "invalid JSON: unexpected character, expected a string key at character 2 of the record")
    ]
    assert (tmp_path / "out.jsonl.rejects.jsonl").read_bytes() == b"{oops\n"
    again = api.convert(str(source), str(out))
    assert again.notes == [
        f"{out}.rejects.jsonl already held rejected records of an earlier run; this run's rejected records were added after them"
    ]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda tmp: api.convert(str(ALL)), UsageError, "give OUTPUT, or --in-place"),
        (
            lambda tmp: api.convert(str(ALL), str(tmp / "o.jsonl"), in_place=True),
            UsageError,
            "give OUTPUT, or --in-place",
        ),
        (lambda tmp: api.convert("-", in_place=True), UsageError, "give OUTPUT, or --in-place"),
        (lambda tmp: api.convert(str(ALL), str(ALL)), UsageError, "is the input; use --in-place"),
        (lambda tmp: api.convert(str(ALL), str(tmp / "o.parquet")), UsageError, "choose an output name that says so"),
        (
            lambda tmp: api.convert(str(ALL), str(ALL / "o.jsonl")),
            UnwritableOutput,
            "is a file, not a directory",
        ),
        (
            lambda tmp: api.convert(str(ALL), "-", rejects="-"),
            UsageError,
            "OUTPUT and --rejects cannot both go to stdout",
        ),
        (lambda tmp: api.audit(str(tmp / "chats.txt")), UnreadableInput, "chats.txt: no such file or directory"),
        (lambda tmp: api.audit(str(ALL), Options(select=("HM9",))), UsageError, "unknown rule code 'HM9'"),
        (
            lambda tmp: api.audit(str(ALL), Options(table="t")),
            UsageError,
            "--table does not apply to a JSONL input \\(only to a DuckDB, PostgreSQL or SQLite one\\)",
        ),
        (
            lambda tmp: api.audit(str(ALL), Options(messages_column="m", id_column="i")),
            UsageError,
            "--messages-column and --id-column do not apply to a JSONL input \\(only to a DuckDB, Parquet, PostgreSQL or SQLite one\\)",
        ),
        (
            lambda tmp: api.convert(str(ALL), to_table="t", overwrite=True),
            UsageError,
            "--to-table and --overwrite do not apply to a JSONL input",
        ),
        (
            lambda tmp: api.convert(str(ALL), str(tmp / "o.jsonl"), overwrite=True),
            UsageError,
            "--overwrite replaces the table --to-table names",
        ),
        (
            lambda tmp: api.convert([str(ALL), str(ALL)], str(tmp / "o.jsonl")),
            UsageError,
            "this name is a JSONL file's",
        ),
        (
            lambda tmp: api.convert([str(ALL), str(ALL)], str(tmp / "out")),
            UsageError,
            "all.jsonl is given twice",
        ),
        (lambda tmp: api.otel(str(ALL), str(tmp / "o.jsonl"), version=4), UsageError, "--version must be one of 5, 6"),
    ],
)
def test_usage_errors_are_raised_before_anything_is_written(tmp_path: Path, call, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_rules_and_migrate() -> None:
    assert [rule.code for rule in api.rules("hm1")] == ["HM101", "HM102", "HM103", "HM104"]
    with pytest.raises(UsageError, match="unknown rule code 'HM7'"):
        api.rules("HM7")
    history = orjson.loads(LEGACY)["messages"]
    with pytest.raises(MigrationError) as raised:  # HM1 alone leaves the 0.0.20 history's null ids, which 2.68 refuses
        api.migrate(history, Options(select=("HM1",)))
    assert raised.value.errors[0] == "messages[1].parts[0].tool_call_id: Input should be a valid string"
    assert history == orjson.loads(LEGACY)["messages"]  # left as it was
    assert {change.rule for change in api.migrate(history)} == {"HM101", "HM201", "HM301"}
    assert api.migrate(history) == []


CRASHED = [
    {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "weather in Oslo and Rome?"}]},
    {
        "kind": "response",
        "parts": [
            {"part_kind": "tool-call", "tool_name": "weather", "args": {"city": "Oslo"}, "tool_call_id": "c1"},
            {"part_kind": "tool-call", "tool_name": "weather", "args": '{"city": "Ro', "tool_call_id": "c2"},
        ],
    },
    {
        "kind": "request",
        "parts": [{"part_kind": "tool-return", "tool_name": "weather", "content": "12 C", "tool_call_id": "c9"}],
    },
    {"kind": "response", "parts": [{"part_kind": "tool-call", "tool_name": "clock", "args": {}, "tool_call_id": "c3"}]},
]
"""A run that crashed mid-tool, then stopped waiting for a call: a cut call, two dangling calls,
an orphaned result (two open calls of its tool: not re-paired), a call of the last response."""


def test_validate_gives_the_findings_of_one_history_and_leaves_it_as_it_is() -> None:
    history = orjson.loads(orjson.dumps(CRASHED))
    found = api.validate(history)
    assert history == CRASHED
    assert [(f.code, f.message, f.part, f.severity) for f in found] == [
        ("HM406", 1, 0, "error"),
        ("HM405", 1, 1, "error"),
        ("HM406", 1, 1, "error"),
        ("HM401", 2, 0, "error"),
        ("HM407", 3, 0, "warning"),
    ]
    assert found[3].text == "tool-return 'weather' (c9) answers no call"
    assert api.validate(CRASHED, Options(select=("HM407",))) == [found[4]]
    assert api.validate(orjson.loads(LEGACY)["messages"])[0].code == "HM201"  # a legacy history: what convert would fix
    assert api.validate([]) == []


def test_validate_refuses_what_the_framework_does_not_load() -> None:
    with pytest.raises(MigrationError) as raised:
        api.validate([{"kind": "nope", "parts": []}])
    assert raised.value.errors[0].startswith("messages[0]: Input tag 'nope' found using 'kind'")


def test_workers_are_sent_where_a_file_chunk_lies_not_its_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes: list[int] = []
    real = parallel._send

    def measured(conn, obj) -> None:
        if isinstance(obj, tuple):
            sizes.append(len(pickle.dumps(obj)))
        real(conn, obj)

    monkeypatch.setattr(parallel, "_send", measured)
    result = api.convert(str(ALL), str(tmp_path / "out.jsonl"), Options(jobs=2))
    assert result.report.counts["changed"] == 138 and sizes
    assert max(sizes) < 512 < ALL.stat().st_size


def test_a_progress_is_told_the_total_and_every_byte(tmp_path: Path) -> None:
    seen: list[tuple[str, int | None]] = []

    class Recorder:
        def start(self, total: int | None) -> None:
            seen.append(("start", total))

        def advance(self, done: int) -> None:
            seen.append(("advance", done))

    api.audit(str(ALL), Options(jobs=1), progress=Recorder())
    assert seen[0] == ("start", ALL.stat().st_size)
    assert sum(n for what, n in seen[1:] if what == "advance") == ALL.stat().st_size


FUTURE = b'{"id":"n1","messages":[{"kind":"request","parts":[{"part_kind":"hologram","content":"x"},{"part_kind":"hologram","content":"y"}]}]}'
CURRENT = b'{"id":"n2","messages":[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"x"}]}]}'


def test_check_says_when_records_hold_parts_it_cannot_load_and_strict_fails_on_them(tmp_path: Path) -> None:
    source = tmp_path / "future.jsonl"
    source.write_bytes(FUTURE + b"\n" + CURRENT + b"\n")
    lenient, strict = api.check(str(source)), api.check(str(source), strict=True)
    said = "histmig check: 2 records need no rule, but 1 record holds 2 parts of a part_kind pydantic-ai 2.68 does not know and cannot load, carried unchanged"
    assert (lenient.exit_code, lenient.verdict) == (0, said + " (--strict would fail on them)")
    assert (strict.exit_code, strict.verdict) == (1, said + " (--strict fails on them)")
    assert lenient.report.counts["warnings"] == 2 and [row["id"] for row in lenient.report.warnings] == ["n1"]
    source.write_bytes(ALL.read_bytes() + FUTURE + b"\n")
    mixed = api.check(str(source))
    assert mixed.exit_code == 1
    assert (
        mixed.verdict
        == "histmig check: 138 of 213 records to migrate, 0 invalid, 0 rejected, 0 with findings only, 75 current and valid; 6 warnings; 1 record holds 2 parts of a part_kind pydantic-ai 2.68 does not know and cannot load"
    )


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"messages": []}, "got an object: pass the list it holds"),
        (b"[]", "got JSON text"),
        ("[]", "got JSON text"),
        (None, "got NoneType"),
        ([{"kind": "request", "parts": []}, "hi"], r"messages\[1\] is not a message"),
        ([{"role": "user", "content": "hi"}], r"messages\[0\] is not a message"),
    ],
)
def test_migrate_refuses_what_is_not_a_history(given: object, said: str) -> None:
    with pytest.raises(NotAHistory, match=said):
        api.migrate(given)  # type: ignore[arg-type]


def test_migrate_json_gives_the_bytes_to_load_and_the_report() -> None:
    output, report = api.migrate_json(LEGACY)
    assert (report.counts["changed"], report.counts["records_in"]) == (1, 1)
    expected = orjson.loads(LEGACY)
    api.migrate(expected["messages"])
    assert orjson.loads(output) == expected and b"retry-prompt" not in output
    assert {row["rule"] for row in report.changes} == {"HM101", "HM201", "HM301"} and report.changes[0]["source"] == "-"
    again, clean = api.migrate_json(output.decode(), source="chat-7")
    assert again == output and clean.counts["unchanged"] == 1 and clean.changes == []
    unknown, warned = api.migrate_json(FUTURE)
    assert unknown == FUTURE and warned.counts["warnings"] == 2


@pytest.mark.parametrize(
    ("data", "first"),
    [
        (b"{oops", "invalid JSON"),
        (b'{"note": 1}', "no messages field found"),
        (
            b'[{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"t","args":{},"tool_call_id":"c","timestamp":null}],"timestamp":"x"}]',
            "messages[0].timestamp",
        ),
    ],
)
def test_migrate_json_raises_when_2_68_could_not_load_the_result(data: bytes, first: str) -> None:
    with pytest.raises(MigrationError) as raised:
        api.migrate_json(data)
    assert raised.value.errors[0].startswith(first)


def test_the_api_runs_as_many_workers_as_the_cli_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from histmig.cli import app

    jobs: list[int] = []
    real = local.Workers

    def counted(work, count, **kwargs):
        jobs.append(count)
        return real(work, count, **kwargs)

    monkeypatch.setattr(local, "Workers", counted)
    monkeypatch.setattr("os.cpu_count", lambda: 3)
    api.audit(str(ALL))
    CliRunner().invoke(app, ["audit", str(ALL), "-q"])
    assert jobs == [3, 3]


def test_a_json_file_holding_one_record_a_line_gets_a_note(tmp_path: Path) -> None:
    source = tmp_path / "lines.json"
    source.write_bytes(LEGACY + b"\n" + LEGACY + b"\n")
    result = api.audit(str(source))
    assert result.exit_code == 1
    assert result.notes == [
        f"{source} holds more than one JSON document; if it holds one record a line, add --format jsonl"
    ]
    assert api.audit(str(source), Options(format="jsonl")).report.counts["changed"] == 2


def test_the_rollback_runbook_check_the_reader_convert_for_it_check_again(tmp_path: Path) -> None:
    newest, back = tmp_path / "newest.jsonl", tmp_path / "back.jsonl"
    api.convert(str(ALL), str(newest))
    before = api.check(str(newest), Options(target="2.0.0"))
    assert (before.exit_code, before.target) == (1, "2.0.0")
    assert (
        before.verdict
        == "histmig check: 2.0.0 loads 31 of 212 records as they are; the 212: 181 to rewrite for it (convert --target 2.0.0), 0 that no rule makes loadable, 0 rejected, 0 with findings only, 31 ready"
    )
    audited = api.audit(str(newest), Options(target="2.0.0"))
    assert (
        audited.verdict
        == "histmig audit: 181 of 212 records would be rewritten for 2.0.0, 31 need nothing, 0 would be rejected; nothing was written"
    )
    rolled = api.convert(str(newest), str(back), Options(target="2.0.0"))
    assert (rolled.exit_code, rolled.verdict) == (
        0,
        f"histmig convert: 181 of 212 records rewritten for 2.0.0, 31 unchanged, 0 rejected; written to {back}",
    )
    assert rolled.report.summary()["parts_by_rule"] == {"HM501": 166, "HM502": 69}
    after = api.check(str(back), Options(target="2.0.0"))
    assert (after.exit_code, after.verdict) == (0, "histmig check: 2.0.0 loads all 212 records as they are")
    assert api.convert(str(back), str(tmp_path / "again.jsonl"), Options(target="2.0.0")).report.counts["changed"] == 0


def test_a_record_the_target_cannot_load_is_kept_named_and_fails_convert(tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(
        orjson.dumps(
            {
                "id": "s",
                "messages": [
                    {"kind": "request", "parts": [{"part_kind": "speech", "speaker": "user", "transcript": "hi"}]}
                ],
            }
        )
        + b"\n"
    )
    result = api.convert(str(source), str(out), Options(target="2.0.0"))
    assert (result.exit_code, out.read_bytes()) == (1, source.read_bytes())
    assert (
        result.verdict
        == f"histmig convert: 0 of 1 records rewritten for 2.0.0, 1 unchanged (1 of them 2.0.0 cannot load), 0 rejected, 1 finding left as found (see the report); written to {out}"
    )
    assert result.report.errors[0]["errors"] == [
        "messages[0].parts[0].part_kind: 2.0.0 cannot load a 'speech' part (loaded from 2.28.0)"
    ]
    assert [row["rule"] for row in result.report.findings] == ["HM503"]
    dropped = api.convert(str(source), str(out), Options(target="2.0.0", unsafe_fixes=True))
    assert dropped.exit_code == 0 and orjson.loads(out.read_bytes())["messages"][0]["parts"] == []


def test_convert_and_audit_say_how_many_findings_they_leave(tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(  # a result whose call is in no response: HM401, an unsafe fix
        b'[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"hi","timestamp":"2025-01-01T00:00:00Z"}]},'
        b'{"kind":"response","parts":[{"part_kind":"text","content":"ok"}],"timestamp":"2025-01-01T00:00:01Z"},'
        b'{"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"t","content":"x","tool_call_id":"c9","timestamp":"2025-01-01T00:00:02Z"}]}]\n'
    )
    audited, converted = api.audit(str(source)), api.convert(str(source), str(out))
    assert (
        audited.verdict
        == "histmig audit: 0 of 1 records would be migrated, 1 need nothing, 0 would be rejected, 1 finding left as found (see the report); nothing was written"
    )
    assert (converted.exit_code, converted.verdict) == (
        0,
        f"histmig convert: 0 of 1 records migrated, 1 unchanged, 0 rejected, 1 finding left as found (see the report); written to {out}",
    )
    fixed = api.convert(str(source), str(out), Options(unsafe_fixes=True))
    assert fixed.verdict == f"histmig convert: 1 of 1 records migrated, 0 unchanged, 0 rejected; written to {out}"


@pytest.mark.parametrize("name", ["", "   "])
def test_a_blank_to_table_is_a_usage_error(tmp_path: Path, name: str) -> None:
    with pytest.raises(UsageError, match=f"^--to-table {name!r}: name a table$"):
        api.convert(str(tmp_path / "chats.duckdb"), None, Options(table="t"), to_table=name)


def test_check_passes_a_conversation_stored_a_message_a_record_with_warnings_naming_the_option(
    tmp_path: Path,
) -> None:
    """One message a record: the calls and results apart are fragments, no proof of damage, so
    ``check`` warns (exit 0) and its verdict names ``--conversation``; ``convert --unsafe-fixes``
    writes every record as it was, the same report on one worker or two."""
    history = orjson.loads((CORPUS / "v2.68.0" / "m_deferred_tool_model_retry.json").read_bytes())
    source = tmp_path / "messages.jsonl"
    source.write_bytes(b"".join(orjson.dumps({"messages": [message]}) + b"\n" for message in history))
    checked = api.check(str(source))
    note = (
        "; 3 records look like part of a conversation stored over several records: their tool pairing was not "
        "repaired and their findings are warnings (give --conversation COLUMN, or '*' for one conversation an "
        "input, to treat each conversation whole)"
    )
    assert (checked.exit_code, checked.verdict) == (
        0,
        f"histmig check: all 4 records are current and valid; 3 warnings (see the report){note}",
    )
    assert [(row["rule"], row["location"], row["certainty"], row["severity"]) for row in checked.report.findings] == [
        ("HM407", "line 2", "fragment", "warning"),
        ("HM401", "line 3", "fragment", "warning"),
        ("HM407", "line 4", "fragment", "warning"),
    ]
    reports = []
    for jobs in (1, 2):
        out = tmp_path / f"out{jobs}.jsonl"
        converted = api.convert(str(source), str(out), Options(unsafe_fixes=True, jobs=jobs))
        assert out.read_bytes() == source.read_bytes() and converted.verdict.endswith(note)
        reports.append({key: value for key, value in converted.report.to_json().items() if key != "run"})
    assert reports[0] == reports[1] and reports[0]["summary"]["fragments"] == 3


def test_from_otel_takes_one_path_or_several(tmp_path: Path) -> None:
    spans = FIXTURES / "otel-spans" / "v5"
    one = api.from_otel(str(spans / "l_no_retry.otlp.jsonl"), str(tmp_path / "one.jsonl"))
    several = api.from_otel(
        [str(spans / "l_no_retry.otlp.jsonl"), str(spans / "i_multi_run.otlp.jsonl")],
        str(tmp_path / "two.jsonl"),
        runs="all",
        report=str(tmp_path / "r.jsonl"),
    )
    assert (one.written, one.exit_code, several.written, several.exit_code) == (1, 0, 3, 0)
    assert len((tmp_path / "r.jsonl").read_bytes().splitlines()) == 3
    assert not (tmp_path / "two.jsonl.report.jsonl").exists()


def test_otel_takes_conversation_and_otel_upgrade_refuses_it(tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    path.write_bytes(b"[]\n")
    exported = api.otel(str(path), str(tmp_path / "spans.jsonl"), Options(conversation=("session_id",)))
    assert (exported.exit_code, (tmp_path / "spans.jsonl").read_bytes()) == (0, b"[]\n")
    with pytest.raises(UsageError, match="otel-upgrade moves each message on its own"):
        api.otel_upgrade(str(path), str(tmp_path / "up.jsonl"), Options(conversation=("session_id",)))


def _request(*parts: object) -> list[dict[str, object]]:
    return [{"kind": "request", "parts": list(parts)}]


@pytest.mark.parametrize(
    ("history", "error"),
    [
        (
            _request({"part_kind": "retry-prompt", "content": [{"loc": 5, "msg": None}], "tool_name": "t"}),
            "messages[0].parts[0].content[0]: an error-details entry must have 'type'",
        ),
        (
            _request({"part_kind": "user-prompt", "content": "a\ud800"}),
            "messages[0].parts[0].content: a lone surrogate (U+D800) at character 2: not UTF-8 text",
        ),
        (
            _request({"part_kind": "text", "content": "x"}),
            "messages[0].parts[0]: part_kind 'text' is a response part: no release loads it in a request",
        ),
        (
            _request({"part_kind": "user-prompt", "content": {1: "x"}}),
            "messages[0].parts[0].content: a key that is not a string (int)",
        ),
        (
            _request({"part_kind": "user-prompt", "content": b"x"}),
            "messages[0].parts[0].content: a value of type bytes, which JSON cannot hold",
        ),
        ([{"kind": "request", "parts": [], "x": 1}, 5], "messages[1] is not a message"),
    ],
)
def test_every_bad_history_raises_migration_error_naming_its_path_and_is_left_as_it_was(
    history: list[object], error: str
) -> None:
    given = repr(history)
    for call in (api.migrate, api.validate):
        with pytest.raises(MigrationError) as raised:
            call(history)  # type: ignore[arg-type]
        assert raised.value.errors[0].startswith(error) and repr(history) == given


def test_not_a_history_and_malformed_are_migration_errors() -> None:
    from histmig.errors import Malformed

    assert issubclass(NotAHistory, MigrationError) and issubclass(Malformed, MigrationError)
    assert NotAHistory("x").errors == ["x"]


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (
            '{"messages":[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"\ud800"}]}]}',
            "messages[0].parts[0].content: a lone surrogate (U+D800) at character 1: not UTF-8 text",
        ),
        ('{"messages": "\ud800', "not UTF-8 text: a lone surrogate (U+D800) at character 15"),
        (
            b'[{"kind":"request","parts":[{"part_kind":"text","content":"x"}]}]',
            "messages[0].parts[0]: part_kind 'text' is a response part: no release loads it in a request",
        ),
        (
            b'[{"kind":"request","parts":[{"part_kind":"retry-prompt","content":["a","b"],"tool_name":"t"}]}]',
            "messages[0].parts[0].content[0]: an error-details entry must be an object",
        ),
    ],
)
def test_migrate_json_raises_migration_error_for_text_2_68_cannot_load(data: str | bytes, error: str) -> None:
    with pytest.raises(MigrationError) as raised:
        api.migrate_json(data)
    assert raised.value.errors[0].startswith(error)


JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(["kind", "parts", "part_kind", "content", "tool_name", "tool_call_id", "loc", "msg"]),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=12,
)
FIELD_VALUES = st.dictionaries(
    st.sampled_from(
        ["content", "tool_name", "tool_call_id", "args", "timestamp", "retry", "outcome", "id", "part_kind", "x"]
    ),
    st.one_of(JSON, st.lists(st.dictionaries(st.sampled_from(["type", "loc", "msg", "input", "url"]), JSON))),
    max_size=5,
)
PART = st.builds(
    lambda kind, fields: {"part_kind": kind, **fields},
    st.sampled_from(sorted({*PART_KINDS["request"], *PART_KINDS["response"], "instruction", "hologram"})),
    FIELD_VALUES,
)
SHAPED = st.one_of(
    JSON,
    st.lists(
        st.fixed_dictionaries(
            {"kind": st.sampled_from(["request", "response", 5]), "parts": st.lists(st.one_of(PART, JSON), max_size=3)}
        ),
        max_size=3,
    ),
)
"""Anything JSON holds, and histories whose parts are of every kind some release wrote, each
field of any type (error lists of any entries)."""


def _api_calls(value: object, text: bytes) -> None:
    """Each API function on ``value`` and its JSON ``text``: a result, or a MigrationError
    whose lines name no internal error."""
    calls = [
        lambda: api.migrate_json(text),
        lambda: api.migrate_json(text.decode(errors="surrogateescape")),
        lambda: api.migrate(copy.deepcopy(value)),  # type: ignore[arg-type]
        lambda: api.validate(copy.deepcopy(value)),  # type: ignore[arg-type]
    ]
    for call in calls:
        try:
            call()
        except MigrationError as exc:
            assert exc.errors and not any("internal error" in line for line in exc.errors), exc.errors


@settings(max_examples=500, deadline=None)
@given(st.one_of(SHAPED, RECORD.map(lambda record: orjson.loads(_record(*record)))))
def test_no_input_makes_the_api_raise_anything_but_a_migration_error(value: object) -> None:
    _api_calls(value, orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS) if _plain(value) else b"{")


@settings(max_examples=200, deadline=None)
@given(RECORD, st.integers(0, 10_000), st.sampled_from([b"\xff", b"\\ud800", b"", b'"', b"\\"]))
def test_no_damaged_text_makes_migrate_json_raise_anything_but_a_migration_error(
    record: tuple[object, ...], at: int, inserted: bytes
) -> None:
    text = _record(*record)  # type: ignore[arg-type]
    at %= len(text) + 1
    _api_calls(None, text[:at] + inserted + text[at + len(inserted) :])


def _plain(value: object) -> bool:
    """Whether orjson encodes ``value`` (no integer beyond 64 bits)."""
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        return False
    return True


def test_a_result_without_an_id_beside_one_with_an_id_is_no_internal_error() -> None:
    """Found by the fuzz test: the settled check's pairing sorted a None id beside a text one."""
    retry = {"content": "", "tool_name": "get_weather", "part_kind": "retry-prompt"}
    history = [{"parts": [retry, {**retry, "tool_call_id": "call_1"}], "kind": "request"}]
    output, report = api.migrate_json(orjson.dumps(history))
    assert b"retry-prompt" not in output and report.counts["changed"] == 1


def test_migrate_json_of_an_envelope_gives_the_envelope_whose_messages_load() -> None:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    output, _ = api.migrate_json(LEGACY)
    envelope = orjson.loads(output)
    assert isinstance(envelope, dict) and list(envelope) == list(orjson.loads(LEGACY))
    assert len(ModelMessagesTypeAdapter.validate_python(envelope["messages"])) == len(envelope["messages"])


ORPHANED = b'{"id":"o","messages":[{"kind":"request","parts":[{"part_kind":"user-prompt","content":"go"}]},{"kind":"response","parts":[{"part_kind":"tool-call","tool_name":"t","args":"{}","tool_call_id":"c"}]},{"kind":"request","parts":[{"part_kind":"tool-return","tool_name":"t","content":"x","tool_call_id":"c"},{"part_kind":"tool-return","tool_name":"t","content":"y","tool_call_id":"gone"}]}]}'


def test_the_check_verdict_names_every_reason_with_counts_that_partition_the_records(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    invalid = b'[{"kind":"teleport","parts":[]}]'
    source.write_bytes(b"\n".join([LEGACY, invalid, b"{oops", ORPHANED, ORPHANED, CURRENT, FUTURE]) + b"\n")
    result = api.check(str(source))
    assert (result.exit_code, result.verdict) == (
        1,
        "histmig check: 1 of 7 records to migrate, 1 invalid, 1 rejected, 2 with findings only, 2 current and valid; "
        "2 findings; 1 record holds 2 parts of a part_kind pydantic-ai 2.68 does not know and cannot load",
    )
    numbers = [
        int(n)
        for n in re.findall(
            r"(\d+) (?:of 7 records to migrate|invalid|rejected|with findings only|current)", result.verdict
        )
    ]
    assert sum(numbers) == result.report.counts["records_in"] == 7
    reader = api.check(str(source), Options(target="2.59.0"))
    loads = reader.report.summary()["reader_loads"]
    assert reader.verdict.startswith(f"histmig check: 2.59.0 loads {loads} of 7 records as they are; the 7: ")
    parts = re.findall(r"(\d+) (?:to rewrite|that no rule|rejected|with findings only|ready)", reader.verdict)
    assert sum(map(int, parts)) == 7
