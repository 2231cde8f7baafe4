"""A task's ranges fetched together against the same ranges fetched one at a time.

An executor's task reads several partitions' ranges (tasks are sized by work, not by
partition). ``fetch(*specs)`` assigns them all to one pooled consumer at once; the baseline
calls ``fetch(spec)`` for each range in turn through the same pool, each its own assignment
and first round trip. No Spark: one process, so the figures are the fetch's alone.

Cases (100-byte values; a topic of ``2 x ranges`` partitions, the task reading half; for
``kept``, of ``ranges`` partitions):

1. ``many``: 256 ranges of 1,000 records (a batch over 512 partitions);
2. ``trigger``: 4 ranges of 1,250 records (a trigger at 20,000 records/s over 4 partitions);
3. ``bulk``: 4 ranges of 62,500 records (a backlog over 8 partitions);
4. ``kept``: one trigger after the other at 20,000 records/s, 0.25 s apart, each 4 ranges of
   1,250 records that start where the last ended, produced just before, read three ways: by
   ``fetch()`` (its pooled consumer, unassigned between tasks, is assigned the ranges), by a
   plain consumer assigned each trigger's ranges and unassigned after (the client's own cost
   of that), and by a plain consumer that stays assigned from one trigger to the next, so
   that librdkafka has fetched the next trigger's records before it asks (the most a pooled
   consumer kept assigned between tasks could save). The plain consumers build no Arrow.

    python -m benchmarks.bench_fetch_ranges             # single-node Apache Kafka, ~2 min
    python -m benchmarks.bench_fetch_ranges --rounds 9 --bootstrap-servers broker:9092

Each mode runs ``--rounds`` times, alternating (``kept``: ``4 x --rounds`` triggers a mode). The
last line is ``key=value`` pairs: ``<case>_<mode>_p50_s``, ``<case>_<mode>_cpu_p50_s``
(``mode`` is ``together`` or ``one``; for ``kept``: ``fetch``, ``assigned`` or ``kept``) and
``ratio_<case>_p50`` (together over one at a time, median against median; for ``kept``: kept
over fetch).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from benchmarks.harness import add_broker_argument, bootstrap_or_kafka, fresh_topic, print_result
from spark_kafka_group.fetcher import FetchSpec, consumer_pool, fetch
from spark_kafka_group.fetcher.pool import consumer_config
from spark_kafka_group.kafka.config import ErrorTracker
from spark_kafka_group.quickstart.sample_data import produce

#: case -> (ranges a task reads, records in each)
CASES = {"many": (256, 1_000), "trigger": (4, 1_250), "bulk": (4, 62_500), "kept": (4, 1_250)}
#: Seconds between two triggers of the ``kept`` case.
TRIGGER_INTERVAL_S = 0.25
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
    if case == "kept":
        return measure_kept(servers, 4 * rounds, delete)
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
    figures = _medians(case, runs)
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


def measure_kept(servers: str, triggers: int, delete: bool) -> dict[str, float]:
    """The ``kept`` case: ``triggers`` consecutive triggers per mode (the module's docstring).
    Each trigger's records are produced, then read :data:`TRIGGER_INTERVAL_S` later, as a
    query at the end of a topic finds them: no record lies past a range's end when it is
    read (a consumer assigned within a backlog would fetch ahead of its range)."""
    ranges, records = CASES["kept"]
    modes = ("fetch", "assigned", "kept")
    runs: dict[str, list[tuple[float, float]]] = {mode: [] for mode in modes}
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 5})

    def next_trigger() -> None:
        for p in range(ranges):
            for _ in range(records):
                producer.produce(topic, key=b"k" * 8, value=VALUE, partition=p)
                producer.poll(0)
        producer.flush()
        time.sleep(TRIGGER_INTERVAL_S)

    with fresh_topic(servers, "fetch-ranges-kept", ranges, delete=delete) as topic:
        next_trigger()
        specs = [FetchSpec(topic, p, 0, records, servers) for p in range(ranges)]
        read(specs, True)  # the pooled consumer and the topic's metadata, unmeasured
        start = records
        for mode in modes:
            plain = None
            if mode != "fetch":
                conf = consumer_config(servers, {}, ErrorTracker())
                plain = Consumer({**conf, "enable.partition.eof": False})
                if mode == "kept":
                    plain.assign([TopicPartition(topic, p, start) for p in range(ranges)])
            ahead = dict.fromkeys(range(ranges), 0) if mode == "kept" else None
            for _ in range(triggers):
                next_trigger()
                if plain is None:
                    specs = [
                        FetchSpec(topic, p, start, start + records, servers) for p in range(ranges)
                    ]
                    wall, cpu, rows = read(specs, True)
                else:
                    wall, cpu, rows = _read_plain(plain, topic, ranges, start, records, ahead)
                assert rows == ranges * records, f"kept {mode}: {rows} records"
                runs[mode].append((wall, cpu))
                start += records
            if plain is not None:
                plain.close()
    figures = _medians("kept", runs)
    figures["ratio_kept_p50"] = figures["kept_kept_p50_s"] / figures["kept_fetch_p50_s"]
    shown = ", ".join(
        f"{mode} p50 {figures[f'kept_{mode}_p50_s'] * 1000:.1f} ms "
        f"(CPU {figures[f'kept_{mode}_cpu_p50_s'] * 1000:.1f} ms)"
        for mode in modes
    )
    print(f"kept: {triggers} triggers of {ranges} ranges of {records} records: {shown}", flush=True)
    return figures


def _medians(case: str, runs: dict[str, list[tuple[float, float]]]) -> dict[str, float]:
    """Each mode's median wall and CPU seconds, as ``<case>_<mode>_p50_s`` and
    ``<case>_<mode>_cpu_p50_s``."""
    figures: dict[str, float] = {}
    for mode, timings in runs.items():
        figures[f"{case}_{mode}_p50_s"] = statistics.median(w for w, _ in timings)
        figures[f"{case}_{mode}_cpu_p50_s"] = statistics.median(c for _, c in timings)
    return figures


def _read_plain(
    consumer: Consumer,
    topic: str,
    ranges: int,
    start: int,
    records: int,
    ahead: dict[int, int] | None,
) -> tuple[float, float, int]:
    """Wall and CPU seconds for a plain consumer to deliver ``records`` of each of ``ranges``
    partitions from ``start``, and the records of the ranges delivered. With ``ahead`` (a
    kept consumer: per partition, the records of this range it delivered during the last
    trigger) it stays assigned, and ``ahead`` becomes the next range's records it delivered;
    without, it is assigned the ranges and unassigned after."""
    wall, cpu = time.perf_counter(), time.process_time()
    if ahead is None:
        consumer.assign([TopicPartition(topic, p, start) for p in range(ranges)])
    left = {p: records - (ahead or {}).get(p, 0) for p in range(ranges)}
    while any(n > 0 for n in left.values()):
        for msg in consumer.consume(sum(n for n in left.values() if n > 0), 10.0):
            partition = msg.partition()
            if msg.error() is None and partition is not None:
                left[partition] -= 1
    if ahead is None:
        consumer.unassign()
    else:
        ahead.update({p: -n for p, n in left.items()})
    rows = ranges * records - sum(n for n in left.values() if n > 0)
    return time.perf_counter() - wall, time.process_time() - cpu, rows


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
