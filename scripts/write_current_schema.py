"""Write ``histmig/schema/current-plain.json``: the current (2.68) history schema as plain
data, :func:`histmig.schema.plain_schema` of the pydantic models' core schema.

Run it after changing :mod:`histmig.schema.current` (``python scripts/write_current_schema.py``);
``tests/test_schema.py`` fails while the file and the models disagree.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from histmig.schema import PLAIN_CURRENT_PATH, CurrentHistory, plain_schema  # noqa: E402


def plain_current_json() -> bytes:
    """The file's bytes: the plain schema as indented JSON, keys in the models' order."""
    return orjson.dumps(
        plain_schema(CurrentHistory.core_schema), option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE
    )


if __name__ == "__main__":
    PLAIN_CURRENT_PATH.write_bytes(plain_current_json())
    print(f"wrote {PLAIN_CURRENT_PATH}")
