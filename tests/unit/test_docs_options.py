"""The options reference (docs/options.md) is generated from the option specs and cannot drift:
an option without documentation, or a checked-in page that differs from the specs, fails."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from spark_kafka_group import options
from spark_kafka_group.options import OPTION_SPECS, specs
from spark_kafka_group.options import docs as docs_options

ROOT = Path(__file__).resolve().parents[2]


def test_the_checked_in_page_is_the_generated_one() -> None:
    page = (ROOT / docs_options.PAGE).read_text(encoding="utf-8")
    assert page == docs_options.render(), (
        "docs/options.md differs from the option specs in spark_kafka_group/options/: run "
        "`python -m spark_kafka_group.options.docs` and commit the page"
    )
    assert docs_options.main(["--root", str(ROOT), "--check"]) == 0


def test_every_option_is_documented_once_with_its_default() -> None:
    assert docs_options.check_specs() == []
    page = docs_options.render()
    for spec in docs_options.all_specs():
        heading = f'<a id="{docs_options.anchor(spec.name)}"></a>\n\n### `{spec.name}`\n'
        assert page.count(heading) == 1, spec.name
        section = page.split(heading, 1)[1].split("\n### ", 1)[0]
        default = docs_options.default_text(spec)
        if default.startswith("required"):
            assert section.lstrip().startswith("**Required**"), spec.name
        elif default != "—":
            assert f"**Default:** {default}" in section, spec.name
        assert docs_options.summary(spec) in section
    # every refused kafka.* key is listed with its reason
    for key in options.OWNED_KAFKA_KEYS:
        assert f"| `kafka.{key}` |" in page


def test_an_option_added_without_documentation_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    undocumented = dataclasses.replace(OPTION_SPECS[0], name="brandNewOption", doc="")
    monkeypatch.setattr(docs_options, "OPTION_SPECS", (*OPTION_SPECS, undocumented))
    problems = docs_options.check_specs()
    assert "option 'brandNewOption' has no documentation (its spec's doc)" in problems
    assert any("'brandNewOption' is in no section" in p for p in problems)
    with pytest.raises(ValueError, match="brandNewOption"):
        docs_options.render()


def test_an_option_documented_but_placed_in_no_section_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = dataclasses.replace(OPTION_SPECS[0], name="brandNewOption", doc="Does a new thing.")
    monkeypatch.setattr(docs_options, "OPTION_SPECS", (*OPTION_SPECS, spec))
    assert docs_options.check_specs() == [
        "option 'brandNewOption' is in no section of spark_kafka_group/options/docs.py SECTIONS"
    ]


def test_a_changed_spec_makes_the_checked_in_page_stale(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    changed = tuple(
        dataclasses.replace(s, default="60000") if s.name == "sessionTimeoutMs" else s
        for s in OPTION_SPECS
    )
    monkeypatch.setattr(docs_options, "OPTION_SPECS", changed)
    assert docs_options.main(["--root", str(ROOT), "--check"]) == 1
    assert "python -m spark_kafka_group.options.docs" in capsys.readouterr().err


def test_a_long_summary_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    wordy = dataclasses.replace(OPTION_SPECS[0], doc="word " * 60)
    monkeypatch.setattr(docs_options, "OPTION_SPECS", (wordy, *OPTION_SPECS[1:]))
    assert any("move details after a blank line" in p for p in docs_options.check_specs())


def test_the_readme_has_no_hand_copied_options_table() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "| `sessionTimeoutMs` |" not in readme and "| option | default" not in readme


def test_the_page_has_every_option_the_parser_accepts_with_its_type_and_default() -> None:
    # The parser's own table, not docs_options' copy: an option the parser accepts but the
    # checked-in page lacks (or shows with another type or default) fails here.
    page = (ROOT / docs_options.PAGE).read_text(encoding="utf-8")
    for spec in (*specs.SPECS_BY_KEY.values(), *specs.OPTION_FAMILIES):
        row = (
            f"| [`{spec.name}`](#{docs_options.anchor(spec.name)}) | "
            f"{docs_options.type_text(spec)} | {docs_options.default_text(spec)} |"
        )
        assert row in page, f"no table row {row!r} in docs/options.md"
    assert len(specs.SPECS_BY_KEY) == len(OPTION_SPECS)  # no two specs share a name


def test_a_spec_missing_from_the_page_fails_the_check(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = dataclasses.replace(OPTION_SPECS[0], name="brandNewOption", doc="Does a new thing.")
    monkeypatch.setattr(docs_options, "OPTION_SPECS", (*OPTION_SPECS, extra))
    sections = (*docs_options.SECTIONS[:-1], ("New", "", ("brandNewOption",)))
    monkeypatch.setattr(docs_options, "SECTIONS", (*sections, docs_options.SECTIONS[-1]))
    assert docs_options.check_specs() == []  # documented and placed: only the page is stale
    assert docs_options.main(["--root", str(ROOT), "--check"]) == 1
    assert "differs from the option specs" in capsys.readouterr().err
