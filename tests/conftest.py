"""Shared fixtures: the corpus copied from ../shared/fixtures/corpus into fixtures/corpus,
and the pydantic-ai 2.68.0 oracle (a test dependency only)."""

from __future__ import annotations

import fcntl
import importlib.util
import os
import random
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic_ai.messages import ModelMessagesTypeAdapter

from histmig.api import migrate
from histmig.engine import process
from histmig.options import Options
from histmig.records import Record
from tests.servers import S3_ENV, moto_server

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CORPUS = FIXTURES / "corpus"
HISTORIES = sorted(CORPUS.glob("v*/*.json"))
LEGACY_RELEASES = ("0.0.20", "0.0.55", "0.4.11", "1.0.18", "1.107.10", "2.0.0", "2.59.0")
NATIVE_RELEASES = ("2.60.0", "2.68.0")


def history_id(path: Path) -> str:
    """``v2.59.0/a_tool_model_retry`` for a corpus path."""
    return f"{path.parent.name}/{path.stem}"


def load(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


def converted(messages: list[Any], options: Options = Options()) -> tuple[list[Any], list]:
    """A migrated copy of ``messages`` and the changes made."""
    copy = orjson.loads(orjson.dumps(messages))
    return copy, migrate(copy, options)


def without_run(report: dict[str, Any]) -> dict[str, Any]:
    """A JSON report without its ``run`` (which names the run's own output, and when it
    started), to compare the records of two runs."""
    return {key: value for key, value in report.items() if key != "run"}


def framework_dump(messages: list[Any]) -> list[dict[str, Any]]:
    """What pydantic-ai 2.68.0 makes of a history: loaded, then dumped as JSON data."""
    return ModelMessagesTypeAdapter.dump_python(ModelMessagesTypeAdapter.validate_python(messages), mode="json")


@pytest.fixture(params=HISTORIES, ids=history_id)
def history_path(request: pytest.FixtureRequest) -> Path:
    return request.param


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for every Spark test, made as ``histmig convert --engine
    spark`` makes its own (:func:`histmig.spark.session`), on ``local[2, 2]``: two cores, and
    a failed task is tried twice (the retry tests). Two shuffle partitions (``summarize``'s
    one shuffle). Fails, never skips, when Java or pyspark is missing."""
    try:
        from histmig.errors import UsageError
        from histmig.spark import session as start
    except ImportError as exc:
        pytest.fail(
            f"the Spark tests need pyspark (the test extras install it: pip install -e '.[test]'): {exc}", pytrace=False
        )
    try:
        session, log = start("local[2, 2]", 2)
    except UsageError as exc:
        pytest.fail(f"the Spark tests need a Spark session: {exc}", pytrace=False)
    session.conf.set("spark.sql.shuffle.partitions", "2")
    yield session
    session.stop()
    if log is not None:
        Path(log).unlink()


@pytest.fixture
def device(tmp_path: Path) -> Path:
    """A character device that discards what it is written: as root, a null device node of
    this test's own (a write layer that replaced a device would replace the machine's
    /dev/null); otherwise /dev/null itself (which a user cannot replace)."""
    if os.geteuid() != 0:
        return Path("/dev/null")
    node = tmp_path / "null"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return node


def waiting_on(lock: Path, processes: list[subprocess.Popen[bytes]]) -> None:
    """Return once each of ``processes`` waits for the flock of ``lock`` (Linux
    /proc/locks lists a waiter as ``-> FLOCK ... PID MAJ:MIN:INODE``); fail if one ends first."""
    inode = os.stat(lock).st_ino
    waiting: set[int] = set()
    while len(waiting) < len(processes):
        for process in processes:
            assert process.poll() is None, f"process {process.pid} ended without waiting for the lock"
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            if "->" in fields and fields[fields.index("->") + 1] == "FLOCK":
                pid, where = int(fields[-4]), fields[-3]
                if where.endswith(f":{inode}"):
                    waiting.add(pid)
        waiting &= {process.pid for process in processes}
        time.sleep(0.01)


@contextmanager
def holding(lock: Path) -> Iterator[None]:
    """Hold the flock of ``lock``, as a run adding to the file beside it does."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


