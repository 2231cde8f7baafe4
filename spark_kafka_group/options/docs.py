"""Generates ``docs/options.md``, the options reference, from the option specs in
:mod:`spark_kafka_group.options` (names, types, defaults and docs), so the reference cannot
drift from the code.

    python -m spark_kafka_group.options.docs            # rewrite docs/options.md
    python -m spark_kafka_group.options.docs --check    # exit 1 if it differs (what tests check)

Each option's ``doc`` is Markdown: its first paragraph is the summary shown in the table at the
top, the rest the details under the option's own heading. Every option belongs to exactly one
section below; :func:`check_specs` refuses an option without a section or without a summary.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from spark_kafka_group.options import OPTION_FAMILIES, OPTION_SPECS, OWNED_KAFKA_KEYS, OptionSpec

#: Where the generated page lives, relative to the repository root.
PAGE = Path("docs") / "options.md"

#: The longest summary the table shows: a long cell is unreadable; details go below it.
MAX_SUMMARY_CHARS = 200

#: (title, introduction, option names) in page order; every option in exactly one section.
SECTIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "Kafka and the subscription",
        "Exactly one of `subscribe`, `subscribePattern` and `assign` is required.",
        ("kafka.bootstrap.servers", "subscribe", "subscribePattern", "assign"),
    ),
    (
        "The group",
        "The group's settings follow the Kafka consumer's; the Kafka name is given for each.",
        (
            "groupId",
            "groupStore",
            "heartbeatIntervalMs",
            "sessionTimeoutMs",
            "rebalanceTimeoutMs",
            "initialRebalanceDelayMs",
            "assignmentStrategy",
            "groupInstanceId",
            "scheduledRebalanceMaxDelayMs",
            "rebalanceListener",
            "groupLogRetention",
        ),
    ),
    (
        "Where reading starts",
        "A partition with a committed offset in the group always continues from it; these "
        "options decide where the others start.",
        (
            "startingOffsets",
            "startingTimestamp",
            "startingOffsetsByTimestamp",
            "startingOffsetsByTimestampStrategy",
            "importFromKafkaGroup",
            "failOnDataLoss",
        ),
    ),
    (
        "Batch reads",
        'Options of `spark.read.format("kafka-group")` only; a stream refuses them.',
        ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"),
    ),
    (
        "Batch size and parallelism",
        "",
        (
            "maxOffsetsPerTrigger",
            "maxBytesPerTrigger",
            "minOffsetsPerTrigger",
            "maxTriggerDelay",
            "parallelism",
            "minPartitions",
            "maxRecordsPerPartition",
        ),
    ),
    (
        "Fetching and the driver's Kafka calls",
        "",
        (
            "includeHeaders",
            "kafkaConsumer.pollTimeoutMs",
            "fetchOffset.numRetries",
            "fetchOffset.retryIntervalMs",
            "kafka.default.api.timeout.ms",
        ),
    ),
    ("Lag tools", "", ("commitToKafka",)),
    (
        "Exactly once with Spark's Delta sink",
        "",
        ("deltaSinkTable",),
    ),
    (
        "Passed through",
        "Keys under these prefixes are handed on, prefix removed.",
        ("kafka.<key>", "groupStore.<key>"),
    ),
)

_HEADER = """\
# Options

<!-- Generated from the option specs in spark_kafka_group/options/ by
     `python -m spark_kafka_group.options.docs`: edit the option specs there, not this page. -->

Options are given with `.option(name, value)` on `spark.readStream.format("kafka-group")` or
`spark.read.format("kafka-group")`. Required: `kafka.bootstrap.servers`, `groupId`,
`groupStore`, and exactly one of `subscribe`, `subscribePattern` and `assign`. Names are
case-insensitive. An unknown option is an error that names it and suggests the closest valid
name; an option of Spark's Kafka source that this source replaces says what to use instead.
"""


def all_specs() -> tuple[OptionSpec, ...]:
    return OPTION_SPECS + OPTION_FAMILIES


def summary(spec: OptionSpec) -> str:
    """The first paragraph of the option's doc."""
    return spec.doc.split("\n\n", 1)[0].strip()


