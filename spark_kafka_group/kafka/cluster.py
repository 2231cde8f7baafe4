"""Driver-side access to the Kafka cluster: topic metadata and ListOffsets (seed 004).

One :class:`KafkaCluster` per stream reader, used as a context manager. Every failure is one
of our exceptions with the servers, the names and the numbers in it; never a bare librdkafka
error. Tansu (the embedded test broker) answers ListOffsets(latest) with the last record
batch's base offset + 1 and ListOffsets by timestamp unreliably (DESIGN section 8).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from types import TracebackType
from typing import Any

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, OffsetSpec

from spark_kafka_group.errors import (
    BrokerUnavailableError,
    KafkaGroupError,
    OptionError,
    TopicNotFoundError,
)
from spark_kafka_group.kafka.config import (
    CONNECTIVITY_ERRORS,
    ErrorTracker,
    client_config,
    unreachable_message,
)

log = logging.getLogger(__name__)

TP = tuple[str, int]

#: Give up early when librdkafka reports every bootstrap server down for this long and the
#: cluster has never answered (connection refused, unknown host): no point waiting 30 s.
UNREACHABLE_FAST_FAIL_S = 3.0

_TOPIC_MISSING_CODES = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION}
)


def is_internal_topic(name: str) -> bool:
    """Kafka's internal topics (``__consumer_offsets``, ``__transaction_state``, ...)."""
    return name.startswith("__")


