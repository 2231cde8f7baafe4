"""Per-task cost of a Python data source: the floor under a micro-batch of a few records.

A batch read of a Python data source whose ``read()`` yields one row per input partition is
collected ``--rounds`` times for each number of input partitions (``--partitions``, default
1, 2, 4, 8) in Spark local mode (``local[<cores>]``). No broker, no group: what is measured is
Spark's job plus its Python workers. Printed per number of partitions: the collect's p50 and
mean, its ratio to the one-partition collect of the same run, and the Python workers' CPU per
task (from ``/proc``, Linux only; workers that exit during the round are not counted).

    python -m benchmarks.bench_task_cost
    python -m benchmarks.bench_task_cost --partitions 1,4 --rounds 50 --cores 2
    python -m benchmarks.bench_task_cost --freeze-gc

pyspark's daemon runs ``gc.collect()`` in a reused Python worker after every task, a full
collection of a heap that holds pyspark and pyarrow. ``--freeze-gc`` measures that
collection's share: the source's first task in each worker moves every object alive then
(the imported modules) out of the collections (``gc.freeze()``).

The last line is ``key=value`` pairs: ``collect_p<N>_ms``, ``ratio_p<N>`` (to one partition)
and ``worker_cpu_per_task_p<N>_ms`` per number of partitions ``N``.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections.abc import Iterator
from typing import Any

from benchmarks.harness import print_result, spark_session


def _one_row_source() -> Any:
    """A Python data source with ``n`` input partitions of one row each (pickled by value)."""
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class OneRowReader(DataSourceReader):
        def __init__(self, partitions: int, freeze_gc: bool) -> None:
            self.count = partitions
            self.freeze_gc = freeze_gc

        def partitions(self) -> list[InputPartition]:
            return [InputPartition(i) for i in range(self.count)]

        def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
            if self.freeze_gc and gc.get_freeze_count() == 0:
                # The worker's first task: what is alive now (the modules) leaves the
                # collections pyspark's daemon runs after every task.
                gc.collect()
                gc.freeze()
            yield pa.RecordBatch.from_arrays([pa.array([1], pa.int64())], names=["x"])

    class OneRowSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench-one-row"

        def schema(self) -> str:
            return "x long"

        def reader(self, schema: Any) -> DataSourceReader:
            return OneRowReader(
                int(self.options.get("partitions", "1")), self.options.get("freezeGc") == "true"
            )

    return OneRowSource


def _python_worker_cpu_s() -> float:
    """CPU seconds of the live ``pyspark.daemon`` processes (the daemon and its workers)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"pyspark.daemon" not in f.read():
                    continue
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:  # the process ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="1,2,4,8", help="comma-separated counts")
    parser.add_argument("--rounds", type=int, default=30, help="collects per count")
    parser.add_argument("--warmup", type=int, default=5, help="unmeasured collects per count")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--freeze-gc",
        action="store_true",
        help="the source's first task in each Python worker freezes the objects alive then "
        "(gc.freeze()), out of the gc.collect() pyspark's daemon runs after every task",
    )
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.partitions.split(",")]
    spark = spark_session("bench_task_cost", master=f"local[{args.cores}]")
    spark.dataSource.register(_one_row_source())
    summary: dict[str, Any] = {}
    baseline_ms: float | None = None
    try:
        for n in counts:
            frame = (
                spark.read.format("bench-one-row")
                .option("partitions", str(n))
                .option("freezeGc", str(args.freeze_gc).lower())
                .load()
            )
            for _ in range(args.warmup):
                frame.collect()
            cpu_before = _python_worker_cpu_s()
            times = []
            for _ in range(args.rounds):
                started = time.perf_counter()
                frame.collect()
                times.append((time.perf_counter() - started) * 1000.0)
            cpu_ms = (_python_worker_cpu_s() - cpu_before) * 1000.0 / (args.rounds * n)
            p50 = statistics.median(times)
            baseline_ms = baseline_ms if baseline_ms is not None else p50
            print(
                f"{n} input partition(s), local[{args.cores}]: collect p50 {p50:.0f} ms, "
                f"mean {statistics.mean(times):.0f} ms ({p50 / baseline_ms:.2f}x the first "
                f"count's); Python worker CPU {cpu_ms:.0f} ms per task",
                flush=True,
            )
            summary[f"collect_p{n}_ms"] = round(p50, 1)
            summary[f"ratio_p{n}"] = round(p50 / baseline_ms, 2)
            summary[f"worker_cpu_per_task_p{n}_ms"] = round(cpu_ms, 1)
    finally:
        spark.stop()
    print_result(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
