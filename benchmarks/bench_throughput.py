"""Throughput and end-to-end latency of format("kafka-group") against Spark's own Kafka source.

Run it in the pyspark of jvm/pom.xml's spark-sql-kafka jar (today ``.venv-maven-spark``, which
scripts/setup creates): ``format("kafka")`` needs that Spark line; ``--without-spark-kafka``
runs the rest in any venv.

    .venv-maven-spark/bin/python -m benchmarks.bench_throughput
    .venv-maven-spark/bin/python -m benchmarks.bench_throughput --bootstrap-servers broker:9092

By default the run starts a single-node Apache Kafka (KRaft) from the jars scripts/setup
fetched; ``--bootstrap-servers`` uses an existing cluster instead (its benchmark topics are
deleted at the end).

**Throughput.** For every value size (``--value-bytes``, default 100 and 1024 bytes) and
partition count (``--partitions``, default 8 and 64) a topic is filled with ``--records``
records (8-byte keys), then read, in the same run, on the same broker and data, by:

1. ``kafka``: ``format("kafka")`` in Spark local mode (``local[<cores>]``) into the ``noop``
   sink with ``Trigger.AvailableNow``; ``kafka-tuned``: the same with
   ``kafka.fetch.max.wait.ms=10``, as kafka-group's consumers wait for the broker;
2. ``kafka-group``: ``format("kafka-group")``, the same way;
3. ``raw``: confluent-kafka consumers building pyarrow RecordBatches, one process per core,
   each assigned a share of the partitions (what a user would hand-write);
4. ``noop``: a do-nothing Python data source that yields ready-made RecordBatches of the same
   schema, partitions and row count into the same sink: the most any Python data source
   can deliver on this machine;
5. ``fetch``: the source's executor-side ``fetch()`` called directly in the ``raw`` layout.

A Spark source's rate is its steady state, from the query progress: rows over the trigger time
of its batches, without the first trigger's ``latestOffset``, which is the start-up (for
kafka-group the member's join and the Trigger.AvailableNow targets) and is printed on its own
line. Each Spark reader is a Spark application of its own (a process with its own driver JVM
and Python workers), as a query is in production: in one shared JVM the sources' runs cost each
other CPU (:class:`SparkApp`). Each reader runs ``--rounds`` times, interleaved, and the best
run counts: the broker shares the cores with the readers. A warm-up query of each source first
starts the Python workers and warms the JVM; kafka-group runs one again before each of its
measured runs, as Spark stops a Python worker that is idle for a minute (a default
``format("kafka")`` run over 512 partitions takes longer), and a worker's start is start-up,
not the rate.

**Resource cost** of the two Spark sources, per query (:mod:`benchmarks.resources`): the peak
RSS of the driver JVM, of a Python worker and of the planning process (the Python process of
the streaming source), and the CPU seconds each used per million records.

**End-to-end latency** (:mod:`benchmarks.end_to_end`): at each ``--latency-rates`` (records/s)
and with each ``--latency-triggers`` (``default``: Spark's default trigger; ``1s``: a 1 s
processing-time trigger), record timestamp to a ``foreachBatch`` sink, p50 / p99 / max, for
``format("kafka")``, ``format("kafka-group")``, a raw confluent-kafka consumer (no trigger)
and the do-nothing Python streaming source. ``--only throughput`` / ``--only latency`` runs
one part.

The last line is machine-readable ``key=value`` pairs; ``vs_spark_kafka`` keys are
kafka-group / kafka of the same run (throughput: rates; latency: milliseconds, lower is
better).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import multiprocessing as mp
import os
import resource
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

from benchmarks import end_to_end
from benchmarks.harness import (
    add_broker_argument,
    bootstrap_or_kafka,
    fresh_topic,
    print_result,
    spark_kafka_conf,
    spark_kafka_unavailable,
    spark_session,
)
from benchmarks.resources import SessionProcesses, Usage
from spark_kafka_group.group.metadata import TopicPartition

KEY_BYTES = 8

#: The fetch settings of the source's consumers; the raw consumers use them too (so the ratio
#: measures the code, not the settings), or librdkafka's defaults with --baseline-defaults.
FETCH_TUNING_KEYS = end_to_end.FETCH_TUNING_KEYS

#: The Spark readers, by reader name, and the short names of the summary keys.
SOURCES = {"kafka": "kafka", "kafka-tuned": "kafka_tuned", "kafka-group": "group"}
#: The Spark sources whose tasks run in Python workers.
PYTHON_SOURCES = frozenset({"kafka-group"})
#: ``format("kafka")`` waiting for the broker as kafka-group's consumers do (``fetch.wait.max.ms``
#: in :data:`spark_kafka_group.fetcher.pool.FETCH_DEFAULTS`), not the Java consumer's 500 ms:
#: the ``kafka-tuned`` reader, to compare code rather than defaults.
TUNED_KAFKA_OPTIONS = {"kafka.fetch.max.wait.ms": "10"}


# ---------------------------------------------------------------------------- prefill


def prefill(servers: str, topic: str, records: int, partitions: int, value_bytes: int) -> int:
    """Produce ``records`` records (8-byte keys, ``value_bytes`` values) round-robin over the
    partitions of ``topic``; the last produce batch of each partition holds one record
    (docs/contributing.md, "Test environment facts"). Returns the number of records in the topic."""
    from spark_kafka_group.quickstart.sample_data import produce

    value = b"v" * value_bytes
    body = max(0, records - partitions)  # sample_data adds one final record per partition

    def gen() -> Iterator[tuple[int, bytes, bytes]]:
        for i in range(body):
            yield i % partitions, b"%08d" % (i % 100_000_000), value

    counts = produce(
        servers,
        topic,
        gen(),
        producer_config={
            "linger.ms": 50,
            "batch.num.messages": 10_000,
            "batch.size": 4 * 1024 * 1024,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1024 * 1024,
            "compression.type": "none",
            "acks": 1,
            "log_level": 0,
        },
    )
    if len(counts) < partitions:  # tiny --records: make sure every partition has its record
        missing = [(p, b"%08d" % 0, value) for p in range(partitions) if p not in counts]
        for p, n in produce(servers, topic, missing).items():
            counts[p] = counts.get(p, 0) + n
    return sum(counts.values())


# ---------------------------------------------------------------------------- workers


def _peak_rss_mb() -> float:
    """Peak RSS of this process (VmHWM; ru_maxrss would include the parent's, kept over exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return float(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def baseline_worker(
    servers: str,
    topic: str,
    share: list[tuple[int, int]],
    barrier: Any,
    out: Any,
    extra_conf: dict[str, Any],
) -> None:
    """Raw confluent-kafka: one consumer assigned all partitions of the share, consume() in
    batches, one RecordBatch per batch (the Spark Kafka schema, no headers)."""
    import pyarrow as pa
    from confluent_kafka import Consumer, TopicPartition

    schema = pa.schema(
        [
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("ms", tz="UTC")),
            ("timestampType", pa.int32()),
        ]
    )
    barrier.wait()
    started = time.perf_counter()
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": f"bench-baseline-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "log_level": 0,
            **extra_conf,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p, _ in share])
    remaining = {p: end for p, end in share if end > 0}
    rows = nbytes = 0
    while remaining:
        msgs = consumer.consume(num_messages=10_000, timeout=1.0)
        msgs = [m for m in msgs if m.error() is None]
        if not msgs:
            continue
        ts = [m.timestamp() for m in msgs]
        partitions = [m.partition() for m in msgs]
        offsets = [m.offset() for m in msgs]
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array([m.key() for m in msgs], pa.binary()),
                pa.array([m.value() for m in msgs], pa.binary()),
                pa.array([m.topic() for m in msgs], pa.string()),
                pa.array(partitions, pa.int32()),
                pa.array(offsets, pa.int64()),
                pa.array([t[1] for t in ts], pa.timestamp("ms", tz="UTC")),
                pa.array([t[0] - 1 for t in ts], pa.int32()),
            ],
            schema=schema,
        )
        rows += batch.num_rows
        nbytes += batch.column(0).nbytes + batch.column(1).nbytes
        for p, last in dict(zip(partitions, offsets, strict=True)).items():
            if p in remaining and last is not None and last >= remaining[p] - 1:
                del remaining[p]
    ended = time.perf_counter()
    consumer.close()
    out.put((started, ended, rows, nbytes, _peak_rss_mb()))


