"""The source through Spark Connect (what Databricks serverless and shared clusters use): a
client application (tests/connect_app.py) runs ``SparkSession.builder.remote("local[2]")``,
registers the source and its progress listener through Connect, and reads a topic with a
memory sink. Real broker, real Delta group log; the test reads the group log itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import spark_kafka_group
from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample
from spark_kafka_group.testing.group_log import group_records
from spark_kafka_group.testing.waiting import wait_until
from tests.groups import committed
from tests.spark_apps import AppProcess
from tests.streaming import expected_records, source_options

# Also in the smoke suite on the oldest supported pyspark: Spark Connect and Python data
# sources changed between 4.0 and 4.3, and Databricks runtimes span both.
pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.smoke]

#: The reader commits a batch only at its next trigger, at least this long after the batch
#: started: a commit seen within :data:`LISTENER_WINDOW_S` of the batch can only be the progress
#: listener's. (A member whose join takes longer than its start-up wait plans an empty first
#: batch; its records then come one trigger later, and the reasoning holds for that batch.)
TRIGGER = "60 seconds"
LISTENER_WINDOW_S = 30


def test_the_source_through_spark_connect(
    bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    group = "g-connect"
    create_topic(bootstrap_servers, topic_name, 3)
    counts = produce_sample(bootstrap_servers, topic_name, partitions=3, per_partition=200)
    config = {
        "options": source_options(bootstrap_servers, topic_name, group, group_store),
        "checkpoint": str(tmp_path / "checkpoint"),
        "trigger": TRIGGER,
        "expected": sum(counts.values()),
        "timeout_s": 180,
    }
    app = AppProcess(
        ["-m", "tests.connect_app", json.dumps(config)], log=tmp_path / "connect.log", env={}
    )
    try:
        read = app.expect("read", timeout_s=300)
        # Registered through Connect and read exactly once.
        assert sorted(map(tuple, read["records"])) == expected_records(counts)

        # Committed by the listener that Spark Connect runs on the server: in its commit object
        # for the member (what describe shows at once), then in the group log itself once the
        # member's fold brings the object in.
        ends = {(topic_name, p): n for p, n in counts.items()}

        def commits() -> list:
            return [r for r in group_records(group_store, group) if r.kind == RecordKind.COMMIT]

        wait_until(
            lambda: (
                committed(group_store, group) == ends
                and {(r.topic, r.partition): r.offset for r in commits()} == ends
            ),
            LISTENER_WINDOW_S,
            f"commits of {ends} in the group log",
        )
        member = read["member"]
        assert {r.member_id for r in commits()} == {member}

        # The member leaves when its query terminates.
        app.send("stop")
        app.expect("stopped", timeout_s=120)
        wait_until(
            lambda: any(
                r.kind == RecordKind.LEAVE and r.member_id == member
                for r in group_records(group_store, group)
            ),
            30,
            f"the LEAVE of {member}",
        )
        assert app.finish() == 0, app.log_tail()
    finally:
        app.kill()
    assert not spark_kafka_group.describe_group(group_store, group).members
