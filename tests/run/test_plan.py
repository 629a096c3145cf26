"""Planning a run (histmig.run.plan): each input with its format and destination, every
destination rule, and the options each input takes, derived from their declarations."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from histmig.errors import UnwritableOutput, UsageError
from histmig.options import Options
from histmig.run.plan import check_options, plan, rejects_of
from histmig.sources import formats
from histmig.sources.base import Destination
from tests.conftest import CORPUS

ALL = CORPUS / "all.jsonl"
JSON = next((CORPUS / "v0.0.20").glob("*.json"))


def test_each_input_gets_its_own_output_and_rejects_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    planning = plan("convert", [str(ALL), str(JSON)], Destination(str(out)), Options())
    assert [(item.path, item.format.name) for item in planning.inputs] == [(str(ALL), "jsonl"), (str(JSON), "json")]
    assert [item.destination.output for item in planning.inputs] == [str(out / ALL.name), str(out / JSON.name)]
    assert {item.destination.rejects for item in planning.inputs} == {f"{out}.rejects.jsonl"}
    assert (planning.directory, planning.paths, planning.columnar) == (str(out), [str(ALL), str(JSON)], False)
    assert not out.exists()  # planning writes nothing


def test_the_files_of_a_glob_keep_their_folders_under_the_output_directory(tmp_path: Path) -> None:
    """``'captured/*/*.json'``: files of one name in several directories (each release's
    ``h_empty_response.json``) are written under their folders, not refused as a clash."""
    out = tmp_path / "out"
    planning = plan(
        "convert", [str(CORPUS / "captured" / "v0.*" / "h_empty_response.json")], Destination(str(out)), Options()
    )
    assert [item.destination.output for item in planning.inputs] == [
        str(out / release / "h_empty_response.json") for release in ("v0.0.20", "v0.0.55", "v0.4.11")
    ]


def test_where_rejected_records_go() -> None:
    assert rejects_of(Destination("o.jsonl", "r.jsonl"), "in.jsonl", "o.jsonl", None) == "r.jsonl"
    assert rejects_of(Destination(in_place=True), "in.jsonl", None, None) == "in.jsonl.rejects.jsonl"
    assert rejects_of(Destination("o.jsonl"), "in.jsonl", "o.jsonl", None) == "o.jsonl.rejects.jsonl"
    assert rejects_of(Destination("lake/"), "a.jsonl", "lake/a.jsonl", "lake/") == "lake.rejects.jsonl"
    assert rejects_of(Destination("-"), "in.jsonl", "-", None) is None
    assert rejects_of(Destination(), "in.jsonl", None, None) is None


@pytest.mark.parametrize(
    ("destination", "options", "message"),
    [
        (Destination(to_table="t"), Options(), "--to-table does not apply to a JSONL input"),
        (
            Destination(),
            Options(key_column="id"),
            "--key-column does not apply to a JSONL input \\(only to a PostgreSQL or SQLite one\\)",
        ),
        (
            Destination(),
            Options(schema="s", single_transaction=True),
            "--schema and --single-transaction do not apply to a JSONL input \\(only to a PostgreSQL one\\)",
        ),
        (Destination(overwrite=True), Options(), "--overwrite replaces the table --to-table names"),
    ],
)
def test_an_option_no_input_takes_is_named_with_the_formats_that_take_it(
    destination: Destination, options: Options, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        check_options("convert", [(str(ALL), formats()["jsonl"])], destination, options)


def test_inputs_of_several_formats_each_take_what_applies_to_them() -> None:
    found = [(str(ALL), formats()["jsonl"]), ("lake/a.parquet", formats()["parquet"])]
    check_options("audit", found, Destination(), Options(messages_column="m"))
    with pytest.raises(UsageError, match="^--table does not apply to a JSONL or Parquet input"):
        check_options("audit", found, Destination(), Options(table="t"))
    with pytest.raises(UsageError, match="^--to-table writes one table: give one database input$"):
        check_options("convert", found, Destination(to_table="t"), Options())
    with pytest.raises(UsageError, match="the otel commands read JSON or JSONL"):
        check_options("otel", found, Destination("o"), Options())
    with pytest.raises(UsageError, match="all.jsonl: --table does not apply to a JSONL input"):
        check_options("otel", found[:1], Destination("o"), Options(table="t"))  # whatever the command


def test_conversation_groups_the_parquet_files_of_a_run_together_but_not_other_files() -> None:
    grouped = Options(conversation=("session_id",), order="seq")
    parquet = [(f"lake/day={n}/part-0.parquet", formats()["parquet"]) for n in (1, 2)]
    check_options("audit", parquet, Destination(), grouped)  # one input: a conversation may span the files
    several = "^--conversation groups the records of one input: give one file or table, or Parquet files"
    for found in ([(str(ALL), formats()["jsonl"])] * 2, [*parquet, (str(ALL), formats()["jsonl"])]):
        with pytest.raises(UsageError, match=several):
            check_options("audit", found, Destination(), grouped)
    check_options("check", [("chats.duckdb", formats()["duckdb"])], Destination(), grouped)
    for found in ([(str(JSON), formats()["json"])], [(str(JSON), formats()["json"])] * 2):  # a folder of .json files
        with pytest.raises(UsageError, match="--conversation and --order do not apply to a JSON input"):
            check_options("check", found, Destination(), grouped)


def test_the_destination_rules_of_a_database_input_are_the_plans() -> None:
    postgres = [("postgresql://app@db/app", formats()["postgres"])]
    with pytest.raises(UsageError, match="^--single-transaction goes with --in-place$"):
        check_options("audit", postgres, Destination(), Options(table="t", single_transaction=True))
    check_options("convert", postgres, Destination(in_place=True), Options(table="t", single_transaction=True))
    with pytest.raises(UsageError, match="^give one of OUTPUT, --to-table and --in-place$"):
        plan("convert", "postgresql://app@db/app", Destination(in_place=True, to_table="x"), Options(table="t"))


@pytest.mark.parametrize(
    ("destination", "engine", "master", "message"),
    [
        (Destination("o.jsonl"), "local", "local[2]", "^--spark-master needs --engine spark$"),
        (Destination("o.jsonl"), "flink", None, "^unknown engine 'flink' \\(one of: local, spark\\)$"),
        (Destination(), "local", None, "^give OUTPUT, or --in-place"),
        (Destination(to_table=" "), "local", None, "^--to-table ' ': name a table$"),
        (
            Destination("out", in_place=True),
            "spark",
            None,
            "give OUTPUT, without --in-place, --to-table, --overwrite or --rejects",
        ),
        (Destination("out.parquet"), "spark", None, "writes a directory of JSONL files; name one \\(no .parquet\\)"),
        (Destination("-", "-"), "local", None, "^OUTPUT and --rejects cannot both go to stdout$"),
    ],
)
def test_destinations_that_do_not_fit_the_command_or_the_engine(
    destination: Destination, engine: str, master: str | None, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        plan("convert", str(ALL), destination, Options(), engine=engine, spark_master=master)


def test_a_rejects_or_report_file_that_cannot_be_created_is_refused_first(tmp_path: Path) -> None:
    with pytest.raises(UnwritableOutput, match="no such directory"):
        plan("audit", str(tmp_path / "missing.jsonl"), Destination(), Options(), report=str(tmp_path / "no" / "r.txt"))


def test_a_spark_output_is_a_directory_beside_its_inputs(tmp_path: Path) -> None:
    source = tmp_path / "a.parquet"
    source.write_bytes(b"PAR1")
    planning = plan("convert", str(source), Destination(str(tmp_path / "lake.v2")), Options(), engine="spark")
    assert [(item.path, item.destination.output) for item in planning.inputs] == [
        (str(source), str(tmp_path / "lake.v2"))
    ]
    assert planning.engine == "spark" and planning.columnar
    (tmp_path / "taken").mkdir()
    with pytest.raises(UsageError, match="exists and is not the output of an earlier --engine spark run"):
        plan("convert", str(source), Destination(str(tmp_path / "taken")), Options(), engine="spark")
    with pytest.raises(UsageError, match="holds the input"):
        (tmp_path / "_SUCCESS").write_bytes(b"")
        plan("convert", str(source), Destination(str(tmp_path)), Options(), engine="spark")


def test_to_table_naming_the_table_read_is_refused_as_its_format_compares_names() -> None:
    postgres = [("postgresql://app:secret@db/app", formats()["postgres"])]
    with pytest.raises(UsageError) as raised:
        check_options("convert", postgres, Destination(to_table="chats"), Options(table="chats"))
    assert str(raised.value).endswith(": --to-table names the table read; use --in-place to rewrite it")
    assert "secret" not in str(raised.value) and str(raised.value).startswith("postgresql://app")
    check_options("convert", postgres, Destination(to_table="Chats"), Options(table="chats"))
    sqlite = [("chats.sqlite", formats()["sqlite"])]
    with pytest.raises(UsageError, match="^chats.sqlite: --to-table names the table read"):
        check_options("convert", sqlite, Destination(to_table="CHATS"), Options(table="chats"))


def test_in_place_is_refused_for_what_is_not_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "chats.jsonl"
    os.mkfifo(fifo)  # written back to while it is read, a FIFO never ends
    for path in (str(fifo), "/dev/null"):
        with pytest.raises(UsageError, match="--in-place replaces a regular file, and this is none; name an OUTPUT"):
            plan("convert", path, Destination(in_place=True), Options(format="jsonl"))


def test_an_output_of_a_directory_run_that_is_a_directory_is_refused_before_any_is_written(tmp_path: Path) -> None:
    lines = (CORPUS / "all.jsonl").read_bytes().splitlines(keepends=True)
    for name in "ab":
        (tmp_path / "in").mkdir(exist_ok=True)
        (tmp_path / "in" / f"{name}.jsonl").write_bytes(lines[0])
    (tmp_path / "out" / "b.jsonl").mkdir(parents=True)
    with pytest.raises(UnwritableOutput, match=r"out/b\.jsonl: is a directory$"):
        plan("convert", [str(tmp_path / "in")], Destination(str(tmp_path / "out")), Options())
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["b.jsonl"]


def test_a_report_or_rejects_file_a_later_run_over_an_input_directory_would_read_is_refused(tmp_path: Path) -> None:
    """``--rejects`` or ``--report`` inside an input directory, under a name a run over it reads
    (``z.jsonl``, ``rep.json``), is refused: the next run would take it as an input. A hidden
    name or a ``*.rejects.jsonl`` one is skipped by the directory, so it is written."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_bytes(b"[]\n")
    into = str(tmp_path / "in")
    for option, name in (("--rejects", "z.jsonl"), ("--report", "rep.json")):
        given = {"rejects": str(tmp_path / "in" / name)} if option == "--rejects" else {}
        report = str(tmp_path / "in" / name) if option == "--report" else None
        with pytest.raises(UsageError, match=f"^{option} .*{name} is in the input directory .*in, where a later run"):
            plan("convert", into, Destination(str(tmp_path / "out"), **given), Options(), report=report)
    plan(
        "convert", into, Destination(str(tmp_path / "out"), rejects=str(tmp_path / "in" / "x.rejects.jsonl")), Options()
    )
    plan("convert", into, Destination(str(tmp_path / "out")), Options(), report=str(tmp_path / "in" / ".rep.json"))


