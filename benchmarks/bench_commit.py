"""Benchmark of offset commits through the group protocol: latency, cold replay, file count.

Run: ``python -m benchmarks.bench_commit`` (about 2-4 minutes on 2 cores; ``--quick`` for a
smoke run).
Everything is written to a temporary local store and deleted afterwards (``--keep`` keeps it).

``--store s3://bucket/prefix`` (or ``az://``, ``abfss://``, ``gs://``) with ``--store-option
KEY=VALUE`` (delta-rs storage options) runs the same benchmark with the log on that store, then
on a temporary local store as the baseline measured in the same run, and prints both and their
ratio (the log goes to a fresh prefix under the given one and is left there).

What it measures (the real path a member's micro-batch commit takes)
--------------------------------------------------------------------
A member joins a fresh group through the coordinator's handlers (JOIN, then the leader's SYNC
with the topic metadata), so it owns all ``--partitions`` partitions of topic ``orders``. Then
each micro-batch commit is one :meth:`GroupLogClient.transact` (fold the log up to its latest
version, ``group.offsets.commit_offsets`` for the member's generation, compare-and-swap
append, fold the appended records), with the client's housekeeping on (a SNAPSHOT record every
``SNAPSHOT_EVERY_RECORDS`` records; table maintenance every ``MAINTAIN_EVERY_VERSIONS``
versions, as the group leader does). That is exactly what a member's ``commit()`` costs on the
driver, minus the (unchanged) Spark side.

1. ``commit``: per micro-batch commit latency, p50 / p99 / max, while the log grows from 0 to
   10,000 records, each commit holding ``--batch-partitions`` partitions (default 12: a member
   that owns 12 partitions with data in every batch).
2. After 1,000 / 10,000 / 100,000 records in the log (one log, growing; beyond 10,000 each
   commit holds every one of the ``--partitions`` partitions to keep the bench short): the cold
   replay time = a new ``GroupLogClient`` (a member starting: opens the table, reads from the
   latest SNAPSHOT record, folds through the protocol state machine), split into store read and
   fold; a full read of every record for comparison; the number of live data files and of files
   in the table directory.

The log is created with the retentions shortened to 0 s (``delta.logRetentionDuration``,
``delta.deletedFileRetentionDuration``) so that a few minutes show the steady state the default
retentions (see ``spark_kafka_group.store.table.DEFAULT_TABLE_PROPERTIES``) reach after an hour:
with the defaults the directory also holds the commits and compacted-away files of that hour.

The last line is ``key=value`` pairs separated by spaces (``commit_p50_ms``, ``commit_p99_ms``,
``replay_100k_s``, ...; with ``--store`` also ``local_*`` for the baseline and ``*_ratio``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from typing import Any

from benchmarks.harness import add_store_arguments, print_result, store_from_args
from spark_kafka_group.group import GroupConfig, GroupCoordinator, GroupRecord
from spark_kafka_group.group.errors import GroupError
from spark_kafka_group.group.messages import CommitResponse, JoinRequest, SyncResponse
from spark_kafka_group.group.offsets import commit_offsets
from spark_kafka_group.member.log_client import GroupLogClient
from spark_kafka_group.store import GroupLog, group_log_uri

SHORT_RETENTION = {
    "delta.logRetentionDuration": "interval 0 seconds",
    "delta.deletedFileRetentionDuration": "interval 0 seconds",
}
TOPIC = "orders"
GROUP = "bench-commit"
MEMBER = "member-1"
CHECKPOINTS = (1_000, 10_000, 100_000)
#: Phase boundary: up to here commits hold --batch-partitions partitions, after it all.
SMALL_PHASE_RECORDS = 10_000


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def files_in(path: str) -> int | str:
    if "://" in path:
        return "n/a"  # an object store: the live data files are counted instead
    return sum(len(files) for _, _, files in os.walk(path))


def join_member(
    store: str, partitions: int, options: Mapping[str, str] | None
) -> tuple[GroupLogClient, int]:
    """Create the log (short retentions) with the member's JOIN, then SYNC through the client.
    Returns the client (as the group's leader and maintainer) and the member's generation."""
    uri = group_log_uri(store, GROUP)
    log = GroupLog.open(uri, storage_options=options, table_properties=SHORT_RETENTION)
    now = int(time.time() * 1000)
    request = JoinRequest(
        member_id=MEMBER,
        protocols=["cooperative-sticky"],
        topics=[TOPIC],
        session_timeout_ms=45_000,
        rebalance_timeout_ms=60_000,
    )
    # one member: no initial rebalance delay to wait out before its SYNC
    coordinator = GroupCoordinator(GROUP, GroupConfig(initial_rebalance_delay_ms=0))
    records, response = coordinator.join(request, now)
    assert response.error is GroupError.NONE, response
    log.append(records, expected_version=-1)

    client = GroupLogClient(store, GROUP, storage_options=options)
    client.maintainer = True

    def sync(work: GroupCoordinator, now: int) -> tuple[list[GroupRecord], SyncResponse]:
        view = work.member_view(MEMBER)
        return work.sync(MEMBER, view.group_generation, now, metadata={TOPIC: partitions})

    for _ in range(10):
        synced = client.transact(sync)
        if synced.error is GroupError.NONE and not synced.pending:
            break
    view = client.fold().member_view(MEMBER)
    assert len(view.assignment) == partitions, view
    return client, view.group_generation


def cold_replay(store: str, options: Mapping[str, str] | None) -> dict[str, Any]:
    """A member starting: new client, read from the latest SNAPSHOT, fold. Also the split
    (store read / protocol fold) and a full read of every record for comparison."""
    t0 = time.perf_counter()
    client = GroupLogClient(store, GROUP, storage_options=options, create=False)
    coordinator = client.fold()
    replay_s = time.perf_counter() - t0
    assert coordinator.member_view(MEMBER).known

    uri = group_log_uri(store, GROUP)
    t0 = time.perf_counter()
    piece = GroupLog.open(uri, storage_options=options, create=False).read_slice(
        from_latest_snapshot=True
    )
    read_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    GroupCoordinator(GROUP).apply_all(record for _, record in piece.records)
    fold_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    full = GroupLog.open(uri, storage_options=options, create=False).read()
    full_s = time.perf_counter() - t0
    return {
        "replay_s": replay_s,
        "read_s": read_s,
        "fold_s": fold_s,
        "tail_records": len(piece.records),
        "full_s": full_s,
        "full_records": len(full),
        "live_files": client.table.file_count(),
        "files": files_in(uri),
    }


def run(
    store: str,
    partitions: int,
    batch_partitions: int,
    last: int,
    options: Mapping[str, str] | None = None,
) -> dict[str, object]:
    client, generation = join_member(store, partitions, options)
    offsets = dict.fromkeys(range(partitions), 0)
    latencies: list[float] = []
    tail: list[float] = []
    results: dict[int, dict[str, float]] = {}
    written = len(client.table.read())
    cursor = 0
    wanted = [c for c in CHECKPOINTS if c <= last]
    started = time.perf_counter()
    while wanted:
        per_batch = batch_partitions if written < SMALL_PHASE_RECORDS else partitions
        chosen = [(cursor + k) % partitions for k in range(per_batch)]
        cursor = (cursor + per_batch) % partitions
        for p in chosen:
            offsets[p] += 1000
        batch = {(TOPIC, p): offsets[p] for p in chosen}

        def commit(
            work: GroupCoordinator, now: int, batch: dict = batch
        ) -> tuple[list[GroupRecord], CommitResponse]:
            return commit_offsets(work.group, MEMBER, generation, batch, now)

        t0 = time.perf_counter()
        response = client.transact(commit)
        elapsed = (time.perf_counter() - t0) * 1000
        assert all(e is GroupError.NONE for e in response.partition_errors.values()), response
        if written < SMALL_PHASE_RECORDS:
            latencies.append(elapsed)
        else:
            tail.append(elapsed)
        written += per_batch
        if written >= wanted[0]:
            records = wanted.pop(0)
            r = cold_replay(store, options)
            results[records] = r
            print(
                f"{records:>7} records ({time.perf_counter() - started:.0f}s): cold replay "
                f"{r['replay_s'] * 1000:.0f} ms (store read {r['read_s'] * 1000:.0f} ms of "
                f"{r['tail_records']} records from the latest SNAPSHOT, fold "
                f"{r['fold_s'] * 1000:.1f} ms); full read of {r['full_records']} records "
                f"{r['full_s'] * 1000:.0f} ms; live data files {r['live_files']}; files in "
                f"table dir {r['files']}",
                flush=True,
            )
    return {"latencies": latencies, "tail": tail[-200:], "results": results}


def summarize(out: dict[str, object], args: argparse.Namespace, where: str) -> dict[str, str]:
    """Print one run's figures; its ``key=value`` pairs."""
    lat: list[float] = out["latencies"]  # type: ignore[assignment]
    tail: list[float] = out["tail"]  # type: ignore[assignment]
    results: dict[int, dict[str, float]] = out["results"]  # type: ignore[assignment]
    p50, p99 = percentile(lat, 0.50), percentile(lat, 0.99)
    print(
        f"[{where}] commit (GroupLogClient.transact + commit_offsets, {args.batch_partitions} "
        f"partitions per micro-batch, log 0 -> 10k records): {len(lat)} commits: p50 "
        f"{p50:.1f} ms, p99 {p99:.1f} ms, mean {statistics.mean(lat):.1f} ms, max "
        f"{max(lat):.1f} ms"
    )
    pairs = {"commit_p50_ms": f"{p50:.1f}", "commit_p99_ms": f"{p99:.1f}"}
    if tail:
        pairs["commit_at_100k_p50_ms"] = f"{percentile(tail, 0.5):.1f}"
        pairs["commit_at_100k_p99_ms"] = f"{percentile(tail, 0.99):.1f}"
        print(
            f"[{where}] commit of {args.partitions} partitions, last {len(tail)} before 100k "
            f"records: p50 {percentile(tail, 0.5):.1f} ms, p99 {percentile(tail, 0.99):.1f} ms"
        )
    for total, r in results.items():
        key = f"{total // 1000}k"
        pairs[f"replay_{key}_s"] = f"{r['replay_s']:.3f}"
        pairs[f"replay_read_{key}_s"] = f"{r['read_s']:.3f}"
        pairs[f"replay_fold_{key}_s"] = f"{r['fold_s']:.3f}"
        pairs[f"full_read_{key}_s"] = f"{r['full_s']:.3f}"
        pairs[f"files_{key}"] = str(r["files"])
        pairs[f"live_files_{key}"] = str(r["live_files"])
    return pairs


def run_local(args: argparse.Namespace, last: int) -> dict[str, object]:
    store = tempfile.mkdtemp(prefix="skg-bench-commit-")
    try:
        batch = min(args.batch_partitions, args.partitions)
        return run(store, args.partitions, batch, last)
    finally:
        if args.keep:
            print(f"store kept at {store}")
        else:
            shutil.rmtree(store, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="up to 10,000 records only")
    parser.add_argument("--partitions", type=int, default=100, help="partitions the member owns")
    parser.add_argument("--batch-partitions", type=int, default=12, help="partitions per commit")
    parser.add_argument("--keep", action="store_true", help="keep the temporary store")
    add_store_arguments(parser, help="an object-store URI to measure against the local store")
    args = parser.parse_args(argv)
    last = 10_000 if args.quick else 100_000

    store, options = store_from_args(args, "bench-commit")
    if store is None:
        print_result(summarize(run_local(args, last), args, "local"))
        return 0
    print(f"log on {store}", flush=True)
    remote = summarize(
        run(store, args.partitions, min(args.batch_partitions, args.partitions), last, options),
        args,
        store.split("://", 1)[0],
    )
    print("baseline: the same run on a temporary local store", flush=True)
    local = summarize(run_local(args, last), args, "local")
    pairs = dict(remote)
    pairs.update({f"local_{k}": v for k, v in local.items()})
    for key in remote:
        if key.startswith(("commit_", "replay_")) and float(local[key]) > 0:
            pairs[f"{key}_ratio"] = f"{float(remote[key]) / float(local[key]):.2f}"
    print_result(pairs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
