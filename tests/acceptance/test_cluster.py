"""A real Spark standalone cluster (issue 27.3): a master and two workers on loopback, started
with pyspark's own ``spark-class``, and histmig run through ``spark-submit`` as the README tells
a user: histmig shipped to the executors as a wheel (``--py-files``), the command line's
``__main__.py`` as the application. The workers' Python (and the driver's) is a virtual
environment that reaches the dependencies (pyarrow, pyspark, ...) but has no histmig of its
own: every import of histmig is the shipped wheel's. Each executor is one core and 1 GB."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from histmig import api
from histmig.options import Options
from tests.conftest import CORPUS, Bucket, make_lake
from tests.servers import S3_ENV, Cluster, standalone_cluster

WORKERS = 2

FAIL_ONCE = '''\
"""Test only, in the workers' Python (never part of histmig): when HISTMIG_TEST_FAIL_ONCE names a
directory, the first attempt of the first task that migrates cells fails, once for the whole
job (a marker file created there with O_EXCL)."""
import importlib.abc
import importlib.util
import os
import sys


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        migrate = module._Cells.__call__

        def failing(cells, batches):
            from pyspark import TaskContext

            if TaskContext.get().attemptNumber() == 0:
                try:
                    marker = os.path.join(os.environ["HISTMIG_TEST_FAIL_ONCE"], "failed")
                    os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
                except FileExistsError:
                    pass
                else:
                    raise RuntimeError("injected: the first attempt of this task fails")
            yield from migrate(cells, batches)

        module._Cells.__call__ = failing


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "histmig.spark":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        spec.loader = _Loader(spec.loader)
        return spec


if os.environ.get("HISTMIG_TEST_FAIL_ONCE"):
    sys.meta_path.insert(0, _Hook())
'''


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A standalone master and two workers (one core, 1 GB each) on loopback, for the session
    (:func:`tests.servers.standalone_cluster`, the workers' Python with :data:`FAIL_ONCE`).
    Fails, never skips, when Java or Spark cannot start them."""
    try:
        with standalone_cluster(tmp_path_factory.mktemp("cluster"), WORKERS, FAIL_ONCE) as running:
            yield running
    except RuntimeError as exc:
        pytest.fail(f"the cluster tests cannot run: {exc}", pytrace=False)


def test_a_job_on_the_cluster_gives_the_local_engines_bytes_and_summary(cluster: Cluster, tmp_path: Path) -> None:
    source = make_lake(tmp_path / "flat", "parquet", ())[0]
    local = api.convert(str(source), str(tmp_path / "local.parquet"), Options(jobs=1))
    report = tmp_path / "report.json"
    run = cluster.submit(
        "convert",
        str(source),
        str(tmp_path / "out"),
        "--engine",
        "spark",
        "-q",
        "--report",
        str(report),
        "--report-format",
        "json",
    )
    assert run.returncode == local.exit_code, run.stdout[-2000:] + run.stderr[-3000:]
    written = [
        row for file in sorted((tmp_path / "out").glob("part-*.parquet")) for row in pq.read_table(file).to_pylist()
    ]
    assert len(written) > 0
    assert sorted(written, key=lambda row: row["id"]) == pq.read_table(tmp_path / "local.parquet").to_pylist()
    assert json.loads(report.read_text())["summary"] == local.report.to_json()["summary"]
    executors = [p for p in Path(cluster.logs).parent.glob("work-*/app-*/*/stderr")]
    assert len({p.parent.parent.parent for p in executors}) == WORKERS  # both workers ran executors


