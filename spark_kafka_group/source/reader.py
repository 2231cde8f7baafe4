"""The streaming reader: Spark's micro-batch calls mapped onto the group member and the fetcher.

Lives in Spark's long-lived streaming-source Python process on the driver (one per query);
the group member and its heartbeat thread live here too. ``read()`` runs on executors and
only uses the pickled :class:`KafkaInputPartition` (docs/design.md, "The shape"
and "Spark facts that shape the reader").

Per trigger (``latestOffset``):

1. Commit the offsets of the batch that just completed (``start``; idempotent) and release
   partitions being revoked whose last batch is now complete (cooperative rebalancing). The
   member's heartbeat thread releases them earlier when the progress listener already
   committed that batch (``GroupMember.begin_batch``).
2. Ask the member for its holdings as its step last published them (no read of the group
   log; during a rebalance this wakes the step).
3. Positions: partitions continuously owned since ``start`` keep Spark's position; others
   start from the group's committed offset, else ``startingOffsets``
   (:mod:`spark_kafka_group.source.positions`).
4. End offsets: the high watermarks, bounded by the read limit (records, or bytes through
   the sampled sizes of :mod:`spark_kafka_group.source.record_sizes`) and, under
   Trigger.AvailableNow, by the targets fixed when the query started.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from spark_kafka_group.errors import KafkaGroupError, TopicNotFoundError
from spark_kafka_group.fetcher import fetch
from spark_kafka_group.group.metadata import TopicPartition, partition_name
from spark_kafka_group.group.offsets import fence
from spark_kafka_group.group.timer import Clock, SystemClock
from spark_kafka_group.kafka.consumer_group_offsets import seed_from_kafka_group
from spark_kafka_group.options import SourceOptions
from spark_kafka_group.sink.takeover import BatchEnd, PlannedBatch, batch_end
from spark_kafka_group.source.input_partition import KafkaInputPartition, input_partitions
from spark_kafka_group.source.lifecycle import stop_on_process_end
from spark_kafka_group.source.offsets import SourceOffset
from spark_kafka_group.source.planning import (
    OffsetRange,
    TriggerMinimum,
    limit_end_offsets,
    records_within_bytes,
)
from spark_kafka_group.source.positions import (
    DeletedTopics,
    LogBounds,
    PartitionsAtStart,
    check_in_range,
    initial_positions,
    known_at_start,
    skip_vanished,
)
from spark_kafka_group.source.pyspark_features import (
    HAS_ADMISSION_CONTROL,
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from spark_kafka_group.source.record_sizes import RecordSizes, sample_record_bytes
from spark_kafka_group.source.subscription import subscription_partitions
from spark_kafka_group.source.timestamps import offsets_for_timestamps

if TYPE_CHECKING:  # the member is imported only where the driver starts it
    from spark_kafka_group.kafka.cluster import KafkaCluster
    from spark_kafka_group.kafka.consumer_group_offsets import KafkaOffsetMirror
    from spark_kafka_group.member import Holdings, Member
    from spark_kafka_group.sink.spark_delta import SinkBatches

log = logging.getLogger(__name__)


class KafkaGroupStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions, *, clock: Clock | None = None) -> None:
        """``clock``: what the reader's waits count on (``maxTriggerDelay``; tests inject a
        manual one)."""
        self._init(options, clock or SystemClock())

    # Spark pickles the reader to run ``read()`` on executors: only the options travel.
    def __getstate__(self) -> dict[str, Any]:
        return {"options": self._opts}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._init(state["options"], SystemClock())

    def _init(self, options: SourceOptions, clock: Clock) -> None:
        self._opts = options
        self._clock = clock
        # Spark calls the reader on one thread (its planning thread); only stop() may also
        # come from another (lifecycle.py, at the process's end): it sets this first.
        self._stopped = False
        self._cluster: KafkaCluster | None = None
        self._member: Member | None = None
        # Trigger.AvailableNow: the offsets to stop at, fixed at the first plan after the join
        # completed (and for partitions assigned later, when first seen).
        self._targets: dict[TopicPartition, int] | None = None
        self._latest_seen: dict[TopicPartition, int] = {}
        # The last offset handed to Spark: where the next batch continues from when Spark
        # does not pass it back (pyspark < 4.2). Which batches are in flight, the member
        # knows (``member.in_flight``).
        self._last_planned: SourceOffset | None = None
        # The query's initial offset, fixed by the first plan: Spark may ask for it again
        # after planning from it (pyspark 4.0 and 4.1 ask while running the first batch).
        self._initial: SourceOffset | None = None
        self._reported_lag: int | None = None
        # commitToKafka: copies accepted commits to the Kafka consumer group (best effort).
        self._kafka_mirror: KafkaOffsetMirror | None = None
        # deltaSinkTable: the batch plans written before Spark runs a batch, and what a
        # partition's previous owner landed in the table (sink/spark_delta.py).
        self._sink_batches: SinkBatches | None = None
        self._at_start = PartitionsAtStart()  # startingOffsets applies to these only
        self._deleted = DeletedTopics()
        self._minimum = (
            None
            if options.min_offsets_per_trigger is None
            else TriggerMinimum(options.min_offsets_per_trigger, options.max_trigger_delay_ms)
        )
        self._record_sizes = RecordSizes(sample=partial(sample_record_bytes, options))

    # -- lazily created driver-side parts (never in __init__: Spark also builds readers in
    #    short-lived workers that must not join the group) --------------------------------

    def _ensure_started(self, *, previous_member: str | None = None) -> Member:
        """The started member. ``previous_member``: the member id in the checkpointed offsets
        of a restarted query; the new member takes its place in the group at once."""
        if self._member is None:
            if self._stopped:
                raise KafkaGroupError(
                    f"The reader of group {self._opts.group.group_id!r} was stopped (its query "
                    "or its streaming-source process ended); restart the query to read again."
                )
            from spark_kafka_group.kafka.cluster import cluster_for_source
            from spark_kafka_group.member import member_for_source

            self._cluster = cluster_for_source(self._opts)
            if self._opts.delta_sink_table is not None:
                from spark_kafka_group.sink.spark_delta import SinkBatches

                self._sink_batches = SinkBatches(
                    self._opts.delta_sink_table,
                    store=self._opts.group.store,
                    group_id=self._opts.group.group_id,
                    storage_options=self._opts.group.storage_options,
                )
            current = subscription_partitions(self._cluster, self._opts)
            self._member = member = member_for_source(self._opts, self._cluster)
            # Before the join: what the group knew while this query (or all its members) was
            # stopped, so a partition created meanwhile counts as discovered.
            self._at_start.record(
                known_at_start(
                    current,
                    member.group_metadata(),
                    pattern=self._opts.subscribe_pattern is not None,
                )
            )
            stop_on_process_end(self.stop)
            # Trigger.AvailableNow reads only what it is assigned: it must complete its join
            # first. pyspark < 4.2 does not tell the source it runs AvailableNow (it runs one
            # batch from the first latestOffset), so there every query completes its join.
            must_complete_join = self._targets is not None or not HAS_ADMISSION_CONTROL
            holdings = member.start(replaces=previous_member, must_complete_join=must_complete_join)
            if must_complete_join and holdings.settled and not holdings.held:
                log.info(
                    "group %s: member %s holds no partition: the group's other live members "
                    "hold every subscribed partition, so this run reads nothing",
                    self._opts.group.group_id, holdings.member_id,
                )  # fmt: skip
            if self._opts.commit_to_kafka:
                from spark_kafka_group.kafka.consumer_group_offsets import KafkaOffsetMirror

                # Through the reader's own Kafka client, as importFromKafkaGroup.
                self._kafka_mirror = KafkaOffsetMirror(self._cluster, self._opts.group.group_id)
                # Every commit the group log accepts for this member is copied, whichever
                # path wrote it (its commit object's fold, a release, its LEAVE, the
                # progress listener), once it is durable there.
                member.on_durable = self._kafka_mirror.commit
        return self._member

    # -- Spark API ------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        """The positions the query starts from, computed once. Spark asks before the first
        batch, or (pyspark 4.0 and 4.1, the first batch planned by ``latestOffset()``) while
        running it: the answer must not move where the next batch continues from."""
        if self._initial is None:
            member = self._ensure_started()
            holdings = member.current_holdings()  # start() has just stepped it
            positions = self._positions_for_new(member, holdings.held, bounds=None)
            self._initial = self._starting_at(holdings, positions)
        if self._last_planned is None:
            self._last_planned = self._initial
        return self._initial.to_json()

    def _starting_at(
        self, holdings: Holdings, positions: Mapping[TopicPartition, int]
    ) -> SourceOffset:
        # Every position is a start (a reset by policy below the group's offset among them):
        # the first batch carries it on, so that whoever commits that batch, the progress
        # listener included, knows where it began.
        return SourceOffset(
            group=self._opts.group.group_id,
            store=self._opts.group.store,
            generation=holdings.generation,
            member=holdings.member_id,
            offsets=positions,
            starts=positions,
        )

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        done = SourceOffset.from_json(start) if start is not None else None
        member = self._ensure_started(previous_member=done.member if done else None)
        # As folded by the member's background step: a trigger never reads the group log.
        holdings = member.current_holdings()
        if done is not None:
            # A restarted query: keep its checkpointed positions where still valid.
            member.resume_checkpoint(done.member, done.generation, done.offsets)
            # pyspark >= 4.2: ``start`` is the end of the last completed batch and no other
            # batch is in flight, so every partition being revoked can be released now.
            holdings = self._commit_completed(
                member, done, batch_running=False, revoking=holdings.revoking
            )
        previous = done if done is not None else self._last_planned
        planned = sorted(holdings.held - holdings.revoking)
        bounds = self._bounds(planned)
        planned = [tp for tp in planned if tp in bounds.latest]  # see skip_vanished
        if previous is not None and (dropped := set(previous.offsets) - set(planned)):
            self._deleted.check(
                dropped,
                existing=self._topic_counts(),
                fail_on_data_loss=self._opts.fail_on_data_loss,
            )

        # A partition held since the previous batch's generation continues from its end.
        continued = (
            {}
            if previous is None
            else fence(holdings.held_since, previous.offsets, previous.generation)
        )
        kept = {tp: continued[tp] for tp in planned if tp in continued}
        new = [tp for tp in planned if tp not in continued]
        checked = check_in_range(
            kept,
            bounds=bounds,
            fail_on_data_loss=self._opts.fail_on_data_loss,
            source="checkpointed position",
        )
        moved = {tp: p for tp, p in checked.items() if p != kept[tp]}  # failOnDataLoss=false
        kept = checked
        starts = {**moved, **self._positions_for_new(member, new, bounds=bounds)}
        positions = {**kept, **starts}
        if previous is None and self._initial is None:
            self._initial = self._starting_at(holdings, positions)  # planned before asked

        latest = dict(bounds.latest)
        if self._targets is not None:
            fixed = {tp: latest[tp] for tp in planned if tp not in self._targets}
            if fixed:
                log.info("Trigger.AvailableNow: reading up to %s", _describe(fixed))
                self._targets.update(fixed)
            for tp in planned:
                latest[tp] = min(latest[tp], self._targets[tp])
        self._log_lag(positions, bounds.latest)
        if self._waits_for_minimum(positions, latest) and previous is not None:
            return start if start is not None else previous.to_json()
        ends = limit_end_offsets(positions, latest, self._max_records(limit, positions, latest))
        # Claim the batch's partitions: from now on a revocation waits for this batch's
        # commit. One released since the poll above (by the heartbeat thread, its last
        # batch committed) is left out: its new owner may already be reading it.
        ours = member.begin_batch(ends, batch_generation=holdings.generation)
        ends = {tp: e for tp, e in ends.items() if tp in ours}
        fresh = bool(starts)
        starts = {**_carried_starts(previous, kept), **starts}
        starts = {tp: s for tp, s in starts.items() if tp in ours}
        end = SourceOffset(
            group=self._opts.group.group_id,
            store=self._opts.group.store,
            generation=holdings.generation,
            member=holdings.member_id,
            offsets=ends,
            starts=starts,
            sink_batches=self._sink_batches is not None,
        )
        if previous is not None and not fresh and _same_position(end, previous):
            # Nothing new: hand back the previous offset unchanged, so Spark plans no batch.
            return start if start is not None else previous.to_json()
        if self._sink_batches is not None:
            # Durable before Spark runs the batch: a new owner of these partitions can tell
            # from the table whether it landed.
            self._sink_batches.record(_planned(previous, end))
        self._last_planned = end
        return end.to_json()

    def getDefaultReadLimit(self) -> ReadLimit:
        # Spark's Python sources take one read limit: with both options the record limit goes
        # to Spark and the byte limit is applied here too (_max_records).
        if self._opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self._opts.max_offsets_per_trigger)
        if self._opts.max_bytes_per_trigger is not None:
            return ReadMaxBytes(self._opts.max_bytes_per_trigger)
        return ReadAllAvailable()

    def reportLatestOffset(self) -> dict | None:
        if not self._latest_seen:
            return None
        last = self._last_planned
        return SourceOffset(
            group=self._opts.group.group_id,
            store=self._opts.group.store,
            generation=last.generation if last else -1,
            member=last.member if last else "",
            offsets=self._latest_seen,
        ).to_json()

    def prepareForTriggerAvailableNow(self) -> None:
        # The join happens at the first plan, which knows a restarted query's previous member
        # (from the checkpoint); the targets are fixed then, once the join has completed.
        self._targets = {}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        previous, current = SourceOffset.from_json(start), SourceOffset.from_json(end)
        ours = self._partitions_still_ours(previous, current)
        ranges: list[OffsetRange] = []
        for tp, until in sorted(current.offsets.items()):
            begin = current.start_of(tp, previous)
            if begin is None:
                begin = until
            if tp not in ours and until > begin:
                # Not held now, or held again only since after the batch was planned (lost
                # and regained meanwhile: its new position comes from the group's commit).
                log.warning(
                    "Skipping %s [%d, %d) of a replayed batch: this member no longer owns "
                    "it; its new owner starts from the group's committed offset.",
                    partition_name(*tp),
                    begin,
                    until,
                )
                continue
            ranges.append(OffsetRange(tp[0], tp[1], begin, until))
        return input_partitions(self._opts, ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaInputPartition)
        yield from fetch(*partition.specs)

    def commit(self, end: dict) -> None:
        member = self._member
        if member is not None:
            # The holdings as last stepped (latestOffset and the background thread step
            # the protocol): commit() records the batch and does not wait on the group log.
            self._commit_completed(
                member,
                SourceOffset.from_json(end),
                batch_running=True,
                revoking=member.holdings.revoking,
            )

    def stop(self) -> None:
        """The query ended: a dynamic member commits and leaves. Spark calls this at the end
        of the streaming-source process on some versions; :mod:`.lifecycle` calls it on the
        others (SIGTERM, interpreter exit), on a thread of their own while a Spark call may
        be under way. Idempotent."""
        self._stopped = True  # first: no member starts after this
        member = self._member
        if member is not None:
            member.close()  # thread-safe; it also ends a join wait under way
            if self._kafka_mirror is not None:
                self._kafka_mirror.close()  # the final commit's copy is sent before the end
        self._member = None
        cluster, self._cluster = self._cluster, None
        if cluster is not None:
            cluster.close()

    # -- helpers --------------------------------------------------------------------------

    def _commit_completed(
        self,
        member: Member,
        done: SourceOffset,
        *,
        batch_running: bool,
        revoking: frozenset[TopicPartition],
    ) -> Holdings:
        """Commit a completed batch's end offsets (idempotent) and release the partitions being
        revoked (``revoking``, from the caller's fresh holdings) that no batch still in
        flight reads: their final offsets are committed now. ``batch_running``: the last
        batch handed to Spark may still run (Spark's ``commit`` of the batch before it).
        The holdings after it."""
        in_flight = member.in_flight
        release = {tp for tp in revoking if not (batch_running and in_flight.reads_last(tp))}
        holdings = member.commit(
            done.offsets,
            batch_generation=done.generation,
            batch_member=done.member,
            release=release,
        )
        return holdings

    def _partitions_still_ours(
        self, previous: SourceOffset, batch: SourceOffset
    ) -> frozenset[TopicPartition]:
        """Partitions of ``batch`` this member may still read: held now, and continuously
        since the generation the batch was planned in. The member counts them as in flight
        from now on (a revocation waits for their commit). A restarted reader's first call
        also fixes where its next batch continues: the end of ``batch``."""
        # A restarted query replays its last planned batch before any latestOffset call:
        # join first, so partitions that moved to another member meanwhile are skipped.
        member = self._ensure_started(previous_member=batch.member)
        member.resume_checkpoint(
            batch.member,
            batch.generation,
            {tp: batch.start_of(tp, previous) or 0 for tp in batch.offsets},
        )
        if self._last_planned is None:
            # The checkpoint's last batch, before this reader planned any: where the next
            # batch continues (pyspark < 4.2 passes no ``start`` to latestOffset), rather
            # than the group's commit, which may not hold that batch's end yet.
            self._last_planned = batch
        return member.begin_batch(batch.offsets, batch_generation=batch.generation)

    def _started_cluster(self) -> KafkaCluster:
        # Only planning uses it, after _ensure_started (stop() ends planning).
        assert self._cluster is not None, "the reader plans only once its member started"
        return self._cluster

    def _topic_counts(self) -> dict[str, int]:
        """Partition count of every topic in the cluster now."""
        metadata = self._started_cluster().metadata()
        return {t: len(m.partitions) for t, m in metadata.topics.items()}

    def _bounds(self, partitions: Sequence[TopicPartition]) -> LogBounds:
        """Log bounds of ``partitions``; of those whose topic was just deleted, none
        (failOnDataLoss=false) or the error naming them (:func:`skip_vanished`)."""
        cluster = self._started_cluster()
        try:
            earliest, latest = cluster.earliest_and_latest_offsets(partitions)
        except TopicNotFoundError as exc:
            present = skip_vanished(
                partitions, existing=self._topic_counts(),
                fail_on_data_loss=self._opts.fail_on_data_loss,
                error=exc,
            )  # fmt: skip
            earliest, latest = cluster.earliest_and_latest_offsets(present)
        self._latest_seen.update(latest)
        return LogBounds(earliest=earliest, latest=latest)

    def _positions_for_new(
        self,
        member: Member,
        partitions: Sequence[TopicPartition] | frozenset[TopicPartition],
        *,
        bounds: LogBounds | None,
    ) -> dict[TopicPartition, int]:
        if not partitions:
            return {}
        partitions = sorted(partitions)
        bounds = bounds or self._bounds(partitions)
        committed = seed_from_kafka_group(
            member.committed_offsets(),
            partitions,
            cluster=self._started_cluster(),
            kafka_group=self._opts.import_from_kafka_group,
        )
        from_group = {tp: committed[tp] for tp in partitions if tp in committed}
        checked = check_in_range(
            from_group,
            bounds=bounds,
            fail_on_data_loss=self._opts.fail_on_data_loss,
            source=f"committed offset of group {self._opts.group.group_id!r}",
        )
        positions = initial_positions(
            partitions,
            committed=checked,
            starting=self._opts.starting_offsets,
            bounds=bounds,
            group_id=self._opts.group.group_id,
            discovered=self._at_start.discovered(partitions),
            at_timestamps=lambda ts: offsets_for_timestamps(
                self._started_cluster(), ts, bounds=bounds
            ),
        )
        explicit = {tp: p for tp, p in positions.items() if tp not in checked}
        positions.update(
            check_in_range(
                explicit,
                bounds=bounds,
                fail_on_data_loss=self._opts.fail_on_data_loss,
                source="startingOffsets position",
            )
        )
        if self._sink_batches is not None:
            # Past what a previous owner that died before its group commit landed in the table.
            positions = self._sink_batches.positions(
                member.current_holdings().member_id, positions,
                committed=committed, members=member.group_members(),
            )  # fmt: skip
        discovered = self._at_start.discovered(partitions)
        for tp in partitions:
            origin = "committed offset" if tp in checked else "startingOffsets"
            if tp in discovered and tp not in checked:
                origin = "new since the query or the group last started: earliest"
            log.info("%s starts at %d (%s)", partition_name(*tp), positions[tp], origin)
        return positions

    def _log_lag(
        self, positions: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]
    ) -> None:
        """The member's lag: at DEBUG every trigger, at INFO when it changed a lot."""
        lag = sum(max(0, latest[tp] - position) for tp, position in positions.items())
        log.debug("group %s lag %d over %d partition(s)", self._opts.group.group_id, lag,
                  len(positions))  # fmt: skip
        before = self._reported_lag
        if before is None or abs(lag - before) > max(1000, before // 2):
            self._reported_lag = lag
            log.info(
                "group %s: lag %d records over %d partition(s) (was %s)",
                self._opts.group.group_id, lag, len(positions),
                "unknown" if before is None else before,
            )  # fmt: skip

    def _waits_for_minimum(
        self, positions: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]
    ) -> bool:
        """minOffsetsPerTrigger / maxTriggerDelay (not under Trigger.AvailableNow, which must
        reach its targets): whether this trigger plans no batch."""
        if self._minimum is None or self._targets is not None:
            return False
        available = sum(max(0, latest[tp] - position) for tp, position in positions.items())
        return self._minimum.hold(available, now_ms=self._clock.monotonic_ms())

    def _max_records(
        self,
        limit: ReadLimit | None,
        positions: Mapping[TopicPartition, int],
        latest: Mapping[TopicPartition, int],
    ) -> int | None:
        """The records this batch may take: Spark's read limit, or the options (pyspark < 4.2)."""
        max_records = self._opts.max_offsets_per_trigger
        max_bytes = self._opts.max_bytes_per_trigger
        if limit is not None:  # pyspark >= 4.2: Spark's read limit
            if isinstance(limit, ReadMaxRows):
                max_records = int(limit.max_rows)  # a byte limit from the options stays
            elif isinstance(limit, ReadMaxBytes):
                max_records, max_bytes = None, int(limit.max_bytes)
            else:  # ReadAllAvailable
                max_records = max_bytes = None
        if max_bytes is None:
            return max_records
        ranges = {tp: (p, latest[tp]) for tp, p in positions.items()}
        sizes = self._record_sizes.of(ranges, now_ms=self._clock.monotonic_ms())
        backlog = {tp: max(0, end - start) for tp, (start, end) in ranges.items()}
        within = records_within_bytes(backlog, sizes, max_bytes)
        return within if max_records is None else min(within, max_records)


def _carried_starts(
    previous: SourceOffset | None, kept: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """The starts of ``previous`` that the next batch still begins at: a partition that
    offset started (the initial offset's positions; a new or reset partition of a batch) and
    that nothing was read of since. The next batch is then known to start there too, so a
    commit of its end, by the member or the progress listener, is marked as a rewind where that
    start lies below the group's committed offset (a reset by policy)."""
    if previous is None:
        return {}
    return {tp: s for tp, s in previous.starts.items() if kept.get(tp) == s}


def _planned(previous: SourceOffset | None, end: SourceOffset) -> PlannedBatch:
    """The plan of the batch ending at ``end`` (``previous``: the end of the one it continues)."""
    after = BatchEnd(-1, "", {}) if previous is None else batch_end(previous)
    return PlannedBatch(
        after=after,
        end=batch_end(end),
        starts=dict(end.starts),
    )


def _same_position(a: SourceOffset, b: SourceOffset) -> bool:
    return (
        a.generation == b.generation and a.member == b.member and dict(a.offsets) == dict(b.offsets)
    )


def _describe(offsets: Mapping[TopicPartition, int]) -> str:
    return (
        ", ".join(f"{partition_name(t, p)}@{o}" for (t, p), o in sorted(offsets.items()))
        or "(nothing)"
    )