CAPTURED = sorted(CORPUS.glob("captured/v*/*.json"))
"""The captured histories: runs that ended in an exception."""


_BENCH = importlib.util.spec_from_file_location("bench", ROOT / "scripts" / "bench.py")
bench = sys.modules.setdefault("bench", importlib.util.module_from_spec(_BENCH))
if not hasattr(bench, "LAYOUTS"):
    _BENCH.loader.exec_module(bench)  # type: ignore[union-attr]
run_pieces, LAYOUTS = bench.run_pieces, bench.LAYOUTS
"""How the stores users keep cut a conversation into records (issue 25), as the benchmark cuts
them (scripts/bench.py)."""


def stored_apart(layout: str, seed: int = 25) -> tuple[dict[str, list[Any]], list[dict[str, Any]]]:
    """Every corpus and captured history (by :func:`history_id`) and its records in
    ``layout``, shuffled in physical order: ``{"conversation_id", "seq", "messages"}`` each."""
    histories = {
        history_id(path) if path.parent.parent == CORPUS else f"captured/{history_id(path)}": load(path)
        for path in [*HISTORIES, *CAPTURED]
    }
    records = [
        {"conversation_id": name, "seq": seq, "messages": piece}
        for name, messages in histories.items()
        for seq, piece in enumerate(LAYOUTS[layout](messages))
    ]
    random.Random(seed).shuffle(records)
    return histories, records


NOT_APPLICABLE = {
    **{
        ("per message", True, f"captured/v{release}/k_tool_retries_exhausted"): {"HM407"}
        for release in ("0.0.20", "0.0.55", "0.4.11", "1.0.18", "1.107.10", "2.0.0")
    },
    **{
        ("per message", True, f"v{release}/m_deferred_tool_model_retry"): {"HM407"}
        for release in ("1.0.18", "1.107.10", "2.0.0", "2.59.0", "2.60.0", "2.68.0")
    },
}
"""The fixes a layout cannot take (issue 25.2), by layout, ``--unsafe-fixes`` and history:
HM407 answers the calls of a history's last response in a new request when the history ends
on that response, and a store of one message a record has no record for a new message (the
captured k_tool_retries_exhausted of 2.59.0 on ends on an empty request, which takes them)."""


def whole_conversion(messages: list[Any], options: Options, withheld: set[str]) -> tuple[str, list[Any] | None]:
    plan = replace(options.plan(), withheld=frozenset(withheld))
    raw = orjson.dumps(messages)
    outcome = process(Record(raw, "whole", "line 1"), plan)
    return outcome.status, None if outcome.output is None else orjson.loads(outcome.output)


def not_applicable(layout: str, unsafe: bool) -> dict[str, set[str]]:
    """:data:`NOT_APPLICABLE` of ``layout`` and ``unsafe``, by history."""
    return {name: codes for (lay, uns, name), codes in NOT_APPLICABLE.items() if lay == layout and uns == unsafe}


def assert_reassembled(
    histories: dict[str, list[Any]],
    out: list[dict[str, Any]],
    options: Options,
    withheld: dict[str, set[str]],
    exact: bool = True,
) -> None:
    """The records ``out`` (``{"conversation_id", "seq", "messages"}``; ``messages`` a list, or
    one message) put together by conversation and ``seq`` are each history's conversion whole
    (:func:`whole_conversion`, with the fixes ``withheld`` for it not applied), byte for byte:
    a rejected history is kept as it was; pydantic-ai 2.68 loads each. Not ``exact``: the same
    JSON values (a ``jsonb`` column keeps its own key order)."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for record in out:
        by_name.setdefault(record["conversation_id"], []).append(record)
    assert set(by_name) == set(histories)
    for name, messages in histories.items():
        status, whole = whole_conversion(messages, options, withheld.get(name, set()))
        mine = sorted(by_name[name], key=lambda r: r["seq"])
        together = [
            message
            for record in mine
            for message in (record["messages"] if isinstance(record["messages"], list) else [record["messages"]])
        ]
        if status == "rejected":
            assert together == messages, name  # kept as it was, every record of it
            continue
        if exact:
            assert orjson.dumps(together) == orjson.dumps(whole), name
        else:
            assert together == whole, name
        framework_dump(together)  # pydantic-ai 2.68 loads it


LAKE_DAYS = ("date=2026-01-01", "date=2026-01-02", "date=2026-01-03")
"""The partition directories of :func:`make_lake`'s one-level lake."""