def test_a_task_that_fails_once_is_run_again_with_the_same_bytes_and_summary(cluster: Cluster, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    make_lake(lake, "parquet")
    plain = cluster.submit(
        "convert",
        str(lake),
        str(tmp_path / "plain"),
        "--engine",
        "spark",
        "-q",
        "--report",
        str(tmp_path / "plain.json"),
        "--report-format",
        "json",
    )
    assert plain.returncode in (0, 1), plain.stderr[-3000:]
    marks = tmp_path / "marks"
    marks.mkdir()
    failing = cluster.submit(
        "convert",
        str(lake),
        str(tmp_path / "again"),
        "--engine",
        "spark",
        "-q",
        "--report",
        str(tmp_path / "again.json"),
        "--report-format",
        "json",
        executors={"HISTMIG_TEST_FAIL_ONCE": str(marks)},
    )
    assert failing.returncode == plain.returncode, failing.stderr[-3000:]
    assert [p.name for p in marks.iterdir()] == ["failed"]  # one task's first attempt failed
    assert "injected: the first attempt of this task fails" in failing.stderr + "".join(
        p.read_text() for p in Path(cluster.logs).parent.glob("work-*/app-*/*/stderr")
    )
    assert _rows(tmp_path / "again") == _rows(tmp_path / "plain")
    summary = json.loads((tmp_path / "again.json").read_text())["summary"]
    assert summary == json.loads((tmp_path / "plain.json").read_text())["summary"]
    assert summary["records_in"] == 212


def _rows(root: Path) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for file in sorted(root.rglob("*.parquet")):
        found.setdefault(str(file.parent.relative_to(root)), []).extend(pq.read_table(file).to_pylist())
    return {k: sorted(v, key=lambda row: row["id"]) for k, v in found.items()}


def _store_env(endpoint: str, **given: str) -> dict[str, str]:
    """The executors' environment for the tests' S3 server, as a user gives it with
    ``--conf spark.executorEnv.NAME=VALUE``: the endpoint, the credentials (``given`` over
    :data:`~tests.servers.S3_ENV`), and no config file of the machine."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        **S3_ENV,
        **given,
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }


def _lake_in(bucket: Bucket, root: Path) -> list[str]:
    """A Parquet lake of three partitions and a gzipped JSONL partition put under the bucket's
    ``in/`` prefix: the keys."""
    make_lake(root, "parquet")
    (root / "date=2026-01-04").mkdir()
    (root / "date=2026-01-04" / "part-0.jsonl.gz").write_bytes(gzip.compress((CORPUS / "all.jsonl").read_bytes()))
    return [
        bucket.put(f"in/{path.relative_to(root)}", path.read_bytes()).removeprefix(f"{bucket.url}/")
        for path in sorted(root.rglob("*.*"))
    ]


def test_a_job_over_object_storage_writes_each_object_as_the_local_engine_does(
    cluster: Cluster, bucket: Bucket, s3_endpoint: str, tmp_path: Path
) -> None:
    """``convert s3://b/in/ s3://b/spark/ --engine spark`` under spark-submit: the driver lists
    the objects, the executors (workers whose environment knows no store: the endpoint and
    credentials given with ``spark.executorEnv``) read and write them through fsspec: every
    output object is the local engine's, byte for byte, and so is the summary."""
    keys = _lake_in(bucket, tmp_path / "lake")
    local = api.convert(f"{bucket.url}/in/", f"{bucket.url}/local/", Options(jobs=1))
    run = cluster.submit(
        "convert",
        f"{bucket.url}/in/",
        f"{bucket.url}/spark/",
        "--engine",
        "spark",
        "--report",
        str(tmp_path / "report.json"),
        "--report-format",
        "json",
        executors=_store_env(s3_endpoint),
    )
    assert run.returncode == local.exit_code == 0, run.stderr[-3000:]
    assert local.verdict.replace("/local/", "/spark/") in run.stdout  # spark-submit's stdout has the driver's stderr
    written = bucket.keys("spark/")
    assert [key.removeprefix("spark/") for key in written] == [key.removeprefix("in/") for key in keys]
    assert len(written) == 7
    for key in written:
        assert bucket.get(key) == bucket.get("local/" + key.removeprefix("spark/")), key
    assert json.loads((tmp_path / "report.json").read_text())["summary"] == local.report.to_json()["summary"]
    assert bucket.uploads() == []
    executors = [p for p in Path(cluster.logs).parent.glob("work-*/app-*/*/stderr")]
    assert len({p.parent.parent.parent for p in executors}) == WORKERS  # both workers ran executors


def test_a_refused_credential_on_the_executors_is_one_line_without_the_secret(
    cluster: Cluster, bucket: Bucket, s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver's credential lists the objects; the executors are given a wrong secret: the
    run exits 2 with one line naming the first object asked for, and no task fails (the store's refusal
    comes back as the executor's one line), nothing is written."""
    import boto3
    from moto import settings

    _lake_in(bucket, tmp_path / "lake")
    iam = boto3.client("iam", endpoint_url=s3_endpoint, region_name="us-east-1", **_keys(S3_ENV))
    iam.create_user(UserName="histmig")
    iam.put_user_policy(
        UserName="histmig",
        PolicyName="all",
        PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        ),
    )
    key = iam.create_access_key(UserName="histmig")["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    monkeypatch.setattr(settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # the server now checks every request's key
    wrong = _store_env(s3_endpoint, AWS_ACCESS_KEY_ID=key["AccessKeyId"], AWS_SECRET_ACCESS_KEY="wrong-do-not-print")
    run = cluster.submit("convert", f"{bucket.url}/in/", f"{bucket.url}/spark/", "--engine", "spark", executors=wrong)
    assert run.returncode == 2, run.stderr[-3000:]
    # spark-submit passes the Python driver's stderr on to its own stdout
    (line,) = [line for line in (run.stdout + run.stderr).splitlines() if line.startswith("histmig")]
    # the first object the first input's task asks for: its piece of the rejects object, cleared of an attempt before
    piece = f"{bucket.url}/spark.rejects.jsonl.000000.piece"
    assert line.startswith(f"histmig: cannot write {piece}: access refused by the store ("), line
    said = run.stdout + run.stderr
    assert "wrong-do-not-print" not in said and key["SecretAccessKey"] not in said and "Traceback" not in said
    monkeypatch.setattr(settings, "INITIAL_NO_AUTH_ACTION_COUNT", float("inf"))
    assert bucket.keys("spark/") == []


def _keys(env: dict[str, str]) -> dict[str, str]:
    return {"aws_access_key_id": env["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"]}
