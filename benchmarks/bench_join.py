"""Join benchmark: how soon a query that joins a running group reads its first record.

Two members consume a topic (default 6 partitions) while a producer writes one record to every
partition every ``--produce-interval-ms``. Then a third member joins; its figure is the time
from its JOIN to its first record, and the target is two trigger intervals plus two heartbeat
intervals (the owners learn of the rebalance within a heartbeat, finish their batch within a
trigger, the newcomer learns of its partitions within a heartbeat and reads them in its first
batch). The newcomer then leaves, the group settles back to two members, and the next run
starts: ``--runs`` samples per configuration.

1. ``kafka``: plain confluent-kafka consumers (threads) in a classic ``cooperative-sticky``
   group with the same heartbeat interval; the newcomer's figure is from its ``subscribe`` to
   its first record. The baseline: what Kafka's own protocol gives on this broker.
2. ``kafka-group``: ``format("kafka-group")`` queries (``cooperative-sticky``) in ONE
   SparkSession (``local[2]``), a foreachBatch sink, for each ``--trigger-ms`` in turn; the
   figure is from the newcomer's JOIN record in the group log to the moment its first record
   reached the sink. The owners' median batch time is printed too: when it exceeds the
   trigger interval, Spark runs batches back to back ("falling behind") and the trigger
   interval no longer bounds anything.

    python -m benchmarks.bench_join                   # single-node Apache Kafka, ~6 min
    python -m benchmarks.bench_join --trigger-ms 500,10000 --runs 7
    python -m benchmarks.bench_join --bootstrap-servers broker:9092
    python -m benchmarks.bench_join --store s3://bucket/prefix --store-option AWS_REGION=eu-west-1
                                                      # the group log on an object store

The last line is ``key=value`` pairs: per trigger interval ``T``, ``join_T<T>_p50_s`` /
``join_T<T>_max_s``, ``budget_T<T>_s``, ``within_budget_T<T>`` (runs within the budget, of
``runs``), ``owner_batch_T<T>_ms``; ``kafka_join_p50_s`` and ``ratio_T<T>_p50`` (kafka-group
over Kafka, median against median).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from benchmarks.harness import (
    FirstRecord,
    Journal,
    KafkaConsumerMember,
    SparkGroup,
    add_broker_argument,
    add_store_arguments,
    group_records,
    print_result,
    steady_topic,
    store_from_args,
    wait_until,
)
from spark_kafka_group.group.kinds import RecordKind

# ---------------------------------------------------------------------------- Kafka


def kafka_runs(servers: str, topic: str, runs: int, heartbeat_ms: int) -> list[float]:
    """Join-to-first-record of a third plain consumer, ``runs`` times."""
    group = f"bench-join-kafka-{uuid.uuid4().hex[:6]}"
    journal = Journal()

    def member(name: str, journal: Journal) -> KafkaConsumerMember:
        return KafkaConsumerMember(
            name, servers, topic, group, "cooperative-sticky", journal, heartbeat_ms=heartbeat_ms
        )

    owners = [member(f"owner{i}", journal) for i in range(2)]
    figures: list[float] = []
    try:
        wait_until(
            lambda: {m for m, *_ in journal.snapshot()} == {"owner0", "owner1"},
            60,
            "both Kafka consumers reading",
        )
        for run in range(runs):
            time.sleep(2.0)  # the group is stable again
            mine = Journal()
            joined = time.time()
            newcomer = member(f"new{run}", mine)
            try:
                wait_until(lambda mine=mine: bool(mine.snapshot()), 60, "the newcomer's record")
                first = min(at for *_, at in mine.snapshot())
                figures.append(first - joined)
                print(f"kafka run {run}: first record {first - joined:.2f}s after subscribe")
            finally:
                newcomer.stop()
    finally:
        for owner in owners:
            owner.stop()
    return figures


# ---------------------------------------------------------------------------- kafka-group


class SparkRuns:
    """Two owner queries and a newcomer started ``runs`` times, in one SparkSession."""

    def __init__(
        self, servers: str, topic: str, work: str, store: str | None, options: dict[str, str]
    ) -> None:
        self.spark_group = SparkGroup(
            servers, topic, work, app="bench_join", trigger_ms=1000, store=store,
            storage_options=options,
        )  # fmt: skip
        self.store = self.spark_group.store
        self.options = options

    def runs(self, trigger_ms: int, heartbeat_ms: int, runs: int) -> tuple[list[float], float]:
        """Join-to-first-record of the newcomer per run; the owners' median batch time (ms)."""
        import spark_kafka_group
        from spark_kafka_group.listener.progress import group_offsets

        group = f"bench-join-{trigger_ms}-{uuid.uuid4().hex[:6]}"
        store = self.store

        def query(name: str, sink: Callable[[Any, int], None]) -> Any:
            return self.spark_group.query(
                name, sink, group=group, trigger_ms=trigger_ms,
                options={"heartbeatIntervalMs": str(heartbeat_ms)},
            )  # fmt: skip

        owner_rows: dict[str, int] = {}
        lock = threading.Lock()

        def owner_sink(name: str) -> Callable:
            def sink(frame: Any, batch_id: int) -> None:
                n = frame.count()
                with lock:
                    owner_rows[name] = owner_rows.get(name, 0) + n

            return sink

        def settled(members: int) -> bool:
            info = spark_kafka_group.describe_group(store, group, storage_options=self.options)
            return (
                info.state == "Stable"
                and len(info.members) == members
                and not any(m.revoking for m in info.members)
                and sum(len(m.assignment) for m in info.members) > 0
            )

        owners = [query(f"{group}-owner{i}", owner_sink(str(i))) for i in range(2)]
        figures: list[float] = []
        try:
            wait_until(lambda: len(owner_rows) == 2, 180, "both owner queries reading")
            for run in range(runs):
                wait_until(lambda: settled(2), 60, "two settled members")
                time.sleep(2 * trigger_ms / 1000)  # the owners are in their steady cadence
                first = FirstRecord(clock=time.time)  # compared with the log's timestamps
                newcomer = query(f"{group}-new{run}", first)
                try:
                    first_at = first.wait(120, "the newcomer's record")
                    # Its member id is in its progress, reported once that batch completed.
                    wait_until(
                        lambda q=newcomer: q.lastProgress is not None, 60, "the newcomer's progress"
                    )
                finally:
                    newcomer.stop()
                member = next(group_offsets(newcomer.lastProgress)).member
                log = group_records(store, group, storage_options=self.options)
                joined_ms = min(
                    r.timestamp_ms
                    for r in log
                    if r.kind == RecordKind.JOIN and r.member_id == member
                )
                figure = first_at - joined_ms / 1000
                figures.append(figure)
                print(f"kafka-group T={trigger_ms}ms run {run}: first record {figure:.2f}s "
                      "after its JOIN", flush=True)  # fmt: skip
            durations = [
                p.durationMs.get("triggerExecution", 0)
                for q in owners
                for p in q.recentProgress
                if p.numInputRows > 0
            ]
        finally:
            for q in owners:
                q.stop()
        return figures, statistics.median(durations) if durations else float("nan")

    def stop(self) -> None:
        self.spark_group.stop()


