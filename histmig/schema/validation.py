"""Validation with the pydantic models of the current (2.68) and legacy message unions.

Validation only (design.md): `current_errors` says whether pydantic-ai 2.68 will load a history,
`legacy_errors` whether histmig can read it at all. Both take plain JSON data (as orjson parses
it) and return one line per error, e.g. `messages[2].parts[0].tool_call_id: Input should be a
valid string`. Importing this module builds the models (about 0.15 s), so :mod:`histmig.schema`
imports it only when one of its names is first used.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import SchemaValidator, core_schema

from histmig.problems import Problem
from histmig.schema import PLAIN_CURRENT
from histmig.schema.current import ModelMessage
from histmig.schema.legacy import LegacyModelMessage

CurrentHistory: TypeAdapter[list[ModelMessage]] = TypeAdapter(list[ModelMessage])
"""A history as pydantic-ai 2.68 loads and writes it (docs/framework.md §3.1)."""

LegacyHistory: TypeAdapter[list[LegacyModelMessage]] = TypeAdapter(list[LegacyModelMessage])
"""A history as any release 0.0.13-2.68 wrote it (docs/framework.md §3.2, §3.3)."""

_MISSING = object()


def _path(loc: tuple[int | str, ...], messages: Any) -> str:
    """The real path of `loc` inside `messages`, without the union tags pydantic inserts.

    Walks the data alongside `loc`: a step that is a key or index of the value reached is kept;
    any other step is a union tag (a message `kind`, a `part_kind`, `str`/`list`, a type name)
    and is skipped, except the last step of a missing field, which names that field.
    """
    path, node = "messages", messages
    for step in loc:
        if isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            path, node = f"{path}[{step}]", node[step]
        elif isinstance(node, dict) and step in node:
            path, node = f"{path}.{step}", node[step]
        elif isinstance(node, dict) and step not in (node.get("kind"), node.get("part_kind")):
            path, node = f"{path}.{step}", _MISSING
    return path


def _errors(adapter: TypeAdapter[Any], messages: Any) -> list[str]:
    try:
        adapter.validate_python(messages)
    except ValidationError as exc:
        return [Problem(_path(error["loc"], messages), error["msg"]) for error in exc.errors()]
    return []


def plain_schema(schema: Any) -> Any:
    """A pydantic-core schema that accepts no more than ``schema`` and builds plain dicts.

    Every model becomes a typed dict with the same fields, aliases and extra behaviour (its
    defaults dropped: a missing field is simply absent), every ``function-before`` validator
    is left out (the ones in the schema models only widen what loads: a null legacy token
    count read as 0, a null ``details`` as ``{}``), and a union picked by a Python callable
    becomes a plain union of the same members. A value this schema accepts, the models
    accept too; the converse may fail (then the models decide). No model instance and no
    Python call per value: about half the cost of the models on a typical history.
    """
    if isinstance(schema, list):
        return [plain_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    kind = schema.get("type")
    if kind in ("model", "function-before"):
        return plain_schema(schema["schema"])
    if kind == "model-fields":
        return core_schema.typed_dict_schema(
            {name: plain_schema(f) for name, f in schema["fields"].items()}, extra_behavior="allow"
        )
    if kind == "model-field":
        inner = schema["schema"]
        required = inner["type"] != "default"
        return core_schema.typed_dict_field(
            plain_schema(inner if required else inner["schema"]),
            required=required,
            validation_alias=schema.get("validation_alias"),
        )
    if kind == "tagged-union" and callable(schema["discriminator"]):
        return core_schema.union_schema([plain_schema(choice) for choice in schema["choices"].values()])
    return {key: plain_schema(value) for key, value in schema.items() if key not in ("ref", "metadata")}


_PLAIN_CURRENT = SchemaValidator(PLAIN_CURRENT)
"""The plain form of the current schema, as stored (tests/test_schema.py: equal to
:func:`plain_schema` of the models')."""


def is_current(messages: Any) -> bool:
    """Whether pydantic-ai 2.68 loads `messages` (a history as plain JSON data): the same verdict
    as `not current_errors(messages)`, without building error lines (the happy path). Asks the
    plain-dict form of the schema first (:func:`plain_schema`), the models only when it says no."""
    if _PLAIN_CURRENT.isinstance_python(messages):
        return True
    try:
        CurrentHistory.validate_python(messages)
    except ValidationError:
        return False
    return True


def current_errors(messages: Any) -> list[str]:
    """Why pydantic-ai 2.68 would refuse to load `messages`: one `path: message` line per error.

    `messages` is a history as plain JSON data (a list of message dicts, as orjson parses it). The
    path is the real path inside it (`messages[2].parts[0].tool_call_id`); the message is
    pydantic's. An empty list means the history is current (docs/framework.md §2, §3.1). Never raises
    on bad input: a non-list gives `messages: Input should be a valid list`.
    """
    return _errors(CurrentHistory, messages)


def legacy_errors(messages: Any) -> list[str]:
    """Why `messages` is not a history any release 0.0.13-2.68 wrote; same lines as `current_errors`.

    An empty list means histmig can read it (docs/framework.md §3.2, §3.3); pre-0.0.13 archives
    (docs/framework.md §3.4) fail here.
    """
    return _errors(LegacyHistory, messages)
