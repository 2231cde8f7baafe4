"""Rebalance benchmark (issue 5): how long partitions pause when a member joins, then leaves.

Three members consume a topic (default 12 partitions) while a producer writes one record to
every partition every ``--produce-interval-ms``; a fourth member joins, then one of the first
three leaves gracefully. For every partition the longest gap between two consecutive consumed
records (by consumption time) is its pause. The same scenario runs three times, one after the
other, on the same broker and topic:

1. ``eager``: plain confluent-kafka consumers (one thread each, one process) in a classic group
   with ``partition.assignment.strategy=range`` (eager: every rebalance revokes everything);
2. ``cooperative``: the same with ``cooperative-sticky`` (KIP-429);
3. ``kafka-group``: ``format("kafka-group")`` queries with ``assignmentStrategy=
   cooperative-sticky``, all in ONE SparkSession (``local[2]``; each query is a member of the
   group, as separate jobs would be; four Spark JVMs would not fit 2 cores), a processing-time
   trigger of ``--trigger-ms``, a foreachBatch sink recording (partition, offset, time).

Per rebalance (the join, then the leave), a partition is *unaffected* if the same member
consumed it right before the event and at the end of the event's window and no other member
consumed it in between; otherwise it *moved*. Its pause is the longest gap between consecutive
consumption times from its last record before the event to the end of the window (a partition
never resumed counts until the window's end). ``steady`` is the same measure in the quiet period
before the join (the normal cadence: the trigger interval plus the batch time for Spark).

    python jobs/bench_rebalance.py                        # embedded Tansu broker, ~3-4 min
    python jobs/bench_rebalance.py --bootstrap-servers broker:9092

The last line is ``key=value`` pairs: ``unaffected_max_pause_s``, ``moved_max_pause_s`` (the
kafka-group source), ``eager_max_pause_s`` / ``cooperative_max_pause_s`` (the moved partitions
of the baselines), and the other figures of each run.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_kafka_group.embedded import bootstrap_or_embedded

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# Python workers must run this interpreter (docs/design.md, "Spark facts that shape the reader").
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

HEARTBEAT_MS = 500
SESSION_TIMEOUT_MS = 6000
REBALANCE_TIMEOUT_MS = 10_000


# ---------------------------------------------------------------------------- recording


@dataclass
class Journal:
    """(member, partition, offset, consumption time) of every record any member consumed."""

    events: list[tuple[str, int, int, float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, member: str, rows: list[tuple[int, int]], at: float) -> None:
        with self.lock:
            self.events.extend((member, p, o, at) for p, o in rows)

    def snapshot(self) -> list[tuple[str, int, int, float]]:
        with self.lock:
            return list(self.events)

    def partitions_since(self, since: float) -> dict[int, set[str]]:
        owners: dict[int, set[str]] = {}
        for member, p, _, at in self.snapshot():
            if at >= since:
                owners.setdefault(p, set()).add(member)
        return owners


class SteadyProducer:
    """One record to every partition every ``interval_s`` (each its own produce batch, so the
    embedded broker's ListOffsets(latest) is exact; docs/design.md, "Test environment facts")."""

    def __init__(self, servers: str, topic: str, partitions: int, interval_s: float) -> None:
        from confluent_kafka import Producer

        self._producer = Producer(
            {
                "bootstrap.servers": servers,
                "linger.ms": 0,
                "batch.num.messages": 1,
                "enable.idempotence": False,
                "log_level": 0,
            }
        )
        self._topic, self._partitions, self._interval = topic, partitions, interval_s
        self.produced = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="producer")

    def start(self) -> SteadyProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self._producer.flush(10)

    def _run(self) -> None:
        tick = time.monotonic()
        while not self._stop.is_set():
            for p in range(self._partitions):
                self._producer.produce(self._topic, b"%d" % self.produced, partition=p)
                self.produced += 1
            self._producer.poll(0)
            tick += self._interval
            self._stop.wait(max(0.0, tick - time.monotonic()))


