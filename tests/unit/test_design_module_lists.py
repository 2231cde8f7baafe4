"""docs/design.md names every module of ``member/`` and ``group/`` in its list of that
package ("in `member/`:", "in `group/`"), and names no module that does not exist: the list
is checked against the tree, so a module added, moved or removed fails here until the design
says so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
PACKAGE = ROOT / "spark_kafka_group"


def listed(package: str) -> set[str]:
    """The modules (``x.py``) and subpackages (``x/``) named in the design's bullet that lists
    ``package``'s modules."""
    text = DESIGN.read_text()
    bullets = re.split(r"\n(?=- \*\*)", text)
    [bullet] = [b for b in bullets if re.search(rf"in `{package}/`", b)]
    return set(re.findall(r"`([a-z_]+(?:\.py|/))`", bullet)) - {f"{package}/"}


def in_tree(package: str) -> set[str]:
    directory = PACKAGE / package
    modules = {p.name for p in directory.glob("*.py") if p.name != "__init__.py"}
    packages = {f"{p.name}/" for p in directory.iterdir() if (p / "__init__.py").exists()}
    return modules | packages


@pytest.mark.parametrize("package", ["member", "group"])
def test_the_design_lists_every_module_of_the_package(package: str) -> None:
    named = listed(package)
    # The bullet may name modules of other packages too (``admin.py``, ``listener/``'s):
    # every name must exist somewhere in the package.
    everywhere = {p.name for p in PACKAGE.rglob("*.py")} | {
        f"{p.name}/" for p in PACKAGE.rglob("*") if (p / "__init__.py").exists()
    }
    assert named <= everywhere, f"named but nowhere: {named - everywhere}"
    assert in_tree(package) <= named, f"not in docs/design.md: {in_tree(package) - named}"


def test_the_check_sees_a_missing_module() -> None:
    """The check can fail: a module the list leaves out is what the comparison reports."""
    named = listed("member")
    assert {"decide.py", "join.py"} <= named and {"replay.py", "assignors/"} <= listed("group")
    assert in_tree("member") - (named - {"decide.py"}) == {"decide.py"}