def make_lake(root: Path, kind: str = "parquet", levels: tuple[tuple[str, ...], ...] = (LAKE_DAYS,)) -> list[Path]:
    """A partitioned dataset of the corpus histories under ``root``: a directory of each
    combination of ``levels`` (``key=value`` names, outermost first), each holding
    ``part-0`` and ``part-1`` files of ``kind`` (``parquet``: an ``id`` int64 column and the
    messages as JSON text, zstd; ``jsonl``: one record a line), the records dealt out in
    order. No file holds its partition's keys. Returns the files, sorted."""
    import itertools

    import pyarrow as pa
    import pyarrow.parquet as pq

    lines = (CORPUS / "all.jsonl").read_bytes().splitlines()
    folders = [Path(*combination) for combination in itertools.product(*levels)]
    files = [root / folder / f"part-{n}.{kind}" for folder in folders for n in (0, 1)]
    share = -(-len(lines) // len(files))
    for at, path in enumerate(files):
        chunk = lines[at * share : (at + 1) * share]
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "jsonl":
            path.write_bytes(b"".join(line + b"\n" for line in chunk))
            continue
        records = [orjson.loads(line) for line in chunk]
        table = pa.table(
            {
                "id": pa.array(range(at * share, at * share + len(records)), pa.int64()),
                "messages": pa.array([orjson.dumps(r["messages"]).decode() for r in records], pa.string()),
            }
        )
        pq.write_table(table, path, row_group_size=20, compression="zstd")
    return sorted(files)


@pytest.fixture(scope="session")
def s3_endpoint():
    """A real S3 API server for the session (moto's server mode, in a thread of this process,
    on a free loopback port): its endpoint URL. Fails, never skips, when it cannot start."""
    try:
        with moto_server() as endpoint:
            yield endpoint
    except ImportError as exc:
        pytest.fail(f"the object-storage tests need moto's server (pip install -e '.[test]'): {exc}", pytrace=False)


class Bucket:
    """A new bucket on the tests' S3 server: ``name``, ``url`` (``s3://name``) and a boto3
    ``client`` to put and look at its objects."""

    def __init__(self, name: str, client: Any) -> None:
        self.name, self.url, self.client = name, f"s3://{name}", client

    def put(self, key: str, data: bytes) -> str:
        self.client.put_object(Bucket=self.name, Key=key, Body=data)
        return f"{self.url}/{key}"

    def get(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.name, Key=key)["Body"].read()

    def keys(self, prefix: str = "") -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.name, Prefix=prefix)
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def uploads(self) -> list[dict[str, Any]]:
        return self.client.list_multipart_uploads(Bucket=self.name).get("Uploads", [])


@pytest.fixture
def bucket(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Bucket:
    """A new bucket of the tests' S3 server, its endpoint and credentials in the environment
    as a user would give them (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...) for histmig
    and its worker processes; no profile or config file of the machine read."""
    import hashlib

    import boto3

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    for name, value in S3_ENV.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    name = "t-" + hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:20]
    client = boto3.client("s3", endpoint_url=s3_endpoint, **_boto_credentials())
    client.create_bucket(Bucket=name)
    return Bucket(name, client)


def _boto_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": S3_ENV["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": S3_ENV["AWS_SECRET_ACCESS_KEY"],
        "region_name": S3_ENV["AWS_DEFAULT_REGION"],
    }