def fetch_worker(
    servers: str,
    topic: str,
    share: list[tuple[int, int]],
    barrier: Any,
    out: Any,
    extra_conf: dict[str, Any],
) -> None:
    """The source's executor path: one fetch of the process's share of the partitions, as a
    task reads its ranges."""
    from spark_kafka_group.fetcher import FetchSpec, fetch

    barrier.wait()
    started = time.perf_counter()
    rows = nbytes = 0
    for batch in fetch(*(FetchSpec(topic, partition, 0, end, servers) for partition, end in share)):
        rows += batch.num_rows
        nbytes += batch.column(0).nbytes + batch.column(1).nbytes
    ended = time.perf_counter()
    out.put((started, ended, rows, nbytes, _peak_rss_mb()))


def run_processes(
    target: Any,
    servers: str,
    topic: str,
    ends: dict[int, int],
    procs: int,
    extra_conf: dict[str, Any] | None = None,
) -> dict[str, float]:
    ctx = mp.get_context("spawn")
    shares: list[list[tuple[int, int]]] = [[] for _ in range(procs)]
    for i, p in enumerate(sorted(ends)):
        shares[i % procs].append((p, ends[p]))
    shares = [s for s in shares if s]
    barrier = ctx.Barrier(len(shares))
    out = ctx.Queue()
    workers = [
        ctx.Process(target=target, args=(servers, topic, share, barrier, out, extra_conf or {}))
        for share in shares
    ]
    for w in workers:
        w.start()
    results = [out.get(timeout=1800) for _ in workers]
    for w in workers:
        w.join()
    start = min(r[0] for r in results)
    end = max(r[1] for r in results)
    rows = sum(r[2] for r in results)
    nbytes = sum(r[3] for r in results)
    seconds = end - start
    return {
        "rows": rows,
        "seconds": seconds,
        "rps": rows / seconds,
        "mbps": nbytes / seconds / 1e6,
        "peak_rss_mb": max(r[4] for r in results),
    }


