"""Build a large Parquet file from the corpus, for measuring ``histmig convert`` memory.

Usage: python scripts/make_big_parquet.py OUT.parquet [--size-mb 1024] [--row-group-rows 5000]

The records of fixtures/corpus/all.jsonl are repeated until the file holds about
``--size-mb`` megabytes of message JSON (Parquet compression makes the file itself smaller
on disk; uncompressed is used so the file is about that size), in a JSON-string
``messages`` column next to an int64 ``id``, a string ``name``, a timestamp ``created``
and a list<string> ``tags``. The file is written row group by row group, so building it
needs little memory too.
"""

from __future__ import annotations

import argparse
from datetime import datetime, timedelta, timezone
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "corpus" / "all.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--row-group-rows", type=int, default=5_000)
    args = parser.parse_args()
    records = [orjson.loads(line) for line in CORPUS.read_bytes().splitlines()]
    cells = [orjson.dumps(r["messages"]).decode() for r in records]
    names = [r["id"] for r in records]
    average = sum(len(c) for c in cells) / len(cells)
    total_rows = int(args.size_mb * 1024 * 1024 / average)
    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("name", pa.string()),
            ("created", pa.timestamp("us", tz="UTC")),
            ("tags", pa.list_(pa.string())),
            ("messages", pa.string()),
        ],
        metadata={b"origin": b"scripts/make_big_parquet.py"},
    )
    with pq.ParquetWriter(args.out, schema, compression="none", use_dictionary=False) as writer:
        for first in range(0, total_rows, args.row_group_rows):
            rows = range(first, min(total_rows, first + args.row_group_rows))
            writer.write_table(
                pa.table(
                    {
                        "id": list(rows),
                        "name": [names[i % len(names)] for i in rows],
                        "created": [start + timedelta(seconds=i) for i in rows],
                        "tags": [[str(i % 7)] for i in rows],
                        "messages": [cells[i % len(cells)] for i in rows],
                    },
                    schema=schema,
                ),
                row_group_size=len(rows),
            )
    print(f"{args.out}: {total_rows} rows, {Path(args.out).stat().st_size / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
