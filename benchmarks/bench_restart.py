"""Restart benchmark: how soon a restarted ``kafka-group`` query reads again.

A producer writes one record to every partition every ``--produce-interval-ms``. In one
SparkSession (``local[2]``), with Kafka's default timeouts (heartbeat 3 s, session 45 s) and a
``--trigger-ms`` trigger, each run measures the time from a restart to the first record in the
new query's sink, for three restarts:

- ``same``: a query reads, ``query.stop()``, the same query starts again on its checkpoint;
- ``new``: the same, on a new checkpoint in the same group (it resumes from the group's
  committed offsets);
- ``avnow``: a Trigger.AvailableNow run ends, and the next AvailableNow run (new checkpoint,
  same group) starts at once; its figure is its start to its first record.

Before a member left with its query, each of these waited for the previous incarnation's
session timeout (44-46 s measured; the AvailableNow rerun read nothing at all). The baseline
is that session timeout: ``ratio_<kind>_p50`` is the median figure over it.

    python -m benchmarks.bench_restart            # single-node Apache Kafka, ~2 min
    python -m benchmarks.bench_restart --runs 5 --trigger-ms 1000

The last line is ``key=value`` pairs: ``restart_<kind>_p50_s``, ``restart_<kind>_max_s``,
``ratio_<kind>_p50`` and ``session_timeout_s``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

from benchmarks.harness import (
    FirstRecord,
    SparkGroup,
    add_broker_argument,
    print_result,
    steady_topic,
)

#: Kafka's default session timeout; the heartbeat and rebalance timeouts are Kafka's defaults
#: too (the source's defaults).
SESSION_TIMEOUT_MS = 45_000
KINDS = ("same", "new", "avnow")


class Restarts:
    """Restarts of a member query, all in one SparkSession, each in a group of its own."""

    def __init__(self, servers: str, topic: str, work: str, trigger_ms: int) -> None:
        self.spark_group = SparkGroup(
            servers, topic, work, app="bench_restart", trigger_ms=trigger_ms,
            member_options={"sessionTimeoutMs": str(SESSION_TIMEOUT_MS)},
        )  # fmt: skip

    def run(self, kind: str) -> float:
        """One restart of ``kind``: seconds from the restart to the first record."""
        group = f"bench-restart-{kind}-{uuid.uuid4().hex[:6]}"
        available_now = kind == "avnow"

        def start(checkpoint: str, sink: FirstRecord) -> Any:
            return self.spark_group.query(
                checkpoint, sink, group=group, available_now=available_now
            )

        first = FirstRecord()
        query = start(f"{group}-1", first)
        if available_now:
            query.awaitTermination(120)
        else:
            first.wait(120, "the first incarnation's record")
            query.stop()
        second = FirstRecord()
        restarted = time.monotonic()
        query = start(f"{group}-1" if kind == "same" else f"{group}-2", second)
        try:
            return second.wait(120, "a record after the restart") - restarted
        finally:
            if available_now:
                query.awaitTermination(120)
            query.stop()

    def stop(self) -> None:
        self.spark_group.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_broker_argument(parser)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--trigger-ms", type=int, default=1000)
    parser.add_argument("--produce-interval-ms", type=int, default=100)
    args = parser.parse_args(argv)

    figures: dict[str, list[float]] = {kind: [] for kind in KINDS}
    with (
        tempfile.TemporaryDirectory(prefix="bench-restart-") as work,
        steady_topic(
            args.bootstrap_servers, "bench-restart", args.partitions,
            args.produce_interval_ms / 1000,
        ) as (servers, topic),
    ):  # fmt: skip
        restarts = Restarts(servers, topic, work, args.trigger_ms)
        try:
            for i in range(args.runs):
                for kind in KINDS:
                    figures[kind].append(restarts.run(kind))
                    print(f"run {i + 1} {kind}: first record {figures[kind][-1]:.2f}s after "
                          "the restart", flush=True)  # fmt: skip
        finally:
            restarts.stop()

    session_s = SESSION_TIMEOUT_MS / 1000
    print(f"\nrestart -> first record, {args.runs} runs, trigger {args.trigger_ms} ms, "
          f"session timeout {session_s:.0f} s (the wait before this change):")  # fmt: skip
    pairs = {}
    for kind, values in figures.items():
        p50 = statistics.median(values)
        print(f"  {kind:6s} p50 {p50:5.2f}s  max {max(values):5.2f}s  "
              f"ratio to the session timeout {p50 / session_s:.3f}")  # fmt: skip
        pairs[f"restart_{kind}_p50_s"] = f"{p50:.2f}"
        pairs[f"restart_{kind}_max_s"] = f"{max(values):.2f}"
        pairs[f"ratio_{kind}_p50"] = f"{p50 / session_s:.3f}"
    pairs["session_timeout_s"] = f"{session_s:.0f}"
    print_result(pairs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
