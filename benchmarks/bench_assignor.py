"""Time the cooperative-sticky assignor on large groups.

    python -m benchmarks.bench_assignor

For each size: a fresh assignment (nobody owns anything) and the rebalance after one more
member joins a balanced group (everyone owns its share; the cooperative round revokes the
minimum). The last line holds the figures as ``key=value`` pairs.
"""

from __future__ import annotations

import argparse
import sys
import time

from benchmarks.harness import print_result
from spark_kafka_group.group.assignors import (
    CooperativeStickyAssignor,
    MemberSubscription,
)


def bench(members: int, partitions: int, topics: int = 10) -> tuple[float, float, int]:
    meta = {f"topic-{i:03d}": partitions // topics for i in range(topics)}
    names = frozenset(meta)
    subs = {f"member-{i:05d}": MemberSubscription(names) for i in range(members)}
    assignor = CooperativeStickyAssignor()
    t0 = time.perf_counter()
    first = assignor.assign(meta, subs)
    fresh = time.perf_counter() - t0
    owned = {m: MemberSubscription(names, frozenset(ps)) for m, ps in first.items()}
    owned["member-new"] = MemberSubscription(names)
    t0 = time.perf_counter()
    second = assignor.assign(meta, owned)
    rejoin = time.perf_counter() - t0
    revoked = sum(len(set(first[m]) - set(second[m])) for m in first)
    return fresh, rejoin, revoked


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    figures: dict[str, str] = {}
    for members, partitions, key in ((100, 10_000, "100x10k"), (1_000, 100_000, "1000x100k")):
        fresh, rejoin, revoked = bench(members, partitions)
        print(
            f"cooperative-sticky {members} members x {partitions} partitions: "
            f"fresh {fresh * 1000:.1f} ms, one member joins {rejoin * 1000:.1f} ms "
            f"({revoked} partitions revoked)"
        )
        figures[f"fresh_ms_{key}"] = f"{fresh * 1000:.1f}"
        figures[f"join_ms_{key}"] = f"{rejoin * 1000:.1f}"
        figures[f"revoked_{key}"] = str(revoked)
    print_result(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