# ---------------------------------------------------------------------------- Spark


class SparkReaders:
    """The Spark sources in one local session, one ``Trigger.AvailableNow`` query per run
    into the ``noop`` sink, and the do-nothing Python data source."""

    def __init__(self, servers: str, cores: int, work: str, conf: dict[str, str]) -> None:
        self.servers = servers
        self.work = work
        self.errors: dict[str, str] = {}
        self.spark = spark_session(
            "bench_throughput",
            master=f"local[{cores}]",
            conf={
                "spark.sql.shuffle.partitions": str(cores),
                "spark.driver.memory": "2g",
                **conf,
            },
            log_level="WARN",
        )
        self.processes = SessionProcesses()

    def run(
        self, fmt: str, topic: str, options: dict[str, str] | None = None
    ) -> dict[str, Any] | None:
        """One AvailableNow query of ``fmt`` over ``topic``: its rate and resource use, or
        None once the source has failed (the error is in :attr:`errors`)."""
        if fmt in self.errors:
            return None
        reader = (
            self.spark.readStream.format(fmt)
            .option("kafka.bootstrap.servers", self.servers)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
        )
        if fmt == "kafka-group":
            reader = reader.option("groupId", f"bench-{uuid.uuid4().hex[:8]}").option(
                "groupStore", os.path.join(self.work, "groups")
            )
        for k, v in (options or {}).items():
            reader = reader.option(k, v)
        wall = time.perf_counter()
        with self.processes.window() as usage:
            try:
                query = (
                    reader.load()
                    .writeStream.format("noop")
                    .option("checkpointLocation", os.path.join(self.work, uuid.uuid4().hex))
                    .trigger(availableNow=True)
                    .start()
                )
                query.awaitTermination()
            except Exception as exc:
                first = str(exc).strip().splitlines()
                self.errors[fmt] = f"{type(exc).__name__}: {' '.join(first[:3])[:600]}"
                return None
        measured = _source_rate(list(query.recentProgress))
        measured["wall"] = time.perf_counter() - wall
        measured["usage"] = usage
        return measured

    def noop(self, partitions: int, rows_per_partition: int, value_bytes: int) -> float:
        """Rows/s of a Python data source that does no work: each partition yields one
        prebuilt RecordBatch (the source's batch size and schema) until it has its rows."""
        self.spark.dataSource.register(_ceiling_source(value_bytes))
        started = time.perf_counter()
        (
            self.spark.read.format("bench-ceiling")
            .option("partitions", str(partitions))
            .option("rows", str(rows_per_partition))
            .load()
            .write.format("noop")
            .mode("overwrite")
            .save()
        )
        return partitions * rows_per_partition / (time.perf_counter() - started)

    def stop(self) -> None:
        self.processes.close()
        self.spark.stop()


