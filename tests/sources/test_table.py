"""A database table read by keyset pages (histmig.sources.table), through SQLite's: every row
once, in key order, whatever the page sizes; a key on two rows or a null key stops the run,
across a page boundary too; a row deleted between two pages is not missed; a page runs in a
worker without its rows."""

from __future__ import annotations

import pickle
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson
import pytest

from histmig.errors import ColumnError
from histmig.options import Options
from histmig.sources import formats, table
from histmig.sources.base import Destination
from histmig.sources.sqlite import SqliteTable
from histmig.sources.table import Page, row_name, row_names
from tests.sources.conftest import corpus_records


def make_db(path: Path, keys: list[tuple[int, int]], messages: list[bytes]) -> Path:
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE t (a INTEGER, b INTEGER, messages TEXT, PRIMARY KEY (a, b))")
        con.executemany("INSERT INTO t VALUES (?, ?, ?)", [(a, b, m.decode()) for (a, b), m in zip(keys, messages)])
        con.execute("CREATE VIEW v AS SELECT a, messages FROM t")
    return path


def pages(path: Path, name: str = "t", key_column: str | None = None) -> list[Page]:
    with SqliteTable(str(path), Destination(), Options(table=name, key_column=key_column), Options().plan()) as opened:
        return list(opened.tasks())


@pytest.fixture(scope="module")
def texts() -> list[bytes]:
    return [orjson.dumps(r["messages"]) for r in corpus_records()]


def test_a_row_is_named_by_its_key() -> None:
    assert (row_name(("id",), (42,)), row_name(("tenant", "id"), (7, "x"))) == ("id=42", "tenant=7,id=x")
    rows = [(42, b"[]", "s"), ("x", None, None)]  # a row read starts with its key values
    assert row_names(("id",), rows) == ("id=42", "id=x")
    assert row_names(("tenant", "id"), rows) == ("tenant=42,id=b'[]'", "tenant=x,id=None")


def grouped_pages(db: Path, options: Options) -> list[Page]:
    with SqliteTable(str(db), Destination(), options, options.plan()) as opened:
        return list(opened.tasks())


