"""The file-system layer (histmig.sources.fs): where an OUTPUT can be created, its missing
directories made."""

from __future__ import annotations

import functools
import gzip
import http.server
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from histmig.cli import app
from histmig.errors import UnwritableOutput
from histmig.sources.fs import PART_BYTES, check_creatable, make_parents, remote_output
from tests.conftest import CORPUS, ROOT, Bucket, make_lake

ALL = CORPUS / "all.jsonl"


def test_an_output_whose_directories_are_missing_can_be_created(tmp_path: Path) -> None:
    check_creatable(str(tmp_path / "a" / "b" / "out.jsonl"))
    check_creatable(str(tmp_path / "a" / "b"), directory=True)
    check_creatable(str(tmp_path), directory=True)
    make_parents(str(tmp_path / "a" / "b" / "out.jsonl"))
    assert (tmp_path / "a" / "b").is_dir() and not (tmp_path / "a" / "b" / "out.jsonl").exists()


def test_an_output_under_a_file_or_over_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").touch()
    with pytest.raises(UnwritableOutput, match=r"file/x/out.jsonl: '.*file' is a file, not a directory"):
        check_creatable(str(tmp_path / "file" / "x" / "out.jsonl"))
    with pytest.raises(UnwritableOutput, match="is a file, not a directory"):
        check_creatable(str(tmp_path / "file"), directory=True)
    with pytest.raises(UnwritableOutput, match="is a directory"):
        check_creatable(str(tmp_path))
    with pytest.raises(UnwritableOutput, match=r"file/out\.jsonl/x: Not a directory"):
        make_parents(str(tmp_path / "file" / "out.jsonl" / "x"))


runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, [str(arg) for arg in args], prog_name="histmig")


def local_output(tmp_path: Path, source: Path, name: str, *args: str) -> bytes:
    """What a local run writes of ``source`` as ``name``."""
    out = tmp_path / "local" / name
    assert invoke("convert", source, out, "-q", *args).exit_code in (0, 1)
    return out.read_bytes()


@pytest.mark.parametrize("name", ["all.jsonl", "all.jsonl.gz"])
def test_every_command_reads_and_writes_jsonl_objects_as_local_files(bucket: Bucket, tmp_path: Path, name: str) -> None:
    data = ALL.read_bytes() if name == "all.jsonl" else gzip.compress(ALL.read_bytes(), mtime=0)
    (tmp_path / name).write_bytes(data)
    source = bucket.put(f"in/{name}", data)
    out = f"{bucket.url}/made/{name}"
    result = invoke("convert", source, out, "-q", "--jobs", "2")
    assert result.exit_code == 0, result.output
    assert bucket.get(f"made/{name}") == local_output(tmp_path, tmp_path / name, name)
    assert bucket.uploads() == []
    assert invoke("check", source, "-q").exit_code == 1
    assert invoke("check", out, "-q").exit_code == 0
    audit = invoke("audit", source, "--report", "-", "--report-format", "json", "--no-timestamp")
    assert audit.exit_code == 0
    report = orjson.loads(audit.stdout_bytes)
    assert report["summary"]["records_in"] == 212 and report["summary"]["changed"] > 0
    assert report["changes"][0]["source"] == source


def test_rejects_and_a_report_named_on_object_storage_are_written_there(bucket: Bucket, tmp_path: Path) -> None:
    source = bucket.put("in/chats.jsonl", ALL.read_bytes() + b"{not json\n")
    rejects, report = f"{bucket.url}/rj/rejects.jsonl", f"{bucket.url}/rp/report.json"
    result = invoke(
        "convert",
        source,
        f"{bucket.url}/out.jsonl",
        "-q",
        "--rejects",
        rejects,
        "--report",
        report,
        "--report-format",
        "json",
    )
    assert result.exit_code == 1, result.output
    assert bucket.get("rj/rejects.jsonl") == b"{not json\n"
    assert orjson.loads(bucket.get("rp/report.json"))["summary"]["rejected"] == 1


