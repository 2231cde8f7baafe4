"""Broker failover benchmark: how soon a query reads again when a Kafka node is lost,
``format("kafka-group")`` beside Spark's own ``format("kafka")`` on the same cluster in the
same run.

It starts a three-node Apache Kafka (KRaft, every node broker and controller, replication 3,
``min.insync.replicas`` 2; :class:`~spark_kafka_group.testing.kafka_nodes.MultiNodeKafka`) and
a topic of ``--partitions`` under steady idempotent acks=all production. In one SparkSession
(``local[2]``) a ``format("kafka-group")`` query and a ``format("kafka")`` query read the topic
from the earliest offsets, each with its source's defaults and a 1 s processing-time trigger,
into a foreachBatch sink that notes each batch's time and records. Then the faults:

- hard bounce (``--rounds``, default 2): SIGKILL of the node leading the most partitions, its
  restart ``--restart-after-s`` (25 s) later, every replica in sync again; the next round
  kills another node;
- rolling restart: every node in turn stopped cleanly (SIGTERM, a controlled shutdown that
  moves its leaders first), started again, every replica in sync.

Before each loss the partitions' leaders are back on their preferred replicas, so every node
leads its share. For each loss and each source the figure is the time from the loss to the
first batch that read a record of a partition the lost node led, past what that source had
read of it before the loss (:mod:`spark_kafka_group.testing.failover`, the definition of the
failure scenarios' tests), among the batches that cannot have fetched it before the loss: a
batch counts when its sink (whose ``collect()`` fetches the records) began after the loss,
or, after a SIGKILL, when it ended after the partitions may have had new leaders (no one
serves them in between). Beside it: when every partition the node led had a new leader and
when a record was appended to one of them again, from a watch of the cluster's metadata and
high watermarks, and the triggers (Spark's progress) from the loss to the record.

At the end production stops, each source reads to the end, and its records are checked
against what the topic holds (its end offsets: every acknowledged record, and any the producer
wrote without an acknowledgement, see ``SteadyProducer``): lost (in the topic, never read) and
duplicated (read more than once). The benchmark must kill nodes, so it always starts its own
cluster. It needs the pyspark of jvm/pom.xml's spark-sql-kafka jar:

    .venv-maven-spark/bin/python -m benchmarks.bench_broker_failover           # ~4 min
    .venv-maven-spark/bin/python -m benchmarks.bench_broker_failover --rounds 3

The last line is ``key=value`` pairs: per fault (``hard_bounce``, ``rolling``) and source
(``kafka_group``, ``kafka``) ``<fault>_<source>_s_p50`` and ``_s_max`` (seconds; ``nan``
when no loss was followed by a record), ``<fault>_<source>_missed`` (losses with no record
within ``--recover-timeout-s``), ``<fault>_vs_spark_kafka_p50`` (kafka-group's p50 over
format("kafka")'s) and ``<fault>_new_leaders_s_p50``, then ``<source>_alive`` (1 or 0),
``lost_<source>`` and ``dup_<source>``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from benchmarks.harness import print_result, spark_kafka_conf, spark_kafka_unavailable
from spark_kafka_group.testing.failover import Batch, Loss, first_record_after, highest_read, loss
from spark_kafka_group.testing.kafka_nodes import KafkaNode, MultiNodeKafka
from spark_kafka_group.testing.production import SteadyProducer
from spark_kafka_group.testing.waiting import wait_until

#: The two sources, by ``format()`` name, with the name of each in the last line's keys.
SOURCES = {"kafka-group": "kafka_group", "kafka": "kafka"}
FAULTS = {"hard_bounce": "hard bounce (SIGKILL)", "rolling": "rolling restart (SIGTERM)"}


# ---------------------------------------------------------------------------- the queries


@dataclass
class Reader:
    """One source's query and what its foreachBatch sink saw."""

    fmt: str
    query: Any = None
    batches: list[tuple[float, float, list[tuple[int, int]]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    died: str | None = None  # the query's error, once it ended

    def sink(self, frame: Any, batch_id: int) -> None:
        began = time.time()  # the batch's records are fetched from Kafka by the collect()
        rows = [(r.partition, r.offset) for r in frame.select("partition", "offset").collect()]
        with self.lock:
            self.batches.append((began, time.time(), rows))

    def records(self) -> list[tuple[int, int]]:
        with self.lock:
            return [record for _, _, rows in self.batches for record in rows]

    def fetched_after(self, at: float, served_again: float | None) -> list[Batch]:
        """``(end, records)`` of the batches that cannot have fetched their records before
        ``at`` (a loss): those whose sink began after it, and those that ended after
        ``served_again`` (when the lost node's partitions may have had new leaders; between
        the loss and then no one served them)."""
        with self.lock:
            return [
                (end, rows)
                for began, end, rows in self.batches
                if began > at or (served_again is not None and end > served_again)
            ]

    def progress(self) -> list[Any]:
        """Spark's recent progress of the query (its last 100 triggers that read or planned)."""
        return list(self.query.recentProgress) if self.query is not None else []

    @property
    def alive(self) -> bool:
        if self.died is None and self.query is not None and not self.query.isActive:
            self.died = str(self.query.exception() or "ended without an error")
        return self.died is None

    def stop(self) -> None:
        """Stop the query, having noted whether it was still alive (a stop is not a death)."""
        if self.query is not None and self.alive:
            self.query.stop()


def start_reader(spark: Any, fmt: str, servers: str, topic: str, work: str) -> Reader:
    """A ``format(fmt)`` query of ``topic`` with its source's defaults, a 1 s trigger and
    earliest starting offsets (kafka-group: a group of its own, its store under ``work``)."""
    reader = Reader(fmt)
    options = {"kafka.bootstrap.servers": servers, "subscribe": topic,
               "startingOffsets": "earliest"}  # fmt: skip
    if fmt == "kafka-group":
        options["groupId"] = f"bench-failover-{uuid.uuid4().hex[:6]}"
        options["groupStore"] = f"{work}/groups"
    stream = spark.readStream.format(fmt)
    for key, value in options.items():
        stream = stream.option(key, value)
    reader.query = (
        stream.load()
        .writeStream.foreachBatch(reader.sink)
        .option("checkpointLocation", f"{work}/checkpoint-{fmt}")
        .trigger(processingTime="1 second")
        .start()
    )
    return reader


# ---------------------------------------------------------------------------- the figures


@dataclass
class Measured:
    """One loss of one fault: what the node led, when the cluster served it again, and each
    source's seconds to read again (all from the loss; None: not seen)."""

    fault: str
    label: str
    led: list[int]
    seconds: dict[str, float | None]  # format() name -> first record read
    new_leaders_s: float | None = None  # every partition it led had another leader
    appended_s: float | None = None  # a partition it led had a record appended after the loss


def triggers_between(progress: Iterable[Mapping[str, Any]], start: float, end: float) -> str:
    """The triggers (Spark's query progress) that started between ``start`` and ``end``
    (wall clock, s): when after ``start``, how long, how long ``latestOffset`` took (the
    driver asking Kafka for the ends) and how many rows each read."""
    shown = []
    for p in progress:
        at = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
        if start - 1 <= at <= end:
            ms = p["durationMs"]
            shown.append(
                f"+{at - start:.1f}s {ms.get('triggerExecution', 0)}ms"
                f" (latestOffset {ms.get('latestOffset', 0)}ms) {p['numInputRows']} rows"
            )
    return "; ".join(shown) or "none"


class LeaderWatch:
    """From a node's loss on, in a thread: when every partition it led has another leader,
    and when a record is appended to one of them again (its high watermark passes the one
    before the loss), as the cluster's metadata and ListOffsets tell. Every look is a new
    AdminClient, so no cached metadata names the dead leader."""

    def __init__(self, kafka: MultiNodeKafka, topic: str, node: KafkaNode, led: list[int]):
        self.servers, self.topic, self.node, self.led = kafka.bootstrap_servers, topic, node, led
        try:
            self._before: dict[int, int] | None = self._high()
        except Exception as exc:  # a diagnostic: the figures do not depend on it
            print(f"note: no high watermarks of {led} before the loss: {exc!r}", flush=True)
            self._before = None
        #: The last look that still saw the node (or no one) lead one of them: the new leaders
        #: were elected after it.
        self.old_leaders_seen: float | None = None
        self.moved_at: float | None = None
        self.appended_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="leader-watch")

    def _admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.servers, "log_level": 0})

    def _high(self) -> dict[int, int]:
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        wanted = {TopicPartition(self.topic, p): OffsetSpec.latest() for p in self.led}
        admin = self._admin()  # referenced until answered: its futures die with it
        answers = admin.list_offsets(wanted, request_timeout=2)
        return {tp.partition: int(f.result(timeout=5).offset) for tp, f in answers.items()}

    def _moved(self) -> bool:
        meta = self._admin().list_topics(self.topic, timeout=2).topics[self.topic].partitions
        return all(meta[p].leader not in (-1, self.node.node_id) for p in self.led)

    def start(self) -> LeaderWatch:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set() and None in (self.moved_at, self.appended_at) and self.led:
            try:
                if self.moved_at is None:
                    if self._moved():
                        self.moved_at = time.time()
                    else:
                        self.old_leaders_seen = time.time()
                if self._before is not None:
                    before, high = self._before, self._high()
                    if any(high[p] > before[p] for p in self.led):
                        self.appended_at = time.time()
            except Exception:
                pass  # no leader answers yet
            self._stop.wait(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def delivery(produced: Mapping[int, int], read: Iterable[tuple[int, int]]) -> tuple[int, int]:
    """``(lost, duplicated)``: the topic's records (offsets ``0..n-1`` of each partition, ``n``
    its end offset) never read, and reads beyond a record's first."""
    counts = Counter(read)
    lost = sum(1 for p, n in produced.items() for o in range(n) if (p, o) not in counts)
    return lost, sum(c - 1 for c in counts.values())


def fault_figures(measured: list[Measured]) -> dict[str, float | int]:
    """``<fault>_<source>_s_p50`` / ``_s_max`` / ``_missed``, ``<fault>_vs_spark_kafka_p50``
    and ``<fault>_new_leaders_s_p50`` for every fault that ran."""
    out: dict[str, float | int] = {}
    for fault in FAULTS:
        rows = [m for m in measured if m.fault == fault]
        if not rows:
            continue
        moved = [s for m in rows if (s := m.new_leaders_s) is not None]
        out[f"{fault}_new_leaders_s_p50"] = statistics.median(moved) if moved else math.nan
        p50s = {}
        for fmt, key in SOURCES.items():
            values = [s for m in rows if (s := m.seconds.get(fmt)) is not None]
            p50s[fmt] = statistics.median(values) if values else math.nan
            out[f"{fault}_{key}_s_p50"] = p50s[fmt]
            out[f"{fault}_{key}_s_max"] = max(values) if values else math.nan
            out[f"{fault}_{key}_missed"] = len(rows) - len(values)
        out[f"{fault}_vs_spark_kafka_p50"] = p50s["kafka-group"] / p50s["kafka"]
    return out


def _since(start: float, at: float | None) -> float | None:
    return None if at is None else at - start


def _seconds(value: float | None) -> str:
    return "none" if value is None else f"{value:.1f}s"


def _shown(value: object) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.2f}"
    return str(value)


