"""histmig.report.escape: what a terminal or Markdown would read as structure, shown inert."""

from __future__ import annotations

import pytest

from histmig.report.escape import markdown, terminal


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a\nb", "a\\x0ab"),
        ("a\rb\tc", "a\\x0db\\x09c"),
        ("\x1b[31mred", "\\x1b[31mred"),
        ("line\u2028para\u2029", "line\\u2028para\\u2029"),
        ("\u202eevil\u202c \u2066iso\u2069 \u200fmark", "\\u202eevil\\u202c \\u2066iso\\u2069 \\u200fmark"),
        ("zero\u200bwidth\ufeff", "zero\\u200bwidth\\ufeff"),
        ("\x85next\x1cfile", "\\x85next\\x1cfile"),
        ("plain é 中 🙂 [0] |`", "plain é 中 🙂 [0] |`"),
    ],
)
def test_a_terminal_sees_every_control_separator_and_bidi_character_as_its_code(text: str, shown: str) -> None:
    assert terminal(text) == shown
    assert terminal(text).splitlines() == [terminal(text)]  # one line, for Python's idea of lines too


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a|b", "a\\|b"),
        ("`code`", "\\`code\\`"),
        ("<img src=x>", "\\<img src=x\\>"),
        ("&#x202E;", "\\&#x202E;"),
        ("[click](http://x)", "[click]\\(http://x)"),
        ("a\\|b", "a\\\\\\|b"),
        ("messages[0].parts[1] tool_call_id *x*", "messages[0].parts[1] tool_call_id *x*"),
        ("a\nb\u202e", "a\\\\x0ab\\\\u202e"),
    ],
)
def test_markdown_sees_no_structure_in_a_cell(text: str, shown: str) -> None:
    assert markdown(text) == shown
