"""What the benchmarks share, so that no benchmark imports another.

Run a benchmark from the repository root as a module, ``python -m benchmarks.bench_<name>``:
the root is then on ``sys.path`` and ``spark_kafka_group`` (with its testing harness,
:mod:`spark_kafka_group.testing`) and ``benchmarks`` import as they are, with no path
manipulation. No benchmark imports ``tests`` (tests/unit/test_benchmark_imports.py checks it).

A benchmark prints its figures, a ratio against a baseline measured in the same run, and a
machine-readable last line; it never asserts a timing. A new benchmark (such as one of group
scale) finds here:

- the broker and a topic: :func:`add_broker_argument` (``--bootstrap-servers``, default a
  single-node Apache Kafka started from jvm/pom.xml's jars, :func:`bootstrap_or_kafka`),
  :func:`fresh_topic` (created, and deleted afterwards on a real cluster) and
  :func:`steady_topic` (both, plus a
  :class:`~spark_kafka_group.testing.production.SteadyProducer` writing one record to every
  partition per interval);
- the group store: :func:`add_store_arguments` / :func:`store_from_args` (``--store URI``
  and ``--store-option KEY=VALUE`` for a group log on an object store);
- the Kafka baseline: :class:`KafkaConsumerMember`, a plain confluent-kafka consumer in a
  classic group, recording into a :class:`Journal`;
- Spark: :func:`spark_session` (a local session with the source registered;
  :func:`spark_kafka_conf` adds Spark's own Kafka source, ``format("kafka")``) and
  :class:`SparkGroup` (``format("kafka-group")`` member queries in one session, with a
  foreachBatch sink), :class:`FirstRecord` (a sink that notes its first record);
- :func:`wait_until` and :func:`group_records` (from :mod:`spark_kafka_group.testing`);
- :func:`print_result`: the last line, ``key=value`` pairs separated by spaces.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_kafka_group.testing.group_log import group_records
from spark_kafka_group.testing.production import SteadyProducer
from spark_kafka_group.testing.waiting import wait_until

__all__ = [
    "FAST_MEMBER_OPTIONS",
    "FirstRecord",
    "Journal",
    "KafkaConsumerMember",
    "SparkGroup",
    "add_broker_argument",
    "add_store_arguments",
    "bootstrap_or_kafka",
    "fresh_topic",
    "group_records",
    "print_result",
    "spark_kafka_conf",
    "spark_kafka_unavailable",
    "spark_session",
    "steady_topic",
    "store_from_args",
    "wait_until",
]

#: Group timeouts of the benchmarks' members (Kafka consumers and kafka-group queries alike):
#: short, so that a rebalance completes within seconds.
HEARTBEAT_MS = 500
SESSION_TIMEOUT_MS = 6000
REBALANCE_TIMEOUT_MS = 10_000
FAST_MEMBER_OPTIONS = {
    "heartbeatIntervalMs": str(HEARTBEAT_MS),
    "sessionTimeoutMs": str(SESSION_TIMEOUT_MS),
    "rebalanceTimeoutMs": str(REBALANCE_TIMEOUT_MS),
}


# ---------------------------------------------------------------------------- arguments


def add_broker_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-servers",
        help="an existing Kafka cluster (default: a single-node Apache Kafka in KRaft mode, "
        "started for the run from the jars scripts/setup fetched)",
    )


@contextlib.contextmanager
def bootstrap_or_kafka(bootstrap_servers: str | None) -> Iterator[str]:
    """``bootstrap_servers`` when given (an existing cluster), else a single-node Apache Kafka
    (:class:`~spark_kafka_group.testing.kafka_broker.KafkaBroker`) for the block."""
    if bootstrap_servers:
        yield bootstrap_servers
        return
    from spark_kafka_group.testing.kafka_broker import KafkaBroker

    with KafkaBroker() as broker:
        print(f"Started Apache Kafka at {broker.bootstrap_servers}", flush=True)
        yield broker.bootstrap_servers


def add_store_arguments(parser: argparse.ArgumentParser, *, help: str) -> None:
    parser.add_argument("--store", help=help)
    parser.add_argument(
        "--store-option", action="append", default=[], metavar="KEY=VALUE",
        help="a delta-rs storage option for --store (repeatable)",
    )  # fmt: skip


def store_from_args(args: argparse.Namespace, prefix: str) -> tuple[str | None, dict[str, str]]:
    """The group store of this run, a fresh ``<prefix>-<id>`` under ``--store`` (None without
    it), and the ``--store-option`` storage options."""
    options = dict(item.partition("=")[::2] for item in args.store_option)
    if not args.store:
        return None, options
    return f"{args.store.rstrip('/')}/{prefix}-{uuid.uuid4().hex[:8]}", options


# ---------------------------------------------------------------------------- topics


@contextlib.contextmanager
def fresh_topic(servers: str, prefix: str, partitions: int, *, delete: bool) -> Iterator[str]:
    """A new topic ``<prefix>-<id>``; with ``delete`` (a real cluster) it is deleted after."""
    from spark_kafka_group.quickstart.sample_data import create_topic

    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic(servers, topic, partitions)
    try:
        yield topic
    finally:
        if delete:
            _delete_topic(servers, topic)


def _delete_topic(servers: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": servers, "log_level": 0})
    for future in admin.delete_topics([topic], request_timeout=30).values():
        try:
            future.result(timeout=30)
        except Exception as exc:
            print(f"warning: could not delete benchmark topic {topic}: {exc}")


@contextlib.contextmanager
def steady_topic(
    bootstrap_servers: str | None, prefix: str, partitions: int, interval_s: float
) -> Iterator[tuple[str, str]]:
    """(servers, topic): a fresh topic on the cluster (default: a single-node Apache Kafka) with a
    :class:`SteadyProducer` writing one record to every partition every ``interval_s``."""
    with (
        bootstrap_or_kafka(bootstrap_servers) as servers,
        fresh_topic(servers, prefix, partitions, delete=bool(bootstrap_servers)) as topic,
        SteadyProducer(servers, topic, partitions, per_round=1, interval_s=interval_s),
    ):
        yield servers, topic


# ---------------------------------------------------------------------------- Kafka baseline


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
                rows = [
                    (p, o)
                    for m in msgs
                    if m.error() is None
                    and (p := m.partition()) is not None
                    and (o := m.offset()) is not None
                ]
                if rows:
                    self.journal.add(self.name, rows, time.time())
        finally:
            self.consumer.close()  # commits and sends LeaveGroup

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


# ---------------------------------------------------------------------------- Spark


def spark_session(
    app: str,
    *,
    master: str = "local[2]",
    conf: Mapping[str, str] | None = None,
    log_level: str = "ERROR",
    storage_options: Mapping[str, str] | None = None,
) -> Any:
    """A local SparkSession named ``kafka-group <app>`` (no UI, one shuffle partition unless
    ``conf`` says otherwise) with the source registered."""
    # Python workers must run this interpreter (docs/design.md, "Spark facts that shape the
    # reader").
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import spark_kafka_group

    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "1",
        **(conf or {}),
    }
    builder = SparkSession.builder.master(master).appName(f"kafka-group {app}")
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    spark_kafka_group.register(spark, storage_options=storage_options)
    return spark


# spark-sql-kafka-0-10_2.13-<spark version>.jar in .jvm/spark-kafka
_SPARK_KAFKA_JAR = re.compile(r"^spark-sql-kafka-0-10_2\.13-(\d+\.\d+)\.\S+\.jar$")


def _spark_kafka_jars() -> tuple[list[Path], str | None]:
    """The jars of jvm/pom.xml's spark-kafka module and the Spark line they are built for."""
    from spark_kafka_group.testing.kafka_broker import jvm_parts_dir

    jars = sorted(jvm_parts_dir("spark-kafka").glob("*.jar"))
    lines = [m.group(1) for m in map(_SPARK_KAFKA_JAR.match, (j.name for j in jars)) if m]
    return jars, (lines[0] if lines else None)


