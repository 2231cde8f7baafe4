"""Committed offsets of a real Kafka consumer group, through the one Kafka client
(:class:`~spark_kafka_group.kafka.cluster.KafkaCluster`: its AdminClient, its error tracker and
its retry policy).

Used by ``kafka-group export-to-kafka`` / ``import-from-kafka`` and by the source options
``commitToKafka`` (:class:`KafkaOffsetMirror`: after each accepted commit to the group log,
also commit to the Kafka group ``groupId`` so kafka-consumer-groups, Burrow and lag exporters
see the lag) and ``importFromKafkaGroup`` (:func:`seed_from_kafka_group`), both with the
reader's client. The group log stays the source of truth: Kafka only gets a copy.

AdminClient ``alter_consumer_group_offsets`` / ``list_consumer_group_offsets`` (OffsetCommit /
OffsetFetch without a member) work on Kafka and on the embedded Tansu broker. Kafka refuses
to alter the offsets of a group that has active consumers (as ``kafka-consumer-groups
--reset-offsets`` does; Kafka answers UNKNOWN_MEMBER_ID): that is reported naming the group,
its active consumers and the fix. While the group's coordinator is loading or moving (a broker
just started, a coordinator failover) Kafka answers COORDINATOR_LOAD_IN_PROGRESS /
NOT_COORDINATOR; the request is sent again, as Kafka's own clients do. A broker without the
admin form of these APIs falls back to a plain consumer with ``group.id`` (commit/committed).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition

from spark_kafka_group.errors import KafkaGroupError, KafkaGroupOffsetsError
from spark_kafka_group.group.metadata import TopicPartition, partition_name
from spark_kafka_group.kafka.cluster import RESEND_BACKOFF, KafkaCluster
from spark_kafka_group.kafka.config import client_config, error_code, error_text

log = logging.getLogger(__name__)


#: Error codes meaning "this broker does not offer the admin form of the API".
_UNSUPPORTED = frozenset(
    {KafkaError._UNSUPPORTED_FEATURE, KafkaError.UNSUPPORTED_VERSION, KafkaError._NOT_IMPLEMENTED}
)
#: Kafka's answers when the group has live consumers.
_GROUP_ACTIVE = frozenset(
    {KafkaError.UNKNOWN_MEMBER_ID, KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION}
)
#: Kafka's answers while the group's coordinator is loading or moving: send again.
_COORDINATOR_BUSY = frozenset(
    {
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
    }
)


def kafka_group_offsets(
    cluster: KafkaCluster,
    group: str,
    partitions: Iterable[TopicPartition] | None = None,
) -> dict[TopicPartition, int]:
    """The committed offsets of Kafka consumer group ``group``: all of them, or only those
    of ``partitions``. Partitions the group never committed are left out."""
    wanted = (
        None
        if partitions is None
        else sorted({TopicPartition(str(t), int(p)) for t, p in partitions})
    )
    if wanted == []:
        return {}
    request = ConsumerGroupTopicPartitions(
        group, None if wanted is None else [KafkaTopicPartition(t, p) for t, p in wanted]
    )

    def send(timeout_s: float) -> list[Future[Any]]:
        return [
            cluster.admin.list_consumer_group_offsets([request], request_timeout=timeout_s)[group]
        ]

    try:
        _await_coordinator(cluster, group)
        result = _group_request(cluster, "OffsetFetch", send)
    except KafkaException as exc:
        if error_code(exc) in _UNSUPPORTED and wanted is not None:
            return _consumer_committed(cluster, group, wanted)
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
            )
        if tp.offset >= 0:
            out[TopicPartition(tp.topic, tp.partition)] = int(tp.offset)
    return dict(sorted(out.items()))


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

    def send(timeout_s: float) -> list[Future[Any]]:
        futures = cluster.admin.alter_consumer_group_offsets(
            [_alter_request(group, wanted)], request_timeout=timeout_s
        )
        return [futures[group]]

    try:
        result = _group_request(cluster, "OffsetCommit", send)
    except KafkaException as exc:
        code = error_code(exc)
        if code in _UNSUPPORTED:
            return _consumer_commit(cluster, group, wanted)
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


def _await_coordinator(cluster: KafkaCluster, group: str) -> None:
    """Wait until the group's coordinator answers (DescribeGroups, sent again while it is
    loading or moving). librdkafka's AdminClient crashes the whole process when the
    OffsetFetch of ``list_consumer_group_offsets`` is answered NOT_COORDINATOR (it hands the
    retry to a consumer-group handle an AdminClient does not have, a known librdkafka bug in
    every release up to 2.16), which happens on a cluster still creating
    ``__consumer_offsets`` and while a coordinator moves. Asked after this, the coordinator
    is the one that just answered."""

    def send(timeout_s: float) -> list[Future[Any]]:
        return [cluster.admin.describe_consumer_groups([group], request_timeout=timeout_s)[group]]

    try:
        # Named as the request it prepares: a user reads "OffsetFetch: 2 attempt(s)".
        _group_request(cluster, "OffsetFetch", send)
    except KafkaException as exc:
        if error_code(exc) != KafkaError.GROUP_ID_NOT_FOUND:  # an answer of the coordinator
            raise


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
        busy = bool(failed) and all(code in _COORDINATOR_BUSY for _, code, _ in failed)
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


def _alter_request(
    group: str, offsets: Mapping[TopicPartition, int]
) -> ConsumerGroupTopicPartitions:
    return ConsumerGroupTopicPartitions(
        group, [KafkaTopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
    )


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


def _consumer(cluster: KafkaCluster, group: str) -> Any:
    conf = client_config(cluster.bootstrap_servers, cluster.client_conf)
    conf.update({"group.id": group, "enable.auto.commit": False})
    return Consumer(conf)


def _consumer_committed(
    cluster: KafkaCluster, group: str, wanted: list[TopicPartition]
) -> dict[TopicPartition, int]:
    consumer = _consumer(cluster, group)
    try:
        tps = consumer.committed(
            [KafkaTopicPartition(t, p) for t, p in wanted], timeout=cluster.attempt_timeout_s
        )
    except KafkaException as exc:
        raise KafkaGroupOffsetsError(
            f"Reading the committed offsets of Kafka consumer group {group!r} from "
            f"{cluster.bootstrap_servers!r} failed: {error_text(exc)}"
        ) from None
    finally:
        consumer.close()
    return {TopicPartition(tp.topic, tp.partition): int(tp.offset) for tp in tps if tp.offset >= 0}


def _consumer_commit(
    cluster: KafkaCluster, group: str, wanted: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    consumer = _consumer(cluster, group)
    try:
        consumer.commit(
            offsets=[KafkaTopicPartition(t, p, o) for (t, p), o in sorted(wanted.items())],
            asynchronous=False,
        )
    except KafkaException as exc:
        raise _commit_error(
            group, cluster.bootstrap_servers, error_code(exc), error_text(exc)
        ) from None
    finally:
        consumer.close()
    return dict(sorted(wanted.items()))


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

    :meth:`commit` sends an OffsetCommit without waiting and returns at once; the answer is
    checked by a callback. A failure never fails a batch (the group log is the source of
    truth, and it holds the offsets): it is counted in :attr:`failures`, kept in
    :attr:`last_error`, and logged at WARNING naming the Kafka group, the reason and the fix
    at the first failure after a success, then every :data:`LOG_EVERY_FAILURES`; the first
    success after failures is logged too. Kafka refuses the copy while the Kafka group has
    active consumers of its own (UNKNOWN_MEMBER_ID): the copies go on failing, and the query
    goes on, until they stop. Offsets equal to the last ones sent successfully are not sent
    again. Offsets refused while the group's coordinator was loading or moving are sent
    again with the next commit, and once more when the mirror closes, so a run's final
    offsets reach the Kafka group. It sends through ``cluster`` (the reader's client), which
    it does not close.
    """

    LOG_EVERY_FAILURES = 100

    def __init__(self, cluster: KafkaCluster, group: str) -> None:
        self.cluster = cluster
        self.group = group
        self.timeout_s = cluster.attempt_timeout_s
        self._lock = threading.Lock()
        self._sent: dict[TopicPartition, int] = {}
        # Offsets refused while the coordinator was busy: sent again (see the class doc).
        self._busy_refused: dict[TopicPartition, int] = {}
        self._pending = 0
        self._idle = threading.Condition(self._lock)
        self._failures_in_a_row = 0
        #: Commits Kafka accepted / failed (each call counts once).
        self.commits = 0
        self.failures = 0
        self.last_error: str | None = None

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Send ``offsets`` to the Kafka group (never raises, never blocks on the broker)."""
        try:
            with self._lock:
                asked = {
                    TopicPartition(str(t), int(p)): int(o)
                    for (t, p), o in offsets.items()
                    if int(o) >= 0
                }
                fresh = {
                    tp: o
                    for tp, o in {**self._busy_refused, **asked}.items()
                    if self._sent.get(tp) != o
                }
                self._busy_refused.clear()
                if not fresh:
                    return
                futures = self.cluster.admin.alter_consumer_group_offsets(
                    [_alter_request(self.group, fresh)], request_timeout=self.timeout_s
                )
                future = futures[self.group]
                self._pending += 1
            future.add_done_callback(lambda f: self._done(f, fresh))
        except Exception as exc:  # never fail the batch
            self._failed(error_code(exc), error_text(exc))

    def _done(self, future: Future[Any], sent: Mapping[TopicPartition, int]) -> None:
        try:
            self._check(future, sent)
        finally:
            with self._lock:
                self._pending -= 1
                self._idle.notify_all()

    def _check(self, future: Future[Any], sent: Mapping[TopicPartition, int]) -> None:
        failed: list[tuple[int | None, str]]
        try:
            answer = future.result()
            failed = [
                (code, f"{partition_name(*tp)}: {why}")
                for tp, code, why in _partition_errors(answer)
            ]
        except Exception as exc:
            failed = [(error_code(exc), error_text(exc))]
        if failed:
            code = failed[0][0]
            if all(c in _COORDINATOR_BUSY for c, _ in failed):
                with self._lock:
                    # A member's offsets only move forward: never resend one older than what
                    # Kafka already took (answers may come back out of order).
                    for tp, offset in sent.items():
                        if offset > self._sent.get(tp, -1):
                            self._busy_refused[tp] = offset
            self._failed(code, "; ".join(text for _, text in failed))
            return
        with self._lock:
            self._sent.update(sent)
            for tp, offset in sent.items():
                if self._busy_refused.get(tp, -1) <= offset:
                    self._busy_refused.pop(tp, None)
            self.commits += 1
            recovered_after = self._failures_in_a_row
            self._failures_in_a_row = 0
        if recovered_after:
            log.info(
                "commitToKafka: Kafka consumer group %r took the offsets again after %d "
                "failed attempt(s)",
                self.group,
                recovered_after,
            )
        log.debug("commitToKafka: committed %s to Kafka group %s", dict(sent), self.group)

    def _failed(self, code: int | None, reason: str) -> None:
        with self._lock:
            self.failures += 1
            self._failures_in_a_row += 1
            self.last_error = reason
            n = self._failures_in_a_row
        if n == 1 or n % self.LOG_EVERY_FAILURES == 0:
            log.warning(
                "commitToKafka: committing offsets to Kafka consumer group %r on %r failed "
                "(%d failed attempt(s) in a row): %s.%s The query goes on, and the group log "
                "keeps every committed offset.",
                self.group,
                self.cluster.bootstrap_servers,
                n,
                reason,
                _active_group_hint(self.group, code),
            )

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Wait until the commits in flight are answered; True if none is left."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout=timeout_s)

    def close(self) -> None:
        """Wait for the commits in flight, and send once more (waiting for the answer) what
        a busy coordinator refused, so the final offsets reach the Kafka group. The client
        stays open: its owner closes it."""
        self.flush(self.timeout_s)
        with self._lock:
            refused, self._busy_refused = self._busy_refused, {}
        if not refused:
            return
        try:
            commit_to_kafka_group(self.cluster, self.group, refused)
        except Exception as exc:  # never fail the query's end
            self._failed(None, error_text(exc))
            return
        with self._lock:
            self._sent.update(refused)
            self.commits += 1