def test_a_json_document_and_a_parquet_file_on_s3_give_the_local_bytes(bucket: Bucket, tmp_path: Path) -> None:
    document = CORPUS / "v2.59.0" / "a_tool_model_retry.json"
    source = bucket.put("doc.json", document.read_bytes())
    assert invoke("convert", source, f"{bucket.url}/doc.v2.json", "-q").exit_code == 0
    assert bucket.get("doc.v2.json") == local_output(tmp_path, document, "doc.json")
    parquet = make_lake(tmp_path / "lake", "parquet", ())[0]
    source = bucket.put("chats.parquet", parquet.read_bytes())
    assert invoke("convert", source, f"{bucket.url}/chats.v2.parquet", "-q", "--jobs", "2").exit_code == 0
    assert bucket.get("chats.v2.parquet") == local_output(tmp_path, parquet, "chats.parquet")
    assert invoke("convert", source, f"{bucket.url}/chats.v2.jsonl", "-q").exit_code == 0
    assert bucket.get("chats.v2.jsonl") == local_output(tmp_path, parquet, "chats.jsonl")


def test_a_prefix_is_an_input_like_a_directory_and_its_partitions_are_kept(bucket: Bucket, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    files = make_lake(lake, "parquet") + make_lake(lake / "logs", "jsonl", (("day=01",),))
    for file in files:
        bucket.put(f"lake/{file.relative_to(lake)}", file.read_bytes())
    bucket.put("lake/date=2026-01-01/_SUCCESS", b"")
    result = invoke("convert", f"{bucket.url}/lake/", f"{bucket.url}/lake.v2", "-q")
    assert result.exit_code == 0, result.output
    assert invoke("convert", lake, tmp_path / "lake.v2", "-q").exit_code == 0
    written = sorted(str(p.relative_to(tmp_path / "lake.v2")) for p in (tmp_path / "lake.v2").rglob("*") if p.is_file())
    assert written == [str(f.relative_to(lake)) for f in files if f.suffix == ".parquet"]  # logs/ is no partition
    assert bucket.keys("lake.v2/") == [f"lake.v2/{name}" for name in written]
    for name in written:
        assert bucket.get(f"lake.v2/{name}") == (tmp_path / "lake.v2" / name).read_bytes()


def test_in_place_on_object_storage_is_refused(bucket: Bucket) -> None:
    source = bucket.put("all.jsonl", ALL.read_bytes())
    result = invoke("convert", source, "--in-place")
    assert result.exit_code == 2
    assert "--in-place is refused on object storage" in result.stderr
    assert bucket.get("all.jsonl") == ALL.read_bytes()


def test_an_unsupported_scheme_is_named_with_the_supported_ones() -> None:
    result = invoke("audit", "ftp://example.invalid/chats.jsonl")
    assert result.exit_code == 2
    assert "ftp://example.invalid/chats.jsonl: URL scheme 'ftp' not supported (supported: s3:// (S3 (tested))" in (
        result.stderr
    )
    assert "gs:// (Google Cloud Storage, untested)" in result.stderr
    assert invoke("convert", str(ALL), "https://example.invalid/out.jsonl").exit_code == 2
    secret = invoke("from-otel", "postgresql://localhost/db?password=pw", "-")  # a database is no span file
    assert secret.exit_code == 2 and "histmig: postgresql://localhost/db?password=***: URL scheme 'postgresql'" in (
        secret.stderr
    )


def test_a_failed_write_leaves_no_object_and_no_upload(bucket: Bucket) -> None:
    with pytest.raises(RuntimeError, match="stop"), remote_output(f"{bucket.url}/big.jsonl") as out:
        out.write(b"x" * (3 * PART_BYTES))  # two parts sent
        raise RuntimeError("stop")
    assert bucket.keys() == [] and bucket.uploads() == []
    with remote_output(f"{bucket.url}/empty.jsonl"):
        pass
    assert bucket.get("empty.jsonl") == b""


def test_a_run_killed_mid_upload_leaves_no_object_at_the_final_key(
    bucket: Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The S3 server holds the second part's request until the run is killed: the first part
    is stored, the upload never completed (deterministic: the kill comes while the server
    holds the run at that point)."""
    from moto.s3.models import S3Backend

    source = tmp_path / "big.jsonl"
    source.write_bytes(ALL.read_bytes() * 40)  # ~24 MB: three parts
    second, release = threading.Event(), threading.Event()
    upload_part = S3Backend.upload_part

    def held(self: S3Backend, bucket_name: str, multipart_id: str, part_id: int, value: bytes) -> Any:
        if bucket_name == bucket.name and part_id == 2:
            second.set()
            release.wait(60)
            raise ConnectionAbortedError("the run was killed while this part was sent")  # never stored
        return upload_part(self, bucket_name, multipart_id, part_id, value)

    monkeypatch.setattr(S3Backend, "upload_part", held)
    run = subprocess.Popen(
        [sys.executable, "-m", "histmig", "convert", str(source), f"{bucket.url}/big.jsonl", "-q", "--jobs", "1"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert second.wait(120), run.stderr.read().decode() if run.poll() is not None else "no second part"
        run.kill()
        assert run.wait(30) == -signal.SIGKILL
    finally:
        release.set()
        run.kill()
        run.wait()
    assert bucket.keys() == []
    (upload,) = bucket.uploads()
    assert upload["Key"] == "big.jsonl"
    parts = bucket.client.list_parts(Bucket=bucket.name, Key="big.jsonl", UploadId=upload["UploadId"])["Parts"]
    assert [part["PartNumber"] for part in parts] == [1]


@pytest.mark.parametrize("command", ["audit", "convert"])
def test_a_refused_credential_is_one_line_without_the_secret(
    bucket: Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    from moto import settings

    source = bucket.put("all.jsonl", ALL.read_bytes())
    monkeypatch.setattr(settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # the server now checks every request's key
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-do-not-print")
    args = [source] if command == "audit" else [ALL, f"{bucket.url}/out.jsonl"]
    run = subprocess.run(
        [sys.executable, "-m", "histmig", command, *map(str, args), "-q"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    (line,) = run.stderr.decode().splitlines()
    said = f"{args[-1]}: " if command == "audit" else f"{args[-1]}.rejects.jsonl: "  # the first object asked for
    assert line.startswith(f"histmig: cannot {'read' if command == 'audit' else 'write'} {said}"), line
    assert "access refused by the store" in line, line
    if command == "audit":
        assert "The AWS Access Key Id you provided does not exist in our records" in line, line
    assert "wrong-secret" not in line and "histmig-test-key" not in line


@pytest.fixture
def web(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A web server on loopback (http.server, a thread of this process) serving a new
    directory: its URL and the directory."""
    served = tmp_path / "served"
    served.mkdir()
    handler = functools.partial(QuietHandler, directory=str(served))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield f"http://127.0.0.1:{server.server_address[1]}", served
        server.shutdown()
        thread.join()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_web_servers_url_is_read_as_a_file(web: tuple[str, Path], tmp_path: Path) -> None:
    url, served = web
    (served / "all.jsonl.gz").write_bytes(gzip.compress(ALL.read_bytes(), mtime=0))
    document = CORPUS / "v2.59.0" / "a_tool_model_retry.json"
    (served / "doc.json").write_bytes(document.read_bytes())
    assert invoke("convert", f"{url}/all.jsonl.gz", tmp_path / "out.jsonl", "-q").exit_code == 0
    assert (tmp_path / "out.jsonl").read_bytes() == local_output(tmp_path, ALL, "all.jsonl")
    assert invoke("convert", f"{url}/doc.json", tmp_path / "doc.json", "-q").exit_code == 0
    assert (tmp_path / "doc.json").read_bytes() == local_output(tmp_path, document, "doc.json")
    assert invoke("check", f"{url}/doc.json", "-q").exit_code == 1
    missing = invoke("audit", f"{url}/none.jsonl")
    assert missing.exit_code == 2
    assert missing.stderr.strip() == f"histmig: cannot read {url}/none.jsonl: no such file or object"


def test_a_database_by_url_is_refused_by_name(bucket: Bucket) -> None:
    result = invoke("audit", f"{bucket.url}/chats.duckdb", "--table", "chats")
    assert result.exit_code == 2
    assert f"{bucket.url}/chats.duckdb: a DuckDB database is read from a local file, not from a URL" in result.stderr
