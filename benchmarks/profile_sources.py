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

cProfile adds its own cost to every Python call it sees, so the profiled query is slower than
an unprofiled one; compare the shares, and the rates of ``bench_throughput``.

Run it in the pyspark of jvm/pom.xml's spark-sql-kafka jar (``.venv-maven-spark``):

    .venv-maven-spark/bin/python -m benchmarks.profile_sources --records 1000000
"""

from __future__ import annotations

import argparse
import glob
import os
import pstats
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from typing import Any

from benchmarks.bench_throughput import SparkReaders, prefill
from benchmarks.harness import (
    add_broker_argument,
    bootstrap_or_kafka,
    fresh_topic,
    print_result,
    spark_kafka_conf,
    spark_kafka_unavailable,
)
from benchmarks.resources import KINDS, driver_jvm_pid


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_broker_argument(parser)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--top", type=int, default=15, help="rows of each profile")
    parser.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE",
        help="a kafka-group source option (repeatable)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    why = spark_kafka_unavailable()
    if why is not None:
        print(f"error: {why}", file=sys.stderr)
        return 2
    options = dict(kv.split("=", 1) for kv in args.option)
    summary: dict[str, Any] = {}
    with (
        tempfile.TemporaryDirectory(prefix="kafka-group-profile-") as work,
        bootstrap_or_kafka(args.bootstrap_servers) as servers,
        fresh_topic(servers, "profile", args.partitions, delete=bool(args.bootstrap_servers))
        as topic,
        fresh_topic(servers, "profile-warmup", args.partitions,
                    delete=bool(args.bootstrap_servers)) as warmup,
    ):  # fmt: skip
        total = prefill(servers, topic, args.records, args.partitions, args.value_bytes)
        prefill(servers, warmup, 50_000, args.partitions, args.value_bytes)
        conf = {**spark_kafka_conf(), "spark.sql.pyspark.dataSource.profiler": "perf"}
        readers = SparkReaders(servers, args.cores, work, conf)
        try:
            for fmt in ("kafka", "kafka-group"):
                readers.run(fmt, warmup, options if fmt == "kafka-group" else None)
            readers.noop(args.partitions, 10_000, args.value_bytes)
            python_profile(readers.spark, work, 0)  # the warm-ups' profiles
            jvm = driver_jvm_pid()
            for name in ("kafka", "kafka-group", "noop"):
                jfr_file = os.path.join(work, f"{name}.jfr")
                subprocess.run(
                    ["jcmd", str(jvm), "JFR.start", f"name={name}", "settings=profile"],
                    check=True, capture_output=True,
                )  # fmt: skip
                with readers.processes.window() as usage:
                    started = time.perf_counter()
                    if name == "noop":
                        readers.noop(args.partitions, total // args.partitions, args.value_bytes)
                        rows = total
                    else:
                        got = readers.run(name, topic, options if name == "kafka-group" else None)
                        if got is None:
                            print(f"{name} failed: {readers.errors.get(name)}")
                            continue
                        rows = got["rows"]
                    wall = time.perf_counter() - started
                subprocess.run(
                    ["jcmd", str(jvm), "JFR.stop", f"name={name}", f"filename={jfr_file}"],
                    check=True, capture_output=True,
                )  # fmt: skip
                per_m = 1e6 / rows
                print(
                    f"\n== {name}: {rows} records, query wall {wall:.2f} s (profiled); CPU s "
                    "per million records: "
                    + ", ".join(f"{k} {usage.cpu_s[k] * per_m:.2f}" for k in KINDS)
                )
                print("  driver JVM, top frames of the CPU samples:")
                for method, n, share in hot_methods(jfr_file, args.top):
                    print(f"    {share:6.1%} {n:6d}  {method}")
                if name != "kafka":
                    print("  Python workers (cProfile around read()'s next()): own s, cum s, calls")
                    for func, own, cum, calls in python_profile(readers.spark, work, args.top):
                        print(f"    {own:7.3f} {cum:7.3f} {calls:9d}  {func}")
                key = name.replace("-", "_")
                for k in KINDS:
                    summary[f"{key}_cpu_s_per_m_{k}"] = usage.cpu_s[k] * per_m
                summary[f"{key}_wall_s"] = wall
        finally:
            readers.stop()
    print_result(summary, format_value=lambda v: f"{v:.3f}" if isinstance(v, float) else str(v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
