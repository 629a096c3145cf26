"""Servers the tests and the benchmark start on loopback and stop: a Spark standalone cluster
(a master and workers started with pyspark's own ``spark-class``, applications run through
``spark-submit`` as the README tells a user) and an S3 API server (moto's server mode). One
place for both, so that ``scripts/bench.py`` measures what the tests check."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# found, not imported: the benchmark's children take their peak RSS from this process's
SPARK_HOME = Path(importlib.util.find_spec("pyspark").submodule_search_locations[0])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def python_without_histmig(folder: Path, sitecustomize: str = "") -> Path:
    """A virtual environment under ``folder`` whose Python finds this environment's packages (a
    ``.pth`` naming its site-packages, which runs none of that directory's own ``.pth`` files, so
    the editable install of histmig there is not found), with ``sitecustomize`` as its
    ``sitecustomize.py``. Raises RuntimeError when that Python still imports histmig."""
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
    (site / "sitecustomize.py").write_text(sitecustomize)
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run([python, "-c", "import histmig"], capture_output=True, text=True, cwd=folder, env=clean)
    if found.returncode == 0 or "No module named 'histmig'" not in found.stderr:
        raise RuntimeError(f"the workers' Python imports histmig of its own: {found.stderr[-500:]}")
    return python


class Cluster:
    """A running standalone cluster: its ``master`` URL, the ``python`` of its workers and
    driver, the ``wheel`` of histmig (shipped with ``--py-files``), the folder of its ``logs``;
    :meth:`argv` and :meth:`env` are a ``spark-submit`` of the command line, :meth:`submit`
    runs one."""

    def __init__(self, master: str, python: Path, wheel: str, logs: Path) -> None:
        self.master, self.python, self.wheel, self.logs = master, python, wheel, logs
        self.folder = logs.parent

    def argv(self, *args: str, executors: dict[str, str] | None = None) -> list[str]:
        """``spark-submit`` of ``histmig ARGS``: each executor one core and 1 GB, two at most,
        a task tried twice; ``executors`` are environment variables of the executors."""
        return [
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

    def env(self) -> dict[str, str]:
        """The environment of a ``spark-submit``: no PYTHONPATH (histmig only from the wheel)."""
        clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
        return {**clean, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1"}

    def submit(self, *args: str, executors: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args, executors=executors),
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=600,
            cwd=self.folder,
        )


@contextmanager
def standalone_cluster(folder: Path, workers: int = 2, sitecustomize: str = "") -> Iterator[Cluster]:
    """A standalone master and ``workers`` workers (one core, 1 GB each) on loopback, under
    ``folder`` (made here), stopped on exit; the workers' Python is :func:`python_without_histmig`.
    Raises RuntimeError (with the logs' tails) when Java, the wheel or the cluster cannot start."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise RuntimeError("a Spark cluster needs Java 17 (apt-get install openjdk-17-jre-headless)")
    folder.mkdir(parents=True, exist_ok=True)
    python = python_without_histmig(folder / "venv", sitecustomize)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(folder / "dist"), str(ROOT)],
        capture_output=True,
        text=True,
    )
    if built.returncode != 0:
        raise RuntimeError(f"the wheel of histmig was not built: {built.stderr[-2000:]}")
    (built_wheel,) = (folder / "dist").glob("histmig-*.whl")
    # PySpark puts a --py-files entry on the executors' path only when it ends in .zip, .egg or .jar:
    # the wheel (a zip) is shipped under a .zip name
    wheel = shutil.copy(built_wheel, folder / "dist" / "histmig.zip")
    port, ui = free_port(), free_port()
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": str(python)}
    env.pop("PYTHONPATH", None)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    logs = folder / "logs"
    logs.mkdir()
    master = f"spark://127.0.0.1:{port}"
    commands = [
        ("master", ["org.apache.spark.deploy.master.Master", "--port", str(port), "--webui-port", str(ui)]),
        *(
            (
                f"worker-{n}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    master,
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--work-dir",
                    str(folder / f"work-{n}"),
                    "--webui-port",
                    str(free_port()),
                ],
            )
            for n in range(workers)
        ),
    ]
    processes = []
    try:
        for name, command in commands:
            with open(logs / f"{name}.log", "wb") as log:  # the process holds its own descriptor
                processes.append(
                    subprocess.Popen(
                        [spark_class, *command, "--host", "127.0.0.1"], env=env, stdout=log, stderr=subprocess.STDOUT
                    )
                )
        deadline, alive = time.monotonic() + 120, 0
        while time.monotonic() < deadline and alive != workers:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5) as answer:
                    alive = json.load(answer).get("aliveworkers", 0)
            except OSError:
                alive = 0
            if alive != workers:
                if any(p.poll() is not None for p in processes):
                    break
                time.sleep(1)
        if alive != workers:
            said = "\n".join((logs / name).read_text()[-2000:] for name in sorted(os.listdir(logs)))
            raise RuntimeError(f"the Spark cluster did not start ({alive} of {workers} workers):\n{said}")
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


S3_ENV = {
    "AWS_ACCESS_KEY_ID": "histmig-test-key",
    "AWS_SECRET_ACCESS_KEY": "histmig-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}
"""The credentials given botocore for :func:`moto_server` (moto's server takes any, unless told to check)."""


@contextmanager
def moto_server() -> Iterator[str]:
    """A real S3 API server (moto's server mode, in a thread of this process, on a free
    loopback port) until exit: its endpoint URL. Raises ImportError when moto's server is
    not installed (``pip install -e '.[test]'``)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line a request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()
