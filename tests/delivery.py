"""A delivery checker (test utility): what was produced, what every member read, the group log.

Kafka's system tests (consumer bounce, static bounce, fencing, valid assignment) and Jepsen's
Kafka checker check these invariants; this one checks them on what our members journaled
(``tests/member_app.py`` writes one JSON line per micro-batch) against the group log:

- nothing produced is missing (``lost``), nothing read that was never produced;
- within one incarnation (process) of a member, the offsets it read of a partition are
  contiguous: a gap is only legal where the partition was read by someone else meanwhile
  (it moved away and came back), and reading backwards only where the member lost the
  partition (expired, rejoined) and restarted at the last commit, re-reading at most its own
  last ``allowed_batches`` batches;
- duplicates are counted and attributed; they are legal only as the previous owner's last
  uncommitted batch(es) of a partition that moved (a batch is committed when the next one is
  planned, so: the last ``allowed_batches`` batches of an incarnation's run on the partition),
  read again by another incarnation;
- a committed offset never runs ahead of what was consumed (COMMIT records vs journals);
- no partition is held by two members at once (the group log replayed record by record, and
  every SYNC assignment checked on its own);
- commits only from owners: no COMMIT from a member after its EXPIRE / LEAVE / replacement,
  nor for a partition it does not hold in the current generation.

``check_delivery(...)`` returns a :class:`DeliveryResult`; ``result.summary()`` is the one-line
summary the scenarios print, ``result.assert_ok()`` fails with the details. For a sink that
skips a batch it already has (a file sink, a Delta table), ``check_landed(...)`` counts what
the sink holds instead of what each batch read: every produced (partition, offset) once.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spark_kafka_group.group import GroupMetadata, GroupProtocolBug, GroupRecord, apply
from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.group.payloads import JoinPayload, SyncPayload

#: Journal time vs commit timestamp: both are this host's wall clock; a batch is journaled
#: before it can be committed, so only clock resolution needs slack.
COMMIT_SLACK_S = 0.25


@dataclass(frozen=True)
class Batch:
    """One journaled micro-batch of one member incarnation."""

    member: str  # the member's name (stable across restarts)
    pid: int  # the process: one incarnation of the member
    batch: int  # Spark's batch id
    time: float  # wall clock when the batch reached the sink
    records: tuple[tuple[int, int], ...]  # (partition, offset)

    @property
    def incarnation(self) -> tuple[str, int]:
        return (self.member, self.pid)


def journal_batches(member: str, lines: Iterable[Mapping[str, Any]]) -> list[Batch]:
    """Batches from ``tests/member_app.py`` journal lines (``MemberProcess.batches()``), in
    order."""
    return [
        Batch(
            member=member,
            pid=int(line["pid"]),
            batch=int(line["batch"]),
            time=float(line["time"]),
            records=tuple((int(p), int(o)) for p, o in line["records"]),
        )
        for line in lines
    ]


def collected_batches(member: str, collected: Any, pid: int = 0) -> list[Batch]:
    """Batches of an in-process query's :class:`tests.streaming.Collected`."""
    with collected.lock:
        ids = sorted(collected.batches)
        return [
            Batch(
                member=member,
                pid=pid,
                batch=b,
                time=collected.times[b],
                records=tuple((p, o) for p, o, *_ in collected.batches[b]),
            )
            for b in ids
        ]


