"""The benchmark's bound and floor baselines do the work they claim, on every record once;
the database tables are measured on a real server."""

from __future__ import annotations

import importlib.util
import re
import sqlite3
import sys
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from histmig.api import convert
from tests.conftest import CORPUS, ROOT
from tests.sources.conftest import postgres_db, postgres_server  # noqa: F401 (the fixtures of the PostgreSQL tests)

_SPEC = importlib.util.spec_from_file_location("bench", ROOT / "scripts" / "bench.py")
bench = sys.modules["bench"] = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)


@pytest.mark.parametrize("copies", [1, 2, 7])
def test_bound_jsonl_dumps_every_migrated_record_once_in_order(tmp_path: Path, copies: int) -> None:
    migrated = tmp_path / "migrated.jsonl"
    source = tmp_path / "all.jsonl"
    source.write_bytes((CORPUS / "all.jsonl").read_bytes() * copies)
    convert(str(source), str(migrated))
    bench.bound_jsonl(str(migrated), str(tmp_path / "bound"))
    written = (tmp_path / "bound.0").read_bytes() + (tmp_path / "bound.1").read_bytes()
    assert written.splitlines() == [orjson.dumps(orjson.loads(line)) for line in migrated.read_bytes().splitlines()]
    assert len(written.splitlines()) == 212 * copies


def test_bound_parquet_writes_the_table_back(tmp_path: Path) -> None:
    table = pa.table({"id": list(range(5000)), "messages": ['[{"kind":"request","parts":[]}]'] * 5000})
    pq.write_table(table, tmp_path / "in.parquet")
    bench.bound_parquet(str(tmp_path / "in.parquet"), str(tmp_path / "out.parquet"))
    assert pq.read_table(tmp_path / "out.parquet").equals(table)


def test_bound_jsonl_fails_when_a_process_fails(tmp_path: Path) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_bytes(b"not json\n" * 10)
    with pytest.raises(RuntimeError, match="a process failed"):
        bench.bound_jsonl(str(source), str(tmp_path / "bound"))


@pytest.mark.parametrize("fmt", ["postgres", "sqlite"])
def test_floor_table_writes_back_the_rows_holding_a_retry_prompt_part_unchanged(
    tmp_path: Path, postgres_db: str, fmt: str
) -> None:
    bench.build_tables(tmp_path, 300, postgres_db)
    bench.reset_table(fmt, tmp_path, 300, postgres_db)
    if fmt == "postgres":
        read = lambda: dict(query_pg(postgres_db, "SELECT id, xmin::text || ' ' || messages::text FROM conversations"))  # noqa: E731
    else:
        location = bench.table_paths(tmp_path, 300)["sqlite"]
        with sqlite3.connect(location) as con:
            con.execute("CREATE TABLE written (id TEXT)")
            con.execute(
                "CREATE TRIGGER logged AFTER UPDATE ON conversations BEGIN INSERT INTO written VALUES (old.id); END"
            )
        read = lambda: {
            key: f"{n} {text}"
            for key, text, n in sqlite3.connect(location).execute(
                "SELECT id, messages, (SELECT count(*) FROM written w WHERE w.id = c.id) FROM conversations c"
            )
        }  # noqa: E731
    before = read()
    bench.floor_table(fmt, postgres_db if fmt == "postgres" else location)
    after = read()
    rewritten = {key for key in before if before[key] != after[key]}
    holding = {key for key, value in before.items() if "retry-prompt" in value}
    assert rewritten == holding and len(holding) == 30
    assert {key: value.split(" ", 1)[1] for key, value in after.items()} == {
        key: value.split(" ", 1)[1] for key, value in before.items()
    }


def query_pg(url: str, statement: str) -> list[tuple]:
    import psycopg

    with psycopg.connect(url) as con:
        return con.execute(statement).fetchall()