@pytest.mark.parametrize("batch", [1, 2, 5, 1000])
def test_conversations_are_cut_into_the_same_pages_whatever_batches_the_cursor_gives(
    tmp_path: Path, texts: list[bytes], batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under ``--conversation``, a page ends only after a whole conversation once it holds
    :data:`~histmig.sources.table.PAGE_BYTES`; each conversation is numbered in the run, sized
    (its refusal past the limit) and named, a row without a conversation key alone, and a
    conversation spanning two batches of the cursor stays one."""
    db = tmp_path / "c.sqlite"
    conversations = [0, 0, 0, None, None, 1, 2, 2, 2, 2, 3, None, 4, 4]
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, c INTEGER, s INTEGER, messages TEXT)")
        con.executemany(
            "INSERT INTO t VALUES (?, ?, ?, ?)",
            [(k, c, k, texts[k].decode()) for k, c in enumerate(conversations)],
        )
    sizes = [len(text) for text in texts[: len(conversations)]]
    limit = sum(sizes[6:10])  # conversation 2 holds as much, within it; conversation 4 more
    assert sizes[12] + sizes[13] > limit
    options = Options(table="t", conversation=("c",), order="s", max_conversation_bytes=limit)
    real = SqliteTable._ordered

    def batched(self: SqliteTable, statement: str) -> Iterator[list[tuple[Any, ...]]]:
        rows = [row for rows in real(self, statement) for row in rows]
        for start in range(0, len(rows), batch):
            yield rows[start : start + batch]

    monkeypatch.setattr(SqliteTable, "_ordered", batched)
    # in (conversation, order, key) order, nulls first in SQLite: rows 3, 4, 11, then 0-2, 5, 6-9, 10, 12-13
    read = [3, 4, 11, 0, 1, 2, 5, 6, 7, 8, 9, 10, 12, 13]
    monkeypatch.setattr(table, "PAGE_BYTES", sum(sizes[k] for k in read[:6]))  # reached after conversation 0
    assert sum(sizes[k] for k in read[6:11]) < table.PAGE_BYTES <= sum(sizes[k] for k in read[6:12])
    found = grouped_pages(db, options)
    assert [name for page in found for name in page.names] == [f"k={k}" for k in read]
    assert [cell for page in found for cell in page.cells] == [texts[k] for k in read]
    seen = [
        (s.start, s.end, s.number, s.name, s.note, s.refused is not None) for page in found for s in page.conversations
    ]
    alone = "no conversation key (c null): a conversation of its own"
    assert seen == [
        (0, 1, 0, "k=3", alone, False),
        (1, 2, 1, "k=4", alone, False),
        (2, 3, 2, "k=11", alone, False),
        (3, 6, 3, "c=0", None, False),
        (0, 1, 4, "c=1", None, False),
        (1, 5, 5, "c=2", None, False),
        (5, 6, 6, "c=3", None, False),
        (0, 2, 7, "c=4", None, True),
    ]
    assert [len(page.names) for page in found] == [6, 6, 2]
    assert [page.size for page in found] == [sum(sizes[k] for k in part) for part in (read[:6], read[6:12], read[12:])]
    refused = found[-1].conversations[0].refused  # type: ignore[index]
    assert refused == (
        f"conversation c=4 holds {sizes[12] + sizes[13]} bytes in 2 rows, past --max-conversation-bytes {limit}: "
        "rejected whole, nothing written for it"
    )


def test_pages_hold_every_row_once_in_key_order_whatever_their_size(
    tmp_path: Path, texts: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = [(i % 5, i) for i in range(len(texts))]
    db = make_db(tmp_path / "t.sqlite", keys[::-1], texts[::-1])
    monkeypatch.setattr(table, "FIRST_PAGE_ROWS", 3)
    monkeypatch.setattr(table, "PAGE_BYTES", 20_000)
    found = pages(db)
    assert [name for page in found for name in page.names] == [row_name(("a", "b"), key) for key in sorted(keys)]
    assert len(found[0].names) == 3 and len({len(page.names) for page in found}) > 3
    sizes = sorted(page.size for page in found[1:-1])  # each page sized on the last's rows: about PAGE_BYTES
    assert 10_000 < sizes[len(sizes) // 2] < 40_000 and sizes[-1] < 60_000
    by_key = dict(zip(keys, texts))
    assert [cell for page in found for cell in page.cells] == [by_key[key] for key in sorted(keys)]


@pytest.mark.parametrize(("keys", "first_page"), [([1, 2, 3, 3, 4], 3), ([1, 2, 2, 3], 5), ([1, 2, 3, 4, 4, 4], 4)])
def test_a_key_on_two_rows_stops_the_run_within_a_page_or_across_a_boundary(
    tmp_path: Path, texts: list[bytes], keys: list[int], first_page: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = make_db(tmp_path / "t.sqlite", [(a, n) for n, a in enumerate(keys)], texts[: len(keys)])
    monkeypatch.setattr(table, "FIRST_PAGE_ROWS", first_page)
    duplicate = next(a for a in keys if keys.count(a) > 1)
    with pytest.raises(ColumnError, match=f"key a={duplicate} is on two rows; name a unique column with --key-column"):
        pages(db, "v", key_column="a")


def test_a_null_key_stops_the_run(tmp_path: Path, texts: list[bytes]) -> None:
    db = tmp_path / "n.sqlite"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE t (k TEXT, messages TEXT)")
        con.executemany("INSERT INTO t VALUES (?, ?)", [("x", texts[0].decode()), (None, texts[1].decode())])
    with pytest.raises(ColumnError, match="a row has a null key"):
        pages(db, key_column="k")
    options = Options(table="t", key_column="k", conversation=("c",), order="s")
    for rows in ([("x", "c", 0), (None, "c", 1)], [("x", "c", 0), (None, None, 0)]):  # in a conversation, or alone
        grouped = tmp_path / f"g{len(rows[1][1] or '')}.sqlite"
        with sqlite3.connect(grouped) as con:
            con.execute("CREATE TABLE t (k TEXT, c TEXT, s INTEGER, messages TEXT)")
            con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", [(*row, texts[0].decode()) for row in rows])
        with pytest.raises(ColumnError, match=r"a row has a null key \(k=None\)"):
            grouped_pages(grouped, options)


def test_a_row_deleted_between_two_pages_is_not_missed(
    tmp_path: Path, texts: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = [(0, i) for i in range(20)]
    db = make_db(tmp_path / "t.sqlite", keys, texts[:20])
    monkeypatch.setattr(table, "FIRST_PAGE_ROWS", 5)
    monkeypatch.setattr(table, "PAGE_BYTES", 1)  # then a row a page
    with SqliteTable(str(db), Destination(), Options(table="t"), Options().plan()) as opened:
        tasks = opened.tasks()
        first = next(tasks)
        with sqlite3.connect(db) as con:
            con.execute("DELETE FROM t WHERE b IN (4, 5)")  # the last row read, and the next
        rest = list(tasks)
    assert first.names == tuple(f"a=0,b={i}" for i in range(5))
    assert [name for page in rest for name in page.names] == [f"a=0,b={i}" for i in range(6, 20)]
    assert max(len(page.names) for page in rest) == 2  # a row a page, and the one after the deleted row read again


def test_a_page_goes_to_a_worker_without_its_rows(tmp_path: Path, texts: list[bytes]) -> None:
    db = make_db(tmp_path / "t.sqlite", [(0, i) for i in range(30)], texts[:30])
    page = pages(db)[0]
    sent = pickle.loads(pickle.dumps(page.sent()))
    assert sent.rows == () and len(page.rows) == 30 and sent.depth == 1
    result = sent.run(Options().plan(), None)
    legacy = {i for i, text in enumerate(texts[:30]) if b"retry-prompt" in text}
    assert set(result.outputs) >= legacy and result.rejected == [] and result.last == "a=0,b=29"
    assert result.report.counts["records_in"] == 30 and result.report.counts["changed"] == len(result.outputs)


def test_same_table_is_exact_on_postgresql_and_ignores_ascii_case_on_sqlite_and_duckdb() -> None:
    postgres, sqlite, duckdb = (formats()[name].same_table for name in ("postgres", "sqlite", "duckdb"))
    assert postgres("chats", "chats") and not postgres("Chats", "chats")
    assert sqlite("Chats", "cHATS") and not sqlite("Äb", "äb") and duckdb("Chats", "cHATS")


def test_the_messages_column_is_found_by_what_it_holds(tmp_path: Path, texts: list[bytes]) -> None:
    """The chat-app example's ``message_list``, bytes: no name of a messages column, but the
    one column whose first value is a history; none or two such columns are refused."""
    db = tmp_path / "chat.sqlite"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE one (id INT PRIMARY KEY, title TEXT, message_list TEXT)")
        con.executemany("INSERT INTO one (title, message_list) VALUES (?, ?)", [("a", None), ("b", texts[0])])
        con.execute("CREATE TABLE two (id INTEGER PRIMARY KEY, old BLOB, new TEXT)")
        con.execute("INSERT INTO two (old, new) VALUES (?, ?)", (texts[0], texts[1].decode()))
        con.execute("CREATE TABLE none_ (id INTEGER PRIMARY KEY, note TEXT)")
        con.execute("INSERT INTO none_ (note) VALUES ('[1, 2]')")
    found = pages(db, "one")
    assert [page.cells for page in found] == [(None, texts[0])]
    with pytest.raises(ColumnError, match=r"several columns hold histories \(old, new\): name one with --messages"):
        pages(db, "two")
    with pytest.raises(ColumnError, match="none_: cannot tell the messages column"):
        pages(db, "none_")


@pytest.mark.parametrize("ids", [[None, None, None], [2, None, 1]], ids=["all-null", "a-null"])
def test_a_null_primary_key_falls_back_to_the_rowid_with_a_note(
    tmp_path: Path, texts: list[bytes], ids: list[int | None]
) -> None:
    """SQLite lets an ``INT PRIMARY KEY`` (not an alias of the rowid) be null, on any number of
    rows: the chat-app example never sets it. The rows are then read in rowid order, named by it, and the
    written note says so; ``--key-column`` is taken as given."""
    db = tmp_path / "chat.sqlite"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE messages (id INT PRIMARY KEY, message_list TEXT)")
        con.executemany("INSERT INTO messages VALUES (?, ?)", [(i, t) for i, t in zip(ids, texts)])
    with SqliteTable(str(db), Destination(), Options(table="messages"), Options().plan()) as opened:
        found = list(opened.tasks())
        note = opened.written().notes
    assert [name for page in found for name in page.names] == ["rowid=1", "rowid=2", "rowid=3"]
    assert [cell for page in found for cell in page.cells] == texts[:3]
    nulls = "every row" if ids.count(None) == len(ids) else f"{ids.count(None)} of {len(ids)} rows"
    assert note == [
        f"{db}:messages: the primary key (id) is null on {nulls}; rows are read in rowid order and named by it"
    ]
    with pytest.raises(ColumnError, match="a row has a null key"):
        pages(db, "messages", key_column="id")


def test_a_conversations_digest_is_taken_of_its_rows_as_read_only_when_a_write_asks(
    tmp_path: Path, texts: list[bytes]
) -> None:
    """Reading takes no digest of a conversation (``""``); :meth:`TableInput.read_as` takes it
    of the conversation's own rows as the page read them, the digest a write compares with
    what the rows hold then, and keeps one taken before."""
    db = make_db(tmp_path / "t.sqlite", [(a, b) for a in range(3) for b in range(4)], texts[:12])
    options = Options(table="t", conversation=("a",), order="b")
    with SqliteTable(str(db), Destination(), options, options.plan()) as opened:
        page = next(iter(opened.tasks()))
        seen = page.conversations
        assert seen is not None and [(s.start, s.end, s.digest) for s in seen] == [(0, 4, ""), (4, 8, ""), (8, 12, "")]
        digests = [opened.read_as(page, one).digest for one in seen]
        with closing(sqlite3.connect(db)) as con:
            held = [con.execute("SELECT a, b, messages FROM t WHERE a = ?", (a,)).fetchall() for a in range(3)]
        # each row's key (a, b), its messages, then its conversation key (a) and order (b), which a write checks too
        assert digests == [table._digest([(a, b, m.encode(), a, b) for a, b, m in rows]) for rows in held]
        assert len(set(digests)) == 3
    rows = [(1, b'[{"a": 1}]', "c", 0), (2, b"[]", "c", 1)]
    as_views = [(k, memoryview(m), c, n) for k, m, c, n in rows[::-1]]  # a driver's memoryview, another order
    assert (
        table._digest(as_views)
        == table._digest(rows)
        == table._digest([(k, bytearray(m), c, n) for k, m, c, n in rows])
    )
    for other in (
        [rows[0]],
        [*rows, (3, b"[]", "c", 2)],
        [(1, b'[{"a": 2}]', "c", 0), rows[1]],
        [rows[0], (2, "[]", "c", 1)],
    ):
        assert table._digest(other) != table._digest(rows)  # a row deleted, added, rewritten, of another type
        taken = seen[1]._replace(digest="taken before")
        assert opened.read_as(page, taken) is taken
