"""The option files in ``conf/`` are accepted as written, their commented store examples too."""

from __future__ import annotations

import re
from pathlib import Path

from spark_kafka_group.options import parse_options, read_properties, storage_options_from
from spark_kafka_group.store.safety import check_storage_options

SOURCE_PROPERTIES = Path(__file__).parents[2] / "conf" / "kafka-group-source.properties"

# A commented-out example setting: "# key=value" with an option-like key and no spaces.
_EXAMPLE = re.compile(r"^#\s*([A-Za-z][\w.]*)=(\S.*)$")


def _examples(path: Path) -> dict[str, str]:
    examples = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _EXAMPLE.match(line.strip())
        if match:
            examples[match.group(1)] = match.group(2).split("   ")[0].strip()
    return examples


def test_source_properties_and_their_commented_store_options_are_accepted() -> None:
    # The kafka.* security examples name files of the user's machine; the store examples are
    # what a user copies to set up the group log, so each must be one the log accepts.
    store_examples = {
        k: v for k, v in _examples(SOURCE_PROPERTIES).items() if k.lower().startswith("groupstore.")
    }
    assert store_examples
    options = {**read_properties(str(SOURCE_PROPERTIES)), **store_examples}
    assert any(k.lower().startswith("groupstore.") for k in options)

    parsed = parse_options(options)
    # What opening the group log checks first: no option the file suggests may be refused.
    check_storage_options(parsed.group.store, storage_options_from(options), env={})