@dataclass
class DeliveryResult:
    produced: int = 0
    consumed: int = 0  # records read, duplicates included
    lost: list[tuple[int, int]] = field(default_factory=list)
    unexpected: list[tuple[int, int]] = field(default_factory=list)  # read, never produced
    duplicated: int = 0  # extra reads
    #: (incarnation "name/pid", partition) -> extra reads of records it read first
    duplicates_by: dict[tuple[str, int], int] = field(default_factory=dict)
    illegal_duplicates: list[str] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)
    commits_ahead: list[str] = field(default_factory=list)
    double_owned: list[str] = field(default_factory=list)
    zombie_commits: list[str] = field(default_factory=list)
    rebalances: int = 0  # GENERATION records
    revokes: dict[str, int] = field(default_factory=dict)  # member id -> REVOKE records
    max_pause_s: float = 0.0  # longest time between two reads of one partition
    incarnations: int = 0
    commits: int = 0

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.unexpected
            or self.illegal_duplicates
            or self.gaps
            or self.commits_ahead
            or self.double_owned
            or self.zombie_commits
        )

    def summary(self) -> str:
        return (
            f"produced={self.produced} consumed={self.consumed} lost={len(self.lost)} "
            f"duplicated={self.duplicated} illegal_duplicates={len(self.illegal_duplicates)} "
            f"gaps={len(self.gaps)} commits_ahead={len(self.commits_ahead)} "
            f"rebalances={self.rebalances} max_pause_s={self.max_pause_s:.1f} "
            f"double_owned={len(self.double_owned)} zombie_commits={len(self.zombie_commits)} "
            f"incarnations={self.incarnations} commits={self.commits}"
        )

    def details(self, limit: int = 10) -> str:
        parts = [self.summary()]
        for name in (
            "lost",
            "unexpected",
            "illegal_duplicates",
            "gaps",
            "commits_ahead",
            "double_owned",
            "zombie_commits",
        ):
            items = getattr(self, name)
            if items:
                parts.append(f"{name} ({len(items)}): {items[:limit]}")
        if self.duplicates_by:
            parts.append(f"duplicates by (incarnation, partition): {self.duplicates_by}")
        return "\n".join(parts)

    def assert_ok(self) -> None:
        assert self.ok, self.details()


def check_delivery(
    produced: Mapping[int, int],
    batches: Iterable[Batch],
    group_records: Sequence[GroupRecord] = (),
    *,
    topic: str | None = None,
    allowed_batches: int = 2,
    print_summary: bool = True,
) -> DeliveryResult:
    """Check what members read (``batches``) against ``produced`` (records per partition,
    offsets ``0..n-1``) and the group log (``group_records`` in log order; COMMIT records of
    other topics than ``topic`` are ignored when it is given)."""
    batches = list(batches)
    result = DeliveryResult(produced=sum(produced.values()))
    _check_reads(result, produced, batches, allowed_batches, _commit_lookup(group_records, topic))
    _check_group_log(result, group_records, batches, topic)
    if print_summary:
        print(f"delivery: {result.summary()}")
    return result


def check_landed(
    produced: Mapping[int, int],
    landed: Iterable[tuple[int, int]],
    group_records: Sequence[GroupRecord] = (),
    *,
    topic: str | None = None,
    sink: str = "sink",
    print_summary: bool = True,
) -> DeliveryResult:
    """Check what a sink holds (``landed``: one (partition, offset) per row, from a file sink
    read back through its ``_spark_metadata`` or a table) against ``produced``: every produced
    record once (``lost``, ``unexpected``, ``duplicated``, ``duplicates_by`` (``sink``,
    partition)), and the group log's ownership and commit checks (no journal times here, so
    no ``commits_ahead``)."""
    counts = Counter(landed)
    result = DeliveryResult(produced=sum(produced.values()), consumed=sum(counts.values()))
    expected = {(p, o) for p, n in produced.items() for o in range(n)}
    result.lost = sorted(expected - set(counts))
    result.unexpected = sorted(set(counts) - expected)
    by: Counter[tuple[str, int]] = Counter()
    for (p, o), n in sorted(counts.items()):
        if n > 1:
            result.duplicated += n - 1
            by[(sink, p)] += n - 1
            result.illegal_duplicates.append(f"{sink}: partition {p} offset {o} landed {n} times")
    result.duplicates_by = dict(by)
    _check_group_log(result, group_records, [], topic)
    if print_summary:
        print(f"delivery ({sink}): {result.summary()}")
    return result


