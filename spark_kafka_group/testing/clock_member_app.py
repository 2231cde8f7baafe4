"""One group member in its own process, without Spark or a broker, on a machine whose wall
clock may be off.

The clock-skew tests (``tests/integration/test_clock_skew.py``) and
``benchmarks/bench_clock_skew.py`` start several of these on one local group store
(:mod:`spark_kafka_group.testing.skewed_group`):

    python -m spark_kafka_group.testing.clock_member_app \\
        --store S --group G --journal /tmp/m.jsonl \\
        [--skew-ms -120000] [--partitions 12] [--heartbeat-ms 1000] [--session-timeout-ms 6000]

``--skew-ms`` shifts this process's ``time.time()`` and ``time.time_ns()`` before anything
else is imported: the testing harness's stand-in for a drifted VM or a laptop resumed from sleep
(production code has no such switch). The monotonic clock is left alone: each machine's own.

The member subscribes to topic ``t`` with ``--partitions`` partitions (a fixed count, no
broker). Each time what it holds changes it appends a JSON line to ``--journal``: its member
id, the partitions it holds and may read, and ``time.monotonic()`` (the same clock for every
process of one machine, so a test can measure against its own). SIGTERM closes the member
(it leaves the group); SIGKILL is a crash.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time


def shift_wall_clock(skew_ms: int) -> None:
    """Shift ``time.time`` / ``time.time_ns`` by ``skew_ms`` for this whole process."""
    if not skew_ms:
        return
    real_time, real_time_ns = time.time, time.time_ns
    time.time = lambda: real_time() + skew_ms / 1000
    time.time_ns = lambda: real_time_ns() + skew_ms * 1_000_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--journal", required=True)
    parser.add_argument("--skew-ms", type=int, default=0)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--heartbeat-ms", type=int, default=3_000)
    parser.add_argument("--session-timeout-ms", type=int, default=45_000)
    parser.add_argument("--poll-ms", type=int, default=500, help="how often the 'reader' polls")
    args = parser.parse_args(argv)
    shift_wall_clock(args.skew_ms)

    from spark_kafka_group.member import GroupMember, SubscriptionSpec
    from spark_kafka_group.options import GroupSettings

    settings = GroupSettings(  # a query's defaults otherwise (cooperative-sticky, 3 s delay)
        group_id=args.group,
        store=args.store,
        heartbeat_interval_ms=args.heartbeat_ms,
        session_timeout_ms=args.session_timeout_ms,
        rebalance_timeout_ms=max(10_000, 2 * args.session_timeout_ms),
    )
    member = GroupMember(
        settings,
        subscription=SubscriptionSpec(topics=("t",)),
        topic_counts=lambda: {"t": args.partitions},
    )
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    journal = open(args.journal, "a", buffering=1)  # noqa: SIM115 - closed on exit
    last: tuple[str, list[int]] | None = None
    assignment = member.start()
    print(f"member {member.member_id} started, wall clock shifted {args.skew_ms} ms", flush=True)
    while not stopping.is_set():
        readable = sorted(p for _, p in assignment.held - assignment.revoking)
        if (member.member_id, readable) != last:
            last = (member.member_id, readable)
            line = {"member": member.member_id, "held": readable, "mono": time.monotonic()}
            journal.write(json.dumps(line) + "\n")
        if member.failure is not None:
            print(f"member failed: {member.failure}", file=sys.stderr, flush=True)
            return 1
        stopping.wait(args.poll_ms / 1000)
        assignment = member.current_holdings()
    member.close()
    journal.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