class KafkaCluster:
    """Metadata and offsets of one Kafka cluster, through a confluent-kafka AdminClient.

    ``client_conf`` holds the user's ``kafka.*`` options with the prefix stripped (security
    settings etc.). ``isolation.level=read_committed`` there makes :meth:`latest_offsets`
    return the last stable offset instead of the high watermark.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        client_conf: Mapping[str, str] | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        if not bootstrap_servers or not str(bootstrap_servers).strip():
            raise OptionError(
                "kafka.bootstrap.servers is empty; set it to the broker list, e.g. "
                "option('kafka.bootstrap.servers', 'broker1:9092,broker2:9092')"
            )
        self.bootstrap_servers = str(bootstrap_servers)
        self.client_conf = dict(client_conf or {})
        self.timeout_s = float(timeout_s)
        self._errors = ErrorTracker()
        conf = client_config(self.bootstrap_servers, self.client_conf, for_admin=True)
        conf["error_cb"] = self._errors
        try:
            self._admin: AdminClient | None = AdminClient(conf)
        except (KafkaException, ValueError, TypeError) as exc:
            raise OptionError(
                f"Invalid Kafka client configuration (kafka.* options): {_text(exc)}"
            ) from None
        self._ever_connected = False
        isolation = str(self.client_conf.get("isolation.level", "read_uncommitted")).lower()
        if isolation not in ("read_uncommitted", "read_committed"):
            raise OptionError(
                f"kafka.isolation.level={isolation!r} is not valid; use read_uncommitted "
                "(the default) or read_committed"
            )
        self._isolation = (
            IsolationLevel.READ_COMMITTED
            if isolation == "read_committed"
            else IsolationLevel.READ_UNCOMMITTED
        )

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        # AdminClient has no close(); dropping the reference destroys the handle.
        self._admin = None

    def __enter__(self) -> KafkaCluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            raise RuntimeError("KafkaCluster is closed")
        return self._admin

    # ------------------------------------------------------------------ metadata

    def metadata(self) -> ClusterMetadata:
        """Metadata of all topics (never auto-creates a topic), retried until the timeout."""
        start = time.monotonic()
        deadline = start + self.timeout_s
        while True:
            remaining = deadline - time.monotonic()
            try:
                md = self.admin.list_topics(timeout=max(0.05, min(remaining, 1.0)))
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if not isinstance(err, KafkaError) or err.code() not in CONNECTIVITY_ERRORS:
                    raise BrokerUnavailableError(
                        f"Kafka cluster {self.bootstrap_servers!r} refused the metadata "
                        f"request: {_text(exc)}"
                    ) from None
            else:
                self._ever_connected = True
                self._errors.connected()
                return md
            self.admin.poll(0)  # serve error_cb
            self._raise_if_unreachable(start, deadline)

    def _raise_if_unreachable(self, start: float, deadline: float, last: str = "") -> None:
        now = time.monotonic()
        errors = self._errors
        down_since = errors.all_brokers_down_at
        hopeless = errors.hopeless is not None
        fast = (
            not self._ever_connected
            and down_since is not None
            and now - start >= min(UNREACHABLE_FAST_FAIL_S, self.timeout_s)
        )
        if hopeless or fast or now >= deadline:
            raise BrokerUnavailableError(
                unreachable_message(
                    self.bootstrap_servers, round(now - start, 1), errors.reason() or last
                )
            )

    def topic_partitions(
        self,
        *,
        subscribe: Sequence[str] | None = None,
        pattern: str | None = None,
        assign: Mapping[str, Sequence[int]] | None = None,
    ) -> dict[str, int]:
        """``topic -> partition count`` for exactly one of subscribe / pattern / assign.

        * ``subscribe``: every listed topic must exist (TopicNotFoundError otherwise).
        * ``pattern``: regular expression that must match the whole topic name; internal
          topics (``__...``) are never matched. No match is not an error (empty dict).
        * ``assign``: every listed partition must exist (TopicNotFoundError with numbers).
        """
        given = [x is not None for x in (subscribe, pattern, assign)]
        if sum(given) != 1:
            raise OptionError(
                "Exactly one of 'subscribe', 'subscribePattern' and 'assign' must be set"
            )
        md = self.metadata()
        counts = {
            name: len(meta.partitions)
            for name, meta in md.topics.items()
            if meta.error is None or meta.partitions
        }
        if pattern is not None:
            try:
                regex = re.compile(pattern)
            except re.error as exc:
                raise OptionError(
                    f"subscribePattern {pattern!r} is not a valid regular expression: {exc}"
                ) from None
            return {
                name: counts[name]
                for name in sorted(counts)
                if not is_internal_topic(name) and regex.fullmatch(name)
            }
        if subscribe is not None:
            topics = list(dict.fromkeys(subscribe))
            missing = [t for t in topics if t not in counts]
            if missing:
                raise self._topic_not_found(missing, counts)
            return {t: counts[t] for t in topics}
        assert assign is not None
        result: dict[str, int] = {}
        for topic, partitions in assign.items():
            if topic not in counts:
                raise self._topic_not_found([topic], counts)
            count = counts[topic]
            bad = sorted({int(p) for p in partitions if not 0 <= int(p) < count})
            if bad:
                raise TopicNotFoundError(
                    f"assign lists partition(s) {bad} of topic {topic!r}, which has {count} "
                    f"partition(s) (0..{count - 1}) on Kafka cluster "
                    f"{self.bootstrap_servers!r}. Fix the 'assign' option."
                )
            result[topic] = count
        return result

    def _topic_not_found(self, missing: list[str], counts: Mapping[str, int]) -> TopicNotFoundError:
        visible = sorted(t for t in counts if not is_internal_topic(t))
        shown = ", ".join(visible[:20]) + (" ..." if len(visible) > 20 else "")
        names = ", ".join(repr(t) for t in missing)
        return TopicNotFoundError(
            f"Topic(s) {names} not found on Kafka cluster {self.bootstrap_servers!r} "
            f"(visible topics: {shown or 'none'}). Create the topic, fix the name in "
            "'subscribe'/'assign', or check that the credentials may describe it (ACLs)."
        )

    # ------------------------------------------------------------------ offsets

    def earliest_offsets(self, tps: Iterable[TP]) -> dict[TP, int]:
        """Log start offset of each partition."""
        return {tp: off for tp, (off, _) in self._list_offsets(tps, OffsetSpec.earliest()).items()}

    def latest_offsets(self, tps: Iterable[TP]) -> dict[TP, int]:
        """High watermark (read_uncommitted) or last stable offset (read_committed)."""
        return {tp: off for tp, (off, _) in self._list_offsets(tps, OffsetSpec.latest()).items()}

    def offsets_for_timestamp(self, tps: Iterable[TP], timestamp_ms: int) -> dict[TP, int | None]:
        """Offset of the first record with timestamp >= ``timestamp_ms``, per partition.

        ``None`` when no such record exists (the caller decides: latest, or an error).
        Unreliable on Tansu (it may answer offset 0 with timestamp -1 for any timestamp).
        """
        result = self._list_offsets(tps, OffsetSpec.for_timestamp(int(timestamp_ms)))
        return {tp: (None if off < 0 else off) for tp, (off, _) in result.items()}

    def _list_offsets(self, tps: Iterable[TP], spec: OffsetSpec) -> dict[TP, tuple[int, int]]:
        wanted = list(dict.fromkeys((str(t), int(p)) for t, p in tps))
        if not wanted:
            return {}
        start = time.monotonic()
        deadline = start + self.timeout_s
        attempt = 0
        while True:
            attempt += 1
            request = {TopicPartition(t, p): spec for t, p in wanted}
            try:
                futures = self.admin.list_offsets(
                    request,
                    isolation_level=self._isolation,
                    request_timeout=max(1.0, min(deadline - time.monotonic(), 10.0)),
                )
                result = {
                    (tp.topic, tp.partition): _result(fut, deadline) for tp, fut in futures.items()
                }
            except (KafkaException, FutureTimeoutError) as exc:
                err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
                code = err.code() if isinstance(err, KafkaError) else KafkaError._TIMED_OUT
                if code in _TOPIC_MISSING_CODES or code == KafkaError._NOENT:
                    # "No leaders found" / unknown topic: raises TopicNotFoundError if the
                    # metadata agrees; else (leader election, new topic) retry below.
                    self._check_partitions_exist(wanted)
                elif code not in CONNECTIVITY_ERRORS:
                    raise KafkaGroupError(
                        f"ListOffsets for {_describe_tps(wanted)} failed on Kafka cluster "
                        f"{self.bootstrap_servers!r}: {_text(exc)}"
                    ) from None
                self.admin.poll(0)  # serve error_cb
                self._raise_if_unreachable(start, deadline, _text(exc))
                time.sleep(min(0.1 * attempt, 1.0))
                continue
            self._ever_connected = True
            return result

    def _check_partitions_exist(self, tps: Sequence[TP]) -> None:
        md = self.metadata()
        counts = {name: len(meta.partitions) for name, meta in md.topics.items()}
        missing_topics = sorted({t for t, _ in tps if t not in counts})
        if missing_topics:
            raise self._topic_not_found(missing_topics, counts)
        bad = [(t, p) for t, p in tps if not 0 <= p < counts[t]]
        if bad:
            t, p = bad[0]
            raise TopicNotFoundError(
                f"Partition {p} of topic {t!r} does not exist on Kafka cluster "
                f"{self.bootstrap_servers!r}: the topic has {counts[t]} partition(s). "
                "Was the topic deleted and re-created with fewer partitions?"
            )


def _result(fut: Future[Any], deadline: float) -> tuple[int, int]:
    info = fut.result(timeout=max(0.1, deadline - time.monotonic()))
    return int(info.offset), int(info.timestamp)


def _describe_tps(tps: Sequence[TP]) -> str:
    shown = ", ".join(f"{t}-{p}" for t, p in tps[:5])
    return shown + (f" and {len(tps) - 5} more" if len(tps) > 5 else "")


def _text(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].str()
    return str(exc) or type(exc).__name__