@contextlib.contextmanager
def steady_topic(
    bootstrap_servers: str | None, prefix: str, partitions: int, interval_s: float
) -> Iterator[tuple[str, str]]:
    """(servers, topic): a fresh topic on the cluster (default: an embedded broker) with a
    :class:`SteadyProducer` writing to it; on a real cluster the topic is deleted after."""
    from spark_kafka_group.sample_data import create_topic

    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    with bootstrap_or_embedded(bootstrap_servers) as servers:
        create_topic(servers, topic, partitions)
        producer = SteadyProducer(servers, topic, partitions, interval_s).start()
        try:
            yield servers, topic
        finally:
            producer.stop()
        if bootstrap_servers:
            from confluent_kafka.admin import AdminClient

            admin = AdminClient({"bootstrap.servers": servers, "log_level": 0})
            for future in admin.delete_topics([topic], request_timeout=30).values():
                with contextlib.suppress(Exception):
                    future.result(timeout=30)


# ---------------------------------------------------------------------------- members


class KafkaConsumerMember:
    """A plain confluent-kafka consumer in a thread (a classic-protocol group member)."""

    def __init__(
        self,
        name: str,
        servers: str,
        topic: str,
        group: str,
        strategy: str,
        j: Journal,
        *,
        heartbeat_ms: int = HEARTBEAT_MS,
    ):
        from confluent_kafka import Consumer

        self.name, self.journal = name, j
        self.consumer = Consumer(
            {
                "bootstrap.servers": servers,
                "group.id": group,
                # Exactly one strategy: with librdkafka's default "range,roundrobin" the
                # embedded broker never assigns anything.
                "partition.assignment.strategy": strategy,
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": heartbeat_ms,
                "max.poll.interval.ms": REBALANCE_TIMEOUT_MS,
                "auto.offset.reset": "latest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 500,
                "fetch.wait.max.ms": 50,
                "log_level": 0,
            }
        )
        self.consumer.subscribe([topic])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                msgs = self.consumer.consume(500, 0.05)
                rows = [(m.partition(), m.offset()) for m in msgs if m.error() is None]
                if rows:
                    self.journal.add(self.name, rows, time.time())
        finally:
            self.consumer.close()  # commits and sends LeaveGroup

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


class SparkGroup:
    """``format("kafka-group")`` queries in one SparkSession; each query is a group member."""

    def __init__(
        self,
        servers: str,
        topic: str,
        work: str,
        trigger_ms: int,
        *,
        store: str | None = None,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        """``store``: the group store (default: a directory under ``work``), with its delta-rs
        ``storage_options``."""
        from pyspark.sql import SparkSession

        import spark_kafka_group

        self.servers, self.topic, self.work, self.trigger_ms = servers, topic, work, trigger_ms
        self.group = f"bench-rebalance-{uuid.uuid4().hex[:6]}"
        self.store = store or os.path.join(work, "groups")
        self.storage_options = dict(storage_options or {})
        self.spark = (
            SparkSession.builder.master("local[2]")
            .appName("kafka-group bench_rebalance")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "1")
            .getOrCreate()
        )
        self.spark.sparkContext.setLogLevel("ERROR")
        spark_kafka_group.register(self.spark, storage_options=self.storage_options)

    def member(self, name: str, j: Journal) -> Any:
        def sink(frame: Any, batch_id: int) -> None:
            rows = frame.select("partition", "offset").collect()
            if rows:
                j.add(name, [(r.partition, r.offset) for r in rows], time.time())

        return self.query(name, sink)

    def query(
        self,
        name: str,
        sink: Callable[[Any, int], None],
        *,
        group: str | None = None,
        trigger_ms: int | None = None,
        heartbeat_ms: int = HEARTBEAT_MS,
    ) -> Any:
        """Start a member query of ``group`` (default: this run's) with a foreachBatch sink."""
        options = {
            "kafka.bootstrap.servers": self.servers,
            "subscribe": self.topic,
            "groupId": group or self.group,
            "groupStore": self.store,
            "startingOffsets": "latest",
            "heartbeatIntervalMs": str(heartbeat_ms),
            "sessionTimeoutMs": str(SESSION_TIMEOUT_MS),
            "rebalanceTimeoutMs": str(REBALANCE_TIMEOUT_MS),
            "assignmentStrategy": "cooperative-sticky",
            **{f"groupStore.{k}": v for k, v in self.storage_options.items()},
        }
        reader = self.spark.readStream.format("kafka-group")
        for key, value in options.items():
            reader = reader.option(key, value)
        return (
            reader.load()
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", os.path.join(self.work, f"checkpoint-{name}"))
            .trigger(processingTime=f"{trigger_ms or self.trigger_ms} milliseconds")
            .start()
        )

    @staticmethod
    def wait_started(query: Any, timeout_s: float = 120.0) -> None:
        """Until the query completed a first batch: starting several at once on a loaded
        2-core machine times out Spark's Python worker connect-back."""
        deadline = time.monotonic() + timeout_s
        while query.lastProgress is None and time.monotonic() < deadline:
            if not query.isActive:
                raise RuntimeError(f"query failed to start: {query.exception()}")
            time.sleep(0.25)

    @staticmethod
    def leave(query: Any) -> None:
        query.stop()  # its member leaves the group as the query ends

    def stop(self) -> None:
        self.spark.stop()