class SparkApp:
    """A :class:`SparkReaders` in a process of its own: one reader's Spark application, with a
    driver JVM and Python workers of its own, as a query runs in production.

    In one shared JVM the sources' runs cost each other CPU: the tuned ``format("kafka")``
    over 8 partitions takes 3.15 CPU seconds per million records in a JVM it shares with
    kafka-group, and 2.23 in its own; kafka-group's JVM takes 1.56 right after a default
    ``format("kafka")`` run over 512 partitions in the same JVM, and 0.83 in its own.
    """

    def __init__(self, servers: str, cores: int, work: str, conf: dict[str, str]) -> None:
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._process = ctx.Process(
            target=_serve_readers, args=(child, servers, cores, work, conf), name="spark-app"
        )
        self._process.start()
        child.close()

    def _call(self, method: str, *args: Any) -> Any:
        try:
            self._conn.send((method, args))
            ok, value = self._conn.recv()
        except (EOFError, OSError) as exc:
            self._process.join(timeout=10)
            raise RuntimeError(
                f"the Spark application process ended (exit code {self._process.exitcode}) "
                f"before answering {method}(): its error is printed above"
            ) from exc
        if not ok:
            raise RuntimeError(value)
        return value

    def run(
        self, fmt: str, topic: str, options: dict[str, str] | None = None
    ) -> dict[str, Any] | None:
        """:meth:`SparkReaders.run` in the application."""
        got: dict[str, Any] | None = self._call("run", fmt, topic, options)
        return got

    def noop(self, partitions: int, rows_per_partition: int, value_bytes: int) -> float:
        """:meth:`SparkReaders.noop` in the application."""
        return float(self._call("noop", partitions, rows_per_partition, value_bytes))

    def errors(self) -> dict[str, str]:
        """The application's failed sources (:attr:`SparkReaders.errors`)."""
        errors: dict[str, str] = self._call("errors")
        return errors

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self._conn.send(("stop", ()))
        self._process.join(timeout=300)
        if self._process.is_alive():
            self._process.kill()
        self._conn.close()


def _serve_readers(conn: Any, servers: str, cores: int, work: str, conf: dict[str, str]) -> None:
    """A :class:`SparkApp`'s process: calls of :class:`SparkReaders` from ``conn`` until
    ``stop`` or the benchmark's end."""
    readers = SparkReaders(servers, cores, work, conf)
    try:
        while True:
            try:
                method, args = conn.recv()
            except EOFError:
                return
            if method == "stop":
                return
            try:
                value = (
                    dict(readers.errors) if method == "errors" else getattr(readers, method)(*args)
                )
            except Exception as exc:
                conn.send((False, f"{method} failed: {type(exc).__name__}: {exc}"))
            else:
                conn.send((True, value))
    finally:
        readers.stop()


def _ceiling_source(value_bytes: int) -> Any:
    """The do-nothing data source of the ceiling measurement (pickled by value)."""
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from spark_kafka_group.fetcher.schema import arrow_schema, spark_schema_ddl
    from spark_kafka_group.fetcher.spec import DEFAULT_MAX_BATCH_ROWS

    class CeilingReader(DataSourceReader):
        def __init__(self, options: dict[str, str]) -> None:
            self.count = int(options["partitions"])
            self.rows = int(options["rows"])

        def partitions(self) -> list[InputPartition]:
            return [InputPartition(i) for i in range(self.count)]

        def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
            n = min(DEFAULT_MAX_BATCH_ROWS, self.rows)
            schema = arrow_schema(False)
            now = pa.scalar(int(time.time() * 1e6), pa.timestamp("us", tz="UTC"))
            batch = pa.RecordBatch.from_arrays(
                [
                    pa.array([b"k" * KEY_BYTES] * n, pa.binary()),
                    pa.array([b"v" * value_bytes] * n, pa.binary()),
                    pa.repeat(pa.scalar("t", pa.string()), n),
                    pa.repeat(pa.scalar(partition.value, pa.int32()), n),
                    pa.array(range(n), pa.int64()),
                    pa.repeat(now, n),
                    pa.repeat(pa.scalar(0, pa.int32()), n),
                ],
                schema=schema,
            )
            for start in range(0, self.rows, n):
                yield batch.slice(0, min(n, self.rows - start))

    class CeilingSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench-ceiling"

        def schema(self) -> str:
            return spark_schema_ddl(False)

        def reader(self, schema: Any) -> DataSourceReader:
            return CeilingReader(dict(self.options))

    return CeilingSource