def log_lines(group_records: Sequence[GroupRecord], limit: int = 80) -> str:
    """The group log, one short line a record (COMMITs of one member and time folded into one
    line), for a failing test's message: what moved when, and who committed where."""
    lines: list[str] = []
    start = group_records[0].timestamp_ms if group_records else 0
    for r in group_records:
        member = (r.member_id or "-")[-6:]
        head = f"{(r.timestamp_ms - start) / 1000:7.2f}s g{r.generation} {r.kind} {member}"
        if r.kind == RecordKind.COMMIT:
            item = f"{r.partition}@{r.offset}"
            if lines and lines[-1].startswith(head):
                lines[-1] += f" {item}"
                continue
            lines.append(f"{head} {item}")
        elif r.kind == RecordKind.SYNC:
            assignment = r.payload.get("assignment") or {}
            owned = {m[-6:]: sorted(p for _, p in tps) for m, tps in assignment.items()}
            lines.append(f"{head} {owned}")
        elif r.kind == RecordKind.REVOKE:
            lines.append(f"{head} {sorted(p for _, p in r.payload.get('partitions', []))}")
        else:
            lines.append(f"{head} {r.payload.get('reason') or ''}".rstrip())
    cut = len(lines) - limit
    return "\n".join(([f"({cut} earlier lines left out)"] if cut > 0 else []) + lines[-limit:])


# -- journals ------------------------------------------------------------------------------


