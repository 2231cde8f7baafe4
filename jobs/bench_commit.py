"""Benchmark of the group log store: commit latency, cold replay time and file count.

Run: ``python jobs/bench_commit.py`` (about 2-3 minutes; ``--quick`` for a smoke run). Everything
is written to a temporary local store and deleted afterwards (``--keep`` keeps it).

What it measures
----------------
1. ``commit``: latency of one COMMIT-like append (4 records: one COMMIT per partition of a member)
   against a fresh local log, with ``maintain()`` every 100 appends (not timed).
2. For 1,000 / 10,000 / 100,000 records written as appends of ``records_per_append`` records (4 for
   1k and 10k, like members committing a few partitions; 100 for 100k to keep the bench short — the
   100k table therefore has 1,000 commits, not 25,000), with ``maintain()`` every 200 appends and a
   SNAPSHOT record every 1,000 records: the latency of the last appends, the cold read time (a new
   ``GroupLog`` handle, like a member starting) of ``read(from_latest_snapshot=True)`` and of a full
   ``read()``, the number of live data files and the number of files in the table directory.

The logs here are created with the retentions shortened to 0 s (``delta.logRetentionDuration``,
``delta.deletedFileRetentionDuration``) so that a few minutes show the steady state the default
retentions (see ``spark_kafka_group.store.log.DEFAULT_TABLE_PROPERTIES``) reach after that long:
with the defaults the directory also holds the commits and compacted-away files of that period.

The last line is ``key=value`` pairs separated by spaces.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_kafka_group.group.records import GroupRecord
from spark_kafka_group.store import GroupLog

SHORT_RETENTION = {
    "delta.logRetentionDuration": "interval 0 seconds",
    "delta.deletedFileRetentionDuration": "interval 0 seconds",
}
MAINTAIN_EVERY = 200
SNAPSHOT_EVERY = 1_000


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def commit_records(n: int, member: str, base: int) -> list[GroupRecord]:
    return [
        GroupRecord(
            kind="COMMIT",
            timestamp_ms=1_700_000_000_000 + base,
            member_id=member,
            generation=7,
            topic="orders",
            partition=(base + k) % 12,
            offset=base + k,
            payload={"metadata": "", "leader_epoch": 3},
        )
        for k in range(n)
    ]


def files_in(path: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(path))


def bench_commit(store: Path, appends: int) -> tuple[float, float]:
    log = GroupLog.open(str(store / "commit"), table_properties=SHORT_RETENTION)
    version = log.append(commit_records(4, "m1", 0), expected_version=-1)
    latencies = []
    for i in range(appends):
        records = commit_records(4, "m1", 4 * (i + 1))
        started = time.perf_counter()
        version = log.append(records, expected_version=version)
        latencies.append((time.perf_counter() - started) * 1000)
        if i % 100 == 99:
            version = log.maintain().version_after
    p50, p99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
    print(
        f"commit: {appends} appends of 4 records: p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
        f"mean {statistics.mean(latencies):.1f} ms, max {max(latencies):.1f} ms"
    )
    return p50, p99


def bench_scale(store: Path, total: int, per_append: int) -> dict[str, float]:
    path = store / f"scale{total}"
    log = GroupLog.open(str(path), table_properties=SHORT_RETENTION)
    version = -1
    written = 0
    appends = 0
    tail: list[float] = []
    started = time.perf_counter()
    maintain_ms: list[float] = []
    while written < total:
        n = min(per_append, total - written)
        records = commit_records(n, f"m{appends % 3}", written)
        if any((written + k) % SNAPSHOT_EVERY == 0 for k in range(n)):
            records[-1] = GroupRecord(
                kind="SNAPSHOT", timestamp_ms=written, payload={"state": "x" * 200}
            )
        t0 = time.perf_counter()
        version = log.append(records, expected_version=version)
        if total - written <= 200 * per_append:
            tail.append((time.perf_counter() - t0) * 1000)
        written += n
        appends += 1
        if appends % MAINTAIN_EVERY == 0:
            report = log.maintain()
            maintain_ms.append(report.duration_ms)
            version = report.version_after
    write_s = time.perf_counter() - started
    report = log.maintain()
    maintain_ms.append(report.duration_ms)

    cold = GroupLog.open(str(path), create=False)
    t0 = time.perf_counter()
    snap = cold.read(from_latest_snapshot=True)
    snap_s = time.perf_counter() - t0
    cold = GroupLog.open(str(path), create=False)
    t0 = time.perf_counter()
    full = cold.read()
    full_s = time.perf_counter() - t0
    assert len(full) == total, (len(full), total)
    assert snap and snap[0][1].kind == "SNAPSHOT"
    t0 = time.perf_counter()
    GroupLog.open(str(path), create=False).latest_version()
    open_s = time.perf_counter() - t0
    live = cold.file_count()
    on_disk = files_in(path)
    print(
        f"{total:>7} records in {appends} appends of {per_append} ({write_s:.1f} s): "
        f"last appends p50 {percentile(tail, 0.5):.1f} ms p99 {percentile(tail, 0.99):.1f} ms; "
        f"maintain max {max(maintain_ms):.0f} ms; cold open {open_s * 1000:.0f} ms; "
        f"cold read from snapshot {snap_s * 1000:.0f} ms ({len(snap)} records); "
        f"cold full read {full_s * 1000:.0f} ms; live data files {live}; "
        f"files in table dir {on_disk}"
    )
    return {
        "tail_p50_ms": percentile(tail, 0.5),
        "snapshot_s": snap_s,
        "full_s": full_s,
        "live_files": live,
        "files": on_disk,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary store")
    args = parser.parse_args()

    store = Path(tempfile.mkdtemp(prefix="skg-bench-"))
    try:
        p50, p99 = bench_commit(store, 60 if args.quick else 400)
        scales = [(1_000, 4), (10_000, 4), (100_000, 100)]
        if args.quick:
            scales = [(1_000, 4), (10_000, 100)]
        results = {total: bench_scale(store, total, per) for total, per in scales}
    finally:
        if args.keep:
            print(f"store kept at {store}")
        else:
            shutil.rmtree(store, ignore_errors=True)

    pairs = {"commit_p50_ms": f"{p50:.1f}", "commit_p99_ms": f"{p99:.1f}"}
    for total, r in results.items():
        key = f"{total // 1000}k"
        pairs[f"replay_{key}_s"] = f"{r['full_s']:.3f}"
        pairs[f"replay_snapshot_{key}_s"] = f"{r['snapshot_s']:.3f}"
        pairs[f"files_{key}"] = str(r["files"])
        pairs[f"live_files_{key}"] = str(r["live_files"])
    print(" ".join(f"{k}={v}" for k, v in pairs.items()))


if __name__ == "__main__":
    main()
