"""Fetch edges benchmark: how soon an executor's fetch returns at the edges of a partition.

tests/integration/test_fetcher.py checks that these fetches return the right records and do
not hang; how soon they return is measured here (a test asserts no timing):

1. ``end``: a range ending at the log end (the last 5 records), then an empty range at the
   end. Baseline: a plain confluent-kafka consumer, ``assign`` at the same offset and
   ``consume`` of the same 5 records.
2. ``markers``: a transactional partition (two transactions of five records and their commit
   markers) read whole with ``read_committed``. Baseline: the plain consumer reading the same
   records. Skipped when the broker does not take transactions.
3. ``unreachable``: a fetch from a broker that does not exist (``127.0.0.1:1``) with
   ``fetch_timeout_s`` 3, until its BrokerUnavailableError. Baseline: that timeout.

    python -m benchmarks.bench_fetch_edges             # single-node Apache Kafka, ~1 min
    python -m benchmarks.bench_fetch_edges --runs 9 --bootstrap-servers broker:9092

The last line is ``key=value`` pairs: ``<edge>_p50_s``, ``<edge>_max_s``, ``baseline_<edge>_p50_s``
and ``ratio_<edge>_p50`` (figure over baseline, median against median).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from functools import partial

from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks.harness import add_broker_argument, bootstrap_or_kafka, fresh_topic, print_result
from spark_kafka_group.errors import BrokerUnavailableError
from spark_kafka_group.fetcher import FetchSpec, consumer_pool, fetch
from spark_kafka_group.group.metadata import TopicPartition as GroupTopicPartition
from spark_kafka_group.kafka import KafkaCluster
from spark_kafka_group.quickstart.sample_data import produce

UNREACHABLE_TIMEOUT_S = 3.0


def timed(action: Callable[[], object]) -> float:
    started = time.monotonic()
    action()
    return time.monotonic() - started


def fetched(spec: FetchSpec) -> list[int]:
    return [o for batch in fetch(spec) for o in batch.column("offset").to_pylist()]


def plain_consumer_read(servers: str, topic: str, start: int, count: int, **conf: str) -> None:
    """The baseline: a plain consumer reads ``count`` records of partition 0 from ``start``."""
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "log_level": 0,
            **conf,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, start)])
        got = 0
        deadline = time.monotonic() + 60
        while got < count and time.monotonic() < deadline:
            got += sum(1 for m in consumer.consume(count - got, timeout=1.0) if not m.error())
        if got < count:
            raise SystemExit(f"the plain consumer read {got} of {count} records in 60 s")
    finally:
        consumer.close()


def end_of_log(servers: str, topic: str, end: int) -> float:
    def action() -> None:
        assert fetched(FetchSpec(topic, 0, end - 5, end, servers)) == list(range(end - 5, end))
        assert fetched(FetchSpec(topic, 0, end, end, servers)) == []

    return timed(action)


def transactional_topic(servers: str, topic: str) -> int | None:
    """Two transactions of five records; the partition's end, or None without transactions."""
    producer = Producer({"bootstrap.servers": servers, "transactional.id": topic, "log_level": 0})
    try:
        producer.init_transactions(10)
        for txn in range(2):
            producer.begin_transaction()
            for i in range(5):
                producer.produce(topic, value=f"value-{txn * 5 + i}".encode(), partition=0)
            producer.commit_transaction(10)
    except Exception as exc:
        print(f"markers: skipped, the broker does not take transactions ({exc})")
        return None
    with KafkaCluster(servers) as cluster:
        tp = GroupTopicPartition(topic, 0)
        return cluster.latest_offsets([tp])[tp]


def unreachable() -> float:
    def action() -> None:
        try:
            fetched(FetchSpec("t", 0, 0, 10, "127.0.0.1:1", fetch_timeout_s=UNREACHABLE_TIMEOUT_S))
        except BrokerUnavailableError:
            return
        raise SystemExit("a fetch from 127.0.0.1:1 did not fail")

    return timed(action)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_broker_argument(parser)
    parser.add_argument("--runs", type=int, default=5, help="samples per edge (default 5)")
    args = parser.parse_args(argv)
    samples: dict[str, list[float]] = {}
    baselines: dict[str, list[float]] = {}
    with bootstrap_or_kafka(args.bootstrap_servers) as servers:
        delete = bool(args.bootstrap_servers)
        with fresh_topic(servers, "bench-fetch-end", 1, delete=delete) as topic:
            end = produce(servers, topic, ((0, None, b"x" * 100) for _ in range(200)))[0]
            for run in range(args.runs):
                samples.setdefault("end", []).append(end_of_log(servers, topic, end))
                baselines.setdefault("end", []).append(
                    timed(partial(plain_consumer_read, servers, topic, end - 5, 5))
                )
                print(
                    f"end run {run}: {samples['end'][-1]:.3f}s (plain {baselines['end'][-1]:.3f}s)"
                )
        with fresh_topic(servers, "bench-fetch-markers", 1, delete=delete) as topic:
            marked_end = transactional_topic(servers, topic)
            committed = (("isolation.level", "read_committed"),)
            for run in range(args.runs if marked_end is not None else 0):
                assert marked_end is not None
                spec = FetchSpec(topic, 0, 0, marked_end, servers, client_conf=committed)
                samples.setdefault("markers", []).append(timed(partial(fetched, spec)))
                baselines.setdefault("markers", []).append(
                    timed(partial(plain_consumer_read, servers, topic, 0, 10, **dict(committed)))
                )
                print(f"markers run {run}: {samples['markers'][-1]:.3f}s")
        for run in range(args.runs):
            samples.setdefault("unreachable", []).append(unreachable())
            baselines.setdefault("unreachable", []).append(UNREACHABLE_TIMEOUT_S)
            print(f"unreachable run {run}: {samples['unreachable'][-1]:.2f}s")
        consumer_pool().clear()
    figures: dict[str, object] = {}
    for edge, values in samples.items():
        p50, base = statistics.median(values), statistics.median(baselines[edge])
        figures[f"{edge}_p50_s"] = round(p50, 3)
        figures[f"{edge}_max_s"] = round(max(values), 3)
        figures[f"baseline_{edge}_p50_s"] = round(base, 3)
        figures[f"ratio_{edge}_p50"] = round(p50 / base, 2) if base else "inf"
    print_result(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
