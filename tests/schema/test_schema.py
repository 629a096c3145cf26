"""The schema core's two forms agree, and the plain form needs no pydantic at import."""

from __future__ import annotations

import subprocess
import sys
from typing import get_args

import orjson

from histmig.schema import PLAIN_CURRENT_PATH, REQUEST_PART_KINDS, RESPONSE_PART_KINDS, CurrentHistory, plain_schema
from histmig.schema.current import ModelRequestPart, ModelResponsePart
from tests.conftest import ROOT


def test_the_stored_plain_schema_is_the_models_plain_schema() -> None:
    derived = orjson.loads(orjson.dumps(plain_schema(CurrentHistory.core_schema)))
    assert orjson.loads(PLAIN_CURRENT_PATH.read_bytes()) == derived, "run `python scripts/write_current_schema.py`"


def _tags(union: object) -> frozenset[str]:
    members = get_args(get_args(union)[0])
    return frozenset(get_args(member.model_fields["part_kind"].annotation)[0] for member in members)


def test_the_part_kinds_are_the_models_part_kinds() -> None:
    assert REQUEST_PART_KINDS == _tags(ModelRequestPart)
    assert RESPONSE_PART_KINDS == _tags(ModelResponsePart)
    assert {"retry-feedback", "tool-return", "user-prompt"} <= REQUEST_PART_KINDS
    assert {"text", "tool-call"} <= RESPONSE_PART_KINDS
    assert "retry-prompt" not in REQUEST_PART_KINDS | RESPONSE_PART_KINDS


def test_the_cli_and_the_hot_path_import_no_pydantic() -> None:
    code = "import sys, histmig.cli, histmig.parallel, histmig.screen; print(sorted(m for m in sys.modules if m.startswith('pydantic')))"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_a_validation_name_is_imported_on_first_use() -> None:
    code = "import sys, histmig.schema as s; print('pydantic' in sys.modules, s.current_errors([{'kind': 'request'}]), 'pydantic' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False ['messages[0].parts: Field required'] True"
