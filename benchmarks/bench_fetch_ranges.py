"""A task's ranges fetched together against the same ranges fetched one at a time.

An executor's task reads several partitions' ranges (tasks are sized by work, not by
partition). ``fetch(*specs)`` assigns them all to one pooled consumer at once; the baseline
calls ``fetch(spec)`` for each range in turn through the same pool, each its own assignment
and first round trip. No Spark: one process, so the figures are the fetch's alone.

Cases (100-byte values; a topic of ``2 x ranges`` partitions, the task reading half):

1. ``many``: 256 ranges of 1,000 records (a batch over 512 partitions);
2. ``trigger``: 4 ranges of 1,250 records (a trigger at 20,000 records/s over 4 partitions);
3. ``bulk``: 4 ranges of 62,500 records (a backlog over 8 partitions).

    python -m benchmarks.bench_fetch_ranges             # single-node Apache Kafka, ~2 min
    python -m benchmarks.bench_fetch_ranges --rounds 9 --bootstrap-servers broker:9092

Each mode runs ``--rounds`` times, alternating. The last line is ``key=value`` pairs:
``<case>_<mode>_p50_s``, ``<case>_<mode>_cpu_p50_s`` (``mode`` is ``together`` or ``one``)
and ``ratio_<case>_p50`` (together over one at a time, median against median).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from benchmarks.harness import add_broker_argument, bootstrap_or_kafka, fresh_topic, print_result
from spark_kafka_group.fetcher import FetchSpec, consumer_pool, fetch
from spark_kafka_group.quickstart.sample_data import produce

#: case -> (ranges a task reads, records in each)
CASES = {"many": (256, 1_000), "trigger": (4, 1_250), "bulk": (4, 62_500)}
VALUE = b"v" * 100


def read(specs: list[FetchSpec], together: bool) -> tuple[float, float, int]:
    """Wall and CPU seconds to read ``specs``, and the records read."""
    wall, cpu, rows = time.perf_counter(), time.process_time(), 0
    if together:
        rows = sum(batch.num_rows for batch in fetch(*specs))
    else:
        rows = sum(batch.num_rows for spec in specs for batch in fetch(spec))
    return time.perf_counter() - wall, time.process_time() - cpu, rows


def measure(servers: str, case: str, rounds: int, delete: bool) -> dict[str, float]:
    ranges, records = CASES[case]
    with fresh_topic(servers, f"fetch-ranges-{case}", 2 * ranges, delete=delete) as topic:
        produce(
            servers,
            topic,
            ((p, b"k" * 8, VALUE) for _ in range(records) for p in range(2 * ranges)),
            producer_config={"linger.ms": 20, "batch.size": 1_000_000},
        )
        specs = [FetchSpec(topic, p, 0, records, servers) for p in range(ranges)]
        read(specs, True)  # the pooled consumer and the topic's metadata, unmeasured
        runs: dict[str, list[tuple[float, float]]] = {"together": [], "one": []}
        for _ in range(rounds):
            for mode in runs:
                wall, cpu, rows = read(specs, mode == "together")
                assert rows == ranges * records, f"{case} {mode}: {rows} records"
                runs[mode].append((wall, cpu))
    figures: dict[str, float] = {}
    for mode, timings in runs.items():
        figures[f"{case}_{mode}_p50_s"] = statistics.median(w for w, _ in timings)
        figures[f"{case}_{mode}_cpu_p50_s"] = statistics.median(c for _, c in timings)
    figures[f"ratio_{case}_p50"] = figures[f"{case}_together_p50_s"] / figures[f"{case}_one_p50_s"]
    print(
        f"{case}: {ranges} ranges of {records} records; together p50 "
        f"{figures[f'{case}_together_p50_s'] * 1000:.0f} ms "
        f"(CPU {figures[f'{case}_together_cpu_p50_s'] * 1000:.0f} ms), one at a time p50 "
        f"{figures[f'{case}_one_p50_s'] * 1000:.0f} ms "
        f"(CPU {figures[f'{case}_one_cpu_p50_s'] * 1000:.0f} ms): "
        f"{figures[f'ratio_{case}_p50']:.2f}x",
        flush=True,
    )
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_broker_argument(parser)
    parser.add_argument("--rounds", type=int, default=5, help="runs of each mode per case")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated")
    args = parser.parse_args(argv)
    figures: dict[str, float] = {}
    with bootstrap_or_kafka(args.bootstrap_servers) as servers:
        try:
            for case in args.cases.split(","):
                figures.update(measure(servers, case, args.rounds, bool(args.bootstrap_servers)))
        finally:
            consumer_pool().clear()
    print_result(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
