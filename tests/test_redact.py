"""histmig.redact: a location's secrets hidden however they are written, and a driver's
message about it without them."""

from __future__ import annotations

import pytest

from histmig import redact
from histmig.sources import format_of, input_paths


@pytest.mark.parametrize(
    ("written", "shown", "secrets"),
    [
        ("postgresql://app:sec/ret@host/db", "postgresql://app@host/db", ["sec/ret"]),
        ("postgresql://app:p@ss@host/db", "postgresql://app@host/db", ["p@ss"]),
        ("postgresql://app:p ss@host/db", "postgresql://app@host/db", ["p ss"]),
        (
            "postgres://app:s3cr%40t@host:5432/db?sslmode=require",
            "postgres://app@host:5432/db?sslmode=require",
            ["s3cr@t"],
        ),
        ("postgresql://app:a?b*c[d@host/db", "postgresql://app@host/db", ["a?b*c[d"]),
        ("postgresql://h/db?sslmode=x&password=a@b&user=u", "postgresql://h/db?sslmode=x&password=***&user=u", ["a@b"]),
        ("mysql://root:pw@h/x", "mysql://root@h/x", ["pw"]),
        ("postgresql://app@host/db", "postgresql://app@host/db", []),
        ("host=h password=x user=u", "host=h password=*** user=u", ["x"]),
        ("host=h password=a b user=u", "host=h password=*** user=u", ["a b"]),
        ("host=h password = 'a b\\'c' user=u", "host=h password = *** user=u", ["a b'c"]),
        ("host=h sslpassword=k dbname=d", "host=h sslpassword=*** dbname=d", ["k"]),
        ("lake/chats.jsonl", "lake/chats.jsonl", []),
    ],
)
def test_a_location_is_shown_without_its_secrets(written: str, shown: str, secrets: list[str]) -> None:
    assert redact.location(written) == shown
    assert redact.secrets(written) == secrets


def test_a_message_loses_the_secrets_and_the_quoted_pieces_of_its_location() -> None:
    assert (
        redact.message('missing "=" after "b" in connection info string', "host=h password=a b")
        == 'missing "=" after "***" in connection info string'
    )
    assert (
        redact.message('unexpected spaces found in "p ss"', "postgresql://u:p ss@h")
        == 'unexpected spaces found in "***"'
    )
    assert redact.message("p is no postgres p4ss: p4ss", "host=h password=p4ss") == "p is no postgres ***: ***"
    assert (
        redact.message("at postgresql://u:pw@h/x and then host=h password=zz")
        == "at postgresql://u@h/x and then host=h password=***"
    )
    assert redact.message("host=h password=***: cannot connect") == "host=h password=***: cannot connect"
    assert redact.message("postgresql://h/d?password=***: a PostgreSQL input needs --table") == (
        "postgresql://h/d?password=***: a PostgreSQL input needs --table"
    )
    assert redact.message("postgresql://h/d?password=***pw: no") == "postgresql://h/d?password=*** no"
    for key in ("pass%77ord", "%70assword", "PASSWORD", "sslpass%77ord"):  # libpq decodes a key as it does a value
        url = f"postgresql:///db?host=/tmp&{key}=S3cretPW"
        assert redact.location(url) == f"postgresql:///db?host=/tmp&{key}=***"
        assert redact.secrets(url) == ["S3cretPW"]
        assert "S3cretPW" not in redact.message(f"{url}: libpq would not read the password as written")


def test_a_connection_string_is_postgres_never_a_path_nor_a_glob(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "host=h password=aXb").write_bytes(b"[]\n")  # what the string would match as a glob
    for location in ("host=h password=a*b", "dbname=app", " sslmode=require host=h", "postgresql://u:a[b@h/d"):
        assert format_of(location).name == "postgres"
        assert input_paths([location]) == [(location, format_of(location))]
    assert format_of("./host=h password=aXb", "jsonl").name == "jsonl"


@pytest.mark.parametrize(
    "location", ["postgresql://u:hunter2%00pass@/app", "postgresql:///app?password=hunter2%00pass"]
)
def test_a_secret_libpq_quotes_back_as_written_is_hidden_too(location: str) -> None:
    """libpq quotes a percent-encoded value it cannot decode as it was written (``%00``): the
    secret is hidden in that spelling as in its decoded one."""
    said = 'forbidden value %00 in percent-encoded value: "hunter2%00pass"'
    assert redact.message(said, location) == 'forbidden value %00 in percent-encoded value: "***"'
