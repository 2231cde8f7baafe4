"""How a group's cost grows with its members, on real processes sharing one group log.

Runs N group members (no Spark: each is the ``GroupMember`` a query's streaming-source
process runs) on one group log for N in ``--members``, several members per process so that
process start-up and interpreter memory do not swamp 2 cores, and measures per N:

- time to converge: from the first JOIN in the log to a settled assignment (every partition
  owned once, nothing being revoked, every member in the group); process start-up is printed
  apart;
- p99 and max of what the reader calls at every trigger for its assignment
  (``current_holdings()``, which reads no store; ``poll()``, a protocol step, on releases
  before it), while converging and while steady;
- log writes per second and compare-and-swap conflicts, while converging and while steady;
- false expiries: EXPIRE records for members that are alive, over the steady period (the
  last N runs ``--steady-s``, the others ``--steady-small-s``).

With ``--commit-every SECONDS`` every member, once it holds partitions, also commits every
that many seconds as a query's reader does after each batch (``begin_batch``, then
``commit``; the offset committed is the wall-clock millisecond of the commit, so the log itself
tells when it was made), and the steady period also measures:

- ``commit()`` p50 / p99 / max as its caller sees it;
- commit-to-durable p50 / p99: from the commit to the COMMIT record that carries it (or a
  later commit of that partition that supersedes it; the record's timestamp is when its writer
  decided it, on this same machine);
- that the log holds every member's last commit once they all stopped (lost: partitions whose
  final committed offset is below the last commit made), and a fair split (the largest and
  smallest assignment at the end of the steady period).

Each process also reports the CPU it used, so that what the machine limits is told apart from
what the design costs. The baseline is the smallest N of the same run: every figure is also
printed as a ratio to it.

    python -m benchmarks.bench_group_scale --members 4,16,32,64 --partitions 256
    python -m benchmarks.bench_group_scale --store s3 --members 4,32   # a SeaweedFS server
    python -m benchmarks.bench_group_scale --members 16,32,64 --commit-every 1

The last line is ``key=value`` pairs. Runs against any release of the package whose
``GroupMember`` takes (settings, subscription, topic_counts): ``PYTHONPATH=<old checkout>``
measures the design before a change with the same script.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from spark_kafka_group.group.kinds import RecordKind

TOPIC = "t"


# -- the worker: K members in one process ------------------------------------------------------


def _settings(args: argparse.Namespace, group: str, storage_options: Mapping[str, str]) -> Any:
    from spark_kafka_group.options import GroupSettings

    strategy: Any = "cooperative-sticky"
    try:  # a release whose settings hold assignor objects
        from spark_kafka_group.group.assignors import load_assignor

        strategy = (load_assignor(strategy),)
    except ImportError:
        pass
    values = {
        "group_id": group,
        "store": args.store_uri,
        "storage_options": dict(storage_options),
        "heartbeat_interval_ms": args.heartbeat_ms,
        "session_timeout_ms": args.session_timeout_ms,
        "rebalance_timeout_ms": args.rebalance_timeout_ms,
        "assignment_strategy": strategy,
        "instance_id": None,
        "scheduled_rebalance_max_delay_ms": 0,
        "rebalance_listener": None,
    }
    known = {f.name for f in dataclasses.fields(GroupSettings)}
    return GroupSettings(**{k: v for k, v in values.items() if k in known})


def worker(args: argparse.Namespace) -> int:
    import logging

    logging.basicConfig(level=logging.ERROR)
    from spark_kafka_group.member.member import GroupMember, SubscriptionSpec

    storage_options = json.loads(args.storage_options)
    settings = _settings(args, args.group, storage_options)
    members = [
        GroupMember(
            settings,
            subscription=SubscriptionSpec(topics=(TOPIC,)),
            topic_counts=lambda: {TOPIC: args.partitions},
            client_id=f"w{args.index}m{k}",
        )
        for k in range(args.count)
    ]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    polls: dict[str, list[float]] = {"converge": [], "steady": []}
    commits: dict[str, list[float]] = {"converge": [], "steady": []}
    last: dict[str, int] = {}
    phase = ["converge"]
    signal.signal(signal.SIGUSR1, lambda *_: phase.__setitem__(0, "steady"))
    errors: list[str] = []
    joins: list[float] = []

    def run(member: Any) -> None:
        # What a trigger calls for its assignment (a release before it stepped the protocol).
        trigger = getattr(member, "current_holdings", member.poll)
        try:
            started = time.monotonic()
            member.start()
            joins.append(time.monotonic() - started)
            while not stop.is_set():
                started = time.monotonic()
                assignment = trigger()
                polls[phase[0]].append(time.monotonic() - started)
                if args.commit_every > 0 and assignment.generation >= 0 and assignment.held:
                    planned = assignment.held - assignment.revoking
                    offset = int(time.time() * 1000)  # when it was committed
                    ends = {tp: offset for tp in planned}
                    member.begin_batch(ends, batch_generation=assignment.generation)
                    started = time.monotonic()
                    member.commit(
                        ends,
                        batch_generation=assignment.generation,
                        batch_member=member.member_id,
                        release=assignment.revoking,
                    )
                    commits[phase[0]].append(time.monotonic() - started)
                    for tp in planned:
                        last[f"{tp[0]}:{tp[1]}"] = offset
                stop.wait(args.commit_every if args.commit_every > 0 else args.poll_s)
        except Exception as exc:  # reported, not hidden
            errors.append(f"{member.member_id}: {exc!r}")

    threads = [threading.Thread(target=run, args=(m,), daemon=True) for m in members]
    for t in threads:
        t.start()
    print(json.dumps({"event": "started", "index": args.index}), flush=True)
    stop.wait()
    for t in threads:
        t.join(timeout=30)
    for m in members:
        with contextlib.suppress(Exception):
            m.close(grace_s=0)
    client_stats = [getattr(m, "client", None) for m in members]
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps(
            {
                "event": "done",
                "index": args.index,
                "polls": polls,
                "commits": commits,
                "last": last,
                "joins": joins,
                "conflicts": sum(getattr(c, "conflicts", 0) for c in client_stats if c),
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "errors": errors,
            }
        ),
        flush=True,
    )
    return 0


# -- the driver: one run per N -----------------------------------------------------------------


@dataclasses.dataclass
class RunResult:
    members: int
    processes: int
    startup_s: float
    converge_s: float | None
    converge_writes_per_s: float
    steady_s: float
    steady_writes_per_s: float
    false_expiries: int
    generation_changes: int
    poll_p99_converge_ms: float
    poll_max_converge_ms: float
    poll_p99_steady_ms: float
    poll_max_steady_ms: float
    conflicts: int
    cpu_per_member_s: float
    errors: list[str]
    commit_p50_ms: float = 0.0
    commit_p99_ms: float = 0.0
    commit_max_ms: float = 0.0
    durable_p50_s: float | None = None
    durable_p99_s: float | None = None
    durable_commits: int = 0
    lost_last_commits: int = 0
    split: tuple[int, int] = (0, 0)


def _p(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)] * 1000


class _LogWatch:
    """The group log as an outside reader sees it (not a member: it never writes)."""

    def __init__(self, store: str, group: str, storage_options: Mapping[str, str]) -> None:
        self.store, self.group, self.options = store, group, dict(storage_options)
        self.log: Any = None
        self.coordinator: Any = None
        self.version = -1
        self.records: list[Any] = []

    def fold(self) -> Any:
        """Read the versions since the last fold once, and fold them."""
        from spark_kafka_group.group import GroupCoordinator
        from spark_kafka_group.store import GroupLog, GroupLogNotFoundError, group_log_uri

        if self.log is None:
            try:
                uri = group_log_uri(self.store, self.group)
                self.log = GroupLog.open(uri, storage_options=self.options, create=False)
            except GroupLogNotFoundError:
                return None
            self.coordinator = GroupCoordinator(self.group)
        piece = self.log.read_slice(after_version=self.version)
        self.coordinator.apply_all(r for _, r in piece.records)
        self.records.extend(r for _, r in piece.records)
        self.version = piece.version
        return self.coordinator

    def settled(self, n: int, partitions: int) -> bool:
        coordinator = self.fold()
        if coordinator is None:
            return False
        g = coordinator.group
        if g.state.value != "Stable" or len(g.members) != n:
            return False
        if any(m.revoking for m in g.members.values()):
            return False
        owned = [tp for m in g.members.values() for tp in m.assignment]
        return len(owned) == len(set(owned)) == partitions


def run_once(
    args: argparse.Namespace, n: int, steady_s: float, storage_options: Mapping[str, str]
) -> RunResult:
    group = f"scale-{n}-{uuid.uuid4().hex[:8]}"
    per_process = max(1, args.members_per_process)
    counts = [per_process] * (n // per_process) + ([n % per_process] if n % per_process else [])
    watch = _LogWatch(args.store_uri, group, storage_options)
    launched = time.monotonic()
    procs = []
    for i, count in enumerate(counts):
        cmd = [
            sys.executable, "-m", "benchmarks.bench_group_scale", "--worker",
            "--group", group, "--index", str(i), "--count", str(count),
            "--store-uri", args.store_uri, "--storage-options", json.dumps(dict(storage_options)),
            "--partitions", str(args.partitions), "--heartbeat-ms", str(args.heartbeat_ms),
            "--session-timeout-ms", str(args.session_timeout_ms),
            "--rebalance-timeout-ms", str(args.rebalance_timeout_ms),
            "--poll-s", str(args.poll_s), "--commit-every", str(args.commit_every),
        ]  # fmt: skip
        root = str(Path(__file__).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH") or root}
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=root, env=env))
    for p in procs:  # each says "started" once its members are created
        assert p.stdout is not None
        p.stdout.readline()
    startup_s = time.monotonic() - launched
    deadline = time.monotonic() + args.converge_limit_s
    converged_at = None
    while time.monotonic() < deadline:
        if watch.settled(n, args.partitions):
            converged_at = time.monotonic()
            break
        time.sleep(0.25)
    first_join_ms = next((r.timestamp_ms for r in watch.records if r.kind == RecordKind.JOIN), None)
    converge_s = None
    converge_writes = watch.version + 1
    if converged_at is not None and first_join_ms is not None:
        settled_ms = max(r.timestamp_ms for r in watch.records)
        converge_s = max(0.0, (settled_ms - first_join_ms) / 1000)
    for p in procs:
        p.send_signal(signal.SIGUSR1)
    steady_from_version = watch.version
    steady_records_from = len(watch.records)
    generation = watch.coordinator.group.generation if watch.coordinator else -1
    steady_started = time.monotonic()
    if converged_at is not None:
        time.sleep(steady_s)
        watch.fold()
    steady_elapsed = time.monotonic() - steady_started
    steady = watch.records[steady_records_from:]
    expiries = [r for r in steady if r.kind == RecordKind.EXPIRE]
    false_expiries = len(expiries)
    for r in expiries:
        print(f"    EXPIRE of {r.member_id} at {r.timestamp_ms}: {r.payload}", flush=True)
    steady_writes = watch.version - steady_from_version
    sizes = (
        [len(m.assignment) for m in watch.coordinator.group.members.values()]
        if (watch.coordinator)
        else [0]
    )
    durable = _durable_lags(steady, args.commit_every)
    generation_changes = watch.coordinator.group.generation - generation if watch.coordinator else 0
    for p in procs:
        p.send_signal(signal.SIGTERM)
    reports = []
    stuck = 0
    for p in procs:
        try:
            out, _ = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:  # its members did not stop: say so, do not hang
            p.kill()
            out, _ = p.communicate()
            stuck += 1
        reports += [json.loads(line) for line in out.splitlines() if '"done"' in line]
    if stuck:
        print(f"    {stuck} of {len(procs)} processes did not stop within 120 s", flush=True)
    watch.fold()  # the final commits, written as the members left
    final = watch.coordinator.group.offsets if watch.coordinator else {}
    last: dict[str, int] = {}
    for r in reports:
        for key, offset in r.get("last", {}).items():
            last[key] = max(offset, last.get(key, -1))
    lost = 0
    for key, offset in last.items():
        topic, _, part = key.rpartition(":")
        got = final.get((topic, int(part)))
        if got is None or got.offset < offset:
            lost += 1
    commits_s = [d for r in reports for d in r.get("commits", {}).get("steady", [])]
    polls_c = [d for r in reports for d in r["polls"]["converge"]]
    polls_s = [d for r in reports for d in r["polls"]["steady"]]
    converge_window = (converged_at or time.monotonic()) - launched
    return RunResult(
        members=n,
        processes=len(procs),
        startup_s=startup_s,
        converge_s=converge_s,
        converge_writes_per_s=converge_writes / max(converge_s or converge_window, 1e-9),
        steady_s=steady_elapsed,
        steady_writes_per_s=steady_writes / max(steady_elapsed, 1e-9),
        false_expiries=false_expiries,
        generation_changes=generation_changes,
        poll_p99_converge_ms=_p(polls_c, 0.99),
        poll_max_converge_ms=_p(polls_c, 1.0),
        poll_p99_steady_ms=_p(polls_s, 0.99),
        poll_max_steady_ms=_p(polls_s, 1.0),
        conflicts=sum(r["conflicts"] for r in reports),
        cpu_per_member_s=sum(r["cpu_s"] for r in reports) / n,
        errors=[e for r in reports for e in r["errors"]],
        commit_p50_ms=_p(commits_s, 0.5),
        commit_p99_ms=_p(commits_s, 0.99),
        commit_max_ms=_p(commits_s, 1.0),
        durable_p50_s=_p(durable, 0.5) / 1000 if durable else None,
        durable_p99_s=_p(durable, 0.99) / 1000 if durable else None,
        durable_commits=len(durable),
        lost_last_commits=lost,
        split=(min(sizes), max(sizes)),
    )


def _durable_lags(records: list[Any], commit_every_s: float) -> list[float]:
    """Seconds from commit to durable for the COMMIT records among ``records`` (offsets are
    commit wall-clock ms). A record also makes durable the commits it superseded since the
    previous record of its partition: the oldest of them, about one interval after that
    record's commit, is counted too."""
    previous: dict[tuple[str, int], int] = {}
    lags: list[float] = []
    step_ms = int(commit_every_s * 1000)
    for r in records:
        if r.kind != RecordKind.COMMIT or r.offset is None or r.offset < 10**12:
            continue
        key = (r.topic, r.partition)
        lags.append(max(0, r.timestamp_ms - r.offset) / 1000)
        before = previous.get(key)
        if before is not None and r.offset - before > 1.5 * step_ms:
            lags.append(max(0, r.timestamp_ms - (before + step_ms)) / 1000)
        previous[key] = r.offset
    return lags


