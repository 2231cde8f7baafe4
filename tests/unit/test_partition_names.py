"""A partition is named ``topic-partition`` (Kafka's ``TopicPartition.toString``) by one
function, everywhere: messages, logs, the CLI, the timeline."""

from __future__ import annotations

import re
from pathlib import Path

import spark_kafka_group
from spark_kafka_group.group.metadata import TopicPartition, partition_name

#: What a hand-written ``topic-partition`` looks like in an f-string or a %-format.
HAND_WRITTEN = re.compile(
    r"\{(t|topic|tp\[0\]|[\w.]+\.topic|[\w.]+\[0\]\[0\])\}-\{(p|partition|tp\[1\]|[\w.]+\.partition|[\w.]+\[0\]\[1\])\}"
    r"|%s-%d"
)


def test_a_partition_reads_as_kafka_prints_it() -> None:
    assert partition_name("orders-eu", 3) == "orders-eu-3"
    assert str(TopicPartition("orders", 0)) == "orders-0"
    assert f"{TopicPartition('orders', 12)}" == "orders-12"
    assert TopicPartition("orders", 0) == ("orders", 0)  # still the plain pair


def test_no_module_spells_the_form_itself() -> None:
    package = Path(spark_kafka_group.__file__).parent
    found = [
        f"{path.relative_to(package)}: {line.strip()}"
        for path in sorted(package.rglob("*.py"))
        for line in path.read_text().splitlines()
        if HAND_WRITTEN.search(line) and "def partition_name" not in line
    ]
    assert found == ['group/metadata.py: return f"{topic}-{partition}"']


def test_the_check_sees_each_hand_written_form() -> None:
    for line in [
        'f"{tp.topic}-{tp.partition}"',
        'f"{t}-{p}"',
        'f"{tp[0]}-{tp[1]}"',
        'f"{spec.topic}-{spec.partition}"',
        'f"{latest[0][0]}-{latest[0][1]}"',
        '"%s-%d starts at %d"',
    ]:
        assert HAND_WRITTEN.search(line), line
