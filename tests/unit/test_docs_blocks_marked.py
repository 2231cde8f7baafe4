"""Every fenced block of README.md and docs/*.md says whether and how the docs test runs it
(tests/docs_blocks.py has the markers): a command or example added without a marker, on any
page, new pages included, fails here instead of escaping the docs test."""

from __future__ import annotations

import re

from tests.docs_blocks import KINDS, ROOT, RUNNABLE, all_blocks, pages

SHELL_LANGS = {"bash", "sh", "shell", "console"}
PYTHON_LANGS = {"python", "py", "pycon"}


def test_the_pages_are_the_readme_and_every_docs_page() -> None:
    assert set(pages()) == {ROOT / "README.md", *(ROOT / "docs").glob("*.md")}


def test_every_block_names_its_language() -> None:
    bare = [b.where for b in all_blocks() if not b.lang]
    assert not bare, f"fenced blocks without a language (use text for output): {bare}"


def test_every_runnable_block_has_a_marker_of_its_kind() -> None:
    problems = []
    for block in all_blocks():
        if block.lang not in RUNNABLE:
            if block.marker is not None:
                problems.append(f"{block.where}: a marker on a {block.lang!r} block")
            continue
        if block.marker is None:
            problems.append(f"{block.where}: {block.lang} block without <!-- test: ... -->")
        elif block.kind not in KINDS:
            problems.append(f"{block.where}: unknown marker kind {block.kind!r}")
        elif block.kind == "shell" and block.lang not in SHELL_LANGS:
            problems.append(f"{block.where}: test: shell on a {block.lang} block")
        elif block.kind == "python" and block.lang not in PYTHON_LANGS:
            problems.append(f"{block.where}: test: python on a {block.lang} block")
        elif block.kind == "none" and len(re.findall(r"\w+", block.marker)) < 4:
            problems.append(f"{block.where}: test: none needs a reason")
    assert not problems, "\n".join(problems)


def test_every_marker_sits_on_a_fence() -> None:
    """A marker separated from its block by a blank line would mark nothing."""
    stray = []
    for page in pages():
        lines = page.read_text(encoding="utf-8").split("\n")
        for number, line in enumerate(lines[:-1], start=1):
            if line.strip().startswith("<!-- test:") and not lines[number].lstrip().startswith(
                "```"
            ):
                stray.append(f"{page.relative_to(ROOT)}:{number}")
    assert not stray, f"markers not directly above a fence: {stray}"


def test_the_readme_try_block_runs() -> None:
    readme = [b for b in all_blocks() if b.page.name == "README.md"]
    tried = [b for b in readme if "kafka-group quickstart" in b.code]
    assert tried and all(b.kind == "shell" for b in tried), [b.where for b in tried]


def test_no_heading_ids_that_github_shows_as_text() -> None:
    """`## Title {#id}` (attr_list) is an anchor in the site but literal text on GitHub, where
    links to it go nowhere: an anchor that differs from the heading's own is an HTML
    <a id="..."></a> line above the heading instead."""
    found = [
        f"{page.relative_to(ROOT)}:{number}"
        for page in pages()
        for number, line in enumerate(page.read_text(encoding="utf-8").split("\n"), start=1)
        if line.startswith("#") and re.search(r"\{#[^}]*\}\s*$", line)
    ]
    assert not found, f"attr_list heading ids: {found}"


def test_what_markers_add_exists() -> None:
    """``jars=`` names a module of jvm/pom.xml, ``before=`` records tests/docs_records.py
    writes: a misspelt one would fail only in the docs test, minutes in."""
    from tests.docs_records import WRITERS

    pom = (ROOT / "jvm" / "pom.xml").read_text(encoding="utf-8")
    modules = set(re.findall(r"<module>([^<]+)</module>", pom))
    problems = [
        f"{b.where}: jars={b.options['jars']!r} is no module of jvm/pom.xml {sorted(modules)}"
        for b in all_blocks()
        if "jars" in b.options and b.options["jars"] not in modules
    ] + [
        f"{b.where}: before={b.options['before']!r} is not in tests/docs_records.py"
        for b in all_blocks()
        if "before" in b.options and b.options["before"] not in WRITERS
    ]
    assert not problems, "\n".join(problems)
    assert any("jars" in b.options for b in all_blocks())