def test_the_tables_are_measured_against_their_floor(
    tmp_path: Path, postgres_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bench.measure_tables(["postgres", "sqlite"], tmp_path, 300, postgres_db, 1)
    rows = [
        line.split("|")[1:-1]
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| PostgreSQL") or line.startswith("| SQLite")
    ]
    assert [row[0].strip() for row in rows] == ["PostgreSQL jsonb 10%", "SQLite TEXT 10%"]
    for row in rows:  # (a child's peak RSS starts from this process's, so it says nothing here)
        assert float(row[1]) > 0 and float(row[3]) > 0 and float(row[5]) > 0 and float(row[6]) > 0
    assert query_pg(postgres_db, "SELECT count(*) FROM template_300") == [(300,)]


def test_a_throwaway_postgres_serves_the_bench_and_is_removed() -> None:
    seen: list[str] = []
    bench.with_postgres(
        None,
        lambda url: (
            seen.append(query_pg(url, "SELECT current_setting('server_version_num')")[0][0]) or seen.append(url)
        ),
        wanted=True,
    )
    assert seen[0].startswith("15")
    assert not Path(seen[1].split("host=")[1]).exists()


@pytest.mark.parametrize("kind", ["spark-floor", "spark-arrow"])
def test_the_spark_baselines_write_the_table_back(spark, tmp_path: Path, kind: str) -> None:
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(bench)  # run as a script, it is __main__, which goes by value
    table = pa.table(
        {"id": list(range(3000)), "messages": [f'[{{"kind":"request","parts":[],"n":{i}}}]' for i in range(3000)]}
    )
    pq.write_table(table, tmp_path / "in.parquet", row_group_size=1000, compression="zstd")
    bench.BASELINES[(kind, "parquet")](str(tmp_path / "in.parquet"), str(tmp_path / "out"))
    written = pq.read_table(tmp_path / "out")
    assert written.select(["id", "messages"]).sort_by("id").to_pylist() == table.to_pylist()
    assert {
        pq.ParquetFile(part).metadata.row_group(0).column(0).compression
        for part in (tmp_path / "out").glob("*.parquet")
    } == {"ZSTD"}
    assert spark.range(2).count() == 2  # the session it was given is still running


def test_the_spark_table_times_histmig_on_spark_against_jobs_2_and_the_floors(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asked: list[list[str]] = []

    def best(commands: list[list[str]], repeat: int) -> list:
        asked.extend(commands)
        return [bench.Timing(seconds, 0, True) for seconds in (8.0, 2.0, 6.0, 4.0, 7.0)]

    monkeypatch.setattr(bench, "best", best)
    files = {name: {"jsonl": CORPUS / "all.jsonl", "parquet": Path(f"/in/{name}.parquet")} for name, _ in bench.SHARES}
    bench.print_spark(files, 212, Path("/out"), 1)
    assert asked[0][1:] == [
        "-m",
        "histmig",
        "convert",
        "/in/1%.parquet",
        "/out/spark-histmig",
        "-q",
        "--jobs",
        "2",
        "--engine",
        "spark",
    ]
    assert asked[1][-4:] == ["/out/jobs2.parquet", "-q", "--jobs", "2"]
    assert [argv[3] for argv in asked[2:5]] == ["spark-floor", "spark-start", "spark-arrow"]
    assert len(asked) == 15
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| spark ")]
    assert len(rows) == 3
    # x --jobs 2 = 2/8, x floor = 6/8; start 4 s, JVM read and write 6 - 4, Python workers 7 - 6, migrating 8 - 7
    assert [cell.strip() for cell in rows[0].split("|")[6:12]] == ["0.25", "0.75", "4.00", "2.00", "1.00", "1.00"]


@pytest.mark.parametrize("layout", ["per run", "per message"])
def test_a_layout_keeps_every_message_of_each_history_in_its_order_its_records_shuffled(layout: str) -> None:
    records = [orjson.loads(line) for line in (CORPUS / "all.jsonl").read_bytes().splitlines()]
    cut = bench.layout_records(records, layout)
    assert cut == bench.layout_records(records, layout)  # deterministic
    by_id: dict[str, list[dict]] = {}
    for record in cut:
        by_id.setdefault(record["id"], []).append(record)
    for record in records:
        pieces = sorted(by_id[record["id"]], key=lambda r: r["seq"])
        assert [m for piece in pieces for m in piece["messages"]] == record["messages"]
        assert all(piece["scenario"] == record["scenario"] for piece in pieces)
    assert [r["id"] for r in cut] != sorted((r["id"] for r in cut), key=[r["id"] for r in records].index)
    if layout == "per message":
        assert all(len(r["messages"]) == 1 for r in cut)


def test_the_cluster_and_s3_tables_give_a_figure_in_every_cell(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # a real standalone cluster and a real S3 server, started and stopped by the benchmark (an error when they cannot)
    assert (
        bench.main(["--formats", "cluster,s3", "--records", "200", "--workdir", str(tmp_path), "--big-mib", "8"]) == 0
    )
    printed = capsys.readouterr().out
    number = r"\s*[0-9][0-9,]*(\.[0-9]+)?\s*"
    rows = {
        "cluster": rf"\| parquet 10%\s*\|({number}\|){{8}}$",
        "s3": rf"\| jsonl 10%\s*\|({number}\|){{8}}$",
        "2 MiB": rf"\| 2 MiB\s*\|({number}\|){{3}}$",
        "8 MiB": rf"\| 8 MiB\s*\|({number}\|){{3}}$",
    }
    for name, row in rows.items():
        assert len(re.findall(row, printed, re.MULTILINE)) == 1, (name, printed)
    assert "n/a" not in printed
