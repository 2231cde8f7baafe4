"""The one driver-side Kafka client: topic metadata, ListOffsets (as Kafka's
``OffsetFetcher`` does it) and, through :mod:`.consumer_group_offsets`, a Kafka consumer
group's committed offsets.

One :class:`KafkaCluster` per stream reader (or CLI command), used as a context manager: one
confluent-kafka AdminClient (plus, per Kafka consumer group whose offsets are read, one
Consumer handle that never subscribes: :meth:`KafkaCluster.group_consumer`), one error
tracker, one retry policy. Every failure is one of our
exceptions with the servers, the names and the numbers in it; never a bare librdkafka error. A
request that gets no answer is retried as Spark's Kafka source does it on the Java client: up
to ``fetchOffset.numRetries`` attempts, ``fetchOffset.retryIntervalMs`` apart, each lasting at
most ``kafka.default.api.timeout.ms``
(:class:`~spark_kafka_group.kafka.config.OffsetFetchRetry`). Within an attempt, a request that
is not answered within :data:`SEND_AGAIN_AFTER_S`, or answered with a leadership error, is sent
again through a new AdminClient after a metadata refresh (the earlier sends stay in flight,
and the first complete answer wins), which is how it finds a partition's
new leader after a broker dies or hangs (librdkafka's admin requests go by its cached
metadata, and a handle sends its refreshes to the broker it sent to last: "Unanswered
handles" in :mod:`.config`). An attempt ends after :data:`UNREACHABLE_FAST_FAIL_S` when no
server was ever reached. Every pause and every deadline is on the injected clock
(:mod:`spark_kafka_group.retry`); only the waits for the broker's answers are real. Tansu (the
embedded test broker) answers ListOffsets(latest) with the last record batch's base offset + 1
and ListOffsets by timestamp unreliably (docs/contributing.md, "Test environment facts").
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from concurrent.futures import wait as wait_futures
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, OffsetSpec

from spark_kafka_group.errors import BrokerUnavailableError, KafkaGroupError, OptionError
from spark_kafka_group.group.metadata import TopicPartition, partition_name
from spark_kafka_group.group.timer import Clock, SystemClock
from spark_kafka_group.kafka.config import (
    CONNECTIVITY_ERRORS,
    LEADERSHIP_ERRORS,
    SEND_TIMEOUT_S,
    ErrorTracker,
    OffsetFetchRetry,
    client_config,
    error_code,
    error_text,
    refused_message,
    unreachable_message,
)
from spark_kafka_group.kafka.topics import check_partitions_exist, select_topics
from spark_kafka_group.retry import Backoff

if TYPE_CHECKING:
    from spark_kafka_group.options import SourceOptions

log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: End an attempt early when librdkafka reports every bootstrap server down for this long and
#: the cluster has never answered (connection refused, unknown host): no point waiting
#: a whole attempt.
UNREACHABLE_FAST_FAIL_S = 3.0

#: Within one attempt, the pause before sending a request again that failed for want of a
#: connection or a partition leader (0.1 s, 0.2 s, 0.4 s, then 0.5 s, never past the
#: attempt's end): short, so that a request reaches a new leader soon after its election.
RESEND_BACKOFF = Backoff(base_s=0.05, cap_s=0.5)
#: A request not answered this long is sent again, through a new AdminClient, whose metadata
#: names a leader that answers once Kafka has elected one (a hung leader is fenced after
#: ``broker.session.timeout.ms``); the earlier sends stay in flight, and their answers count.
SEND_AGAIN_AFTER_S = 1.0

_TOPIC_MISSING_CODES = frozenset(
    {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC, KafkaError._UNKNOWN_PARTITION}
)

#: ``on_error(exc, code)`` of :meth:`KafkaCluster.request`: raise to end the request, return
#: to send it again.
OnError = Callable[[BaseException, int], None]


class _AttemptFailed(Exception):
    """One attempt got no answer (the reason is the text); the caller may retry."""


def cluster_for_source(opts: SourceOptions) -> KafkaCluster:
    """The cluster of a query's source options (servers, ``kafka.*``, ``fetchOffset.*``)."""
    return KafkaCluster(
        opts.bootstrap_servers,
        client_conf=dict(opts.kafka_params),
        retry=opts.fetch_offset_retry,
    )


