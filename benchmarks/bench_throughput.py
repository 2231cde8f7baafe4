"""Throughput benchmark: the kafka-group source against raw confluent-kafka consumers.

Prefills a topic, then reads it three ways, on the same broker and data, in this run:

1. baseline: raw confluent-kafka consumers building pyarrow RecordBatches, one process per
   core, each assigned a share of the partitions (what a user would hand-write);
2. fetch: the source's executor-side ``fetch()`` called directly, same process layout, one
   partition range at a time (what each Spark task runs);
3. source: ``format("kafka-group")`` in Spark local mode (``local[<cores>]``) into the
   ``noop`` sink with ``Trigger.AvailableNow``; the rate comes from the query progress of
   the measured query (a warm-up query first starts the Python workers): its batches after
   the join, i.e. without the first trigger's ``latestOffset`` (the join, with the initial
   rebalance delay), which is printed on its own as the start-up;
4. ceiling: a do-nothing Python data source that yields ready-made RecordBatches of the same
   schema, partitions and row count into the same sink: the most any Python data source
   can deliver on this machine, so ``source_vs_ceiling`` says how much of Spark's own limit
   the source reaches.

Then the end-to-end latency (:mod:`benchmarks.end_to_end`): at ``--latency-rate`` records/s
with Spark's default trigger, record timestamp to a ``foreachBatch`` sink, for the source, a
do-nothing Python streaming source and a raw confluent-kafka consumer, in one run.
``--only throughput`` / ``--only latency`` runs one part.

Each reader runs ``--rounds`` times (alternating) and the best run counts: the broker shares
the cores with the readers, and anything else running on the machine makes one run noisy.
On a real cluster the two benchmark topics are deleted at the end.

    python -m benchmarks.bench_throughput                # embedded Tansu broker
    python -m benchmarks.bench_throughput --bootstrap-servers broker:9092 --records 10000000

The last line is machine-readable ``key=value`` pairs (``source_rps``, ``baseline_rps``,
``ratio`` = best source / best baseline, ``round_ratios`` = source / baseline of each round,
``fetch_rps``, ``fetch_ratio`` = fetch / baseline, ``ceiling_rps``, ``source_vs_ceiling``,
``source_startup_s``, MB/s, peak RSS, ``latency_{source,plain,raw}_{p50,p99}_ms``,
``latency_p50_vs_plain``, ``latency_p99_vs_plain``, ``latency_p50_vs_raw``, ...).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import resource
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from benchmarks import end_to_end
from benchmarks.harness import add_broker_argument, fresh_topic, print_result, spark_session
from spark_kafka_group.embedded import bootstrap_or_embedded
from spark_kafka_group.group.metadata import TopicPartition

KEY_BYTES = 8

#: The fetch settings of the source's consumers; the baseline uses them too (so the ratio
#: measures the code, not the settings), or librdkafka's defaults with --baseline-defaults.
FETCH_TUNING_KEYS = end_to_end.FETCH_TUNING_KEYS


# ---------------------------------------------------------------------------- prefill


def prefill(servers: str, topic: str, records: int, partitions: int, value_bytes: int) -> int:
    """Produce ``records`` records (8-byte keys, ``value_bytes`` values) round-robin over the
    partitions of ``topic``; the last produce batch of each partition holds one record
    (docs/contributing.md, "Test environment facts"). Returns the number of records in the topic."""
    from spark_kafka_group.sample_data import produce

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
    """The source's executor path: fetch(FetchSpec) per partition, one after another."""
    from spark_kafka_group.fetcher import FetchSpec, fetch

    barrier.wait()
    started = time.perf_counter()
    rows = nbytes = 0
    for partition, end in share:
        for batch in fetch(FetchSpec(topic, partition, 0, end, servers)):
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


