"""The option files in ``conf/`` are accepted as written, their commented store examples too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spark_kafka_group.ops.cli.arguments import _UsageError, properties_file
from spark_kafka_group.options import parse_options, read_properties, storage_options_from
from spark_kafka_group.store.safety import check_storage_options

REPO = Path(__file__).parents[2]
SOURCE_PROPERTIES = REPO / "conf" / "kafka-group-source.properties"
SPARK_DEFAULTS = REPO / "conf" / "spark-defaults.conf"

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
        properties_file(missing)


def test_spark_defaults_holds_only_settings_that_act_on_kafka_group_jobs() -> None:
    # Each setting here is exercised by tests/integration/test_jobs.py's local-cluster submit
    # (the Delta jars through its offline alternative, spark.jars). Settings that do nothing for
    # this source (Arrow for pandas conversions, DStreams' graceful shutdown, Spark's own
    # defaults) must not come back, nor a setting right in one deploy mode only (a driver
    # Python of the submitting machine, a YARN application master's environment).
    assert set(read_properties(str(SPARK_DEFAULTS))) == {
        "spark.archives",
        "spark.pyspark.python",
        "spark.jars.packages",
        "spark.sql.extensions",
        "spark.sql.catalog.spark_catalog",
    }


def test_spark_defaults_names_the_delta_spark_the_tests_run() -> None:
    # jvm/pom.xml pins the delta-spark jar (its artifact names the Spark line) that the
    # maven_spark tests run; the coordinate users are told to fetch must be that one.
    parent = (REPO / "jvm" / "pom.xml").read_text(encoding="utf-8")
    module = (REPO / "jvm" / "delta-spark" / "pom.xml").read_text(encoding="utf-8")
    version = re.search(r"<delta\.version>([^<]+)<", parent)
    artifact = re.search(r"<artifactId>(delta-spark_[^<]+)<", module)
    assert version and artifact
    coordinate = f"io.delta:{artifact.group(1)}:{version.group(1)}"
    assert read_properties(str(SPARK_DEFAULTS))["spark.jars.packages"] == coordinate


def test_conf_files_point_only_at_pages_that_exist() -> None:
    for path in (SPARK_DEFAULTS, SOURCE_PROPERTIES):
        text = path.read_text(encoding="utf-8")
        assert "README" not in text, f"{path.name} points into the README"
        for page in re.findall(r"\b((?:docs|jobs|conf)/[\w./-]+\.(?:md|py|conf|properties))", text):
            assert (REPO / page).is_file(), f"{path.name} names {page}, which does not exist"


def test_source_properties_leave_commit_to_kafka_off_and_say_what_it_does() -> None:
    # commitToKafka writes to a Kafka consumer group of the same name: an example turned on
    # without a reason would make every copy of it write there.
    assert "commitToKafka" not in read_properties(str(SOURCE_PROPERTIES))
    text = SOURCE_PROPERTIES.read_text(encoding="utf-8")
    assert "# commitToKafka=true" in text and "kafka-consumer-groups" in text
