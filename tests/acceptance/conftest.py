"""Real old pydantic-ai releases for the acceptance tests (issue 18): each installed in its own
virtual environment by the test setup, from the package index, built once and cached in
``.cache/releases/`` (gitignored), keyed by release and Python version. An environment that
cannot be built fails every test that needs it, loudly: there is no skip."""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from histmig.schema.releases import Release, release
from tests.conftest import ROOT

OLD_RELEASES = ("2.59.0", "2.0.0", "1.107.10")
"""The releases the rollback is checked in: the last one before the new retry parts, the first
2.x, and the last of the 1.x line."""

CACHE = ROOT / ".cache" / "releases"

OTEL_UNTIL = Release(1, 0, 18)
OTEL_PIN = "opentelemetry-api==1.36.0"
"""Releases up to 1.0.18 import an OpenTelemetry API that later versions removed."""

LOADER = """
import json, sys
from pydantic import ValidationError
from pydantic_ai.messages import ModelMessagesTypeAdapter
with open(sys.argv[1], 'rb') as histories, open(sys.argv[2], 'w') as out:
    for line in histories:
        try:
            ModelMessagesTypeAdapter.validate_json(line)
            error = None
        except ValidationError as exc:
            first = exc.errors()[0]
            error = '.'.join(map(str, first['loc'])) + ': ' + first['msg']
        out.write(json.dumps(error) + '\\n')
"""
"""Run in a release's environment: loads each line of a file of histories (one JSON array a
line) with ``ModelMessagesTypeAdapter.validate_json`` and writes, a line each, ``null`` or
its first error (``path: message``)."""


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (two test runs never build one environment at once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(command: list[Any]) -> None:
    done = subprocess.run([str(part) for part in command], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(map(str, command))} exited {done.returncode}: {(done.stderr or done.stdout)[-2000:]}"
        )


def environment(name: str) -> Path:
    """The python of a virtual environment holding pydantic-ai-slim ``name`` (and, up to
    1.0.18, the OpenTelemetry API it needs), built on first use. Raises ``RuntimeError``
    naming the command that failed."""
    home = CACHE / f"pydantic-ai-slim-{name}-py{sys.version_info.major}.{sys.version_info.minor}"
    python, ready = home / "bin" / "python", home / ".ready"
    with _locked(home.with_name(home.name + ".lock")):
        if not ready.exists():
            shutil.rmtree(home, ignore_errors=True)
            _run([sys.executable, "-m", "venv", home])
            extra = [OTEL_PIN] if release(name) <= OTEL_UNTIL else []
            _run(
                [
                    python,
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    f"pydantic-ai-slim=={name}",
                    *extra,
                ]
            )
            _run([python, "-c", "from pydantic_ai.messages import ModelMessagesTypeAdapter"])
            ready.write_text(f"pydantic-ai-slim=={name}\n")
    return python


@pytest.fixture(scope="session")
def release_pythons() -> dict[str, Path]:
    """The python of each of :data:`OLD_RELEASES`' environments, built (in parallel) when not
    cached. Fails the session's tests that use it when one cannot be built."""
    with ThreadPoolExecutor(len(OLD_RELEASES)) as pool:
        built = {name: pool.submit(environment, name) for name in OLD_RELEASES}
    try:
        return {name: future.result() for name, future in built.items()}
    except RuntimeError as exc:
        pytest.fail(f"cannot build the environment of a pydantic-ai release under {CACHE}: {exc}", pytrace=False)


def load_in_release(python: Path, histories: list[Any], work: Path) -> list[str | None]:
    """Each of ``histories`` (plain JSON data) loaded by the release of ``python``, all in one
    process: ``None`` where it loads, else its first error."""
    source, result = work / "histories.jsonl", work / "loaded.jsonl"
    source.write_bytes(b"".join(orjson.dumps(history) + b"\n" for history in histories))
    _run([python, "-c", LOADER, source, result])
    return [json.loads(line) for line in result.read_text().splitlines()]
