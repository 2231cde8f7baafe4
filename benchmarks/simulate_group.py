"""The group log at sizes this machine cannot host: a printed report from the simulation.

Runs :func:`spark_kafka_group.testing.simulated_group.simulate` (production members over the
in-memory log, simulated clock and store latency; deterministic) over a grid of member counts,
partition counts and store latencies, for the current design and for the classic one (every
heartbeat a write, every member rejoins every rebalance, no initial delay), and prints per run:

- join: simulated seconds from the last member's start to a settled assignment;
- writes/s and conflicts per successful write while converging;
- steady: writes/s and false expiries over a quiet minute;
- scale-out: one more member joins a settled group: time to settle again, writes, moved
  partitions, and the longest pause of a partition that did not move.

    python -m benchmarks.simulate_group                    # the full report (some minutes)
    python -m benchmarks.simulate_group --members 10,100 --latencies 10,100

With ``--commit-every SECONDS[,SECONDS...]`` it measures commits instead: every member that
holds partitions commits that often, and per (members, interval, store latency) it prints, for
the steady minute after the group settled, commit-to-durable p50 and p99 (from ``commit()`` to
the offset in the log), compare-and-swap writes per second, lost races per write and false
expiries; for commit objects folded once per interval (``objects``, the design) and for every
commit an append to the log (``log``, the design before; up to ``--log-commits-up-to``
members).

    python -m benchmarks.simulate_group --commit-every 1,5 --members 16,64,1000 --latencies 10,100

With ``--listener log,objects`` (and ``none``) each member's query also has a progress listener
committing every completed batch on the member's behalf, as a Spark query registered with
``spark_kafka_group.register`` does, members on commit objects: ``lsn-log`` appends each batch
to the log (the design before listener objects), ``lsn-obj`` writes it in the listener's own
commit object, ``no-lsn`` has no listener.

    python -m benchmarks.simulate_group --commit-every 1 --members 16,32,64 --latencies 10,100 \
        --listener none,log,objects

The last line is ``key=value`` pairs; the baseline of each ratio is the classic design at the
same size, where it converges.
"""

from __future__ import annotations

import argparse
import logging
import sys

from spark_kafka_group.testing.simulated_group import SimResult, simulate


def _row(r: SimResult, design: str) -> str:
    join, steady, out = (
        r.phase("join"),
        next((p for p in r.phases if p.name == "steady"), None),
        next((p for p in r.phases if p.name == "scale-out"), None),
    )

    def s(x: float | None) -> str:
        return "never" if x is None else f"{x:7.1f}"

    cells = [
        f"{design:8s}",
        f"{r.members:5d}",
        f"{r.partitions:6d}",
        f"{r.append_ms:4d}",
        s(join.settled_s),
        f"{join.writes_per_s:6.1f}",
        f"{join.conflicts_per_write:5.2f}",
        f"{join.false_expiries:4d}",
    ]
    if steady and out:
        cells += [
            f"{steady.writes_per_s:6.2f}",
            f"{steady.false_expiries:4d}",
            s(out.settled_s),
            f"{out.writes:5d}",
            f"{out.moved:5d}",
            f"{out.unmoved_pause_max_s:5.1f}",
        ]
    else:
        cells += ["     -", "   -", "      -", "    -", "    -", "    -"]
    return " ".join(cells) + f"   ({r.wall_s:.0f}s)"


HEADER = (
    "design   members  parts   ms  join(s) wr/s  conf/w fexp steady-wr/s fexp "
    "out(s) out-wr moved pause   (wall)"
)


COMMIT_HEADER = (
    "path     members every(s)  ms  durable-p50(s) durable-p99(s) CAS-wr/s lost/wr fexp "
    "commits   (wall)"
)


def _commit_row(r: SimResult, path: str, every_s: float) -> str:
    steady = next((p for p in r.phases if p.name == "steady"), None)
    if steady is None:
        return f"{path:8s} {r.members:7d} {every_s:8.1f} {r.append_ms:3d}  never settled"

    def s(x: float | None) -> str:
        return "          none" if x is None else f"{x:14.2f}"

    return (
        f"{path:8s} {r.members:7d} {every_s:8.1f} {r.append_ms:3d} "
        f"{s(steady.commit_lag_s(0.5))} {s(steady.commit_lag_s(0.99))} "
        f"{steady.writes_per_s:8.2f} {steady.conflicts_per_write:7.2f} {steady.false_expiries:4d} "
        f"{steady.commits:7d}   ({r.wall_s:.0f}s)"
    )


LISTENER_PATHS: dict[str, tuple[str, str | None]] = {
    "none": ("no-lsn", None),
    "log": ("lsn-log", "log"),
    "objects": ("lsn-obj", "objects"),
}


