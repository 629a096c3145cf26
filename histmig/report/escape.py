"""Text that comes from records, paths or drivers (record ids, keys, JSON paths, evidence,
messages) made inert where it is shown: on a terminal (:func:`terminal`) or in Markdown
(:func:`markdown`). An id holding a newline, a line or paragraph separator (U+2028, U+2029)
or a bidi override (U+202E) would otherwise forge report lines or reorder what a reader sees;
every report line, error and note goes through here. The JSON report needs neither: JSON
quotes its strings itself."""

from __future__ import annotations

import re

_INERT = re.compile("[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
"""What a terminal or a Markdown renderer reads as structure or draws unseen: the C0 and C1
controls (tab, newline, escape sequences), the soft hyphen, the line and paragraph
separators, the bidi marks, embeddings, overrides and isolates, the zero-width characters
and the byte-order mark."""

_MARKDOWN = re.compile(r"[\\`<>|&]|(?<=\])\(")
"""What lets text make structure in Markdown (GitHub's): a table cell's end (``|``), a code
span, HTML or an autolink (``<``), a character reference (``&#x202E;``), a link (the ``(``
of ``](``: a JSON path's ``[0]`` stays as it is), and the backslash that would undo an
escape. Each is shown as itself behind a ``\\``. Emphasis (``*``, ``_``) is left: it
changes how a cell looks, not what the report says."""


def terminal(text: str) -> str:
    """``text`` with every character of :data:`_INERT` shown as its code: ``\\xNN`` below
    U+0100, else ``\\uNNNN`` (a newline is ``\\x0a``, U+202E is ``\\u202e``); nothing else
    changed."""
    return _INERT.sub(_code, text)


def markdown(text: str) -> str:
    """``text`` for a Markdown line or table cell: :func:`terminal`'s codes, and every
    Markdown structure character (:data:`_MARKDOWN`, ``|`` among them) escaped with ``\\``,
    so that it renders as the text itself."""
    return _MARKDOWN.sub(r"\\\g<0>", terminal(text))


def _code(match: re.Match[str]) -> str:
    code = ord(match[0])
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
