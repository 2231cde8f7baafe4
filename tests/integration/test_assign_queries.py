"""An ``assign`` query in a group that has subscribing members (real Spark, broker, group log).

As a Kafka consumer that uses ``assign()`` and commits to a group with active members, its
commit is refused; the query fails with an error that names the group and those members.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample
from spark_kafka_group.testing.waiting import wait_until
from tests.members import group_member
from tests.streaming import Collected, source_options, start_query

pytestmark = [pytest.mark.broker]


@pytest.mark.spark
def test_an_assign_query_fails_naming_the_groups_subscribing_members(
    spark, bootstrap_servers: str, topic_name: str, group_store: str, tmp_path: Path
) -> None:
    create_topic(bootstrap_servers, topic_name, 2)
    produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=10)
    group = "g-assign"
    subscriber = group_member(group_store, group, {topic_name: 2})
    subscriber.start(must_complete_join=True)
    try:
        options = source_options(bootstrap_servers, topic_name, group, group_store)
        del options["subscribe"]
        options["assign"] = json.dumps({topic_name: [0]})
        collected = Collected()
        query = start_query(spark, options, str(tmp_path / "ckpt"), collected, available_now=False)
        try:
            with contextlib.suppress(Exception):
                query.awaitTermination(120)
            error = query.exception()
        finally:
            query.stop()
        assert error is not None, "the assign query did not fail"
        message = str(error)
        assert "CommitRejectedError" in message, message
        assert f"Group {group!r} rejected the commit of this 'assign' query" in message, message
        assert subscriber.member_id in message and f"subscribing to {topic_name}" in message
        wait_until(
            lambda: subscriber.current_holdings().held, 10, "the subscriber keeps its partitions"
        )
    finally:
        subscriber.close()
