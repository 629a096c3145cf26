"""The schema core: what pydantic-ai 2.68 loads, and what any release 0.0.13-2.68 wrote.

Two forms of the current (2.68) history schema (docs/framework.md §3.1):

- the pydantic models (:mod:`histmig.schema.current`, and :mod:`histmig.schema.legacy`
  for what old releases wrote), which name every error: :func:`current_errors`,
  :func:`legacy_errors`, :func:`is_current`, :func:`plain_schema` and the ``CurrentHistory``
  / ``LegacyHistory`` type adapters come from :mod:`histmig.schema.validation`, imported
  on first use (building the models takes about 0.15 s, which a run whose records all
  pass the screen and the settled check never pays);
- the same schema as plain data (``current-plain.json``: :func:`plain_schema` of the
  models' core schema, written by ``scripts/write_current_schema.py`` and compared with the
  models by the tests), :data:`PLAIN_CURRENT`, from which :func:`msgspec_type` builds
  msgspec types for decoding JSON text (:class:`histmig.screen.Settled`) and the part
  kinds are read at import, without pydantic.
"""

from __future__ import annotations

import datetime
import decimal
import importlib
import itertools
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Optional, Union

import msgspec
import orjson

PLAIN_CURRENT_PATH = Path(__file__).with_name("current-plain.json")
"""Where the current schema is kept as plain data (see the module docstring)."""

_VALIDATION_NAMES = frozenset(
    {"CurrentHistory", "LegacyHistory", "current_errors", "is_current", "legacy_errors", "plain_schema"}
)

_MSGSPEC_SCALARS: dict[str, Any] = {
    "any": msgspec.Raw,
    "bool": bool,
    "int": int,
    "float": float,
    "str": str,
    "datetime": datetime.datetime,
    "timedelta": datetime.timedelta,
    "decimal": decimal.Decimal,
}
_struct_names = itertools.count()

Fields = list[tuple[Any, ...]]
"""A struct's fields as :func:`msgspec.defstruct` takes them: ``(name, type)`` or
``(name, type, default)``."""


def msgspec_type(
    schema: Any,
    tag: tuple[str, str] | None = None,
    refine: Callable[[tuple[str, str] | None, Fields], Fields] | None = None,
    namespace: Callable[[tuple[str, str] | None], dict[str, Any]] | None = None,
) -> Any:
    """The msgspec type of a :func:`plain_schema` node: a typed dict becomes a struct
    (unknown fields ignored, every field of a validation alias declared apart, so the struct
    is stricter than the alias; untracked by the garbage collector, as decoded JSON holds no
    cycle), a union picked by a key a union of structs tagged by that key (``tag`` is
    ``(key, value)`` for a member), a value of any type :class:`msgspec.Raw` (skipped,
    unbuilt). msgspec is stricter than pydantic's lax mode
    (no ``5.0`` for an int), so a JSON text msgspec decodes into it is one pydantic
    accepts; the tests check it on the corpus and on generated histories. ``refine``, when
    given, is called with each struct's tag and fields and returns the fields to declare
    (to make a struct stricter still); ``namespace``, with each struct's tag, and returns
    the attributes of its class (as :func:`msgspec.defstruct` takes them). Raises
    ``TypeError`` for a node kind the current schema does not use."""

    def build(node: Any, tag: tuple[str, str] | None = None) -> Any:
        kind = node["type"]
        if kind in _MSGSPEC_SCALARS:
            return _MSGSPEC_SCALARS[kind]
        if kind == "list":
            return list[build(node["items_schema"])]  # type: ignore[misc]  # a type built at run time
        if kind == "dict":
            return dict[build(node["keys_schema"]), build(node["values_schema"])]  # type: ignore[misc]  # at run time
        if kind == "literal":
            return Literal[tuple(node["expected"])]
        if kind == "nullable":
            return Optional[build(node["schema"])]
        if kind == "union":
            return Union[tuple(build(choice) for choice in node["choices"])]
        if kind == "tagged-union":
            return Union[
                tuple(build(choice, (node["discriminator"], value)) for value, choice in node["choices"].items())
            ]
        if kind == "typed-dict":
            fields: Fields = []
            for name, spec in node["fields"].items():
                if tag is not None and name == tag[0]:
                    continue
                alias = spec.get("validation_alias")
                names = (
                    [alias]
                    if isinstance(alias, str)
                    else [path[0] for path in alias]
                    if isinstance(alias, list)
                    else [name]
                )
                value_type = build(spec["schema"])
                fields += [
                    (key, value_type) if spec["required"] and key == names[0] else (key, value_type, None)
                    for key in names
                ]
            if refine is not None:
                fields = refine(tag, fields)
            tagging: dict[str, Any] = {"tag_field": tag[0], "tag": tag[1]} if tag is not None else {}
            attributes = namespace(tag) if namespace is not None else None
            return msgspec.defstruct(
                f"_Current{next(_struct_names)}", fields, kw_only=True, gc=False, namespace=attributes, **tagging
            )
        raise TypeError(f"no msgspec type for a {kind!r} schema")

    return build(schema, tag)


def _part_kinds(plain: Any, message_kind: str) -> frozenset[str]:
    """The ``part_kind`` values of a ``message_kind`` message's parts in a plain history schema."""
    parts = plain["items_schema"]["choices"][message_kind]["fields"]["parts"]["schema"]["items_schema"]
    return frozenset(parts["choices"])


# read as a resource of the package, so histmig runs from a zip too (a wheel shipped to Spark's executors)
PLAIN_CURRENT: Any = orjson.loads(resources.files(__name__).joinpath(PLAIN_CURRENT_PATH.name).read_bytes())
"""A 2.68 history's schema as plain data (:func:`plain_schema` of the models' core schema)."""

REQUEST_PART_KINDS = _part_kinds(PLAIN_CURRENT, "request")
"""Every request ``part_kind`` 2.68 loads (docs/framework.md §3.1)."""

RESPONSE_PART_KINDS = _part_kinds(PLAIN_CURRENT, "response")
"""Every response ``part_kind`` 2.68 loads (docs/framework.md §3.1)."""


def __getattr__(name: str) -> Any:
    """The names of :mod:`histmig.schema.validation`, imported on first use (PEP 562)."""
    if name not in _VALIDATION_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("histmig.schema.validation"), name)
    globals()[name] = value
    return value


__all__ = [
    "PLAIN_CURRENT",
    "PLAIN_CURRENT_PATH",
    "REQUEST_PART_KINDS",
    "RESPONSE_PART_KINDS",
    "CurrentHistory",
    "Fields",
    "LegacyHistory",
    "current_errors",
    "is_current",
    "legacy_errors",
    "msgspec_type",
    "plain_schema",
]
