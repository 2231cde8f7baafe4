"""Where a batch's time goes: format("kafka") against format("kafka-group") on one workload.

Fills a topic, then reads it with a ``Trigger.AvailableNow`` query into the ``noop`` sink,
once with each source and once with the do-nothing Python data source of
:mod:`benchmarks.bench_throughput` (ready-made Arrow batches: the floor of the Python
data-source path), in one local session. For each:

- the driver JVM's CPU samples (Java Flight Recorder, started and stopped around the query
  with ``jcmd``): the hottest methods, by the samples in which they are the top frame;
- the Python side of a Python source: Spark's own data-source profiler
  (``spark.sql.pyspark.dataSource.profiler=perf``, cProfile around each ``next()`` of
  ``read()`` in the Python workers), its most expensive functions by own time;
- the CPU seconds of the JVM, the Python workers and the planning process
  (:mod:`benchmarks.resources`).

With ``--latency-rate R`` it profiles the streaming case instead: a producer writes ``R``
records a second to a fresh topic of ``--latency-partitions`` partitions and each source
reads it with Spark's default trigger into the ``foreachBatch`` sink of
:mod:`benchmarks.end_to_end` for ``--latency-seconds``; besides the profiles it prints
Spark's mean milliseconds per trigger phase, and the Python profile per task (``fetch``'s
cumulative time over its calls).

cProfile adds its own cost to every Python call it sees, so the profiled query is slower than
an unprofiled one; compare the shares, and the rates of ``bench_throughput``.

Run it in the pyspark of jvm/pom.xml's spark-sql-kafka jar (``.venv-maven-spark``):

    .venv-maven-spark/bin/python -m benchmarks.profile_sources --records 1000000
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import pstats
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

from benchmarks import end_to_end
from benchmarks.bench_throughput import SparkReaders, prefill
from benchmarks.harness import (
    add_broker_argument,
    bootstrap_or_kafka,
    fresh_topic,
    print_result,
    spark_kafka_conf,
    spark_kafka_unavailable,
)
from benchmarks.resources import KINDS, Usage, driver_jvm_pid

#: Java Flight Recorder settings: CPU samples every millisecond, nothing else (the JDK's own
#: "profile" settings sample every 10-20 ms, too few for a query of a few seconds).
JFC = """<?xml version="1.0" encoding="UTF-8"?>
<configuration version="2.0" label="cpu samples">
  <event name="jdk.ExecutionSample">
    <setting name="enabled">true</setting>
    <setting name="period">1 ms</setting>
  </event>