@contextlib.contextmanager
def _store(kind: str, workdir: Path) -> Iterator[tuple[str, dict[str, str]]]:
    if kind == "local":
        yield str(workdir / "groups"), {}
        return
    from spark_kafka_group.testing.seaweedfs import seaweedfs

    with seaweedfs(workdir) as store:
        yield store.fresh("scale"), dict(store.storage_options)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", default="4,16,32,64", help="comma-separated N to run")
    parser.add_argument("--partitions", type=int, default=256)
    parser.add_argument("--store", choices=["local", "s3"], default="local")
    parser.add_argument("--members-per-process", type=int, default=8)
    parser.add_argument("--steady-s", type=float, default=300.0, help="steady period, last N")
    parser.add_argument("--steady-small-s", type=float, default=30.0, help="for the other N")
    parser.add_argument("--converge-limit-s", type=float, default=180.0)
    parser.add_argument("--heartbeat-ms", type=int, default=3000)
    parser.add_argument("--session-timeout-ms", type=int, default=45000)
    parser.add_argument("--rebalance-timeout-ms", type=int, default=60000)
    parser.add_argument("--poll-s", type=float, default=1.0, help="a reader's trigger interval")
    parser.add_argument("--workdir", help="keep the group logs here (default: a temporary dir)")
    parser.add_argument(
        "--commit-every", type=float, default=0.0, help="seconds between a member's commits"
    )
    # worker mode (internal)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--store-uri", help=argparse.SUPPRESS)
    parser.add_argument("--storage-options", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)

    sizes = [int(x) for x in args.members.split(",") if x.strip()]
    results: list[RunResult] = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-group-scale-") as tmp,
        _store(args.store, Path(tmp)) as (store_uri, storage_options),
    ):
        args.store_uri = store_uri
        for i, n in enumerate(sizes):
            steady = args.steady_s if i == len(sizes) - 1 else args.steady_small_s
            r = run_once(args, n, steady, storage_options)
            results.append(r)
            print(
                f"N={n:4d} ({r.processes} processes) startup {r.startup_s:5.1f}s  converge "
                f"{'-' if r.converge_s is None else f'{r.converge_s:5.1f}s'}  poll p99/max "
                f"{r.poll_p99_converge_ms:.0f}/{r.poll_max_converge_ms:.0f} ms converging, "
                f"{r.poll_p99_steady_ms:.0f}/{r.poll_max_steady_ms:.0f} ms steady  writes/s "
                f"{r.converge_writes_per_s:.1f} converging, {r.steady_writes_per_s:.2f} steady  "
                f"conflicts {r.conflicts}  steady {r.steady_s:.0f}s: false expiries "
                f"{r.false_expiries}, generation changes {r.generation_changes}  cpu/member "
                f"{r.cpu_per_member_s:.1f}s",
                flush=True,
            )
            if args.commit_every > 0:

                def s(x: float | None) -> str:
                    return "-" if x is None else f"{x:.2f}s"

                print(
                    f"    commits every {args.commit_every:g}s: commit() p50/p99/max "
                    f"{r.commit_p50_ms:.1f}/{r.commit_p99_ms:.1f}/{r.commit_max_ms:.0f} ms  "
                    f"durable p50/p99 {s(r.durable_p50_s)}/{s(r.durable_p99_s)} "
                    f"({r.durable_commits} records)  last commits lost {r.lost_last_commits}  "
                    f"split {r.split[0]}-{r.split[1]} partitions per member",
                    flush=True,
                )
            for e in r.errors[:5]:
                print(f"    member error: {e}", flush=True)
    base = results[0]
    parts = [f"store={args.store}", f"partitions={args.partitions}"]
    for r in results:
        parts += [
            f"converge_s_{r.members}={'none' if r.converge_s is None else f'{r.converge_s:.1f}'}",
            f"poll_p99_ms_{r.members}={max(r.poll_p99_converge_ms, r.poll_p99_steady_ms):.0f}",
            f"writes_per_s_{r.members}={r.converge_writes_per_s:.1f}",
            f"steady_writes_per_s_{r.members}={r.steady_writes_per_s:.2f}",
            f"conflicts_{r.members}={r.conflicts}",
            f"false_expiries_{r.members}={r.false_expiries}",
        ]
        if args.commit_every > 0:
            parts += [
                f"commit_p99_ms_{r.members}={r.commit_p99_ms:.1f}",
                f"durable_p99_s_{r.members}="
                + ("none" if r.durable_p99_s is None else f"{r.durable_p99_s:.2f}"),
                f"lost_last_commits_{r.members}={r.lost_last_commits}",
                f"split_{r.members}={r.split[0]}-{r.split[1]}",
            ]
        if r is not base and r.converge_s is not None and base.converge_s:
            parts.append(
                f"converge_ratio_{r.members}_vs_{base.members}={r.converge_s / base.converge_s:.2f}"
            )
    print(" ".join(parts))
    return 0 if all(r.converge_s is not None for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