class KafkaCluster:
    """Metadata, offsets and consumer-group offsets of one Kafka cluster, through one
    confluent-kafka AdminClient.

    ``client_conf`` holds the user's ``kafka.*`` options with the prefix stripped (security
    settings etc.). ``retry`` says how often a request that gets no answer is tried.
    ``isolation.level=read_committed`` there makes :meth:`latest_offsets`
    return the last stable offset instead of the high watermark. ``clock`` times the attempts
    and makes the pauses between them (a test clock moves instead of blocking).
    """

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        client_conf: Mapping[str, str] | None = None,
        retry: OffsetFetchRetry = OffsetFetchRetry(),  # noqa: B008 (frozen, so shared safely)
        attempt_timeout_s: float | None = None,
        clock: Clock | None = None,
    ) -> None:
        if not bootstrap_servers or not str(bootstrap_servers).strip():
            raise OptionError(
                "kafka.bootstrap.servers is empty; set it to the broker list, e.g. "
                "option('kafka.bootstrap.servers', 'broker1:9092,broker2:9092')"
            )
        self.bootstrap_servers = str(bootstrap_servers)
        self.client_conf = dict(client_conf or {})
        self.retry = retry
        self.attempt_timeout_s = (
            retry.api_timeout_ms / 1000 if attempt_timeout_s is None else float(attempt_timeout_s)
        )
        self.clock: Clock = clock or SystemClock()
        self._errors = ErrorTracker()
        conf = client_config(self.bootstrap_servers, self.client_conf, for_admin=True)
        conf["error_cb"] = self._errors
        self._admin_conf = conf
        try:
            self._admin: AdminClient | None = AdminClient(conf)
        except (KafkaException, ValueError, TypeError) as exc:
            raise OptionError(
                f"Invalid Kafka client configuration (kafka.* options) for "
                f"{self.bootstrap_servers!r}: {error_text(exc)}. Fix or remove the option "
                "librdkafka names."
            ) from None
        self._ever_connected = False
        # Kafka consumer group -> its Consumer handle (group_consumer); the lock keeps two
        # threads of one reader from making two handles for one group.
        self._group_consumers: dict[str, Consumer] = {}
        self._group_consumers_lock = threading.Lock()
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
        with self._group_consumers_lock:
            consumers, self._group_consumers = list(self._group_consumers.values()), {}
        for consumer in consumers:
            consumer.close()  # never joined its group: no LeaveGroup, nothing to wait for

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
            raise KafkaGroupError(
                f"The Kafka client for {self.bootstrap_servers!r} is closed (its query or "
                "command ended); nothing more is sent to Kafka through it."
            )
        return self._admin

    def _renew_admin(self) -> None:
        """Replace the AdminClient after a send went unanswered: the old one would send its
        metadata refresh to the broker that did not answer ("Unanswered handles" in
        :mod:`.config`). Destroying a handle with requests in flight takes milliseconds."""
        if self._admin is not None:
            self._admin = AdminClient(self._admin_conf)

    def group_consumer(self, group: str) -> Consumer:
        """The Consumer handle of Kafka consumer group ``group`` (made on first use, closed
        by :meth:`close`): ``group.id`` is ``group``, and it never subscribes, so it never
        joins the group. Its group handle finds the group's coordinator, and finds it again
        when the coordinator moves; :mod:`.consumer_group_offsets` reads and commits the
        group's offsets through it (OffsetFetch and OffsetCommit without a member, as an
        admin sends them)."""
        with self._group_consumers_lock:
            consumer = self._group_consumers.get(group)
            if consumer is not None:
                return consumer
            self.admin  # noqa: B018 (raises if this client is closed)
            conf = client_config(self.bootstrap_servers, self.client_conf)
            conf.update(
                {
                    "group.id": group,
                    "enable.auto.commit": False,
                    # librdkafka sends committed()'s OffsetFetch with RequireStable
                    # (KIP-447) only under read_committed. Without it a coordinator answers
                    # from the offsets its high watermark covers, and one that has just
                    # taken over the group (its node became the leader of the group's
                    # __consumer_offsets partition) can know a lower high watermark than
                    # its predecessor, which acknowledged the last commit: the read returns
                    # the offsets before that commit. With it the coordinator answers from
                    # every offset it holds, once they are replicated (and waits for a
                    # transaction that commits offsets to the group to end).
                    "isolation.level": "read_committed",
                    # A handle that never joins uses session.timeout.ms for one thing only:
                    # how long a commit waits for a coordinator before failing (_WAIT_COORD)
                    # for the caller to send it again, as any unanswered send is.
                    "session.timeout.ms": round(SEND_TIMEOUT_S * 1000),
                    "error_cb": self._errors,
                }
            )
            try:
                consumer = Consumer(conf)
            except (KafkaException, ValueError, TypeError) as exc:
                raise OptionError(
                    f"Invalid Kafka client configuration (kafka.* options) for "
                    f"{self.bootstrap_servers!r}: {error_text(exc)}. Fix or remove the "
                    "option librdkafka names."
                ) from None
            self._group_consumers[group] = consumer
            return consumer

    def _now_s(self) -> float:
        return self.clock.monotonic_ms() / 1000

    # ------------------------------------------------------------------ metadata

    def metadata(self) -> ClusterMetadata:
        """Metadata of all topics (never auto-creates a topic)."""
        return self._with_retries("Metadata", self._metadata_attempt)

    def _metadata_attempt(self, start: float, deadline: float) -> ClusterMetadata:
        while True:
            remaining = deadline - self._now_s()
            try:
                md = self.admin.list_topics(timeout=max(0.05, min(remaining, 1.0)))
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if not isinstance(err, KafkaError) or err.code() not in CONNECTIVITY_ERRORS:
                    raise BrokerUnavailableError(
                        f"Kafka cluster {self.bootstrap_servers!r} refused the metadata "
                        f"request: {error_text(exc)}"
                    ) from None
            else:
                self._ever_connected = True
                self._errors.connected()
                return md
            self.admin.poll(0)  # serve error_cb
            self._end_attempt_if_unreachable(start, deadline)
            self._renew_admin()

    def _with_retries(self, what: str, attempt: Callable[[float, float], _T]) -> _T:
        """``attempt(start, deadline)`` up to ``retry.num_retries`` times, Spark's way."""
        retry = self.retry
        first_start = self._now_s()
        reason = ""
        for number in range(1, retry.num_retries + 1):
            start = self._now_s()
            try:
                return attempt(start, start + self.attempt_timeout_s)
            except _AttemptFailed as failed:
                reason = str(failed)
            if self._errors.hopeless is not None:
                break  # wrong credentials or TLS setup: another attempt cannot help
            if number < retry.num_retries:
                log.warning(
                    "%s request to Kafka cluster %r got no answer (attempt %d of %d: %s); "
                    "retrying in %d ms",
                    what,
                    self.bootstrap_servers,
                    number,
                    retry.num_retries,
                    reason,
                    retry.retry_interval_ms,
                )
                self.clock.sleep(retry.backoff.delay_s(number))
        if self._errors.hopeless is not None:
            raise BrokerUnavailableError(
                f"{what}: " + refused_message(self.bootstrap_servers, self._errors.hopeless)
            )
        elapsed = round(self._now_s() - first_start, 1)
        raise BrokerUnavailableError(
            unreachable_message(self.bootstrap_servers, elapsed, reason)
            + f" {what}: {number} attempt(s) of up to {self.attempt_timeout_s:g}s "
            f"(fetchOffset.numRetries={retry.num_retries}, fetchOffset.retryIntervalMs="
            f"{retry.retry_interval_ms}, kafka.default.api.timeout.ms="
            f"{round(self.attempt_timeout_s * 1000)}); raise them to wait longer for a cluster "
            "that is briefly unavailable."
        )

    def _end_attempt_if_unreachable(self, start: float, deadline: float, last: str = "") -> None:
        now = self._now_s()
        errors = self._errors
        down_since = errors.all_brokers_down_at
        hopeless = errors.hopeless is not None
        fast = (
            not self._ever_connected
            and down_since is not None
            and now - start >= min(UNREACHABLE_FAST_FAIL_S, self.attempt_timeout_s)
        )
        if hopeless or fast or now >= deadline:
            raise _AttemptFailed(errors.reason() or last or "no answer")

    def topic_partitions(
        self,
        *,
        subscribe: Sequence[str] | None = None,
        pattern: str | None = None,
        assign: Mapping[str, Sequence[int]] | None = None,
    ) -> dict[str, int]:
        """``topic -> partition count`` for exactly one of subscribe / pattern / assign
        (:func:`~.topics.select_topics` says what each requires)."""
        md = self.metadata()
        counts = {
            name: len(meta.partitions)
            for name, meta in md.topics.items()
            if meta.error is None or meta.partitions
        }
        return select_topics(
            counts, self.bootstrap_servers, subscribe=subscribe, pattern=pattern, assign=assign
        )

    # ------------------------------------------------------------------ offsets

    def earliest_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Log start offset of each partition."""
        earliest = self._list_offsets(tps, OffsetSpec.earliest(), positions=True)
        return {tp: off for tp, (off, _) in earliest.items()}

    def latest_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """High watermark (read_uncommitted) or last stable offset (read_committed)."""
        latest = self._list_offsets(tps, OffsetSpec.latest(), positions=True)
        return {tp: off for tp, (off, _) in latest.items()}

    def earliest_and_latest_offsets(
        self, tps: Iterable[TopicPartition]
    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """:meth:`earliest_offsets` and :meth:`latest_offsets` in one round trip: both
        requests are in flight at once (a trigger asks for both)."""
        earliest, latest = self._list_offsets_many(
            tps, (OffsetSpec.earliest(), OffsetSpec.latest()), positions=True
        )
        return (
            {tp: off for tp, (off, _) in earliest.items()},
            {tp: off for tp, (off, _) in latest.items()},
        )

    def offsets_for_timestamp(
        self, tps: Iterable[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, int | None]:
        """Offset of the first record with timestamp >= ``timestamp_ms``, per partition.

        ``None`` when no such record exists (the caller decides: latest, or an error).
        Unreliable on Tansu (it may answer offset 0 with timestamp -1 for any timestamp).
        """
        result = self._list_offsets(tps, OffsetSpec.for_timestamp(int(timestamp_ms)))
        return {tp: (None if off < 0 else off) for tp, (off, _) in result.items()}

    def _list_offsets(
        self, tps: Iterable[TopicPartition], spec: OffsetSpec, *, positions: bool = False
    ) -> dict[TopicPartition, tuple[int, int]]:
        return self._list_offsets_many(tps, (spec,), positions=positions)[0]

    def _list_offsets_many(
        self, tps: Iterable[TopicPartition], specs: Sequence[OffsetSpec], *, positions: bool = False
    ) -> list[dict[TopicPartition, tuple[int, int]]]:
        """One ListOffsets request per spec, all in flight at once; an answer per spec.
        ``positions``: every answer must be an offset (earliest, latest), so an answer without
        one is sent again, as a leadership error is."""
        wanted = list(dict.fromkeys(TopicPartition(str(t), int(p)) for t, p in tps))
        if not wanted:
            return [{} for _ in specs]
        keys = [TopicPartition(t, p) for t, p in wanted]

        def send(timeout_s: float) -> list[Future[Any]]:
            futures: list[Future[Any]] = []
            for spec in specs:
                answers = self.admin.list_offsets(
                    {KafkaTopicPartition(t, p): spec for t, p in wanted},
                    isolation_level=self._isolation,
                    request_timeout=timeout_s,
                )
                futures.extend(answers[KafkaTopicPartition(t, p)] for t, p in wanted)
            return [_offset_required(f) for f in futures] if positions else futures

        def on_error(exc: BaseException, code: int) -> None:
            if code in _TOPIC_MISSING_CODES or code == KafkaError._NOENT:
                # "No leaders found" / unknown topic: raises TopicNotFoundError if the
                # metadata agrees; else (leader election, new topic) send again.
                self._check_partitions_exist(wanted)
                return
            raise KafkaGroupError(
                f"ListOffsets for {_describe_tps(wanted)} failed on Kafka cluster "
                f"{self.bootstrap_servers!r}: {error_text(exc)}"
            ) from None

        topics = sorted({t for t, _ in wanted})
        infos = self.request("ListOffsets", send, on_error=on_error, refresh_topics=topics)
        return [
            {
                tp: (int(info.offset), int(info.timestamp))
                for tp, info in zip(keys, infos[n * len(keys) : (n + 1) * len(keys)], strict=True)
            }
            for n in range(len(specs))
        ]

    # ------------------------------------------------------------------ any request

    def request(
        self,
        what: str,
        send: Callable[[float], Sequence[Future[Any]]],
        *,
        on_error: OnError | None = None,
        refresh_topics: Sequence[str] = (),
    ) -> list[Any]:
        """Send a request and wait for every answer, under the client's one policy.

        ``send(request_timeout_s)`` sends it and returns its futures; the result is theirs, in
        order. An attempt that gets no answer (no connection, a timeout) sends again after a
        :data:`RESEND_BACKOFF` pause until the attempt's time is up; attempts are repeated as
        :meth:`_with_retries` says; then :class:`BrokerUnavailableError`. Any other failure is
        given to ``on_error(exc, code)`` (raise to end the request, return to send again);
        without it, the confluent-kafka exception is raised for the caller to explain.
        """

        def attempt(start: float, deadline: float) -> list[Any]:
            return self._request_attempt(what, send, on_error, refresh_topics, start, deadline)

        return self._with_retries(what, attempt)

    def _request_attempt(
        self,
        what: str,
        send: Callable[[float], Sequence[Future[Any]]],
        on_error: OnError | None,
        refresh_topics: Sequence[str],
        start: float,
        deadline: float,
    ) -> list[Any]:
        failures = 0
        last = ""
        # Every send of the attempt stays in flight until the attempt ends, through the handle
        # it went by: the first complete answer wins, so a slow but live broker is answered
        # however often the request went out again meanwhile.
        waiting: list[list[Future[Any]]] = []
        earlier_handles: list[AdminClient] = []
        while True:
            sent_at = self._now_s()
            try:
                futures = list(send(max(1.0, deadline - sent_at)))
                waiting.append(futures)
                answered = self._await_first(
                    waiting, start, deadline, until=min(deadline, sent_at + SEND_AGAIN_AFTER_S)
                )
                if answered is None:
                    raise FutureTimeoutError()
                waiting.remove(answered)
                results = [_result(fut) for fut in answered]
            except (KafkaException, FutureTimeoutError) as exc:
                code = error_code(exc)
                code = KafkaError._TIMED_OUT if code is None else code
                if code not in CONNECTIVITY_ERRORS and code not in LEADERSHIP_ERRORS:
                    if on_error is None:
                        raise
                    on_error(exc, code)
                self.admin.poll(0)  # serve error_cb
                self._end_attempt_if_unreachable(start, deadline, error_text(exc))
                earlier_handles.append(self.admin)
                self._renew_admin()
                self._refresh_metadata(refresh_topics, deadline)
                failures += 1
                last = error_text(exc)
                log.debug("%s: send %d unanswered or refused: %s", what, failures, last)
                if self._now_s() - sent_at < SEND_AGAIN_AFTER_S:  # refused at once: pause
                    pause = RESEND_BACKOFF.delay_s(failures)
                    self.clock.sleep(min(pause, max(0.0, deadline - self._now_s())))
                continue
            self._ever_connected = True
            self._errors.connected()
            if failures:
                # What an operator sees of a broker restart or a leader election.
                log.info(
                    "%s to Kafka cluster %r answered after %d unanswered or refused send(s) "
                    "in %.1fs (last: %s); metadata refreshed between sends",
                    what,
                    self.bootstrap_servers,
                    failures,
                    self._now_s() - start,
                    last or "no answer",
                )
            return results

    def _refresh_metadata(self, topics: Sequence[str], deadline: float) -> None:
        """Ask a live node for ``topics``' metadata, which replaces librdkafka's cached
        leaders (as Kafka's clients do after a disconnect or NOT_LEADER_OR_FOLLOWER)."""
        for topic in topics:
            remaining = deadline - self._now_s()
            if remaining <= 0:
                return
            try:
                self.admin.list_topics(topic, timeout=max(0.05, min(remaining, 1.0)))
            except KafkaException:
                return  # no node answered: the next send finds out again

    def _await_first(
        self, waiting: list[list[Future[Any]]], start: float, deadline: float, *, until: float
    ) -> list[Future[Any]] | None:
        """The first of ``waiting`` (one list of futures per send) whose futures are all done,
        or None at ``until``; waits in short slices, ending the attempt early (like metadata)
        when every server is down and the cluster never answered."""
        while True:
            for futures in waiting:
                if all(fut.done() for fut in futures):
                    return futures
            remaining = until - self._now_s()
            if remaining <= 0:
                return None
            pending = [fut for futures in waiting for fut in futures if not fut.done()]
            wait_futures(
                pending, timeout=max(0.05, min(remaining, 1.0)), return_when=FIRST_COMPLETED
            )
            self.admin.poll(0)  # serve error_cb
            self._end_attempt_if_unreachable(start, deadline)

    def _check_partitions_exist(self, tps: Sequence[TopicPartition]) -> None:
        md = self.metadata()
        counts = {name: len(meta.partitions) for name, meta in md.topics.items()}
        check_partitions_exist(tps, counts, self.bootstrap_servers)


def _offset_required(answer: Future[Any]) -> Future[Any]:
    """``answer``, or LEADER_NOT_AVAILABLE if it holds no offset. Asked for the earliest or
    latest offset, librdkafka can answer offset -1001 (none) without an error: seen on
    Apache Kafka's KRaft broker just after it was fenced (a 10 s pause). Used as a position,
    that would be an offset out of range."""
    checked: Future[Any] = Future()

    def done(source: Future[Any]) -> None:
        if source.cancelled():
            checked.cancel()
            return
        error = source.exception()
        if error is not None:
            checked.set_exception(error)
        elif int(source.result().offset) < 0:
            checked.set_exception(
                KafkaException(
                    KafkaError(KafkaError.LEADER_NOT_AVAILABLE, "ListOffsets answered no offset")
                )
            )
        else:
            checked.set_result(source.result())

    answer.add_done_callback(done)
    return checked


def _result(fut: Future[Any]) -> Any:
    """The answer of a future :meth:`KafkaCluster._await_first` found done."""
    return fut.result(timeout=0)


def _describe_tps(tps: Sequence[TopicPartition]) -> str:
    shown = ", ".join(partition_name(t, p) for t, p in tps[:5])
    return shown + (f" and {len(tps) - 5} more" if len(tps) > 5 else "")
