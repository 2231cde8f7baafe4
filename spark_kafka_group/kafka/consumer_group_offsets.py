"""Committed offsets of a real Kafka consumer group, through the one Kafka client
(:class:`~spark_kafka_group.kafka.cluster.KafkaCluster`: its clients, its error tracker and
its retry policy).

Used by ``kafka-group export-to-kafka`` / ``import-from-kafka`` and by the source options
``commitToKafka`` (:class:`KafkaOffsetMirror`: after each accepted commit to the group log,
also commit to the Kafka group ``groupId`` so kafka-consumer-groups, Burrow and lag exporters
see the lag) and ``importFromKafkaGroup`` (:func:`seed_from_kafka_group`), both with the
reader's client. The group log stays the source of truth: Kafka only gets a copy.

Reads (OffsetFetch, ``committed()``) and commits (OffsetCommit, ``commit()``) go through the
cluster's Consumer handle for the group
(:meth:`~spark_kafka_group.kafka.cluster.KafkaCluster.group_consumer`), never through the
AdminClient. librdkafka's AdminClient crashes the whole process (SIGSEGV) when the OffsetFetch
of ``list_consumer_group_offsets`` is answered NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE,
which Kafka answers whenever the group's coordinator moves (its broker restarts or shuts down)
and while ``__consumer_offsets`` is being created: it hands the answer to a consumer-group
handle an AdminClient does not have
(tests/integration/test_group_offsets_coordinator_moves.py reproduces it, and fails once a
librdkafka without it is installed). And the AdminClient's ``alter_consumer_group_offsets``
goes on asking a coordinator whose broker died until that broker is back. A Consumer's group
handle looks the coordinator up again when it moves or dies, and the request is sent again.
Kafka refuses to alter the offsets of a group that has active consumers (as
``kafka-consumer-groups --reset-offsets`` does; Kafka answers UNKNOWN_MEMBER_ID): that is
reported naming the group, its active consumers and the fix.

While the group's coordinator is loading or moving Kafka answers COORDINATOR_LOAD_IN_PROGRESS
/ NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE; the request is sent again, as Kafka's own
clients do, for up to one attempt's time (``kafka.default.api.timeout.ms``). Reads ask for
stable offsets (RequireStable): a coordinator that has just taken the group over answers only
once every offset it holds is replicated, so a read never returns offsets older than a
commit Kafka acknowledged; a partition whose offsets an open transaction holds is answered
UNSTABLE_OFFSET_COMMIT, and read again within the same time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition

from spark_kafka_group.errors import KafkaGroupError, KafkaGroupOffsetsError
from spark_kafka_group.group.metadata import TopicPartition, partition_name
from spark_kafka_group.kafka.cluster import RESEND_BACKOFF, KafkaCluster
from spark_kafka_group.kafka.config import error_code, error_text
from spark_kafka_group.kafka.topics import is_internal_topic

log = logging.getLogger(__name__)


#: Kafka's answers when the group has live consumers.
_GROUP_ACTIVE = frozenset(
    {KafkaError.UNKNOWN_MEMBER_ID, KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION}
)
#: Kafka's answers while the group's coordinator is loading or moving (and librdkafka's, while
#: it looks the coordinator up): send again.
_COORDINATOR_BUSY = frozenset(
    {
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError._WAIT_COORD,
    }
)
#: Kafka's answer to a read (OffsetFetch with RequireStable, see
#: KafkaCluster.group_consumer) of a partition whose offsets a transaction still being
#: committed holds: send again, as while the coordinator is busy.
_UNSTABLE = KafkaError.UNSTABLE_OFFSET_COMMIT
_NOT_YET = _COORDINATOR_BUSY | {_UNSTABLE}


def kafka_group_offsets(
    cluster: KafkaCluster,
    group: str,
    partitions: Iterable[TopicPartition] | None = None,
) -> dict[TopicPartition, int]:
    """The committed offsets of Kafka consumer group ``group``: those of every partition of
    the cluster's topics (internal ones aside), or only those of ``partitions``. Partitions
    the group never committed are left out."""
    try:
        wanted = (
            _cluster_partitions(cluster)
            if partitions is None
            else sorted({TopicPartition(str(t), int(p)) for t, p in partitions})
        )
        if not wanted:
            return {}
        consumer = cluster.group_consumer(group)
        asked = [KafkaTopicPartition(t, p) for t, p in wanted]

        def send(timeout_s: float) -> list[Future[Any]]:
            # committed() waits (at most timeout_s) while its group handle finds the
            # coordinator; what it raises (a timeout, NOT_COORDINATOR ...) cluster.request
            # handles as any failed send.
            consumer.poll(0)  # serve error_cb: the cluster's error tracker
            answer: Future[Any] = Future()
            answer.set_result(
                ConsumerGroupTopicPartitions(group, consumer.committed(asked, timeout=timeout_s))
            )
            return [answer]

        result = _group_request(cluster, "OffsetFetch", send)
    except KafkaException as exc:
        raise KafkaGroupOffsetsError(
            f"Reading the committed offsets of Kafka consumer group {group!r} from "
            f"{cluster.bootstrap_servers!r} failed: {error_text(exc)}"
        ) from None
    out: dict[TopicPartition, int] = {}
    for tp in result.topic_partitions or []:
        if tp.error is not None and tp.error.code() != KafkaError.NO_ERROR:
            if tp.error.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
                continue
            raise KafkaGroupOffsetsError(
                f"Kafka consumer group {group!r}: reading the offset of {tp.topic}-"
                f"{tp.partition} failed: {tp.error.str()}"
                + (_unstable_hint(cluster) if tp.error.code() == _UNSTABLE else "")
            )
        if tp.offset >= 0:
            out[TopicPartition(tp.topic, tp.partition)] = int(tp.offset)
    return dict(sorted(out.items()))


def _unstable_hint(cluster: KafkaCluster) -> str:
    """What an UNSTABLE_OFFSET_COMMIT that lasted a whole attempt means, and the fix."""
    return (
        f" (for {cluster.attempt_timeout_s:g}s). A transaction that commits offsets to this "
        "group (a transactional producer's sendOffsetsToTransaction) is still open, and "
        "Kafka gives the offsets it will replace only once it ends. Let that producer commit "
        "or abort it (Kafka aborts it after the producer's transaction.timeout.ms), then run "
        "again."
    )


def _cluster_partitions(cluster: KafkaCluster) -> list[TopicPartition]:
    """Every partition of the cluster's topics, internal ones aside: what "all the group's
    offsets" is asked for (a Consumer asks for named partitions only)."""
    return sorted(
        TopicPartition(name, int(p))
        for name, meta in cluster.metadata().topics.items()
        if not is_internal_topic(name) and (meta.error is None or meta.partitions)
        for p in meta.partitions
    )


