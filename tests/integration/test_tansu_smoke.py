"""The quickstart's broker stays supported: the embedded Tansu (pip only, ``[embedded]``) under a
real group query. The rest of the suite runs on Apache Kafka; scripts/check_wheel runs the
quickstart itself on Tansu from the installed wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample
from spark_kafka_group.testing.waiting import wait_until
from tests.groups import committed
from tests.streaming import expected_records, run_available_now, source_options

pytestmark = [pytest.mark.spark, pytest.mark.broker]


def test_a_group_query_reads_and_commits_every_record_on_tansu(
    spark, tansu_bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    servers = tansu_bootstrap_servers
    create_topic(servers, topic_name, 2)
    first = produce_sample(servers, topic_name, partitions=2, per_partition=40)
    options = source_options(servers, topic_name, "g-tansu", group_store)

    run1 = run_available_now(spark, options, str(tmp_path / "ckpt"))
    assert run1.records == expected_records(first)
    wait_until(
        lambda: committed(group_store, "g-tansu") == {(topic_name, p): n for p, n in first.items()},
        30,
        "the final batch's commits",
    )

    # A new checkpoint in the same group resumes from the group's committed offsets.
    more = produce_sample(servers, topic_name, partitions=2, per_partition=15, start=40)
    run2 = run_available_now(spark, options, str(tmp_path / "ckpt-new"))
    assert run2.records == expected_records(more, start=first)