def report(
    measured: list[Measured],
    readers: Mapping[str, Reader],
    produced: Mapping[int, int],
    recover_timeout_s: float,
) -> dict[str, float | int]:
    """Print the table and the delivery check; the last line's figures."""
    print(
        "\n== seconds after the loss: every partition the lost node led has a new leader, a "
        "record is appended to one again, each source reads the first of them"
    )
    print(
        f"{'fault':26s} {'loss':13s} {'led':5s} {'new leaders':>11s} {'appended':>9s} "
        f"{'kafka-group':>11s} {'format(kafka)':>13s}"
    )
    for m in measured:
        cells = [_seconds(m.seconds.get(fmt)) for fmt in SOURCES]
        led = ",".join(map(str, m.led)) or "-"
        print(
            f"{FAULTS[m.fault]:26s} {m.label:13s} {led:5s} {_seconds(m.new_leaders_s):>11s} "
            f"{_seconds(m.appended_s):>9s} {cells[0]:>11s} {cells[1]:>13s}"
        )
    figures = fault_figures(measured)
    for fault, name in FAULTS.items():
        if f"{fault}_kafka_s_p50" not in figures:
            continue
        line = ", ".join(
            f"{fmt} p50 {_shown(figures[f'{fault}_{key}_s_p50'])} s"
            f" max {_shown(figures[f'{fault}_{key}_s_max'])} s"
            f" ({figures[f'{fault}_{key}_missed']} without a record within "
            f"{recover_timeout_s:.0f} s)"
            for fmt, key in SOURCES.items()
        )
        print(f"  {name}: {line}; kafka-group / kafka p50 "
              f"{_shown(figures[f'{fault}_vs_spark_kafka_p50'])}")  # fmt: skip
    total = sum(produced.values())
    print(f"\n== delivery: {total} records in the topic")
    for fmt, reader in readers.items():
        key = SOURCES[fmt]
        lost, dup = delivery(produced, reader.records())
        alive = reader.died is None
        figures[f"{key}_alive"] = int(alive)
        figures[f"lost_{key}"] = lost
        figures[f"dup_{key}"] = dup
        state = "alive" if alive else f"DEAD: {reader.died[:1500] if reader.died else ''}"
        print(f"  format({fmt!r}): {state}; {lost} lost, {dup} duplicated")
    return figures


