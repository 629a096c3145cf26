"""A real Spark standalone cluster (issue 27.3): a master and two workers on loopback, started
with pyspark's own ``spark-class``, and histmig run through ``spark-submit`` as the README tells
a user: histmig shipped to the executors as a wheel (``--py-files``), the command line's
``__main__.py`` as the application. The workers' Python (and the driver's) is a virtual
environment that reaches the dependencies (pyarrow, pyspark, ...) but has no histmig of its
own: every import of histmig is the shipped wheel's. Each executor is one core and 1 GB."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pyspark
import pytest

from histmig import api
from histmig.options import Options
from tests.conftest import ROOT, make_lake

SPARK_HOME = Path(pyspark.__file__).parent
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _python_without_histmig(folder: Path) -> Path:
    """A virtual environment whose Python finds the test environment's packages (a ``.pth``
    naming its site-packages, which runs none of that directory's own ``.pth`` files, so the
    editable install of histmig there is not found) and the test-only ``sitecustomize``."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (site / "sitecustomize.py").write_text(FAIL_ONCE)
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run([python, "-c", "import histmig"], capture_output=True, text=True, cwd=folder, env=clean)
    assert found.returncode != 0 and "No module named 'histmig'" in found.stderr, found.stderr
    return python


class Cluster:
    """The running cluster: its ``master`` URL, the ``python`` of its workers and driver, the
    ``wheel`` of histmig, and ``submit`` to run the command line as an application (``executors``: environment variables
    of its executors)."""

    def __init__(self, master: str, python: Path, wheel: str, logs: Path) -> None:
        self.master, self.python, self.wheel, self.logs = master, python, wheel, logs
        self.folder = logs.parent

    def submit(self, *args: str, executors: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        command = [
            str(SPARK_HOME / "bin" / "spark-submit"),
            "--master",
            self.master,
            "--py-files",
            str(self.wheel),
            "--conf",
            "spark.executor.memory=1g",
            "--conf",
            "spark.executor.cores=1",
            "--conf",
            "spark.cores.max=2",
            "--conf",
            "spark.task.maxFailures=2",
            "--conf",
            f"spark.pyspark.python={self.python}",
            "--conf",
            f"spark.pyspark.driver.python={self.python}",
            *(
                arg
                for name, value in (executors or {}).items()
                for arg in ("--conf", f"spark.executorEnv.{name}={value}")
            ),
            str(ROOT / "histmig" / "__main__.py"),
            *args,
        ]
        clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
        return subprocess.run(
            command,
            env={
                **clean,
                "SPARK_HOME": str(SPARK_HOME),
                "SPARK_LOCAL_IP": "127.0.0.1",
            },
            capture_output=True,
            text=True,
            timeout=600,
            cwd=self.folder,
        )


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A standalone master and two workers (one core, 1 GB each) on loopback, for the session.
    Fails, never skips, when Java or Spark cannot start them."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("the cluster tests need Java 17 (apt-get install openjdk-17-jre-headless)", pytrace=False)
    folder = tmp_path_factory.mktemp("cluster")
    python = _python_without_histmig(folder / "venv")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(folder / "dist"), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    (built_wheel,) = (folder / "dist").glob("histmig-*.whl")
    # PySpark puts a --py-files entry on the executors' path only when it ends in .zip, .egg or .jar:
    # the wheel (a zip) is shipped under a .zip name
    wheel = shutil.copy(built_wheel, folder / "dist" / "histmig.zip")
    port, ui = _free_port(), _free_port()
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": str(python)}
    env.pop("PYTHONPATH", None)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    logs = folder / "logs"
    logs.mkdir()
    processes = [
        subprocess.Popen(
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(ui),
            ],
            env=env,
            stdout=open(logs / "master.log", "wb"),  # noqa: SIM115 (the process holds it)
            stderr=subprocess.STDOUT,
        )
    ]
    master = f"spark://127.0.0.1:{port}"
    for n in range(WORKERS):
        work = folder / f"work-{n}"
        work.mkdir()
        processes.append(
            subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    master,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--work-dir",
                    str(work),
                    "--webui-port",
                    str(_free_port()),
                ],
                env=env,
                stdout=open(logs / f"worker-{n}.log", "wb"),  # noqa: SIM115
                stderr=subprocess.STDOUT,
            )
        )
    try:
        deadline = time.monotonic() + 120
        alive = 0
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5) as answer:
                    alive = json.load(answer).get("aliveworkers", 0)
            except OSError:
                alive = 0
            if alive == WORKERS:
                break
            if any(p.poll() is not None for p in processes):
                break
            time.sleep(1)
        if alive != WORKERS:
            said = "\n".join((logs / name).read_text()[-2000:] for name in sorted(os.listdir(logs)))
            pytest.fail(f"the Spark cluster did not start ({alive} of {WORKERS} workers):\n{said}", pytrace=False)
        yield Cluster(master, python, wheel, logs)
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


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
