"""HM503: for an older target, a part of a kind that release cannot load and that has no
older form is removed (an unsafe fix: reported as a finding unless ``--unsafe-fixes``)."""

from __future__ import annotations

from typing import Any

from histmig.rules.base import ROLLBACK, Change, Context, Docs, Messages, PartKind, Rule
from histmig.schema.releases import OLDER_FORMS, OLDEST, PART_KINDS, Span, newer_kinds

DROPPED = {kind: newer_kinds(kind) - OLDER_FORMS.keys() for kind in PART_KINDS}
"""By message kind, the part kinds this rule removes for a target that cannot load them: the
newer kinds without an older form (a ``retry-feedback`` part has one: HM502's)."""

LAST = max(first for kinds in PART_KINDS.values() for first in kinds.values())
"""The release of the newest part kind (docs/framework.md §3.2): from it on, every kind loads."""


def remove_unloadable_parts(messages: Messages, ctx: Context) -> list[Change]:
    """Remove every part whose kind the target release cannot load (the catalogue,
    docs/framework.md §3.2: a ``thinking`` part before 0.3.0, a ``speech`` part before 2.28.0,
    the bookkeeping ``*-delta`` parts before they came) and that has no older form; the
    whole part is reported as lost."""
    changes: list[Change] = []
    for m_index, message in enumerate(messages):
        kind: Any = message.get("kind") if isinstance(message, dict) else None
        parts = message.get("parts") if kind in DROPPED else None
        if not isinstance(parts, list):
            continue
        kept = []
        for p_index, part in enumerate(parts):
            part_kind: Any = part.get("part_kind") if isinstance(part, dict) else None
            if part_kind in DROPPED[kind] and PART_KINDS[kind][part_kind] > ctx.target:
                said = f"lost the part ({ctx.target} cannot load it: loaded from {PART_KINDS[kind][part_kind]})"
                changes.append(Change("HM503", m_index, p_index, part_kind, "removed", said, "exact"))
            else:
                kept.append(part)
        if len(kept) < len(parts):
            message["parts"] = kept
    return changes


RULE = Rule(
    code="HM503",
    name="unloadable-part",
    summary="(--target an older release) a part of a kind that release "
    "cannot load, with no older form -> removed (unsafe)",
    source="pydantic-ai 0.0.13-2.68.0 ModelRequest and ModelResponse part unions (pydantic_ai/messages.py), release by "
    "release: a part kind a release does not have fails its load",
    facts="docs/framework.md §3.2 (part kinds by release)",
    docs=Docs(
        what=(
            "For a --target that cannot load a part's kind (thinking before 0.3.0, builtin tool parts before 0.6.2, "
            "file before 1.0.15, compaction, speech and the *-delta and instruction-* parts before they came), removes "
            "the part, reported as lost. Unsafe: without --unsafe-fixes it is a finding and the record stays as it is."
        ),
        why="A release that does not know a part kind refuses to "
        "load the whole history; such parts have no older form.",
        safety=(
            "Unsafe: the part has no older form, so the fix removes stored content (named in the change's "
            "evidence); without --unsafe-fixes the record is kept as it is, one the target cannot load."
        ),
        before=(
            '[{"kind":"response","parts":[{"part_kind":"thinking","content":"Let me check."},{"part_kind":"text",'
            '"content":"12 C"}]}]'
        ),
        after='[{"kind":"response","parts":[{"part_kind":"text","content":"12 C"}]}]',
        target="0.2.0",
    ),
    looks=tuple(PartKind(kinds, message=kind) for kind, kinds in DROPPED.items()),
    fix=remove_unloadable_parts,
    applicability="unsafe",
    phase=ROLLBACK,
    targets=Span(OLDEST, LAST),
)