# ---------------------------------------------------------------------------- scenario


@dataclass
class Run:
    name: str
    events: list[tuple[str, int, int, float]]
    steady_from: float
    joined_at: float
    left_at: float
    ended_at: float
    partitions: int


def scenario(
    name: str,
    partitions: int,
    start: Callable[[str], Any],
    stop: Callable[[Any], None],
    journal: Journal,
    *,
    settle_s: float,
    phase_s: float,
    startup_timeout_s: float,
    started: Callable[[Any], None] = lambda member: None,
) -> Run:
    """Three members; once all partitions flow, settle, a fourth joins, then member 1 leaves."""
    print(f"[{name}] starting 3 members", flush=True)
    t0 = time.time()
    members: dict[str, Any] = {}
    try:
        for n in ("m1", "m2", "m3"):
            members[n] = start(n)
            started(members[n])
        deadline = time.monotonic() + startup_timeout_s
        while True:
            since = time.time() - 2.0
            owners = journal.partitions_since(since)
            busy = {m for ms in owners.values() for m in ms}
            if len(owners) == partitions and len(busy) == 3 and since > t0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"[{name}] 3 members did not consume all {partitions} partitions within "
                    f"{startup_timeout_s:.0f}s (consuming: {sorted(owners)} by {sorted(busy)})"
                )
            time.sleep(0.5)
        print(f"[{name}] all partitions consumed by 3 members after {time.time() - t0:.0f}s")
        steady_from = time.time()
        time.sleep(settle_s)
        joined_at = time.time()
        print(f"[{name}] m4 joins", flush=True)
        members["m4"] = start("m4")
        # The window runs until the new member has consumed something (a Spark query takes a
        # while to start on a loaded machine), then phase_s more.
        deadline = time.monotonic() + startup_timeout_s
        while "m4" not in {m for ms in journal.partitions_since(joined_at).values() for m in ms}:
            if time.monotonic() > deadline:
                print(f"[{name}] m4 consumed nothing within {startup_timeout_s:.0f}s")
                break
            time.sleep(0.25)
        else:
            print(f"[{name}] m4 consuming after {time.time() - joined_at:.1f}s", flush=True)
        time.sleep(phase_s)
        left_at = time.time()
        print(f"[{name}] m1 leaves", flush=True)
        stop(members.pop("m1"))
        time.sleep(phase_s)
        ended_at = time.time()
    finally:
        for member in members.values():
            with contextlib.suppress(Exception):
                stop(member)
    return Run(name, journal.snapshot(), steady_from, joined_at, left_at, ended_at, partitions)


def _owner_before(rows: list[tuple[float, str]], at: float) -> str | None:
    before = [m for t, m in rows if t < at]
    return before[-1] if before else None


def analyse(run: Run) -> dict[str, Any]:
    """Per event: partitions unaffected / moved, and the max pause of each kind."""
    by_partition: dict[int, list[tuple[float, str]]] = {p: [] for p in range(run.partitions)}
    for member, p, _, at in run.events:
        by_partition.setdefault(p, []).append((at, member))
    for rows in by_partition.values():
        rows.sort()

    def max_gap(rows: list[tuple[float, str]], start: float, end: float) -> float:
        before = [t for t, _ in rows if t < start]
        times = ([before[-1]] if before else [start]) + [t for t, _ in rows if start <= t < end]
        times.append(end)
        return max(b - a for a, b in itertools.pairwise(times))

    steady = max(max_gap(rows, run.steady_from, run.joined_at) for rows in by_partition.values())
    out: dict[str, Any] = {"steady": steady, "events": []}
    unaffected_all: list[float] = []
    moved_all: list[float] = []
    for event, start, end in (
        ("join", run.joined_at, run.left_at),
        ("leave", run.left_at, run.ended_at),
    ):
        unaffected: dict[int, float] = {}
        moved: dict[int, float] = {}
        for p, rows in by_partition.items():
            owner = _owner_before(rows, start)
            during = {m for t, m in rows if start <= t < end}
            pause = max_gap(rows, start, end)
            if owner is not None and during == {owner}:
                unaffected[p] = pause
            else:
                moved[p] = pause
        unaffected_all += unaffected.values()
        moved_all += moved.values()
        out["events"].append((event, unaffected, moved))
    out["unaffected"] = max(unaffected_all, default=math.nan)
    out["moved"] = max(moved_all, default=math.nan)
    out["all"] = max(unaffected_all + moved_all, default=math.nan)
    return out


