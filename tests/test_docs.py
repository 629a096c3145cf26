"""The user documentation (the README and docs/) against the code: the generated pages are what
``scripts/docs.py`` generates, every citation of docs/framework.md names one of its sections,
every relative link leads somewhere, every documented command line uses options its command has,
and the README's quick start is what the command line does."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import typer.main

from histmig.cli import app
from histmig.rules import registry
from tests.conftest import ROOT

_SPEC = importlib.util.spec_from_file_location("docs", ROOT / "scripts" / "docs.py")
docs = sys.modules["docs"] = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(docs)

CODE = [
    path
    for folder in ("histmig", "tests", "scripts")
    for path in sorted((ROOT / folder).rglob("*.py"))
    if path != Path(__file__).resolve()  # whose citations of no section are planted
]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def unresolved(text: str) -> list[str]:
    """The ``§N.M`` citations of ``text`` that name no heading of docs/framework.md."""
    sections = docs.framework_anchors()
    return [f"§{found[1]}" for found in docs.SECTION.finditer(text) if found[1] not in sections]


@pytest.mark.parametrize("columns", [None, "30", "300"])
def test_the_generated_pages_are_what_the_code_generates(columns: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if columns is not None:  # the same pages whatever the terminal's width
        monkeypatch.setenv("COLUMNS", columns)
    assert docs.outdated() == [], "run `python scripts/docs.py` to write the generated pages again"


def test_the_check_catches_a_page_edited_by_hand_and_a_stale_rule_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", copy)
    monkeypatch.setattr(docs, "DOCS", copy)
    monkeypatch.setattr(docs, "RULES", copy / "rules")
    edited = copy / "rules" / "HM101.md"
    edited.write_text(edited.read_text().replace("Fix: safe", "Fix: unsafe"))
    index = copy / "rules" / "index.md"
    index.write_text(index.read_text().replace("| [HM406](HM406.md) |", "| [HM406](HM406.md) | x |"))
    (copy / "rules" / "HM999.md").write_text("# HM999\n")
    (copy / "cli.md").unlink()
    assert docs.outdated() == sorted([copy / "cli.md", index, edited, copy / "rules" / "HM999.md"])
    assert docs.main(["--check"]) == 1
    assert docs.main([]) == 0
    assert docs.outdated() == []
    assert not (copy / "rules" / "HM999.md").exists()
    assert "Fix: safe" in edited.read_text()


def test_the_cli_reference_has_every_command_and_option_as_click_holds_them() -> None:
    page = (ROOT / "docs" / "cli.md").read_text()
    for command in ("convert", "audit", "check", "rules", "otel", "otel-upgrade"):
        assert f"\n## histmig {command}\n" in page
    assert "| `--messages-field FIELD` | Envelope field holding the messages (default: auto-detect). |" in page
    assert "| `-j, --jobs N` |" in page and "histmig convert chats.jsonl chats.v2.jsonl\n" in page
    assert "pip install 'histmig[spark]'" in page  # rich's escaped bracket written plain


def test_every_rule_has_a_page_in_ruffs_shape_with_its_fix_safety() -> None:
    for rule in registry():
        page = (ROOT / "docs" / "rules" / f"{rule.code}.md").read_text()
        for heading in ("What it does", "Why it matters", "Example", "Fix safety", "Source"):
            assert f"\n## {heading}\n" in page, (rule.code, heading)
        said = "Safe:" if rule.fix and rule.applicability == "safe" else "Unsafe:" if rule.fix else "No fix:"
        assert rule.docs.safety.startswith(said), rule.code
        assert rule.docs.safety in page and rule.docs.what in page and rule.source in page
        assert not re.search(r"\bBC\d", page), rule.code  # the team's bug cases are not in the repository
        assert f"[{rule.code}]({rule.code}.md)" in (ROOT / "docs" / "rules" / "index.md").read_text()


def test_every_citation_in_the_code_names_a_section_of_docs_framework() -> None:
    cited = {path.relative_to(ROOT): unresolved(path.read_text()) for path in CODE}
    assert {path: found for path, found in cited.items() if found} == {}
    assert sum(path.read_text().count("docs/framework.md §") for path in CODE) > 150
    stale = [path for path in CODE if re.search(r"framework-facts\s+§", path.read_text())]
    assert stale == [], "cite docs/framework.md, the document the repository holds"


def test_every_section_of_docs_framework_names_the_source_it_was_read_from() -> None:
    text = (ROOT / "docs" / "framework.md").read_text()
    sections = re.split(r"^## (?=§)", text, flags=re.MULTILINE)[1:]
    assert [section.split()[0] for section in sections] == ["§0", "§1", "§2", "§3", "§4", "§5"]
    for section in sections[1:]:
        intro, *subsections = re.split(r"^### (?=§)", section, flags=re.MULTILINE)
        if "Read from:" not in intro:  # else it says it for every subsection
            assert subsections, intro.splitlines()[0]
            for subsection in subsections:
                assert "Read from:" in subsection, subsection.splitlines()[0]


def test_a_citation_of_no_section_is_caught() -> None:
    assert unresolved("(docs/framework.md §2.2, §9.9; §3.3 and §1.7)") == ["§9.9", "§1.7"]
    assert unresolved("docs/framework.md §2.6 (the pairing passes)") == []


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of ``page``'s headings (outside code blocks)."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    titles = re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-") for title in titles}


def test_every_relative_link_of_the_docs_leads_to_a_file_and_heading_that_exist() -> None:
    broken = []
    for page in PAGES:
        for target in LINK.findall(re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in _anchors(linked)):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []


def test_every_page_is_reachable_from_the_docs_index() -> None:
    index = (ROOT / "docs" / "index.md").read_text()
    rules = (ROOT / "docs" / "rules" / "index.md").read_text()
    for page in sorted((ROOT / "docs").rglob("*.md")):
        name = page.relative_to(ROOT / "docs").as_posix()
        assert name == "index.md" or f"]({name})" in index or f"]({page.name})" in rules, name


def test_the_readme_is_short_and_opens_with_the_two_set_up_commands_of_the_makefile() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    first = re.search(r"```sh\n(.*?)```", readme, re.DOTALL)[1].splitlines()
    assert [line.split()[:2] for line in first] == [["make", "demo"], ["make", "test"]]
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, re.MULTILINE) and re.search(r"^test:", makefile, re.MULTILINE)
    assert "](docs/index.md)" in readme and "](CHANGELOG.md)" in readme


def _command_lines(page: Path) -> list[str]:
    """The ``histmig ...`` command lines of ``page``'s shell and console blocks (a prompt, a pipe
    before and a comment after taken off)."""
    lines, language = [], None
    # a command continued with a backslash is one command line
    for line in page.read_text().replace("\\\n", " ").splitlines():
        if line.startswith("```"):
            language = line[3:].strip() if language is None else None
        elif language in ("sh", "bash", "") or (language == "console" and line.startswith("$ ")):
            found = re.search(r"(?:^\$ |^|\| )(histmig [^#|>]*)", line.strip())
            if found:
                lines.append(found[1].strip())
    return lines


def test_every_documented_command_line_uses_options_its_command_has() -> None:
    group = typer.main.get_command(app)
    root = group.make_context("histmig", [], resilient_parsing=True)
    flags = {
        name: {
            flag
            for param in command.get_params(command.make_context(name, [], resilient_parsing=True, parent=root))
            for flag in (*param.opts, *param.secondary_opts)
        }
        for name, command in group.commands.items()
    }
    used = [(page, line) for page in PAGES for line in _command_lines(page)]
    assert len(used) > 60
    wrong = [
        f"{page.relative_to(ROOT)}: {line}"
        for page, line in used
        if line.split()[1] not in flags
        or any(
            word.split("=")[0] not in flags[line.split()[1]]
            for word in shlex.split(line)
            if word[:1] == "-" and word != "-"
        )
    ]
    assert wrong == []


def _block(text: str, marker: str) -> str:
    return re.search(re.escape(marker) + r"\n```\w*\n(.*?)```", text, re.DOTALL)[1]


def _histmig(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "histmig", *args],
        cwd=cwd,
        check=False,  # the exit code is what the tests look at
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "200"},
    )


def test_the_readme_quick_start_is_what_the_command_line_does(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    before = json.loads(_block(readme, "<!-- quick start: before -->"))
    after = _block(readme, "<!-- quick start: after -->")
    (tmp_path / "crashed.jsonl").write_bytes(orjson.dumps(before) + b"\n")
    assert _histmig("check", "crashed.jsonl", "-q", cwd=tmp_path).returncode == 1
    converted = _histmig("convert", "crashed.jsonl", "fixed.jsonl", cwd=tmp_path)
    assert converted.returncode == 0
    for line in converted.stderr.splitlines():
        if line.startswith(("crashed.jsonl:", "histmig convert:")):
            assert line in readme, line
    assert "histmig convert: 1 of 1 records migrated" in converted.stderr
    written = (tmp_path / "fixed.jsonl").read_bytes()
    assert written == orjson.dumps(json.loads(after)) + b"\n"  # the values, and their keys' order
    assert _histmig("check", "fixed.jsonl", "-q", cwd=tmp_path).returncode == 0