# ---------------------------------------------------------------------------- the faults


class FailoverRun:
    """The cluster, the topic under production and the two queries, losing nodes."""

    def __init__(self, kafka: MultiNodeKafka, topic: str, readers: dict[str, Reader],
                 recover_timeout_s: float) -> None:  # fmt: skip
        self.kafka, self.topic, self.readers = kafka, topic, readers
        self.recover_timeout_s = recover_timeout_s
        self.measured: list[Measured] = []

    def lose(self, node: KafkaNode, label: str) -> tuple[dict[str, Loss], LeaderWatch]:
        """What ``node`` leads now and how far each source read it, just before it is lost;
        a watch of its partitions, started."""
        led = sorted(p for p, n in self.kafka.leaders(self.topic).items() if n == node.node_id)
        watch = LeaderWatch(self.kafka, self.topic, node, led)
        at = time.time()
        losses = {fmt: loss(label, at, led, r.records()) for fmt, r in self.readers.items()}
        return losses, watch.start()

    def wait_read_again(self, losses: dict[str, Loss], *, deadline: float) -> None:
        """Until every live source read past its loss point on every partition the node led
        (or ``deadline``, by the monotonic clock)."""

        def caught_up(fmt: str, lost: Loss) -> bool:
            reader = self.readers[fmt]
            read = highest_read(reader.records())
            return not reader.alive or all(read.get(p, -1) > o for p, o in lost.partitions.items())

        while time.monotonic() < deadline:
            if all(caught_up(fmt, lost) for fmt, lost in losses.items()):
                return
            time.sleep(0.25)

    def measure(self, fault: str, losses: dict[str, Loss], watch: LeaderWatch) -> None:
        watch.stop()
        lost = next(iter(losses.values()))
        killed = fault == "hard_bounce"
        # After a SIGKILL no one serves the node's partitions from the loss until the new
        # leaders: a batch that ended after them may have fetched from them. After a SIGTERM
        # the node serves them until it hands them over, within a batch: only a batch begun
        # after the stop began counts.
        served_again = watch.old_leaders_seen if killed else None
        seconds = {
            fmt: first_record_after(loss, self.readers[fmt].fetched_after(loss.at, served_again))
            for fmt, loss in losses.items()
        }
        m = Measured(
            fault, lost.label, sorted(lost.partitions), seconds,
            new_leaders_s=_since(lost.at, watch.moved_at),
            appended_s=_since(lost.at, watch.appended_at),
        )  # fmt: skip
        self.measured.append(m)
        print(
            f"{FAULTS[fault]}: {m.label} led {m.led}: new leaders {_seconds(m.new_leaders_s)}, "
            f"first record appended {_seconds(m.appended_s)} after the loss",
            flush=True,
        )
        for fmt, s in seconds.items():
            reader = self.readers[fmt]
            state = "" if reader.alive else " (query ended)"
            end = lost.at + (s if s is not None else self.recover_timeout_s)
            triggers = triggers_between(reader.progress(), lost.at, end)
            print(f"  {fmt}: first record {_seconds(s)}{state}; triggers: {triggers}", flush=True)

    def settle(self) -> None:
        """Every replica in sync and every leader on its preferred replica: the next loss
        finds the cluster whole, each node leading its share."""
        self.kafka.wait_in_sync()
        replicas = self.kafka.replicas(self.topic)
        preferred = {p: r[0] for p, r in replicas.items()}

        def balanced() -> bool:
            try:
                return self.kafka.leaders(self.topic) == preferred
            except Exception:
                return False  # a node still starting

        try:
            wait_until(balanced, 60, "the preferred leaders", poll_s=0.5)
        except AssertionError:
            print(f"note: leaders {self.kafka.leaders(self.topic)} not all preferred "
                  f"({preferred}) after 60 s", flush=True)  # fmt: skip

    def hard_bounce(self, rounds: int, restart_after_s: float) -> None:
        previous: KafkaNode | None = None
        for round_ in range(1, rounds + 1):
            victim = self.kafka.busiest_leader(self.topic, besides=previous)
            losses, watch = self.lose(victim, f"kill{round_}(node{victim.node_id})")
            killed = time.monotonic()
            victim.kill()
            time.sleep(max(0.0, killed + restart_after_s - time.monotonic()))
            self.kafka.restart(victim)
            self.wait_read_again(losses, deadline=killed + self.recover_timeout_s)
            self.measure("hard_bounce", losses, watch)
            self.settle()
            previous = victim

    def rolling_restart(self) -> None:
        for node in self.kafka.nodes:
            losses, watch = self.lose(node, f"stop(node{node.node_id})")
            stopped = time.monotonic()
            node.terminate()
            self.wait_read_again(losses, deadline=stopped + self.recover_timeout_s)
            self.kafka.restart(node)
            self.measure("rolling", losses, watch)
            self.settle()