def commit_to_kafka_group(
    cluster: KafkaCluster,
    group: str,
    offsets: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """Set the committed offsets of Kafka consumer group ``group`` (waits for the answer);
    returns what was committed. Raises :class:`KafkaGroupOffsetsError` naming the failures."""
    wanted = {
        TopicPartition(str(t), int(p)): int(o) for (t, p), o in offsets.items() if int(o) >= 0
    }
    if not wanted:
        return {}
    consumer = cluster.group_consumer(group)
    sent = [KafkaTopicPartition(t, p, o) for (t, p), o in sorted(wanted.items())]

    def send(timeout_s: float) -> list[Future[Any]]:
        # A synchronous commit waits for a coordinator at most SEND_TIMEOUT_S (the handle's
        # session.timeout.ms, see KafkaCluster.group_consumer), then raises _WAIT_COORD.
        consumer.poll(0)  # serve error_cb: the cluster's error tracker
        answer: Future[Any] = Future()
        taken = consumer.commit(offsets=sent, asynchronous=False)
        answer.set_result(ConsumerGroupTopicPartitions(group, taken))
        return [answer]

    try:
        result = _group_request(cluster, "OffsetCommit", send)
    except KafkaException as exc:
        code = error_code(exc)
        raise _commit_error(group, cluster.bootstrap_servers, code, error_text(exc)) from None
    failed = _partition_errors(result)
    if failed:
        text = "; ".join(f"{partition_name(*tp)}: {why}" for tp, _, why in failed)
        raise _commit_error(group, cluster.bootstrap_servers, failed[0][1], text)
    return dict(sorted(wanted.items()))


def _partition_errors(result: Any) -> list[tuple[TopicPartition, int, str]]:
    """The partitions of an OffsetCommit / OffsetFetch answer that failed: (partition, error
    code, the broker's words)."""
    return [
        (TopicPartition(tp.topic, tp.partition), int(tp.error.code()), str(tp.error.str()))
        for tp in getattr(result, "topic_partitions", None) or []
        if tp.error is not None and tp.error.code() != KafkaError.NO_ERROR
    ]


def _group_request(
    cluster: KafkaCluster, what: str, send: Callable[[float], Sequence[Future[Any]]]
) -> Any:
    """The one answer of a group request (``cluster.request``), sent again while Kafka says
    the group's coordinator is loading or moving, whether for the whole request or for every
    failed partition, for up to one attempt's time (``cluster.attempt_timeout_s``). Then the
    last answer is returned (or its exception raised) for the caller to explain."""

    def on_error(exc: BaseException, code: int) -> None:
        if code not in _COORDINATOR_BUSY:
            raise exc
        # returning makes cluster.request send again after a pause, within its attempt

    started_ms = cluster.clock.monotonic_ms()
    busy_answers = 0
    while True:
        [result] = cluster.request(what, send, on_error=on_error)
        failed = _partition_errors(result)
        busy = bool(failed) and all(code in _NOT_YET for _, code, _ in failed)
        elapsed_s = (cluster.clock.monotonic_ms() - started_ms) / 1000
        if not busy or elapsed_s >= cluster.attempt_timeout_s:
            return result
        busy_answers += 1
        log.debug(
            "%s: the coordinator of the Kafka group is busy (%s); sending again",
            what,
            failed[0][2],
        )
        cluster.clock.sleep(RESEND_BACKOFF.delay_s(busy_answers))


def _commit_error(group: str, servers: str, code: int | None, text: str) -> KafkaGroupError:
    return KafkaGroupOffsetsError(
        f"Committing offsets to Kafka consumer group {group!r} on {servers!r} failed: "
        f"{text}.{_active_group_hint(group, code)}"
    )


def _active_group_hint(group: str, code: int | None) -> str:
    """What to do when Kafka refused a commit because ``group`` has active consumers."""
    if code not in _GROUP_ACTIVE:
        return ""
    return (
        f" Kafka consumer group {group!r} has active consumers (see kafka-consumer-groups "
        f"--describe --group {group} --members), and Kafka lets an admin set the offsets of "
        "an empty group only. Stop those consumers, or copy the offsets to a Kafka group "
        "that no Kafka consumer application uses (commitToKafka copies to the query's "
        "groupId; export-to-kafka to --kafka-group)."
    )


def seed_from_kafka_group(
    committed: Mapping[TopicPartition, int],
    partitions: Iterable[TopicPartition],
    *,
    cluster: KafkaCluster,
    kafka_group: str | None,
) -> dict[TopicPartition, int]:
    """``committed`` plus, for ``partitions`` it lacks, the Kafka group's committed offsets
    (the ``importFromKafkaGroup`` option; the group log always wins)."""
    out = dict(committed)
    missing = sorted(tp for tp in partitions if tp not in out)
    if not kafka_group or not missing:
        return out
    imported = kafka_group_offsets(cluster, kafka_group, missing)
    for tp, offset in imported.items():
        log.info(
            "%s: no committed offset in the group log; starting at %d, the committed "
            "offset of Kafka consumer group %r (importFromKafkaGroup)",
            partition_name(*tp),
            offset,
            kafka_group,
        )
    out.update(imported)
    return out


class KafkaOffsetMirror:
    """``commitToKafka``: copy accepted commits to the Kafka consumer group, best effort.

    :meth:`commit` hands the offsets to the mirror's sender thread and returns at once. The
    thread commits them with :func:`commit_to_kafka_group` (through the group's Consumer
    handle, which follows a coordinator that moves, sent again within the cluster's budget),
    the newest offsets only: offsets handed over while a commit is under way are merged, and
    the next commit takes them all. Offsets equal to the last ones Kafka took are not sent
    again. A failure never fails a batch (the group log is the source of truth, and it holds
    the offsets): it is counted in :attr:`failures`, kept in :attr:`last_error`, and logged at
    WARNING naming the Kafka group, the reason and the fix at the first failure after a
    success, then every :data:`LOG_EVERY_FAILURES`; the first success after failures is
    logged too. Kafka refuses the copy while the Kafka group has active consumers of its own
    (UNKNOWN_MEMBER_ID): the copies go on failing, and the query goes on, until they stop.
    Offsets a failed commit did not get into Kafka are sent again with the next commit, and
    once more when the mirror closes, so a run's final offsets reach the Kafka group. It
    sends through ``cluster`` (the reader's client), which it does not close.
    """

    LOG_EVERY_FAILURES = 100

    def __init__(self, cluster: KafkaCluster, group: str) -> None:
        self.cluster = cluster
        self.group = group
        self._state = threading.Condition()
        # Guarded by _state: the newest offsets handed over, those Kafka took, whether
        # offsets were handed over since the last send, whether a send is under way.
        self._wanted: dict[TopicPartition, int] = {}
        self._taken: dict[TopicPartition, int] = {}
        self._due = False
        self._sending = False
        self._closing = False
        self._failures_in_a_row = 0
        #: Commits Kafka accepted / failed (each send counts once).
        self.commits = 0
        self.failures = 0
        self.last_error: str | None = None
        self._sender = threading.Thread(
            target=self._send_loop, name=f"commitToKafka-{group}", daemon=True
        )
        self._sender.start()

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Hand ``offsets`` to the sender (never raises, never blocks on the broker)."""
        try:
            asked = {
                TopicPartition(str(t), int(p)): int(o)
                for (t, p), o in offsets.items()
                if int(o) >= 0
            }
        except Exception as exc:  # never fail the batch
            self._failed(error_text(exc))
            return
        with self._state:
            if self._closing:
                return
            self._wanted.update(asked)
            self._due = True
            self._state.notify_all()

    def _send_loop(self) -> None:
        while True:
            with self._state:
                self._state.wait_for(lambda: self._due or self._closing)
                closing = self._closing  # then this send is the last one
                fresh = {tp: o for tp, o in self._wanted.items() if self._taken.get(tp) != o}
                self._due = False
                self._sending = bool(fresh)
                self._state.notify_all()  # flush() may be waiting for this
            if fresh:
                self._send(fresh)
                with self._state:
                    self._sending = False
                    self._state.notify_all()
            if closing:
                return

    def _send(self, fresh: Mapping[TopicPartition, int]) -> None:
        try:
            commit_to_kafka_group(self.cluster, self.group, fresh)
        except Exception as exc:  # never fail the query
            self._failed(error_text(exc))  # a refusal's text names the fix already
            return
        with self._state:
            self._taken.update(fresh)
            self.commits += 1
            recovered_after, self._failures_in_a_row = self._failures_in_a_row, 0
        if recovered_after:
            log.info(
                "commitToKafka: Kafka consumer group %r took the offsets again after %d "
                "failed attempt(s)",
                self.group,
                recovered_after,
            )
        log.debug("commitToKafka: committed %s to Kafka group %s", dict(fresh), self.group)

    def _failed(self, reason: str) -> None:
        with self._state:
            self.failures += 1
            self._failures_in_a_row += 1
            self.last_error = reason
            n = self._failures_in_a_row
        if n == 1 or n % self.LOG_EVERY_FAILURES == 0:
            log.warning(
                "commitToKafka: committing offsets to Kafka consumer group %r on %r failed "
                "(%d failed attempt(s) in a row): %s The query goes on, and the group log "
                "keeps every committed offset.",
                self.group,
                self.cluster.bootstrap_servers,
                n,
                reason,
            )

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until the offsets handed over have been sent (taken or failed); True if
        nothing is left to send."""
        with self._state:
            return self._state.wait_for(
                lambda: not self._due and not self._sending, timeout=timeout_s
            )

    def close(self) -> None:
        """Send what Kafka has not taken yet (waiting for the answer, within the cluster's
        budget), so the final offsets reach the Kafka group, and stop the sender. The client
        stays open: its owner closes it."""
        with self._state:
            self._closing = True
            self._state.notify_all()
        self._sender.join()