def _paths(args: argparse.Namespace, members: int) -> list[tuple[str, str | None]]:
    """(label, listener commits) of each run at this size."""
    if args.listener:
        try:
            return [LISTENER_PATHS[x] for x in args.listener.split(",")]
        except KeyError as exc:
            raise SystemExit(
                f"--listener {args.listener}: {exc} is not one of none, log, objects"
            ) from None
    paths: list[tuple[str, str | None]] = [("objects", None)]
    return paths + ([("log", None)] if members <= args.log_commits_up_to else [])


def commits_report(args: argparse.Namespace) -> int:
    latencies = [int(x) for x in args.latencies.split(",")]
    print(COMMIT_HEADER, flush=True)
    summary: list[str] = []
    for every_s in (float(x) for x in args.commit_every.split(",")):
        for n in map(int, args.members.split(",")):
            for ms in latencies:
                for path, listener in _paths(args, n):
                    r = simulate(
                        members=n,
                        partitions=max(args.min_partitions, n * args.partitions_per_member),
                        append_ms=ms,
                        steady_ms=args.steady_ms,
                        converge_limit_ms=args.limit_ms,
                        rebalance_timeout_ms=args.rebalance_timeout_ms,
                        commit_every_ms=int(every_s * 1000),
                        commit_objects=path != "log",
                        listener_commits=listener,
                    )
                    print(_commit_row(r, path, every_s), flush=True)
                    steady = next((p for p in r.phases if p.name == "steady"), None)
                    key = f"{path}_{n}m_{every_s:g}s_{ms}ms"
                    if steady is None:
                        summary.append(f"p99_{key}=none")
                        continue
                    p99 = steady.commit_lag_s(0.99)
                    summary.append(f"p99_{key}={'none' if p99 is None else f'{p99:.2f}'}")
                    summary.append(f"writes_per_s_{key}={steady.writes_per_s:.2f}")
                    summary.append(f"lost_per_write_{key}={steady.conflicts_per_write:.2f}")
    print(" ".join(summary))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", default="10,100,300,1000")
    parser.add_argument("--partitions-per-member", type=int, default=10)
    parser.add_argument("--latencies", default="10,50,100", help="ms per append")
    parser.add_argument(
        "--partition-sweep", default="100:100,100:1000,100:10000", help="members:partitions"
    )
    parser.add_argument("--classic-up-to", type=int, default=100, help="largest classic run")
    parser.add_argument("--steady-ms", type=int, default=60_000)
    parser.add_argument("--limit-ms", type=int, default=900_000, help="simulated time limit")
    parser.add_argument(
        "--rebalance-timeout-ms", type=int, default=60_000, help="the option's default"
    )
    parser.add_argument("--commit-every", help="seconds: report commits instead (see above)")
    parser.add_argument("--log-commits-up-to", type=int, default=100, help="largest 'log' run")
    parser.add_argument("--min-partitions", type=int, default=256, help="with --commit-every")
    parser.add_argument(
        "--listener", help="with --commit-every: none,log,objects (progress listener commits)"
    )
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # members log every rebalance
    if args.commit_every:
        return commits_report(args)

    runs: list[tuple[int, int]] = [
        (n, n * args.partitions_per_member) for n in map(int, args.members.split(","))
    ]
    for spec in filter(None, args.partition_sweep.split(",")):
        n, p = (int(x) for x in spec.split(":"))
        if (n, p) not in runs:
            runs.append((n, p))
    latencies = [int(x) for x in args.latencies.split(",")]
    print(HEADER, flush=True)
    summary: list[str] = []
    for n, p in runs:
        for ms in latencies:
            results = {}
            designs = ["current"] + (["classic"] if n <= args.classic_up_to else [])
            for design in designs:
                classic = design == "classic"
                r = simulate(
                    members=n,
                    partitions=p,
                    append_ms=ms,
                    leases=not classic,
                    implicit_rejoin=not classic,
                    initial_delay_ms=0 if classic else 3_000,
                    steady_ms=args.steady_ms,
                    converge_limit_ms=args.limit_ms,
                    rebalance_timeout_ms=args.rebalance_timeout_ms,
                )
                results[design] = r
                print(_row(r, design), flush=True)
            cur = results["current"].phase("join").settled_s
            key = f"{n}m_{p}p_{ms}ms"
            summary.append(f"join_s_{key}={'none' if cur is None else f'{cur:.1f}'}")
            if "classic" in results:
                old = results["classic"].phase("join").settled_s
                if old and cur:
                    summary.append(f"join_ratio_vs_classic_{key}={cur / old:.2f}")
                else:
                    summary.append(f"classic_join_s_{key}={'none' if old is None else old}")
    print(" ".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