def _check_reads(
    result: DeliveryResult,
    produced: Mapping[int, int],
    batches: list[Batch],
    allowed_batches: int,
    committed_at: Any,
) -> None:
    # Journal order per incarnation (a journal is appended to; restarts add incarnations).
    by_incarnation: dict[tuple[str, int], list[Batch]] = defaultdict(list)
    for b in batches:
        by_incarnation[b.incarnation].append(b)
    result.incarnations = len(by_incarnation)

    reads: Counter[tuple[int, int]] = Counter()
    readers: dict[tuple[int, int], set[tuple[str, int]]] = defaultdict(set)
    for b in batches:
        for rec in b.records:
            reads[rec] += 1
            readers[rec].add(b.incarnation)
    result.consumed = sum(reads.values())
    expected = {(p, o) for p, n in produced.items() for o in range(n)}
    result.lost = sorted(expected - set(reads))
    result.unexpected = sorted(set(reads) - expected)

    # Runs: per incarnation and partition, maximal stretches of contiguous reads. When the
    # partition moved on after a run (someone else read beyond its last offset), the run's
    # last `allowed_batches` batches are its tail: they may not have been committed yet, and
    # the next owner may read them again. By offsets, not journal times: a batch planned
    # before its member was paused is journaled after the new owner has read past it.
    furthest: dict[int, dict[tuple[str, int], int]] = defaultdict(dict)
    for b in batches:
        for p, o in b.records:
            furthest[p][b.incarnation] = max(furthest[p].get(b.incarnation, -1), o)

    def moved_on(p: int, inc: tuple[str, int], last_offset: int) -> bool:
        return any(o > last_offset for i, o in furthest[p].items() if i != inc)

    tails: dict[tuple[int, int], set[tuple[str, int]]] = defaultdict(set)
    own_rereads: list[str] = []
    self_rereads: Counter[tuple[int, int]] = Counter()  # legal re-reads by the same process
    for inc, seq in by_incarnation.items():
        name = f"{inc[0]}/{inc[1]}"
        last: dict[int, int] = {}  # partition -> last offset read
        run_end: dict[int, int] = {}  # partition -> index of the run's last batch
        run_records: dict[int, list[tuple[int, int]]] = defaultdict(list)  # (batch idx, off)

        def close_run(
            p: int,
            seq: list[Batch] = seq,
            inc: tuple[str, int] = inc,
            run_end: dict[int, int] = run_end,
            run_records: dict[int, list[tuple[int, int]]] = run_records,
        ) -> None:
            end = run_end[p]
            if moved_on(p, inc, max((off for _, off in run_records[p]), default=-1)):
                for idx, off in run_records[p]:
                    if idx > end - allowed_batches:
                        tails[(p, off)].add(inc)
            run_records[p] = []

        for idx, b in enumerate(seq):
            per_partition: dict[int, list[int]] = defaultdict(list)
            for p, o in b.records:
                per_partition[p].append(o)
            for p, offsets in sorted(per_partition.items()):
                offsets.sort()
                for a, c in itertools.pairwise(offsets):
                    if c != a + 1:
                        result.gaps.append(
                            f"{name} batch {b.batch} partition {p}: offsets {a} -> {c} "
                            "inside one batch"
                        )
                first = offsets[0]
                if p in last:
                    prev = last[p]
                    if first <= prev:
                        # The member lost the partition (e.g. expired and rejoined in the same
                        # process): legal if it restarted at the last commit and re-read at
                        # most its own last `allowed_batches` batches.
                        recent = {
                            o
                            for q in seq[max(0, idx - allowed_batches) : idx]
                            for pp, o in q.records
                            if pp == p
                        }
                        again = [o for o in offsets if o <= prev]
                        if first == committed_at(p, b.time) and set(again) <= recent:
                            for o in again:
                                self_rereads[(p, o)] += 1
                        else:
                            own_rereads.append(
                                f"{name} batch {b.batch} partition {p}: read [{first}, "
                                f"{offsets[-1]}] again after reaching {prev} (committed: "
                                f"{committed_at(p, b.time)})"
                            )
                    if first != prev + 1:
                        missing = range(prev + 1, first)
                        uncovered = [o for o in missing if not (readers.get((p, o), set()) - {inc})]
                        if uncovered:
                            result.gaps.append(
                                f"{name} batch {b.batch} partition {p}: jumped from {prev} to "
                                f"{first}; {len(uncovered)} skipped offset(s) nobody else read "
                                f"(first {uncovered[0]})"
                            )
                        close_run(p)
                run_end[p] = idx
                run_records[p].extend((idx, o) for o in offsets)
                last[p] = max(last.get(p, -1), offsets[-1])
        for p in list(run_records):
            if run_records[p]:
                close_run(p)
    tail_reads = {
        (rec, inc) for rec, incs in tails.items() for inc in incs
    }  # (record, incarnation) pairs that read it in a tail

    # Attribute every extra read. Legal only when (1) no incarnation read it twice, (2) some
    # reader read it in a tail, and (3) no later read, outside a tail, re-read an offset that
    # was already committed when it was read (a new owner starts at the last commit).
    reads_in_time: dict[tuple[int, int], list[tuple[float, tuple[str, int]]]] = defaultdict(list)
    for b in batches:
        for rec in b.records:
            if reads[rec] > 1:
                reads_in_time[rec].append((b.time, b.incarnation))
    by: Counter[tuple[str, int]] = Counter()
    for rec, n in sorted(reads.items()):
        if n < 2:
            continue
        result.duplicated += n - 1
        ordered = sorted(reads_in_time[rec])
        inc = ordered[0][1]
        by[(f"{inc[0]}/{inc[1]}", rec[0])] += n - 1
        why = None
        if len(readers[rec]) != n - self_rereads[rec]:
            why = "read twice by one incarnation"
        elif len(readers[rec]) == 1:
            pass  # only legal re-reads by its one reader (see own re-reads above)
        elif not tails.get(rec):
            why = "not in the uncommitted tail of a moved partition's previous owner"
        else:
            for t, reader in ordered[1:]:
                committed = committed_at(rec[0], t)
                if rec[1] < committed and (rec, reader) not in tail_reads:
                    why = (
                        f"{reader[0]}/{reader[1]} read it at {t:.3f} when {committed} was "
                        "already committed"
                    )
                    break
        if why:
            result.illegal_duplicates.append(
                f"partition {rec[0]} offset {rec[1]} read {n} times by "
                f"{sorted(f'{m}/{p}' for m, p in readers[rec])}: {why}"
            )
    result.duplicates_by = dict(by)
    result.illegal_duplicates.extend(own_rereads)

    # Pause: the longest time between two reads of one partition (while it had data).
    times: dict[int, list[float]] = defaultdict(list)
    for b in batches:
        for p in {p for p, _ in b.records}:
            times[p].append(b.time)
    for ts in times.values():
        ts.sort()
        for earlier, later in itertools.pairwise(ts):
            result.max_pause_s = max(result.max_pause_s, later - earlier)


def _commit_lookup(records: Sequence[GroupRecord], topic: str | None) -> Any:
    """``committed_at(partition, t)``: the partition's last accepted commit at time ``t``."""
    commits: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for rec in records:
        if str(rec.kind) == RecordKind.COMMIT and (topic is None or rec.topic == topic):
            commits[int(rec.partition or 0)].append(
                (rec.timestamp_ms / 1000.0, int(rec.offset or 0))
            )
    times = {p: [t for t, _ in cs] for p, cs in commits.items()}

    def committed_at(partition: int, t: float) -> int:
        idx = bisect.bisect_right(times.get(partition, []), t)
        return commits[partition][idx - 1][1] if idx else 0

    return committed_at