def _source_rate(progress: list[dict[str, Any]]) -> dict[str, Any]:
    """Steady-state rate of one query from its progress: rows over the trigger execution time
    of its batches after the join. The first trigger's ``latestOffset`` is the start-up (the
    member joins the group, waits out the initial rebalance delay and fixes the
    Trigger.AvailableNow targets), reported on its own as ``startup_s``; the rest of that
    trigger, which plans and runs the first batch, counts as steady state."""
    batches = [p for p in progress if p.get("numInputRows", 0) > 0]
    startup_ms = progress[0]["durationMs"].get("latestOffset", 0) if progress else 0
    rows = sum(p["numInputRows"] for p in batches)
    seconds = sum(p["durationMs"].get("triggerExecution", 0) for p in batches) / 1000.0
    if batches and batches[0] is progress[0]:
        seconds -= startup_ms / 1000.0
    phases: dict[str, int] = {}
    for p in batches:
        for phase, ms in p["durationMs"].items():
            if phase in ("latestOffset", "triggerExecution") and p is progress[0]:
                ms -= startup_ms
            phases[phase] = phases.get(phase, 0) + ms
    return {
        "rps": rows / seconds if seconds > 0 else float("nan"),
        "rows": rows,
        "seconds": seconds,
        "startup_s": startup_ms / 1000.0,
        "batches": len(batches),
        "phases": ", ".join(f"{k}={v}" for k, v in sorted(phases.items(), key=lambda kv: -kv[1])),
    }


# ---------------------------------------------------------------------------- main


def _fmt(x: float | str) -> str:
    if isinstance(x, (int, str)):
        return str(x)
    if math.isnan(x):
        return "nan"
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3f}"


def _ints(text: str) -> list[int]:
    return [int(v.replace("_", "")) for v in text.split(",") if v]


