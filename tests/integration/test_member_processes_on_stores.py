"""Two Spark applications in separate processes (``tests/member_app.py``, as two spark-submit
jobs on two machines would be) share one group whose log is on an object-store server (Azurite):
one joins while records are produced steadily, the other leaves, and every record is read
exactly once.

One store is enough here: what differs between stores, appends racing from several processes
and the log read by the CLI and by running queries, is tested on both SeaweedFS and Azurite by
test_store_concurrency.py and test_object_stores.py; this scenario's own subject, two
applications handing partitions over, does not depend on the store."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from spark_kafka_group.quickstart.sample_data import create_topic
from spark_kafka_group.testing.group_log import group_records
from spark_kafka_group.testing.production import SteadyProducer
from spark_kafka_group.testing.servers import ObjectStore
from spark_kafka_group.testing.waiting import wait_until
from tests.delivery import check_delivery, journal_batches
from tests.groups import stable_with
from tests.processes import MemberProcess

pytestmark = [pytest.mark.spark, pytest.mark.broker]

PARTITIONS = 4


def test_two_applications_share_a_group_on_the_store_exactly_once(
    azure_store: ObjectStore, bootstrap_servers: str, topic_name: str, tmp_path: Path
) -> None:
    store = azure_store
    root, group = store.fresh("apps"), "g-apps"
    options = dict(store.storage_options)
    create_topic(bootstrap_servers, topic_name, PARTITIONS)

    def stable(members: int) -> bool:
        return stable_with(root, group, members, PARTITIONS, storage_options=options)

    def member(name: str) -> MemberProcess:
        # Stopped between two batches: a stop that cuts a batch after its sink ran keeps the
        # member in the group for its restart, and when none comes the partitions' new owner
        # reads that batch again (tests/integration/test_churn.py restarts such stops).
        extra = [f"--option={k}={v}" for k, v in store.source_options().items()]
        # A trigger of 2 s leaves gaps between batches for that stop to land in, also when a
        # batch takes longer than the default trigger on busy cores.
        extra += ["--stop-between-batches", "--trigger-ms=2000"]
        return MemberProcess(
            tmp_path, name, bootstrap_servers=bootstrap_servers, topic=topic_name,
            group_id=group, group_store=root, extra=extra,
        )  # fmt: skip

    first, second = member("first"), member("second")
    producer = SteadyProducer(bootstrap_servers, topic_name, PARTITIONS)
    try:
        first.start()
        wait_until(lambda: stable(1), 120, f"the first application on {store.name}")
        producer.start()
        wait_until(lambda: first.records(), 60, "the first application reading")
        second.start()  # joins during steady production
        wait_until(lambda: stable(2), 120, "the second application's join")
        wait_until(lambda: second.records(), 60, "the second application reading")
        time.sleep(2)
        first.stop()  # leaves during steady production (stopped between batches, LEAVE written)
        assert first.process is not None and first.process.returncode == 0, first.output()
        wait_until(lambda: stable(1), 60, "the first application's leave")
        time.sleep(2)
        final = producer.stop()
        total = sum(final.values())
        wait_until(
            lambda: len(set(first.records()) | set(second.records())) >= total,
            90, "every produced record",
        )  # fmt: skip
    finally:
        producer.stop()
        first.stop()
        second.stop()
    assert second.process is not None and second.process.returncode == 0, second.output()

    consumed = Counter(first.records() + second.records())
    produced = {(p, o) for p, n in final.items() for o in range(n)}
    assert set(consumed) == produced, f"lost: {sorted(produced - set(consumed))[:10]}"
    assert max(consumed.values()) == 1, [r for r, n in consumed.items() if n > 1][:10]
    assert {p for p, _ in first.records()} and {p for p, _ in second.records()}
    records = group_records(root, group, storage_options=options)
    batches = journal_batches("first", first.batches()) + journal_batches(
        "second", second.batches()
    )
    check_delivery(final, batches, records).assert_ok()