def spark_kafka_unavailable() -> str | None:
    """Why ``format("kafka")`` cannot run in this interpreter (naming the fix), or None."""
    import pyspark

    try:
        jars, line = _spark_kafka_jars()
    except FileNotFoundError as exc:
        return str(exc)
    if line is None:
        return (
            f"No spark-sql-kafka-0-10_2.13-<version>.jar among {[j.name for j in jars]}: "
            "fetch jvm/pom.xml's jars again with scripts/setup"
        )
    installed = ".".join(pyspark.__version__.split(".")[:2])
    if installed != line:
        return (
            f"format('kafka') needs pyspark {line}.x (the Spark line of jvm/pom.xml's "
            f"spark-sql-kafka jar), this interpreter has pyspark {pyspark.__version__}: run "
            "the benchmark with .venv-maven-spark/bin/python (scripts/setup creates it)"
        )
    return None


def spark_kafka_conf() -> dict[str, str]:
    """``spark.jars`` for Spark's own Kafka source; check :func:`spark_kafka_unavailable`
    first."""
    jars, _ = _spark_kafka_jars()
    return {"spark.jars": ",".join(str(j) for j in jars)}


class SparkGroup:
    """``format("kafka-group")`` queries in one SparkSession; each query is a group member."""

    def __init__(
        self,
        servers: str,
        topic: str,
        work: str,
        *,
        app: str,
        trigger_ms: int,
        store: str | None = None,
        storage_options: Mapping[str, str] | None = None,
        member_options: Mapping[str, str] = FAST_MEMBER_OPTIONS,
    ) -> None:
        """``store``: the group store (default: a directory under ``work``), with its delta-rs
        ``storage_options``; ``member_options``: the members' timeouts (source options)."""
        self.servers, self.topic, self.work, self.trigger_ms = servers, topic, work, trigger_ms
        self.group = f"{app.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
        self.store = store or os.path.join(work, "groups")
        self.storage_options = dict(storage_options or {})
        self.member_options = dict(member_options)
        self.spark = spark_session(app, storage_options=self.storage_options)

    def member(self, name: str, j: Journal) -> Any:
        """A member query recording what it consumed into ``j``."""

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
        available_now: bool = False,
        options: Mapping[str, str] | None = None,
    ) -> Any:
        """Start a member query of ``group`` (default: this run's) with a foreachBatch sink,
        on the checkpoint ``checkpoint-<name>``; ``options`` override the source options."""
        settings = {
            "kafka.bootstrap.servers": self.servers,
            "subscribe": self.topic,
            "groupId": group or self.group,
            "groupStore": self.store,
            "startingOffsets": "latest",
            **self.member_options,
            "assignmentStrategy": "cooperative-sticky",
            **{f"groupStore.{k}": v for k, v in self.storage_options.items()},
            **(options or {}),
        }
        reader = self.spark.readStream.format("kafka-group")
        for key, value in settings.items():
            reader = reader.option(key, value)
        writer = (
            reader.load()
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", os.path.join(self.work, f"checkpoint-{name}"))
        )
        if available_now:
            return writer.trigger(availableNow=True).start()
        return writer.trigger(
            processingTime=f"{trigger_ms or self.trigger_ms} milliseconds"
        ).start()

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


class FirstRecord:
    """A foreachBatch sink that notes when (by ``clock``) its first non-empty batch arrived."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.at: float | None = None
        self._clock = clock
        self._seen = threading.Event()

    def __call__(self, frame: Any, batch_id: int) -> None:
        if self.at is None and frame.limit(1).count():
            self.at = self._clock()
            self._seen.set()

    def wait(self, timeout_s: float, what: str = "the first record") -> float:
        """The time of the first record; TimeoutError after ``timeout_s``."""
        if not self._seen.wait(timeout_s):
            raise TimeoutError(f"no record within {timeout_s:.0f}s: waiting for {what}")
        assert self.at is not None
        return self.at


# ---------------------------------------------------------------------------- results


def print_result(
    figures: Mapping[str, object], *, format_value: Callable[[Any], str] = str
) -> None:
    """The benchmark's last line: ``key=value`` pairs separated by spaces."""
    print(" ".join(f"{key}={format_value(value)}" for key, value in figures.items()))
