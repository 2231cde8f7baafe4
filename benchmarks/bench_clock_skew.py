"""Members whose wall clocks are off, with the default timeouts, for five minutes.

Three groups run at once on one local group store, each of three member processes
(:mod:`spark_kafka_group.testing.clock_member_app`: a group member without Spark or a
broker); in each group one member's ``time.time()`` is shifted: -120 s, +120 s, +1 h. Default
timeouts (heartbeat 3 s, session 45 s). Prints, per group, the EXPIRE records written (should
be 0) and the split of the 12 partitions, by the members' own journals and by the group log
(should be 4/4/4), every minute and at the end. Run from the repository root, on a machine
with nothing else heavy running (the members' timing is what it measures):

    python -m benchmarks.bench_clock_skew [--minutes 5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from spark_kafka_group.testing.skewed_group import SkewedGroup
from spark_kafka_group.testing.waiting import wait_until

SKEWS = {"behind-120s": -120_000, "ahead-120s": 120_000, "ahead-1h": 3_600_000}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--heartbeat-ms", type=int, default=3_000)
    parser.add_argument("--session-timeout-ms", type=int, default=45_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        timeouts = {
            "heartbeat_ms": args.heartbeat_ms,
            "session_timeout_ms": args.session_timeout_ms,
        }
        store = str(workdir / "groups")
        groups = [
            SkewedGroup(workdir, store, f"skew-{name}", skew, **timeouts)
            for name, skew in SKEWS.items()
        ]
        started = time.monotonic()
        try:
            for g in groups:
                g.start()
            try:
                wait_until(lambda: all(g.fair() for g in groups), 180, "every group fair")
                print(f"settled after {time.monotonic() - started:.1f} s", flush=True)
            except AssertionError:  # measured all the same: what a broken group does
                print("NOT every group fair after 180 s", flush=True)
                for g in groups:
                    print(g.report(), flush=True)
            end = time.monotonic() + args.minutes * 60
            while time.monotonic() < end:
                time.sleep(min(60.0, max(0.0, end - time.monotonic())))
                print(f"--- {time.monotonic() - started:.0f} s", flush=True)
                for g in groups:
                    print(g.report(), flush=True)
            ok = all(not g.expires() and g.fair() for g in groups)
        finally:
            for g in groups:
                g.stop()
        print("=== after every member stopped (each left the group)")
        for g in groups:
            print(f"{g.group}: EXPIRE records {len(g.expires())}")
        print("RESULT:", "0 EXPIRE and a fair split in every group" if ok else "FAILED")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