class PythonWorkerRss:
    """Samples the peak RSS (VmHWM) of pyspark Python worker processes via /proc."""

    def __init__(self) -> None:
        self.peaks: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        me = os.getpid()
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == me:
                continue
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    cmd = f.read()
                if b"pyspark" not in cmd or (b"daemon" not in cmd and b"worker" not in cmd):
                    continue
                with open(f"/proc/{name}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            kb = float(line.split()[1])
                            self.peaks[int(name)] = max(self.peaks.get(int(name), 0.0), kb / 1024)
            except OSError:
                continue

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(0.5)

    def __enter__(self) -> PythonWorkerRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


class SourceBench:
    """``format("kafka-group")`` in local Spark into the noop sink, one query per round."""

    def __init__(
        self,
        servers: str,
        cores: int,
        work: str,
        max_offsets_per_trigger: int | None,
        spark_conf: dict[str, str] | None = None,
    ) -> None:
        self.servers = servers
        self.work = work
        self.limit = max_offsets_per_trigger
        self.rss = PythonWorkerRss()
        self.error: str | None = None
        self.spark: Any = None
        conf = {"spark.sql.shuffle.partitions": str(cores), "spark.driver.memory": "2g"}
        self.spark = spark_session(
            "bench_throughput",
            master=f"local[{cores}]",
            conf={**conf, **(spark_conf or {})},
            log_level="WARN",
        )
        self.rss.__enter__()

    def run(
        self,
        name: str,
        topic: str,
        limit: int | None = None,
        settings: dict[str, str] | None = None,
    ) -> dict[str, Any] | None:
        """One AvailableNow query over ``topic``; its rate, or None if the source failed.

        ``settings``: ``spark.*`` keys are set as (runtime) SQL confs for this query only, the
        others are source options."""
        if self.spark is None or self.error is not None:
            return None

        settings = settings or {}
        confs = {k: v for k, v in settings.items() if k.startswith("spark.")}
        saved = {k: self.spark.conf.get(k, None) for k in confs}
        for k, v in confs.items():
            self.spark.conf.set(k, v)

        reader = (
            self.spark.readStream.format("kafka-group")
            .option("kafka.bootstrap.servers", self.servers)
            .option("subscribe", topic)
            .option("groupId", f"bench-{name}-{uuid.uuid4().hex[:6]}")
            .option("groupStore", os.path.join(self.work, "groups"))
            .option("startingOffsets", "earliest")
        )
        if limit:
            reader = reader.option("maxOffsetsPerTrigger", str(limit))
        for k, v in settings.items():
            if not k.startswith("spark."):
                reader = reader.option(k, v)
        wall = time.perf_counter()
        try:
            query = (
                reader.load()
                .writeStream.format("noop")
                .option("checkpointLocation", os.path.join(self.work, f"checkpoint-{name}"))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
        except Exception as exc:
            first = str(exc).strip().splitlines()
            self.error = f"query failed ({type(exc).__name__}: {' '.join(first[:3])[:600]})"
            return None
        finally:
            for k, v in saved.items():
                if v is None:
                    self.spark.conf.unset(k)
                else:
                    self.spark.conf.set(k, v)
        measured = _source_rate(list(query.recentProgress))
        measured["wall"] = time.perf_counter() - wall
        return measured

    def ceiling(self, partitions: int, rows_per_partition: int, value_bytes: int) -> float:
        """Rows/s of a Python data source that does no work: each partition yields one
        prebuilt RecordBatch (the source's batch size and schema) until it has its rows."""
        if self.spark is None or self.error is not None:
            return float("nan")
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

    def stop(self) -> float:
        """Stop Spark; the peak RSS of the Python workers seen meanwhile (MB)."""
        if self.spark is not None:
            self.rss.__exit__()
            self.spark.stop()
        return max(self.rss.peaks.values(), default=float("nan"))


def _ceiling_source(value_bytes: int) -> Any:
    """The do-nothing data source of the ceiling measurement (pickled by value)."""
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from spark_kafka_group.fetcher.fetch import DEFAULT_MAX_BATCH_ROWS
    from spark_kafka_group.fetcher.schema import arrow_schema, spark_schema_ddl

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_broker_argument(parser)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each reader (best)")
    parser.add_argument(
        "--baseline-defaults",
        action="store_true",
        help="baseline consumer with librdkafka's default fetch settings (not the tuned ones)",
    )
    parser.add_argument("--skip-spark", action="store_true", help="baseline and fetch only")
    parser.add_argument(
        "--only",
        choices=("throughput", "latency"),
        help="run one part only (default: throughput, then end-to-end latency)",
    )
    parser.add_argument("--latency-rate", type=float, default=1000.0, help="records/s")
    parser.add_argument("--latency-seconds", type=float, default=30.0, help="per reader")
    parser.add_argument("--latency-warmup", type=float, default=5.0, help="seconds, per reader")
    parser.add_argument("--latency-partitions", type=int, default=4)
    parser.add_argument(
        "--latency-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a source option for the latency run (repeatable)",
    )
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="Spark conf for the session (repeatable), e.g. spark.python.worker.reuse=true",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:KEY=VALUE,...",
        help="also measure the source with these settings in every round (spark.* keys are "
        "runtime SQL confs, others source options), e.g. 'split:minPartitions=16'",
    )
    args = parser.parse_args(argv)
    summary: dict[str, Any] = {}
    if args.only != "latency":
        summary.update(throughput(args))
    if args.only != "throughput" and not args.skip_spark:
        summary.update(latency(args))
    print_result(summary, format_value=_fmt)
    return 0


def throughput(args: argparse.Namespace) -> dict[str, Any]:
    """The throughput part: baseline, fetch, source and ceiling rounds; its summary."""
    variants: dict[str, dict[str, str]] = {}
    for spec in args.variant:
        vname, _, body = spec.partition(":")
        variants[vname] = dict(kv.split("=", 1) for kv in body.split(",") if kv)
    spark_conf = dict(kv.split("=", 1) for kv in args.spark_conf)

    from spark_kafka_group.kafka import KafkaCluster

    delete = bool(args.bootstrap_servers)  # the embedded broker's topics go with it
    with (
        tempfile.TemporaryDirectory(prefix="kafka-group-bench-") as work,
        bootstrap_or_embedded(args.bootstrap_servers) as servers,
        fresh_topic(servers, "bench", args.partitions, delete=delete) as topic,
        fresh_topic(servers, "bench-warmup", args.partitions, delete=delete) as warmup,
    ):
        t0 = time.perf_counter()
        total = prefill(servers, topic, args.records, args.partitions, args.value_bytes)
        prefill_s = time.perf_counter() - t0
        # The warm-up query starts the Python workers and warms the JVM's Arrow path.
        warmup_records = max(20_000, min(200_000, args.records // 10))
        prefill(servers, warmup, warmup_records, args.partitions, args.value_bytes)
        with KafkaCluster(servers) as cluster:
            tps = [TopicPartition(topic, p) for p in range(args.partitions)]
            ends = {p: off for (_, p), off in cluster.latest_offsets(tps).items()}
        print(
            f"prefill: {total} records ({args.value_bytes}-byte values) in {prefill_s:.1f}s "
            f"over {args.partitions} partitions; high watermarks sum {sum(ends.values())}",
            flush=True,
        )
        if sum(ends.values()) != total:
            print("warning: high watermarks do not add up to the records produced")
        bytes_per_record = KEY_BYTES + args.value_bytes

        from spark_kafka_group.fetcher.pool import FETCH_DEFAULTS

        baseline_conf = (
            {}
            if args.baseline_defaults
            else {k: FETCH_DEFAULTS[k] for k in FETCH_TUNING_KEYS if k in FETCH_DEFAULTS}
        )
        source = None
        if not args.skip_spark:
            source = SourceBench(
                servers, args.cores, work, args.max_offsets_per_trigger, spark_conf
            )
            source.run("warmup", warmup)  # starts the Python workers, warms the JVM
        bases: list[dict[str, float]] = []
        fets: list[dict[str, float]] = []
        srcs: list[dict[str, Any]] = []
        var_rps: dict[str, list[float]] = {v: [] for v in variants}
        ceilings: list[float] = []
        for round_no in range(1, args.rounds + 1):
            # Interleaved, best of each kept: the broker shares the cores.
            bases.append(
                run_processes(baseline_worker, servers, topic, ends, args.cores, baseline_conf)
            )
            fets.append(run_processes(fetch_worker, servers, topic, ends, args.cores))
            line = (
                f"round {round_no}: baseline {bases[-1]['rps']:.0f} rec/s "
                f"({bases[-1]['seconds']:.2f}s), fetch {fets[-1]['rps']:.0f} rec/s "
                f"({fets[-1]['seconds']:.2f}s)"
            )
            measured = (
                source.run(f"measure{round_no}", topic, args.max_offsets_per_trigger)
                if source
                else None
            )
            if measured is not None:
                srcs.append(measured)
                line += (
                    f", source {measured['rps']:.0f} rec/s ({measured['rows']} rows in "
                    f"{measured['batches']} batch(es), {measured['seconds']:.2f}s of trigger "
                    f"execution after the join, start-up {measured['startup_s']:.2f}s, "
                    f"{measured['wall']:.2f}s query wall; ms per phase after the join: "
                    f"{measured['phases']})"
                )
            if source is not None and measured is not None:
                ceilings.append(
                    source.ceiling(args.partitions, total // args.partitions, args.value_bytes)
                )
                line += f", ceiling {ceilings[-1]:.0f} rec/s"
            for vname, settings in variants.items():
                got = (
                    source.run(f"{vname}{round_no}", topic, args.max_offsets_per_trigger, settings)
                    if source
                    else None
                )
                if got is not None:
                    var_rps[vname].append(got["rps"])
                    line += (
                        f"\n  variant {vname} {settings}: {got['rps']:.0f} rec/s "
                        f"({got['batches']} batch(es), ms per phase: {got['phases']})"
                    )
            print(line, flush=True)
        nan = float("nan")
        worker_rss = source.stop() if source is not None else nan
        if source is not None and source.error:
            print(f"source: {source.error}")
        base = max(bases, key=lambda r: r["rps"])
        fet = max(fets, key=lambda r: r["rps"])
        src_rps = max((r["rps"] for r in srcs), default=nan)
        src = {"rps": src_rps, "mbps": src_rps * bytes_per_record / 1e6}
        startup_s = min((r["startup_s"] for r in srcs), default=nan)
        tuning = "librdkafka defaults" if args.baseline_defaults else "same fetch tuning"
        print(
            f"baseline (raw confluent-kafka -> Arrow, {args.cores} processes, {tuning}): "
            f"{base['rows']} rows in {base['seconds']:.2f}s = {base['rps']:.0f} rec/s, "
            f"{base['mbps']:.1f} MB/s, peak RSS {base['peak_rss_mb']:.0f} MB/process"
        )
        print(
            f"fetch (spark_kafka_group.fetcher.fetch, {args.cores} processes): "
            f"{fet['rows']} rows in {fet['seconds']:.2f}s = {fet['rps']:.0f} rec/s, "
            f"{fet['mbps']:.1f} MB/s, peak RSS {fet['peak_rss_mb']:.0f} MB/process"
        )
        print(
            f"source (format('kafka-group'), local[{args.cores}], noop sink): "
            f"{_fmt(src['rps'])} rec/s, {_fmt(src['mbps'])} MB/s, Python worker "
            f"peak RSS {_fmt(worker_rss)} MB",
            flush=True,
        )
        print(
            f"source start-up (the first trigger's latestOffset: join, initial rebalance "
            f"delay, Trigger.AvailableNow targets; not in the rate above): {_fmt(startup_s)} s",
            flush=True,
        )
        ceiling_rps = max(ceilings, default=nan)
        print(
            f"ceiling (a do-nothing Python data source yielding ready-made Arrow batches "
            f"of the same shape, local[{args.cores}], noop sink): {_fmt(ceiling_rps)} rec/s",
            flush=True,
        )

    return {
        "source_rps": src["rps"],
        "baseline_rps": base["rps"],
        "ratio": src["rps"] / base["rps"],
        "fetch_rps": fet["rps"],
        "fetch_ratio": fet["rps"] / base["rps"],
        "round_ratios": ",".join(
            f"{m['rps'] / b['rps']:.3f}" for b, m in zip(bases, srcs, strict=False)
        )
        or "nan",
        "ceiling_rps": ceiling_rps,
        "source_vs_ceiling": src["rps"] / ceiling_rps,
        "source_startup_s": startup_s,
        **{f"variant_{v}_ratio": max(rps, default=nan) / base["rps"] for v, rps in var_rps.items()},
        "source_mbps": src["mbps"],
        "baseline_mbps": base["mbps"],
        "fetch_mbps": fet["mbps"],
        "worker_peak_rss_mb": worker_rss,
        "baseline_peak_rss_mb": base["peak_rss_mb"],
        "fetch_peak_rss_mb": fet["peak_rss_mb"],
        "records": total,
        "partitions": args.partitions,
        "cores": args.cores,
    }


def latency(args: argparse.Namespace) -> dict[str, Any]:
    """The end-to-end latency part (:mod:`benchmarks.end_to_end`); its summary."""
    options = dict(kv.split("=", 1) for kv in args.latency_option)
    spark_conf = dict(kv.split("=", 1) for kv in args.spark_conf)
    with (
        tempfile.TemporaryDirectory(prefix="kafka-group-latency-") as work,
        bootstrap_or_embedded(args.bootstrap_servers) as servers,
    ):
        topic = f"bench-latency-{uuid.uuid4().hex[:6]}"  # the run creates topic-<reader>
        spark = spark_session(
            "bench_throughput latency",
            master=f"local[{args.cores}]",
            conf={"spark.sql.shuffle.partitions": str(args.cores), **spark_conf},
            log_level="WARN",
        )
        try:
            run = end_to_end.measure(
                spark,
                servers,
                topic,
                args.latency_partitions,
                work,
                rate=args.latency_rate,
                warmup_s=args.latency_warmup,
                seconds=args.latency_seconds,
                source_options=options,
            )
        finally:
            spark.stop()
    p = {
        name: (r.percentile(50), r.percentile(99), len(r.values)) for name, r in run.readers.items()
    }
    print(
        f"end-to-end latency at {args.latency_rate:.0f} records/s over "
        f"{args.latency_partitions} partitions, Spark's default trigger, record timestamp to "
        f"the foreachBatch sink ({args.latency_seconds:.0f}s per reader after "
        f"{args.latency_warmup:.0f}s warm-up):"
    )
    labels = {
        "raw": "raw confluent-kafka consumer",
        "plain": "do-nothing Python streaming source (no group)",
        "source": "format('kafka-group')",
    }
    for name, (p50, p99, n) in p.items():
        extra = ""
        if name in run.phases:
            extra = (
                f"; {run.batches_per_s[name]:.1f} batches/s, mean ms per phase: {run.phases[name]}"
            )
        print(f"  {labels[name]}: p50 {p50:.0f} ms, p99 {p99:.0f} ms ({n} records){extra}")
    src50, src99, _ = p["source"]
    plain50, plain99, _ = p["plain"]
    raw50, raw99, _ = p["raw"]
    print(
        f"  source / do-nothing source: p50 {src50 / plain50:.2f}x, p99 {src99 / plain99:.2f}x; "
        f"source / raw consumer: p50 {src50 / raw50:.1f}x, p99 {src99 / raw99:.1f}x",
        flush=True,
    )
    return {
        "latency_source_p50_ms": src50,
        "latency_source_p99_ms": src99,
        "latency_plain_p50_ms": plain50,
        "latency_plain_p99_ms": plain99,
        "latency_raw_p50_ms": raw50,
        "latency_raw_p99_ms": raw99,
        "latency_p50_vs_plain": src50 / plain50,
        "latency_p99_vs_plain": src99 / plain99,
        "latency_p50_vs_raw": src50 / raw50,
        "latency_rate": args.latency_rate,
    }


if __name__ == "__main__":
    sys.exit(main())