def details(spec: OptionSpec) -> str:
    parts = spec.doc.split("\n\n", 1)
    return parts[1].strip() if len(parts) > 1 else ""


def anchor(name: str) -> str:
    """The option's heading id: its name (a family's ``<key>`` as ``key``)."""
    return name.replace("<key>", "key")


def type_text(spec: OptionSpec) -> str:
    return spec.type.name


def default_text(spec: OptionSpec) -> str:
    if spec.default_doc is not None:
        return spec.default_doc
    return "none" if spec.default is None else f"`{spec.default}`"


def check_specs() -> list[str]:
    """What keeps the page from documenting every option; empty when all is well."""
    problems: list[str] = []
    names = [spec.name for spec in all_specs()]
    placed = [name for _, _, members in SECTIONS for name in members]
    for name in sorted(set(names) - set(placed)):
        problems.append(
            f"option {name!r} is in no section of spark_kafka_group/options/docs.py SECTIONS"
        )
    for name in sorted(set(placed) - set(names)):
        problems.append(f"SECTIONS names {name!r}, which is not an option")
    for name in sorted({n for n in placed if placed.count(n) > 1}):
        problems.append(f"SECTIONS lists option {name!r} more than once")
    for spec in all_specs():
        text = summary(spec)
        if len(text) < 10:
            problems.append(f"option {spec.name!r} has no documentation (its spec's doc)")
        elif len(text) > MAX_SUMMARY_CHARS:
            problems.append(
                f"option {spec.name!r}: the summary (the doc's first paragraph) has {len(text)} "
                f"characters, more than {MAX_SUMMARY_CHARS}: move details after a blank line"
            )
    return problems


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render() -> str:
    """The whole options page."""
    problems = check_specs()
    if problems:
        raise ValueError("cannot generate the options page: " + "; ".join(problems))
    by_name = {spec.name: spec for spec in all_specs()}
    lines = [_HEADER, "| option | type | default | what it does |", "|---|---|---|---|"]
    for _, _, members in SECTIONS:
        for name in members:
            spec = by_name[name]
            lines.append(
                f"| [`{name}`](#{anchor(name)}) | {_cell(type_text(spec))} | "
                f"{_cell(default_text(spec))} | "
                f"{_cell(summary(spec))} |"
            )
    for title, intro, members in SECTIONS:
        lines += ["", f"## {title}", ""]
        if intro:
            lines += [intro, ""]
        for name in members:
            spec = by_name[name]
            # an HTML anchor, not an attr_list {#id}: GitHub shows those as text
            lines += [f'<a id="{anchor(name)}"></a>', "", f"### `{name}`", ""]
            lines += [*_default_line(spec), summary(spec), ""]
            if details(spec):
                lines += [details(spec), ""]
            if name == "kafka.<key>":
                lines += _owned_kafka_keys()
    return "\n".join(lines).rstrip() + "\n"


def _default_line(spec: OptionSpec) -> list[str]:
    """``**Default:** ...``, or ``**Required** ...`` for a required option, then the type."""
    text, kind = default_text(spec), f"**Type:** {type_text(spec)}"
    if text == "—":
        return [kind, ""]
    if text.startswith("required"):
        return [f"**Required**{text[len('required') :]}. {kind}", ""]
    return [f"**Default:** {text}. {kind}", ""]


def _owned_kafka_keys() -> list[str]:
    lines = ["| refused option | why, and what to use |", "|---|---|"]
    for key, reason in sorted(OWNED_KAFKA_KEYS.items()):
        lines.append(f"| `kafka.{key}` | {_cell(reason)} |")
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--root", default=".", help="the repository root (default: .)")
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if the page is stale"
    )
    args = parser.parse_args(argv)
    path = Path(args.root) / PAGE
    text = render()
    if args.check:
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != text:
            print(
                f"{path} differs from the option specs: run "
                "`python -m spark_kafka_group.options.docs` and commit the page.",
                file=sys.stderr,
            )
            return 1
        return 0
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
