"""Rebalance benchmark: how long partitions pause when a member joins, then leaves.

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

    python -m benchmarks.bench_rebalance                  # single-node Apache Kafka, ~3-4 min
    python -m benchmarks.bench_rebalance --bootstrap-servers broker:9092

The last line is ``key=value`` pairs: ``unaffected_max_pause_s``, ``moved_max_pause_s`` (the
kafka-group source), ``eager_max_pause_s`` / ``cooperative_max_pause_s`` (the moved partitions
of the baselines), and the other figures of each run.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from benchmarks.harness import (
    Journal,
    KafkaConsumerMember,
    SparkGroup,
    add_broker_argument,
    print_result,
    steady_topic,
)

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
    add_broker_argument(parser)
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

    results: dict[str, dict[str, Any]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="kafka-group-bench-rebalance-") as work,
        steady_topic(
            args.bootstrap_servers,
            "bench-rebalance",
            args.partitions,
            args.produce_interval_ms / 1000,
        ) as (servers, topic),
    ):
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
            spark = SparkGroup(
                servers, topic, work, app="bench_rebalance", trigger_ms=args.trigger_ms
            )
            try:
                j = Journal()
                run = scenario(
                    "kafka-group",
                    args.partitions,
                    partial(spark.member, j=j),
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
    print_result(summary, format_value=lambda v: f"{v:.2f}" if isinstance(v, float) else str(v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