def test_an_output_a_later_run_over_an_input_directory_or_glob_would_read_is_refused(tmp_path: Path) -> None:
    """OUTPUT in a ``key=value`` partition directory of an input directory, or a report a
    quoted input glob matches, would be read again by the next run; an OUTPUT in another
    subdirectory, which a directory run does not read, is written."""
    (tmp_path / "in" / "v1").mkdir(parents=True)
    (tmp_path / "in" / "a.jsonl").write_bytes(b"[]\n")
    (tmp_path / "in" / "v1" / "b.json").write_bytes(b"[]")
    into = str(tmp_path / "in")
    with pytest.raises(UsageError, match=r"^OUTPUT .*in/k=1/a.jsonl is in the input directory .*in or a partition"):
        plan("convert", into, Destination(str(tmp_path / "in" / "k=1") + "/"), Options())
    plan("convert", into, Destination(str(tmp_path / "in" / "out") + "/"), Options())
    globbed, report = str(tmp_path / "in" / "*" / "*.json"), str(tmp_path / "in" / "v1" / "r.json")
    with pytest.raises(UsageError, match=r"^--report .*r.json matches the input glob .*\*\.json: a later run"):
        plan("convert", globbed, Destination(str(tmp_path / "out")), Options(), report=report)
    plan("convert", globbed, Destination(str(tmp_path / "out")), Options(), report=str(tmp_path / "in" / "r.json"))
