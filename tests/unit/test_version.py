"""One version: the package's (``_version.py``, which the wheel carries) is the CHANGELOG's
newest release, and every wheel file name the README and docs tell a reader to install is
that version's."""

from __future__ import annotations

import re

from spark_kafka_group._version import __version__
from tests.docs_blocks import ROOT, pages


def test_the_changelog_s_newest_release_is_the_package_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    # Keep a Changelog's "Unreleased" section collects changes before the next release.
    headings = re.findall(r"^## \[([^\]]+)\]", changelog, flags=re.MULTILINE)
    releases = [h for h in headings if h != "Unreleased"]
    assert releases and releases[0] == __version__, (releases[:2], __version__)


def test_every_wheel_name_in_the_docs_is_this_version() -> None:
    wrong = {
        f"{page.relative_to(ROOT)}: {name}"
        for page in [*pages(), ROOT / "jobs" / "databricks_notebook.py"]
        for name in re.findall(
            r"spark_kafka_group-([0-9][^-]*)-py3", page.read_text(encoding="utf-8")
        )
        if name != __version__
    }
    assert not wrong, f"wheel names of another version than {__version__}: {sorted(wrong)}"