def parser() -> argparse.ArgumentParser:
    doc = __doc__ or ""
    parser = argparse.ArgumentParser(
        description=doc.split("\n\n")[0] + " " + doc.split("\n\n")[1],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_broker_argument(parser)
    parser.add_argument("--records", type=int, default=1_000_000, help="per topic")
    parser.add_argument("--partitions", type=_ints, default=[8, 64], help="comma-separated")
    parser.add_argument("--value-bytes", type=_ints, default=[100, 1024], help="comma-separated")
    parser.add_argument("--cores", type=int, default=2, help="local[N]; raw/fetch processes")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each reader (best)")
    parser.add_argument(
        "--readers",
        default="kafka,kafka-tuned,kafka-group,raw,noop,fetch",
        help="throughput readers, comma-separated",
    )
    parser.add_argument(
        "--without-spark-kafka",
        action="store_true",
        help="leave out format('kafka') (it needs the pyspark of jvm/pom.xml's "
        "spark-sql-kafka jar: .venv-maven-spark)",
    )
    parser.add_argument(
        "--baseline-defaults",
        action="store_true",
        help="raw consumers with librdkafka's default fetch settings (not the source's)",
    )
    parser.add_argument(
        "--only",
        choices=("throughput", "latency"),
        help="run one part only (default: throughput, then end-to-end latency)",
    )
    parser.add_argument("--latency-rates", type=_ints, default=[1000, 20000], help="records/s")
    parser.add_argument(
        "--latency-triggers", default="default,1s", help="'default' or '<seconds>s', comma-sep."
    )
    parser.add_argument("--latency-seconds", type=float, default=20.0, help="per reader")
    parser.add_argument(
        "--latency-warmup", type=float, default=5.0,
        help="seconds, per reader, at least (then until it has caught up; end_to_end's docstring)",
    )  # fmt: skip
    parser.add_argument("--latency-partitions", type=int, default=4)
    parser.add_argument(
        "--latency-rounds", type=int, default=1,
        help="rounds per rate and trigger, the readers taking turns in each; the percentiles "
        "are over the records of every round",
    )  # fmt: skip
    parser.add_argument(
        "--latency-readers", default=",".join(end_to_end.READERS), help="comma-separated"
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a kafka-group source option for every kafka-group query (repeatable)",
    )
    parser.add_argument(
        "--kafka-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a format('kafka') option for every format('kafka') query (repeatable), e.g. "
        "kafka.max.partition.fetch.bytes=8388608",
    )
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Spark conf for the session (repeatable)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    spark_conf = dict(kv.split("=", 1) for kv in args.spark_conf)
    if not args.without_spark_kafka:
        why = spark_kafka_unavailable()
        if why is not None:
            print(f"error: {why}; or pass --without-spark-kafka", file=sys.stderr)
            return 2
        spark_conf.update(spark_kafka_conf())
    summary: dict[str, Any] = {}
    with (
        tempfile.TemporaryDirectory(prefix="kafka-group-bench-") as work,
        bootstrap_or_kafka(args.bootstrap_servers) as servers,
    ):
        if args.only != "latency":
            summary.update(throughput(args, servers, work, spark_conf))
        if args.only != "throughput":
            summary.update(latency(args, servers, work, spark_conf))
    print_result(summary, format_value=_fmt)
    return 0


def throughput(
    args: argparse.Namespace, servers: str, work: str, spark_conf: dict[str, str]
) -> dict[str, Any]:
    """Every value size and partition count: each reader's best rate; the summary."""
    readers = [r for r in args.readers.split(",") if r]
    if args.without_spark_kafka:
        readers = [r for r in readers if r not in ("kafka", "kafka-tuned")]
    kafka_options = dict(kv.split("=", 1) for kv in args.kafka_option)
    options = {
        "kafka-group": dict(kv.split("=", 1) for kv in args.option),
        "kafka": kafka_options,
        "kafka-tuned": {**kafka_options, **TUNED_KAFKA_OPTIONS},
    }
    apps = {
        reader: SparkApp(servers, args.cores, work, spark_conf)
        for reader in readers
        if reader in SOURCES or reader == "noop"
    }
    summary: dict[str, Any] = {}
    try:
        for value_bytes in args.value_bytes:
            for partitions in args.partitions:
                summary.update(
                    _throughput_case(args, servers, apps, readers, options, value_bytes, partitions)
                )
    finally:
        for reader, app in apps.items():
            with contextlib.suppress(RuntimeError):  # the application has ended
                for fmt, error in app.errors().items():
                    print(f"{reader}: format({fmt!r}) failed: {error}", flush=True)
            app.stop()
    return summary


def _throughput_case(
    args: argparse.Namespace,
    servers: str,
    apps: dict[str, SparkApp],
    readers: list[str],
    options: dict[str, dict[str, str]],
    value_bytes: int,
    partitions: int,
) -> dict[str, Any]:
    from spark_kafka_group.fetcher.pool import FETCH_DEFAULTS
    from spark_kafka_group.kafka import KafkaCluster

    case = f"{value_bytes}b_{partitions}p"
    delete = bool(args.bootstrap_servers)  # our own broker's topics go with it
    with (
        fresh_topic(servers, "bench", partitions, delete=delete) as topic,
        fresh_topic(servers, "bench-warmup", partitions, delete=delete) as warmup,
    ):
        t0 = time.perf_counter()
        total = prefill(servers, topic, args.records, partitions, value_bytes)
        prefill_s = time.perf_counter() - t0
        prefill(servers, warmup, max(10_000, min(100_000, args.records // 10)), partitions,
                value_bytes)  # fmt: skip
        with KafkaCluster(servers) as cluster:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            ends = {p: off for (_, p), off in cluster.latest_offsets(tps).items()}
        record_bytes = KEY_BYTES + value_bytes
        print(
            f"\n== throughput: {total} records of {value_bytes}-byte values "
            f"({total * record_bytes / 1e6:.0f} MB of keys and values) over {partitions} "
            f"partitions, local[{args.cores}] (prefill {prefill_s:.1f}s)",
            flush=True,
        )
        if sum(ends.values()) != total:
            print("warning: high watermarks do not add up to the records produced")
        raw_conf = (
            {}
            if args.baseline_defaults
            else {k: FETCH_DEFAULTS[k] for k in FETCH_TUNING_KEYS if k in FETCH_DEFAULTS}
        )
        for reader in SOURCES:
            if reader in readers:  # starts the Python workers, warms the JVM
                apps[reader].run(_format(reader), warmup, options[reader])
        runs: dict[str, list[dict[str, Any]]] = {r: [] for r in readers}
        for round_no in range(1, args.rounds + 1):
            line = []
            for reader in readers:
                got: dict[str, Any] | None
                if reader in SOURCES:
                    if reader in PYTHON_SOURCES:
                        # Spark stops a Python worker idle for a minute, less than a default
                        # format("kafka") run over 512 partitions takes: started again here,
                        # not within the measured run.
                        apps[reader].run(_format(reader), warmup, options[reader])
                    got = apps[reader].run(_format(reader), topic, options[reader])
                elif reader == "noop":
                    rps = apps[reader].noop(partitions, total // partitions, value_bytes)
                    got = {"rps": rps, "rows": total}
                elif reader == "raw":
                    got = run_processes(baseline_worker, servers, topic, ends, args.cores,
                                        raw_conf)  # fmt: skip
                elif reader == "fetch":
                    got = run_processes(fetch_worker, servers, topic, ends, args.cores)
                else:
                    got = None
                if got is not None:
                    runs[reader].append(got)
                    line.append(f"{reader} {got['rps']:.0f}")
            print(f"round {round_no} (records/s): {', '.join(line)}", flush=True)
    return _report_case(case, runs, record_bytes, args.cores)


def _format(reader: str) -> str:
    """The format name of a Spark reader."""
    return "kafka" if reader == "kafka-tuned" else reader


LABELS = {
    "kafka": "format('kafka')",
    "kafka-tuned": "format('kafka') with kafka.fetch.max.wait.ms=10",
    "kafka-group": "format('kafka-group')",
    "raw": "raw confluent-kafka -> Arrow",
    "noop": "do-nothing Python data source",
    "fetch": "kafka-group's fetch() alone",
}


def _report_case(
    case: str, runs: dict[str, list[dict[str, Any]]], record_bytes: int, cores: int
) -> dict[str, Any]:
    nan = float("nan")
    best = {r: max(rs, key=lambda m: m["rps"]) for r, rs in runs.items() if rs}
    summary: dict[str, Any] = {}
    kafka_rps = best["kafka"]["rps"] if "kafka" in best else nan
    tuned_rps = best["kafka-tuned"]["rps"] if "kafka-tuned" in best else nan
    for reader, m in best.items():
        rps = m["rps"]
        vs = ""
        if not reader.startswith("kafka") or reader == "kafka-group":
            vs = f", {rps / kafka_rps:.2f}x format('kafka'), {rps / tuned_rps:.2f}x tuned"
        where = f" ({cores} processes)" if reader in ("raw", "fetch") else ""
        print(
            f"  {LABELS[reader]}{where}: {rps:,.0f} records/s, "
            f"{rps * record_bytes / 1e6:.1f} MB/s{vs}"
        )
        key = reader.replace("-", "_")
        summary[f"{key}_rps_{case}"] = rps
        summary[f"{key}_mbps_{case}"] = rps * record_bytes / 1e6
    for fmt, short in SOURCES.items():
        if fmt not in best:
            continue
        m = best[fmt]
        print(
            f"  {LABELS[fmt]} start-up (the first trigger's latestOffset, not in the rate): "
            f"{m['startup_s']:.2f} s; steady phases (ms): {m['phases']}"
        )
        usage: Usage = m["usage"]
        print(f"  {LABELS[fmt]} resources: {usage.describe(m['rows'])}")
        per_m = 1e6 / m["rows"] if m["rows"] else nan
        summary[f"{short}_startup_s_{case}"] = m["startup_s"]
        summary[f"{short}_cpu_s_per_m_{case}"] = usage.total_cpu_s * per_m
        for kind, cpu_s in usage.cpu_s.items():
            summary[f"{short}_cpu_s_per_m_{kind}_{case}"] = cpu_s * per_m
        for kind, mb in usage.peak_rss_mb.items():
            summary[f"{short}_rss_mb_{kind}_{case}"] = mb
    group_rps = best["kafka-group"]["rps"] if "kafka-group" in best else nan
    summary[f"vs_spark_kafka_{case}"] = group_rps / kafka_rps
    summary[f"vs_tuned_spark_kafka_{case}"] = group_rps / tuned_rps
    ratios = [
        f"/ {name}: {group_rps / rps:.2f}x"
        for name, rps in (("kafka", kafka_rps), ("tuned kafka", tuned_rps))
        if not math.isnan(rps)
    ]
    print(f"  kafka-group {'; '.join(ratios)}", flush=True)
    return summary


def latency(
    args: argparse.Namespace, servers: str, work: str, spark_conf: dict[str, str]
) -> dict[str, Any]:
    """The end-to-end latency part (:mod:`benchmarks.end_to_end`); its summary."""
    options = {
        "kafka-group": dict(kv.split("=", 1) for kv in args.option),
        "kafka": dict(kv.split("=", 1) for kv in args.kafka_option),
    }
    readers = tuple(r for r in args.latency_readers.split(",") if r)
    if args.without_spark_kafka:
        readers = tuple(r for r in readers if r != "kafka")
    triggers: list[float | None] = [
        None if t == "default" else float(t.rstrip("s"))
        for t in args.latency_triggers.split(",")
        if t
    ]
    spark = spark_session(
        "bench_throughput latency",
        master=f"local[{args.cores}]",
        conf={"spark.sql.shuffle.partitions": str(args.cores), **spark_conf},
        log_level="WARN",
    )
    summary: dict[str, Any] = {}
    labels = {
        "raw": "raw confluent-kafka consumer (no trigger)",
        "plain": "do-nothing Python streaming source",
        **LABELS,
    }
    try:
        topic = f"bench-latency-{uuid.uuid4().hex[:6]}"
        end_to_end.warm_up(spark, servers, topic, args.latency_partitions, work,
                           rate=min(args.latency_rates), warmup_s=args.latency_warmup)  # fmt: skip
        for rate in args.latency_rates:
            for n, trigger_s in enumerate(triggers):
                # raw has no trigger: measured once per rate
                wanted = tuple(r for r in readers if r != "raw" or n == 0)
                tname = "default" if trigger_s is None else f"{trigger_s:g}s"
                rounds: list[end_to_end.LatencyRun] = []
                for round_no in range(1, args.latency_rounds + 1):
                    rounds.append(
                        end_to_end.measure(
                            spark,
                            servers,
                            f"{topic}-{rate}-{n}-{round_no}",
                            args.latency_partitions,
                            work,
                            rate=rate,
                            warmup_s=args.latency_warmup,
                            seconds=args.latency_seconds,
                            readers=wanted,
                            trigger_s=trigger_s,
                            source_options=options,
                        )
                    )
                    of = f", round {round_no} of {args.latency_rounds}"
                    print(
                        f"\n== end-to-end latency at {rate} records/s over "
                        f"{args.latency_partitions} partitions, {tname} trigger"
                        f"{of if args.latency_rounds > 1 else ''}, record timestamp to the "
                        f"foreachBatch sink ({args.latency_seconds:.0f}s per reader once caught "
                        f"up, after at least {args.latency_warmup:.0f}s of warm-up):"
                    )
                    _print_latencies(rounds[-1], labels)
                pooled = end_to_end.pooled(rounds)
                if len(rounds) > 1:
                    print(
                        f"\n== end-to-end latency at {rate} records/s, {tname} trigger, the "
                        f"records of all {len(rounds)} rounds:"
                    )
                    _print_latencies(pooled, labels)
                for name, r in pooled.readers.items():
                    key = f"latency_{name.replace('-', '_')}_{rate}_{tname}"
                    if name == "raw":
                        key = f"latency_raw_{rate}"
                    summary[f"{key}_p50_ms"] = r.percentile(50)
                    summary[f"{key}_p99_ms"] = r.percentile(99)
                    summary[f"{key}_max_ms"] = r.percentile(100)
                for q, ratio in _latency_ratios(pooled).items():
                    summary[f"latency_vs_spark_kafka_p{q}_{rate}_{tname}"] = ratio
    finally:
        spark.stop()
    return summary


def _latency_ratios(run: end_to_end.LatencyRun) -> dict[int, float]:
    """kafka-group's p50 and p99 over format("kafka")'s (none if either was not run)."""
    if "kafka" not in run.readers or "kafka-group" not in run.readers:
        return {}
    k, g = run.readers["kafka"], run.readers["kafka-group"]
    return {q: g.percentile(q) / k.percentile(q) for q in (50, 99)}


def _print_latencies(run: end_to_end.LatencyRun, labels: dict[str, str]) -> None:
    for name, r in run.readers.items():
        extra = ""
        if name in run.progress:
            extra = (
                f"; {run.batches_per_s(name):.1f} batches/s, mean ms per phase: {run.phases(name)}"
            )
        print(
            f"  {labels[name]}: p50 {r.percentile(50):.0f} ms, p99 {r.percentile(99):.0f} ms, "
            f"max {r.percentile(100):.0f} ms ({len(r.values)} records, {r.warm_up_shown()})"
            f"{extra}"
        )
    ratios = _latency_ratios(run)
    if ratios:
        print(f"  kafka-group / kafka: p50 {ratios[50]:.2f}x, p99 {ratios[99]:.2f}x", flush=True)


if __name__ == "__main__":
    sys.exit(main())
