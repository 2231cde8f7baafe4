"""The fenced code blocks of README.md and docs/*.md, with the marker that says how the docs test
(tests/integration/test_docs_blocks.py) runs each.

A marker is an HTML comment on the line just above the fence (invisible on GitHub and in the
site):

    <!-- test: shell -->                  run with bash in the docs test's working directory
    <!-- test: shell in=checkout -->      the same, in a copy of the checkout (pip install ".")
    <!-- test: python -->                 run with the virtualenv's python; must print something
    <!-- test: python file=app.py -->     saved as app.py in the working directory (and
                                          compiled); later blocks of the page run it
    <!-- test: python file=app.py args="first second" until="REGEX" -->
                                          a streaming application: one process per argument,
                                          side by side, each until its output matches REGEX
    <!-- test: python jars=spark-avro before=orders-avro -->
                                          jars=MODULE: the jars of that module of jvm/pom.xml
                                          on Spark's classpath (what the page's --packages
                                          gives); before=NAME: first the records (and files)
                                          that the page says the reader's producers wrote
                                          (tests/docs_records.py)
    <!-- test: none, REASON -->           not run, for the reason given (a fragment, a cloud
                                          account, a benchmark ...)

Every block in a language a user runs (``RUNNABLE``) needs a marker, and every block needs a
language (``text`` for output), so that a new page's commands cannot escape the test.
"""

from __future__ import annotations

import re
import shlex
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNNABLE = frozenset({"bash", "sh", "shell", "console", "python", "py", "pycon"})
KINDS = frozenset({"shell", "python", "none"})
_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w+-]*)\s*$")
_MARKER = re.compile(r"^\s*<!--\s*test:\s*(?P<body>.*?)\s*-->\s*$")

#: What the docs test puts in place of the documented local addresses (and nothing else).
LOCAL_BROKER = "localhost:9092"
LOCAL_TMP = "/tmp/"


def pages() -> list[Path]:
    """Every page, Getting started first: it makes the topic `events` that the README's and
    the other pages' examples read (the README sends readers there for it); then the README,
    the site's index and the other pages."""
    docs = sorted((ROOT / "docs").glob("*.md"))
    first = [ROOT / "docs" / "getting-started.md", ROOT / "README.md", ROOT / "docs" / "index.md"]
    return [*first, *[p for p in docs if p not in first]]


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    marker: str | None  # the marker's text after "test:", None without a marker
    options: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def kind(self) -> str | None:
        if self.marker is None:
            return None
        return re.split(r"[\s,]", self.marker, maxsplit=1)[0]


def _options(marker: str) -> dict[str, str]:
    words = shlex.split(marker.replace(",", " ", 1)) if not marker.startswith("none") else []
    return dict(word.split("=", 1) for word in words[1:] if "=" in word)


def blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").split("\n")
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        marker = _MARKER.match(lines[i - 1]) if i else None
        body = marker.group("body") if marker else None
        found.append(
            Block(
                page=page,
                line=i + 1,
                lang=fence.group("lang"),
                code=textwrap.dedent("\n".join(lines[i + 1 : end])) + "\n",
                marker=body,
                options=_options(body) if body else {},
            )
        )
        i = end + 1
    return found


def all_blocks() -> list[Block]:
    return [block for page in pages() for block in blocks(page)]