</configuration>
"""


def hot_methods(jfr_file: str, top: int) -> list[tuple[str, int, float]]:
    """(method, samples as the top frame, share) of the JFR recording's execution samples."""
    text = subprocess.run(
        ["jfr", "print", "--events", "jdk.ExecutionSample", "--stack-depth", "1", jfr_file],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    counts: Counter[str] = Counter()
    lines = iter(text.splitlines())
    for line in lines:
        if line.strip().startswith("stackTrace = ["):
            frame = next(lines, "").strip()
            counts[frame.split("  line:")[0].strip() or "?"] += 1
    total = sum(counts.values()) or 1
    return [(m, n, n / total) for m, n in counts.most_common(top)]


def python_profile(spark: Any, work: str, top: int) -> list[tuple[str, float, float, int]]:
    """(function, own seconds, cumulative seconds, calls) of the data-source profiles Spark
    collected since the last call, most own time first; the collected profiles are cleared."""
    folder = os.path.join(work, f"profile-{uuid.uuid4().hex[:6]}")
    spark.profile.dump(folder, type="perf")
    spark.profile.clear(type="perf")
    files = glob.glob(os.path.join(folder, "*"))
    if not files:
        return []
    stats = pstats.Stats(*files)
    rows = []
    for (file, line, name), (_, calls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append((f"{name} ({os.path.basename(file)}:{line})", tottime, cumtime, calls))
    rows.sort(key=lambda r: -r[1])
    return rows[:top]


@contextlib.contextmanager
def jfr_recording(jvm: int, work: str, name: str) -> Iterator[str]:
    """A CPU-sample recording of the driver JVM for the block; yields the file it is in."""
    jfc = os.path.join(work, "cpu.jfc")
    with open(jfc, "w") as f:
        f.write(JFC)
    jfr_file = os.path.join(work, f"{name}-{uuid.uuid4().hex[:6]}.jfr")
    subprocess.run(
        ["jcmd", str(jvm), "JFR.start", f"name={name}", f"settings={jfc}"],
        check=True, capture_output=True,
    )  # fmt: skip
    try:
        yield jfr_file
    finally:
        subprocess.run(
            ["jcmd", str(jvm), "JFR.stop", f"name={name}", f"filename={jfr_file}"],
            check=True, capture_output=True,
        )  # fmt: skip


def report(
    name: str, rows: int, wall: float, usage: Usage, jfr_file: str, profile: list[Any], top: int
) -> dict[str, float]:
    per_m = 1e6 / rows if rows else float("nan")
    print(
        f"\n== {name}: {rows} records, wall {wall:.2f} s (profiled); CPU s per million "
        "records: " + ", ".join(f"{k} {usage.cpu_s[k] * per_m:.2f}" for k in KINDS)
    )
    print("  driver JVM, top frames of the CPU samples:")
    for method, n, share in hot_methods(jfr_file, top):
        print(f"    {share:6.1%} {n:6d}  {method}")
    if profile:
        print(
            "  Python workers (cProfile around read()'s next()): own s, cum s, calls, cum ms/call"
        )
        for func, own, cum, calls in profile:
            print(f"    {own:7.3f} {cum:7.3f} {calls:9d} {cum / calls * 1000:8.2f}  {func}")
    key = name.replace("-", "_")
    return {
        **{f"{key}_cpu_s_per_m_{k}": usage.cpu_s[k] * per_m for k in KINDS},
        f"{key}_wall_s": wall,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_broker_argument(parser)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--top", type=int, default=15, help="rows of each profile")
    parser.add_argument("--latency-rate", type=int, help="profile the streaming case instead")
    parser.add_argument("--latency-partitions", type=int, default=4)
    parser.add_argument("--latency-seconds", type=float, default=20.0)
    parser.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE",
        help="a kafka-group source option (repeatable)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    why = spark_kafka_unavailable()
    if why is not None:
        print(f"error: {why}", file=sys.stderr)
        return 2
    options = {"kafka-group": dict(kv.split("=", 1) for kv in args.option), "kafka": {}}
    conf = {**spark_kafka_conf(), "spark.sql.pyspark.dataSource.profiler": "perf"}
    with (
        tempfile.TemporaryDirectory(prefix="kafka-group-profile-") as work,
        bootstrap_or_kafka(args.bootstrap_servers) as servers,
    ):
        readers = SparkReaders(servers, args.cores, work, conf)
        try:
            if args.latency_rate:
                summary = profile_latency(args, readers, servers, work, options)
            else:
                summary = profile_throughput(args, readers, servers, work, options)
        finally:
            readers.stop()
    print_result(summary, format_value=lambda v: f"{v:.3f}" if isinstance(v, float) else str(v))
    return 0


def profile_throughput(
    args: argparse.Namespace,
    readers: SparkReaders,
    servers: str,
    work: str,
    options: dict[str, dict[str, str]],
) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    delete = bool(args.bootstrap_servers)
    with (
        fresh_topic(servers, "profile", args.partitions, delete=delete) as topic,
        fresh_topic(servers, "profile-warmup", args.partitions, delete=delete) as warmup,
    ):
        total = prefill(servers, topic, args.records, args.partitions, args.value_bytes)
        prefill(servers, warmup, 50_000, args.partitions, args.value_bytes)
        for fmt in ("kafka", "kafka-group"):
            readers.run(fmt, warmup, options[fmt])
        readers.noop(args.partitions, 10_000, args.value_bytes)
        python_profile(readers.spark, work, 0)  # the warm-ups' profiles
        jvm = driver_jvm_pid()
        for name in ("kafka", "kafka-group", "noop"):
            with (
                jfr_recording(jvm, work, name) as jfr_file,
                readers.processes.window() as usage,
            ):
                started = time.perf_counter()
                if name == "noop":
                    readers.noop(args.partitions, total // args.partitions, args.value_bytes)
                    rows = total
                else:
                    got = readers.run(name, topic, options[name])
                    rows = got["rows"] if got is not None else 0
                wall = time.perf_counter() - started
            if name in readers.errors:
                print(f"{name} failed: {readers.errors[name]}")
                continue
            profile = [] if name == "kafka" else python_profile(readers.spark, work, args.top)
            summary.update(report(name, rows, wall, usage, jfr_file, profile, args.top))
    return summary


def profile_latency(
    args: argparse.Namespace,
    readers: SparkReaders,
    servers: str,
    work: str,
    options: dict[str, dict[str, str]],
) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    spark, rate, partitions = readers.spark, args.latency_rate, args.latency_partitions
    topic = f"profile-latency-{uuid.uuid4().hex[:6]}"
    end_to_end.warm_up(spark, servers, topic, partitions, work, rate=rate, warmup_s=3.0)
    python_profile(spark, work, 0)
    jvm = driver_jvm_pid()
    for name in ("kafka", "kafka-group"):
        with end_to_end.producing(servers, f"{topic}-{name}", partitions, rate):
            reader = end_to_end.spark_reader(
                spark, name, servers, f"{topic}-{name}", partitions, work, options[name]
            )
            # The first records and a few seconds unmeasured: the join, the first batches.
            with (
                jfr_recording(jvm, work, name) as jfr_file,
                readers.processes.window() as usage,
            ):
                started = time.perf_counter()
                result, progress = end_to_end.measure_spark(
                    spark, name, reader, work, 3.0, args.latency_seconds
                )
                wall = time.perf_counter() - started
        print(
            f"\n== {name} at {rate} records/s, default trigger: p50 {result.percentile(50):.0f} "
            f"ms, p99 {result.percentile(99):.0f} ms; {len(progress)} measured triggers, mean "
            f"ms per phase: {end_to_end.phase_means(progress)}"
        )
        profile = [] if name == "kafka" else python_profile(spark, work, args.top)
        rows = len(result.values)
        summary.update(report(name, rows, wall, usage, jfr_file, profile, args.top))
        summary[f"{name.replace('-', '_')}_p50_ms"] = result.percentile(50)
    return summary


if __name__ == "__main__":
    sys.exit(main())