# -- group log -----------------------------------------------------------------------------


def _check_group_log(
    result: DeliveryResult,
    records: Sequence[GroupRecord],
    batches: list[Batch],
    topic: str | None,
) -> None:
    # Highest offset of each partition read by anyone up to a time (prefix max by time).
    points: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for b in batches:
        highest: dict[int, int] = {}
        for p, o in b.records:
            highest[p] = max(highest.get(p, -1), o)
        for p, o in highest.items():
            points[p].append((b.time, o))
    read_times: dict[int, list[float]] = {}
    read_max: dict[int, list[int]] = {}
    for p, pts in points.items():
        pts.sort()
        read_times[p] = [t for t, _ in pts]
        running, out = -1, []
        for _, o in pts:
            running = max(running, o)
            out.append(running)
        read_max[p] = out

    def consumed_position(p: int, ts_s: float) -> int:
        idx = bisect.bisect_right(read_times.get(p, []), ts_s + COMMIT_SLACK_S)
        return read_max[p][idx - 1] + 1 if idx else 0

    group = GroupMetadata("delivery-check")
    gone: dict[str, str] = {}  # member id -> why it can no longer commit
    revokes: Counter[str] = Counter()
    for i, rec in enumerate(records):
        kind = str(rec.kind)
        where = f"record {i} ({kind} by {rec.member_id}, generation {rec.generation})"
        if kind == RecordKind.COMMIT and (topic is None or rec.topic == topic):
            result.commits += 1
            if rec.member_id is not None:
                if rec.member_id in gone:
                    result.zombie_commits.append(f"{where}: after its {gone[rec.member_id]}")
                else:
                    m = group.member(rec.member_id)
                    tp = TopicPartition(str(rec.topic), int(rec.partition or 0))
                    if m is None or tp not in m.held or rec.generation != group.generation:
                        result.zombie_commits.append(
                            f"{where}: {tp} not held by the writer in generation {group.generation}"
                        )
            position = consumed_position(int(rec.partition or 0), rec.timestamp_ms / 1000.0)
            if batches and rec.offset is not None and rec.offset > position:
                result.commits_ahead.append(
                    f"{where}: partition {rec.partition} committed {rec.offset} but only "
                    f"{position} had been consumed"
                )
        if kind == RecordKind.SYNC:
            seen: dict[tuple[str, int], str] = {}
            sync = SyncPayload.of(rec)
            for member in set(sync.assignment) | set(sync.revoking):
                held = sync.assignment.get(member, frozenset())
                held |= sync.revoking.get(member, frozenset())
                for tp in sorted(held):
                    key = (tp.topic, tp.partition)
                    if key in seen and seen[key] != member:
                        result.double_owned.append(
                            f"{where}: {key} given to {seen[key]} and {member}"
                        )
                    seen[key] = member
        if kind == RecordKind.GENERATION:
            result.rebalances += 1
        if kind == RecordKind.REVOKE and rec.member_id:
            revokes[rec.member_id] += 1
        if kind in (RecordKind.EXPIRE, RecordKind.LEAVE) and rec.member_id:
            gone[rec.member_id] = kind
        if kind == RecordKind.JOIN:
            # A removed member id stays removed: a member that rejoins after its EXPIRE must
            # do so as a new member id (Kafka: UNKNOWN_MEMBER_ID, then a fresh id), so any
            # later COMMIT under the old id is counted as a zombie commit.
            replaces = JoinPayload.of(rec).replaces
            if replaces:
                gone[str(replaces)] = "replacement (static member restarted)"
        try:
            apply(group, rec)
        except GroupProtocolBug as exc:
            result.double_owned.append(f"{where}: replay refused it: {exc}")
            break
        holders: dict[TopicPartition, str] = {}
        for m in group.members.values():
            for tp in m.held:
                if tp in holders:
                    result.double_owned.append(
                        f"{where}: {tp} held by {holders[tp]} and {m.member_id}"
                    )
                holders[tp] = m.member_id
    result.revokes = dict(revokes)