def report(run: Run, result: dict[str, Any]) -> None:
    print(f"[{run.name}] steady max gap {result['steady']:.2f}s (normal cadence before the join)")
    for event, unaffected, moved in result["events"]:

        def fmt(d: dict[int, float]) -> str:
            return " ".join(f"p{p}:{v:.1f}" for p, v in sorted(d.items())) or "-"

        print(
            f"[{run.name}] {event}: unaffected {len(unaffected)} max "
            f"{max(unaffected.values(), default=math.nan):.2f}s ({fmt(unaffected)}); moved "
            f"{len(moved)} max {max(moved.values(), default=math.nan):.2f}s ({fmt(moved)})",
            flush=True,
        )


# ---------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-servers", help="a real Kafka cluster (default: embedded)")
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--produce-interval-ms", type=int, default=100)
    parser.add_argument("--trigger-ms", type=int, default=500, help="kafka-group trigger")
    parser.add_argument("--settle-s", type=float, default=5.0, help="steady period before join")
    parser.add_argument("--phase-s", type=float, default=20.0, help="window after each event")
    parser.add_argument(
        "--only", choices=("eager", "cooperative", "kafka-group"), action="append", default=None
    )
    args = parser.parse_args(argv)
    which = args.only or ["eager", "cooperative", "kafka-group"]

    work = tempfile.mkdtemp(prefix="kafka-group-bench-rebalance-")
    results: dict[str, dict[str, Any]] = {}
    try:
        with steady_topic(
            args.bootstrap_servers,
            "bench-rebalance",
            args.partitions,
            args.produce_interval_ms / 1000,
        ) as (servers, topic):
            common = {"settle_s": args.settle_s, "phase_s": args.phase_s}
            for strategy, name in (("range", "eager"), ("cooperative-sticky", "cooperative")):
                if name not in which:
                    continue
                j = Journal()
                group = f"bench-{name}-{uuid.uuid4().hex[:6]}"

                def start(n: str, strategy=strategy, group=group, j=j) -> Any:
                    return KafkaConsumerMember(n, servers, topic, group, strategy, j)

                run = scenario(
                    name,
                    args.partitions,
                    start,
                    lambda m: m.stop(),
                    j,
                    startup_timeout_s=60,
                    **common,
                )
                results[name] = analyse(run)
                report(run, results[name])
            if "kafka-group" in which:
                spark = SparkGroup(servers, topic, work, args.trigger_ms)
                try:
                    j = Journal()
                    run = scenario(
                        "kafka-group",
                        args.partitions,
                        lambda n, j=j: spark.member(n, j),
                        spark.leave,
                        j,
                        started=SparkGroup.wait_started,
                        startup_timeout_s=180,
                        **common,
                    )
                finally:
                    spark.stop()
                results["kafka-group"] = analyse(run)
                report(run, results["kafka-group"])
    finally:
        shutil.rmtree(work, ignore_errors=True)

    nan: dict[str, Any] = {"unaffected": math.nan, "moved": math.nan, "steady": math.nan}
    ours = results.get("kafka-group", nan)
    eager = results.get("eager", nan)
    coop = results.get("cooperative", nan)
    summary = {
        "unaffected_max_pause_s": ours["unaffected"],
        "moved_max_pause_s": ours["moved"],
        "eager_max_pause_s": eager["moved"],
        "cooperative_max_pause_s": coop["moved"],
        "steady_max_gap_s": ours["steady"],
        "eager_unaffected_max_pause_s": eager["unaffected"],
        "cooperative_unaffected_max_pause_s": coop["unaffected"],
        "eager_steady_max_gap_s": eager["steady"],
        "cooperative_steady_max_gap_s": coop["steady"],
        "trigger_s": args.trigger_ms / 1000,
        "unaffected_within_trigger": int(ours["unaffected"] <= args.trigger_ms / 1000),
        "moved_faster_than_eager": int(ours["moved"] < eager["moved"]),
        "partitions": args.partitions,
    }
    print(
        " ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in summary.items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
