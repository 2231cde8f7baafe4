"""Offsets for timestamps: ListOffsets by timestamp, checked against the records themselves.

``startingTimestamp`` / ``startingOffsetsByTimestamp`` / ``endingTimestamp`` ... ask for the
first offset whose record timestamp is at or after a time. Kafka answers that with ListOffsets
(confluent-kafka ``offsets_for_times``), but not every broker answers it right: Tansu answers
offset 0 for every timestamp, even one after the last record. So each answer is checked with
at most two single-record reads (the record at the answer must be at or after the time, the one
before it before the time); a wrong answer is replaced by a binary search over the partition's
record timestamps, O(log n) single-record reads, and logged once per cluster.

The search assumes timestamps do not decrease with the offset (CreateTime set by well-behaved
producers, or LogAppendTime), which is also what ListOffsets' time index assumes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from spark_kafka_group.errors import KafkaGroupError
from spark_kafka_group.group.metadata import TopicPartition, partition_name
from spark_kafka_group.kafka.config import client_config
from spark_kafka_group.source.positions import LogBounds

log = logging.getLogger(__name__)

#: ``(offset, timestamp ms)`` of the first record at or after an offset; ``None`` past the end.
RecordAt = Callable[[int], tuple[int, int] | None]

#: How long one single-record read may wait for the broker.
READ_TIMEOUT_S = 10.0

_warned_clusters: set[str] = set()


def first_offset_at_or_after(
    record_at: RecordAt, *, low: int, high: int, timestamp_ms: int
) -> int | None:
    """The offset of the first record in ``[low, high)`` with timestamp >= ``timestamp_ms``,
    or ``None`` if there is none; O(log(high - low)) calls of ``record_at``."""
    # The smallest offset whose first record at or after it is missing or at/after the time.
    lo, hi = low, high
    while lo < hi:
        mid = (lo + hi) // 2
        found = record_at(mid)
        if found is None or found[1] >= timestamp_ms:
            hi = mid
        else:  # every offset in [mid, found] leads to a record before the time
            lo = found[0] + 1
    found = record_at(lo) if lo < high else None
    return found[0] if found is not None else None


def answer_holds(
    answer: int | None, record_at: RecordAt, *, low: int, high: int, timestamp_ms: int
) -> bool:
    """Whether a broker's ListOffsets answer agrees with the records: the record at the answer
    is at or after the time and the one before it is before the time (``None`` or the high
    watermark: the last record is before the time)."""
    if low >= high:
        return answer is None or answer >= high
    if answer is None or answer >= high:
        last = record_at(high - 1)
        return last is None or last[1] < timestamp_ms
    if answer < low:
        return False
    at = record_at(answer)
    if at is None or at[1] < timestamp_ms:
        return False
    if answer > low:
        before = record_at(answer - 1)
        if before is not None and before[0] < answer and before[1] >= timestamp_ms:
            return False
    return True


def offsets_for_timestamps(
    cluster: Any,
    timestamps: Mapping[TopicPartition, int],
    *,
    bounds: LogBounds,
) -> dict[TopicPartition, int | None]:
    """Per partition, the first offset with timestamp >= its timestamp (``None``: none).

    ``cluster`` is a :class:`spark_kafka_group.kafka.KafkaCluster`.
    """
    answers: dict[TopicPartition, int | None] = {}
    for ms in sorted(set(timestamps.values())):
        tps = [tp for tp, t in timestamps.items() if t == ms]
        answers.update(cluster.offsets_for_timestamp(tps, ms))
    result: dict[TopicPartition, int | None] = {}
    with RecordReader(cluster.bootstrap_servers, cluster.client_conf) as reader:
        for tp, ms in sorted(timestamps.items()):
            record_at = reader.for_partition(tp, high=bounds.latest[tp])
            low, high = bounds.earliest[tp], bounds.latest[tp]
            answer = answers.get(tp)
            if answer_holds(answer, record_at, low=low, high=high, timestamp_ms=ms):
                result[tp] = answer if answer is not None and answer < high else None
                continue
            if cluster.bootstrap_servers not in _warned_clusters:
                _warned_clusters.add(cluster.bootstrap_servers)
                log.warning(
                    "Kafka cluster %r answered ListOffsets for timestamp %d on %s with %s, "
                    "which the records contradict; finding timestamps by a binary search over "
                    "the records instead (logged once per cluster).",
                    cluster.bootstrap_servers, ms, partition_name(*tp), answer,
                )  # fmt: skip
            result[tp] = first_offset_at_or_after(record_at, low=low, high=high, timestamp_ms=ms)
    return result


class RecordReader:
    """Reads single records (offset and timestamp) with a group-less consumer."""

    def __init__(self, bootstrap_servers: str, client_conf: Mapping[str, str]) -> None:
        conf = client_config(bootstrap_servers, client_conf)
        conf.update({"group.id": "spark-kafka-group-timestamps", "enable.auto.commit": False})
        # One small fetch per read; no waiting for more data than the one record.
        conf.update({"enable.partition.eof": True, "fetch.wait.max.ms": 10})
        self._bootstrap_servers = bootstrap_servers
        self._consumer = Consumer(conf)

    def __enter__(self) -> RecordReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self._consumer.close()

    def for_partition(self, tp: TopicPartition, *, high: int) -> RecordAt:
        cache: dict[int, tuple[int, int] | None] = {}

        def record_at(offset: int) -> tuple[int, int] | None:
            if offset >= high:
                return None
            if offset not in cache:
                cache[offset] = self._read(tp, offset)
            return cache[offset]

        return record_at

    def _read(self, tp: TopicPartition, offset: int) -> tuple[int, int] | None:
        self._consumer.assign([KafkaTopicPartition(tp[0], tp[1], offset)])
        reason = f"no answer within {READ_TIMEOUT_S:g}s"
        try:
            message = self._consumer.poll(READ_TIMEOUT_S)
            while message is not None and (error := message.error()) is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return None
                reason = error.str()
                if not error.retriable():
                    break
                message = self._consumer.poll(READ_TIMEOUT_S)
        except KafkaException as exc:
            message, reason = None, str(exc)
        if message is None or message.error() is not None or (found := message.offset()) is None:
            raise KafkaGroupError(
                f"Reading the record at offset {offset} of {partition_name(*tp)} from "
                f"{self._bootstrap_servers!r} to find a timestamp failed ({reason})."
            )
        return found, message.timestamp()[1]
