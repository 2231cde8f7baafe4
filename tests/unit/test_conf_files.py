"""The option files in ``conf/`` are accepted as written, their commented store examples too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spark_kafka_group.cli import _properties_file, _UsageError
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


def test_properties_files_are_read_as_java_reads_them(tmp_path: Path) -> None:
    # Kafka's client properties files are java.util.Properties files: ':' or whitespace may
    # separate key and value, backslashes escape, a trailing backslash continues the line.
    path = tmp_path / "client.properties"
    path.write_text(
        "# a comment\n"
        "! another comment\n"
        "security.protocol: SASL_SSL\n"
        "sasl.mechanism PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        '    username="alice" \\\n'
        '    password="s3cret";\n'
        "ssl.ca.location = C:\\\\certs\\\\ca.pem\n"
        "client.id=caf\\u00e9\n"
        "key\\=with\\:separators=value\n",
        encoding="utf-8",
    )
    assert read_properties(str(path)) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="alice" password="s3cret";',
        "ssl.ca.location": "C:\\certs\\ca.pem",
        "client.id": "café",
        "key=with:separators": "value",
    }


def test_an_unreadable_command_config_is_a_usage_error_naming_the_file(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.properties")
    with pytest.raises(_UsageError, match=r"--command-config .*missing\.properties"):
        _properties_file(missing)
