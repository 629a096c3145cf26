"""The file-system layer every file format (JSON, JSONL, Parquet) reads and writes through:
local paths, and object storage and web servers by URL through fsspec (README "Object
storage"): ``s3://`` (s3fs; tested against an S3 API server), ``https://`` and ``http://`` to
read, and fsspec's other stores (``gs://``, ``az://``, ...) through the same calls, untested
here. Credentials, endpoints and regions are found as each store's own tools find them (for
S3, botocore's: ``AWS_ENDPOINT_URL``, ``AWS_PROFILE``, the environment, ``~/.aws``); histmig
takes none of its own.

An object is written whole or not at all: its bytes go up as a multipart upload that is
completed only when the output is (:func:`remote_output`), and aborted on any failure, so a
partial object never appears under the final key (a killed run leaves an incomplete upload,
which is no object, for the bucket's lifecycle rule to clear). Also: where a local OUTPUT can
be created (its missing directories made when it is written).
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from histmig import redact
from histmig.errors import UnreadableInput, UnwritableOutput, UsageError

SCHEMES = {
    "s3": "S3 (tested)",
    "https": "read only",
    "http": "read only",
    "gs": "Google Cloud Storage, untested",
    "gcs": "Google Cloud Storage, untested",
    "az": "Azure, untested",
    "abfs": "Azure, untested",
    "abfss": "Azure, untested",
}
"""The URL schemes histmig reads and writes through fsspec, with what is known of each."""

READ_ONLY = frozenset({"http", "https"})

PART_BYTES = 8 << 20
"""Bytes of a multipart upload's part (S3 takes 5 MiB and more): what an object output holds
in memory while it is written, whatever its size."""

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def scheme(path: str) -> str | None:
    """The URL scheme of ``path`` in lower case (``s3`` of ``s3://bucket/key``), ``None`` for a
    local path (``file://`` is a local path too)."""
    found = _URL.match(path)
    if found is None or found[1].lower() == "file":
        return None
    return found[1].lower()


def is_url(path: str) -> bool:
    """Whether ``path`` is a URL of a store (not a local path)."""
    return scheme(path) is not None


def is_object(path: str) -> bool:
    """Whether ``path`` is the URL of a file or object in a store of :data:`SCHEMES` (not a
    local path, nor a database's URL)."""
    return scheme(path) in SCHEMES


def check_scheme(path: str, *, writing: bool = False) -> None:
    """Raise :class:`~histmig.errors.UsageError` unless the URL ``path``'s scheme is one of
    :data:`SCHEMES` (naming them), or, ``writing``, one histmig can write to."""
    found = scheme(path)
    if found is None:
        return
    if found not in SCHEMES:
        known = ", ".join(f"{name}:// ({what})" for name, what in SCHEMES.items())
        raise UsageError(f"{redact.location(path)}: URL scheme {found!r} not supported (supported: {known})")
    if writing and found in READ_ONLY:
        raise UsageError(
            f"{redact.location(path)}: {found}:// is read only; write to a local path or an object store (s3://)"
        )


def filesystem(path: str) -> tuple[Any, str]:
    """The fsspec file system of the URL ``path`` and the path within it. Raises
    :class:`~histmig.errors.UsageError` for an unsupported scheme, or one whose fsspec package
    is not installed (naming it)."""
    check_scheme(path)
    try:
        import fsspec.core  # type: ignore[import-untyped]

        return fsspec.core.url_to_fs(path)
    except ImportError as exc:
        raise UsageError(
            f"{path}: {scheme(path)}:// needs fsspec and the store's package (pip install 'histmig[s3]' for s3://): "
            f"{_line(exc)}"
        ) from exc


def _line(exc: BaseException) -> str:
    """An exception as one line: its first line (botocore and aiohttp messages name the
    request, never a secret), else its type."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@contextmanager
def store_errors(path: str, error: type[Exception]) -> Iterator[None]:
    """A block whose failures talking to a store (no such object, a refused credential, a
    network error) are raised as ``error`` (:class:`~histmig.errors.UnreadableInput` or
    :class:`~histmig.errors.UnwritableOutput`) naming ``path`` and the cause in one line."""
    try:
        yield
    except (UsageError, UnreadableInput, UnwritableOutput):
        raise
    except FileNotFoundError as exc:
        raise error(f"{path}: no such file or object") from exc
    except PermissionError as exc:  # s3fs's word for a 403: a refused credential, or no access
        raise error(f"{path}: access refused by the store ({_line(exc)})") from exc
    except Exception as exc:
        raise error(f"{path}: {_line(exc)}") from exc


def open_input(path: str, *, sequential: bool = False) -> BinaryIO:
    """The URL ``path`` opened for reading, buffered (it can be peeked at); ``sequential``:
    read from start to end, which a web server's URL is as one stream (no range requests,
    which not every server answers). Raises :class:`~histmig.errors.UnreadableInput` naming it."""
    fs, inner = filesystem(path)
    with store_errors(path, UnreadableInput):
        raw = fs.open(inner, "rb", block_size=0) if sequential and scheme(path) in READ_ONLY else fs.open(inner, "rb")
    return io.BufferedReader(raw, 1 << 20)


def size(path: str) -> int | None:
    """The size in bytes of the file or object ``path`` (``None`` when the store does not say)."""
    if not is_url(path):
        return os.path.getsize(path)
    fs, inner = filesystem(path)
    with store_errors(path, UnreadableInput):
        return fs.size(inner)


def exists(path: str, error: type[Exception] = UnreadableInput) -> bool:
    """Whether a file or object is at ``path``; a store that cannot say raises ``error``
    (:func:`store_errors`)."""
    if not is_url(path):
        return os.path.exists(path)
    fs, inner = filesystem(path)
    with store_errors(path, error):
        return bool(fs.exists(inner))


def is_directory(path: str) -> bool:
    """Whether ``path`` is a directory: a local one, or a prefix of objects (a URL ending in
    ``/``, or one the store lists as a directory; a web server's URL never is)."""
    if not is_url(path):
        return os.path.isdir(path)
    if scheme(path) in READ_ONLY:
        return False
    if path.endswith("/"):
        return True
    fs, inner = filesystem(path)
    with store_errors(path, UnreadableInput):
        return bool(fs.isdir(inner))


class Entry(NamedTuple):
    """An entry of a directory: its ``name``, its ``path`` (a URL for a store's), whether it
    is a directory."""

    name: str
    path: str
    directory: bool


def entries(path: str) -> list[Entry]:
    """The entries of the directory or prefix ``path`` (a local one's each but a broken
    symbolic link: a FIFO, a socket or a device too, for the caller to refuse). Raises
    :class:`~histmig.errors.UnreadableInput` naming it when it cannot be listed."""
    if not is_url(path):
        return [Entry(e.name, e.path, e.is_dir()) for e in os.scandir(path) if os.path.exists(e.path)]
    fs, inner = filesystem(path)
    prefix = path[: len(path) - len(path.split("://", 1)[1])]
    with store_errors(path, UnreadableInput):
        listed = fs.ls(inner.rstrip("/"), detail=True)
    found = []
    for item in listed:
        name = item["name"].rstrip("/").rsplit("/", 1)[-1]
        found.append(Entry(name, prefix + item["name"].rstrip("/"), item["type"] == "directory"))
    return found


@contextmanager
def remote_output(path: str) -> Iterator[BinaryIO]:
    """A binary stream that becomes the object at the URL ``path`` only when the block ends
    without an exception: a multipart upload of :data:`PART_BYTES` parts, completed then;
    aborted when the block raises, so no object, partial or whole, is left at ``path`` (an
    earlier one there is kept). Raises :class:`~histmig.errors.UnwritableOutput` naming
    ``path`` (a refused credential, a missing bucket)."""
    check_scheme(path, writing=True)
    fs, inner = filesystem(path)
    with store_errors(path, UnwritableOutput):
        out = fs.open(inner, "wb", block_size=PART_BYTES, autocommit=False)
    try:
        yield out
        with store_errors(path, UnwritableOutput):
            out.close()
            out.commit()
    except BaseException:
        with suppress(Exception):
            out.discard()
        raise


def _nearest(path: Path) -> Path:
    """The nearest of ``path``'s ancestors that exists (``path`` itself when it does)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_creatable(path: str, *, directory: bool = False) -> None:
    """Raise :class:`~histmig.errors.UnwritableOutput` unless the OUTPUT ``path`` (a file, or
    with ``directory`` a directory) can be written, its missing directories created: it is
    not a directory (a file) or is a writable one (a directory), and its nearest existing
    ancestor is a writable directory (not a file). A URL is checked for its scheme
    (:func:`check_scheme`); the store says the rest when it is written."""
    if is_url(path):
        check_scheme(path, writing=True)
        return
    target = Path(path)
    if target.is_dir():
        if not directory:
            raise UnwritableOutput(f"{path}: is a directory")
        if not os.access(target, os.W_OK):
            raise UnwritableOutput(f"{path}: cannot write in this directory")
        return
    if target.exists() and directory:
        raise UnwritableOutput(f"{path}: is a file, not a directory")
    found = _nearest(target.parent)
    if not found.is_dir():
        raise UnwritableOutput(f"{path}: {str(found)!r} is a file, not a directory")
    if not os.access(found, os.W_OK):
        raise UnwritableOutput(f"{path}: cannot write in {str(found)!r}")


def make_parents(path: str) -> None:
    """Create the missing directories of the OUTPUT file ``path`` (a file there appears whole,
    renamed into place once complete; only the directories are made ahead; an object store
    has none to make). Raises :class:`~histmig.errors.UnwritableOutput` naming ``path`` when
    they cannot be."""
    folder = os.path.dirname(path)
    if not folder or is_url(path):
        return
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise UnwritableOutput(f"{path}: {exc.strerror or exc}") from exc