def drain(readers: Mapping[str, Reader], produced: Mapping[int, int], timeout_s: float) -> None:
    """Until every live source read every record of the topic (or ``timeout_s``)."""
    expected = {(p, o) for p, n in produced.items() for o in range(n)}

    def done() -> bool:
        return all(not r.alive or expected <= set(r.records()) for r in readers.values())

    try:
        wait_until(done, timeout_s, "every record of the topic read", poll_s=0.5)
    except AssertionError as exc:
        print(f"note: {exc}", flush=True)


# ---------------------------------------------------------------------------- main


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--partitions", type=int, default=6)
    p.add_argument("--rounds", type=int, default=2, help="hard bounces (default 2)")
    p.add_argument("--restart-after-s", type=float, default=25.0,
                   help="seconds from a SIGKILL to the node's restart")  # fmt: skip
    p.add_argument("--recover-timeout-s", type=float, default=90.0,
                   help="how long a loss waits for both sources to read again")  # fmt: skip
    p.add_argument("--faults", default="hard_bounce,rolling",
                   help=f"comma-separated, of {', '.join(FAULTS)}")  # fmt: skip
    p.add_argument("--spark-log-level", default="ERROR")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    faults = [f for f in args.faults.split(",") if f]
    unknown = sorted(set(faults) - set(FAULTS))
    if unknown:
        print(f"--faults {args.faults!r}: unknown {unknown}; choose from {list(FAULTS)}",
              file=sys.stderr)  # fmt: skip
        return 2
    reason = spark_kafka_unavailable()
    if reason is not None:
        print(f"bench_broker_failover compares with format('kafka'): {reason}", file=sys.stderr)
        return 2

    from benchmarks.harness import spark_session

    topic = f"bench-failover-{uuid.uuid4().hex[:6]}"
    with (
        tempfile.TemporaryDirectory(prefix="bench-failover-") as work,
        MultiNodeKafka() as kafka,
    ):
        print(f"Started three Apache Kafka nodes at {kafka.bootstrap_servers}", flush=True)
        kafka.create_topic(topic, args.partitions)
        producer = SteadyProducer(
            kafka.bootstrap_servers, topic, args.partitions, per_round=2, idempotent=True
        ).start()
        spark = spark_session(
            "bench_broker_failover", conf=spark_kafka_conf(), log_level=args.spark_log_level
        )
        readers: dict[str, Reader] = {}
        try:
            for fmt in SOURCES:
                readers[fmt] = start_reader(spark, fmt, kafka.bootstrap_servers, topic, work)
            wait_until(
                lambda: all(r.records() or not r.alive for r in readers.values()),
                180,
                "both queries reading",
            )
            run = FailoverRun(kafka, topic, readers, args.recover_timeout_s)
            run.settle()
            print(f"both queries read; topic {topic}, {args.partitions} partitions, leaders "
                  f"{kafka.leaders(topic)}", flush=True)  # fmt: skip
            if "hard_bounce" in faults:
                run.hard_bounce(args.rounds, args.restart_after_s)
            if "rolling" in faults:
                run.rolling_restart()
            produced = producer.stop()
            drain(readers, produced, 120)
        finally:
            producer.stop()
            for reader in readers.values():
                reader.stop()
            spark.stop()
    figures = report(run.measured, readers, produced, args.recover_timeout_s)
    print_result(figures, format_value=_shown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