# ---------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_broker_argument(parser)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--produce-interval-ms", type=int, default=100)
    parser.add_argument(
        "--trigger-ms",
        default="500,1000,2000",
        help="comma-separated trigger intervals of the kafka-group queries",
    )
    parser.add_argument("--heartbeat-ms", type=int, default=500)
    parser.add_argument("--runs", type=int, default=5, help="newcomers per configuration")
    add_store_arguments(
        parser, help="group store URI, e.g. s3://bucket/prefix (default: a local directory)"
    )
    args = parser.parse_args(argv)
    store, options = store_from_args(args, "bench-join")
    triggers = [int(t) for t in args.trigger_ms.split(",") if t.strip()]

    summary: dict[str, Any] = {"runs": args.runs, "heartbeat_s": args.heartbeat_ms / 1000}
    summary["store"] = store.split("://", 1)[0] if store else "local"
    with (
        tempfile.TemporaryDirectory(prefix="kafka-group-bench-join-") as work,
        steady_topic(
            args.bootstrap_servers, "bench-join", args.partitions, args.produce_interval_ms / 1000
        ) as (servers, topic),
    ):
        kafka = kafka_runs(servers, topic, args.runs, args.heartbeat_ms)
        spark = SparkRuns(servers, topic, work, store, options)
        try:
            ours = {t: spark.runs(t, args.heartbeat_ms, args.runs) for t in triggers}
        finally:
            spark.stop()

    kafka_p50 = statistics.median(kafka)
    print(f"\nkafka (cooperative-sticky consumers): {', '.join(f'{x:.2f}' for x in kafka)} s")
    summary["kafka_join_p50_s"] = round(kafka_p50, 2)
    summary["kafka_join_max_s"] = round(max(kafka), 2)
    for trigger, (figures, batch_ms) in ours.items():
        budget = 2 * trigger / 1000 + 2 * args.heartbeat_ms / 1000
        within = sum(1 for x in figures if x <= budget)
        p50 = statistics.median(figures)
        print(
            f"kafka-group T={trigger}ms: {', '.join(f'{x:.2f}' for x in figures)} s; budget "
            f"{budget:.1f} s (2 triggers + 2 heartbeats); within: {within}/{len(figures)}; "
            f"owners' median batch {batch_ms:.0f} ms"
            + (" (longer than the trigger: Spark runs batches back to back)"
               if batch_ms > trigger else "")
        )  # fmt: skip
        summary[f"join_T{trigger}_p50_s"] = round(p50, 2)
        summary[f"join_T{trigger}_max_s"] = round(max(figures), 2)
        summary[f"budget_T{trigger}_s"] = budget
        summary[f"within_budget_T{trigger}"] = within
        summary[f"owner_batch_T{trigger}_ms"] = round(batch_ms)
        summary[f"ratio_T{trigger}_p50"] = round(p50 / kafka_p50, 2)
    print_result(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
