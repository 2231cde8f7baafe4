"""Module-level pool of fetch consumers, so a reused Python worker does not reconnect per task.

Keyed by ``(bootstrap servers, client configuration)``. A consumer returned to the pool is
unassigned, so an idle consumer sends no fetch requests; the next fetch assigns its own
partitions and offsets (an open connection is kept; kept assigned, a consumer would have the
next trigger's records at hand, docs/design.md says why it is not). librdkafka's
pause/resume is not used: a resume took 0.7-1 s in librdkafka 2.16.
Bounded (:data:`MAX_IDLE`), idle consumers expire after :data:`IDLE_TTL_S`, a consumer that
saw an error or a vanished topic is closed instead of returned, and a forked child never uses
its parent's.

A pooled consumer is never handed a topic it knew under another topic id (the topic was
deleted, or deleted and created again): it is closed instead. librdkafka 2.5 to 2.16 crash the
whole process (SIGSEGV) when a consumer that knew a topic fetches it after it was re-created on
a broker that answers such a fetch with UNKNOWN_TOPIC_OR_PARTITION, as Tansu does
(docs/troubleshooting.md); Apache Kafka answers UNKNOWN_TOPIC_ID and the client copes. The
topic ids come from DescribeTopics, asked at most once per topic per :data:`TOPIC_ID_TTL_S`.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient

from spark_kafka_group.kafka.config import ErrorTracker, client_config

log = logging.getLogger(__name__)

#: Idle consumers kept per Python worker process (each holds a connection and up to
#: ``queued.max.messages.kbytes`` of prefetched records).
MAX_IDLE = 4
#: Idle consumers older than this are closed instead of reused.
IDLE_TTL_S = 300.0
#: A topic's id, once asked, is trusted for this long (a topic deleted and re-created within
#: it may meet a consumer that knew its old incarnation).
TOPIC_ID_TTL_S = 1.0
#: How long finding a topic's id may take in all.
TOPIC_ID_TIMEOUT_S = 5.0
#: A topic whose id the cluster did not give is not asked again for this long: while a
#: broker is dead or hung, only one fetch per worker process waits for the answer.
TOPIC_ID_UNKNOWN_TTL_S = 10.0
#: One DescribeTopics attempt. librdkafka sends DescribeTopics to the node its metadata names
#: as the controller and waits for that node until the request times out, even when it is
#: dead or hung; so each attempt is short, and the next goes through a new AdminClient. Kafka
#: names a random live broker as the controller, so a new handle's metadata mostly names one
#: that answers (until Kafka fences a killed or hung broker, that one too).
TOPIC_ID_ATTEMPT_S = 1.0
#: A topic id standing for "the topic does not exist".
NO_TOPIC = "<none>"

#: librdkafka requires a group id for a consumer; it is never used to join a group or
#: commit (partitions are assigned, auto commit and offset store are off).
FETCHER_GROUP_ID = "spark-kafka-group-fetcher"

# Defaults tuned for bulk reads of a task's ranges; ``kafka.*`` options override.
# fetch.wait.max.ms is low because a consumer moving to the next task's partitions first waits
# for its in-flight (long-poll) fetch; idle pooled consumers are unassigned, so they do not poll.
FETCH_DEFAULTS: dict[str, Any] = {
    "group.id": FETCHER_GROUP_ID,
    "isolation.level": "read_uncommitted",
    # A task fetches all of its partitions at once, and a fetch response stays in memory while
    # any of its records is: Kafka's Java defaults (1 MiB a partition) with a 16 MiB response
    # kept a Python worker's memory about a quarter lower than 8 and 64 MiB, no slower.
    "max.partition.fetch.bytes": 1024 * 1024,
    "fetch.max.bytes": 16 * 1024 * 1024,
    # A small prefetch queue (memory per Python worker) is as fast as a big one provided the
    # fetcher does not back off for fetch.queue.backoff.ms (1 s by default) when it is full.
    "queued.max.messages.kbytes": 8 * 1024,
    "queued.min.messages": 50_000,
    "fetch.queue.backoff.ms": 10,
    "fetch.wait.max.ms": 10,
    "fetch.error.backoff.ms": 100,
    "socket.nagle.disable": True,
    "client.id": "spark-kafka-group-fetcher",
}

# Required for correctness; the user cannot override these.
_FORCED: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    "auto.offset.reset": "error",
}

PoolKey = tuple[str, tuple[tuple[str, str], ...]]


def consumer_config(
    bootstrap_servers: str, client_conf: Mapping[str, str], errors: ErrorTracker
) -> dict[str, Any]:
    conf: dict[str, Any] = dict(FETCH_DEFAULTS)
    conf.update(client_config(bootstrap_servers, client_conf))
    conf.update(_FORCED)
    conf["error_cb"] = errors
    return conf


class PooledConsumer:
    """A consumer plus what the fetch loop needs to know about it."""

    def __init__(self, key: PoolKey) -> None:
        self.key = key
        self.errors = ErrorTracker()
        #: ``errors.connectivity_errors`` when the consumer's metadata was last refreshed.
        self.refreshed_at_errors = 0
        self.consumer = Consumer(consumer_config(key[0], dict(key[1]), self.errors))
        #: The consumer has had an answer from the cluster (not "never connected").
        self.connected = False
        #: Partitions are assigned (the consumer is fetching).
        self.assigned = False
        self.idle_since = time.monotonic()
        self.uses = 0
        #: How many times the consumer was assigned partitions.
        self.assigns = 0
        #: Id of each topic this consumer fetched (librdkafka keeps it in its metadata cache),
        #: as the pool knew it then; None when it was not asked.
        self.topic_ids: dict[str, str | None] = {}
        #: The topic fetched last vanished or was re-created: close it, never pool it.
        self.stale = False

    def unassign(self) -> bool:
        """Stop fetching (before going idle); False if the consumer is unusable."""
        if not self.assigned:
            return True
        try:
            self.consumer.unassign()
        except Exception as exc:  # a broken consumer is closed, not pooled
            log.debug("unassigning a fetch consumer failed: %s", exc)
            return False
        self.assigned = False
        return True

    def close(self) -> None:
        self.assigned = False
        try:
            self.consumer.close()
        except Exception as exc:  # closing a broken consumer must not mask the error
            log.debug("closing a fetch consumer failed: %s", exc)


class ConsumerPool:
    """Per-process pool of :class:`PooledConsumer` (thread-safe)."""

    def __init__(self, max_idle: int = MAX_IDLE, idle_ttl_s: float = IDLE_TTL_S) -> None:
        self.max_idle = max_idle
        self.idle_ttl_s = idle_ttl_s
        self._lock = threading.Lock()
        self._idle: list[PooledConsumer] = []
        #: (key, topic) -> (topic id or None, when it was asked), see :meth:`topic_id`.
        self._topic_ids: dict[tuple[PoolKey, str], tuple[str | None, float]] = {}
        self._admins: dict[PoolKey, AdminClient] = {}
        self._pid = os.getpid()
        self.created = 0
        self.reused = 0

    def _check_fork(self) -> None:
        if os.getpid() != self._pid:
            # librdkafka threads do not survive fork: forget (never close) the parent's.
            self._idle = []
            self._admins = {}
            self._topic_ids = {}
            self._pid = os.getpid()
            self.created = self.reused = 0

    def acquire(self, key: PoolKey, topics: Sequence[str] = ()) -> PooledConsumer:
        """An idle consumer for ``key`` (the most recently used), or a new one. An idle
        consumer that knew one of ``topics`` under another id is closed, not reused."""
        current_ids: dict[str, str | None] = dict.fromkeys(topics)
        if topics and any(e.key == key for e in self.idle()):
            current_ids = {topic: self.topic_id(key, topic) for topic in topics}
        expired: list[PooledConsumer] = []
        chosen: PooledConsumer | None = None
        with self._lock:
            self._check_fork()
            now = time.monotonic()
            keep: list[PooledConsumer] = []
            for entry in self._idle:
                too_old = now - entry.idle_since > self.idle_ttl_s
                stale = _knew_another(entry, key, current_ids)
                (expired if too_old or stale else keep).append(entry)
            self._idle = keep
            chosen = next((e for e in reversed(self._idle) if e.key == key), None)
            if chosen is not None:
                self._idle.remove(chosen)
                self.reused += 1
        for entry in expired:
            entry.close()
        if chosen is None:
            chosen = PooledConsumer(key)
            with self._lock:
                self.created += 1
        chosen.uses += 1
        chosen.topic_ids.update(current_ids)
        return chosen

    def topic_id(self, key: PoolKey, topic: str) -> str | None:
        """The id of ``topic`` now (:data:`NO_TOPIC` if it does not exist; asked at most once
        per :data:`TOPIC_ID_TTL_S`), or None if the cluster did not say (then not asked again
        for :data:`TOPIC_ID_UNKNOWN_TTL_S`)."""
        now = time.monotonic()
        with self._lock:
            self._check_fork()
            cached = self._topic_ids.get((key, topic))
            if cached is not None:
                known, asked = cached
                ttl = TOPIC_ID_TTL_S if known is not None else TOPIC_ID_UNKNOWN_TTL_S
                if now - asked < ttl:
                    return known
            admin = self._admins.get(key)
        conf = client_config(key[0], dict(key[1]), for_admin=True)
        topic_id, admin = _describe_topic_id(admin or AdminClient(conf), conf, topic)
        with self._lock:
            self._admins[key] = admin
            self._topic_ids[(key, topic)] = (topic_id, now)
        return topic_id

    def replace(self, entry: PooledConsumer) -> PooledConsumer:
        """Close ``entry`` (and the idle consumers of its key) and return a new consumer for
        its key, after a request of ``entry``'s went unanswered: its metadata refreshes would
        go to the broker that did not answer ("Unanswered handles" in
        :mod:`spark_kafka_group.kafka.config`)."""
        entry.close()
        with self._lock:  # the idle ones of its key would ask that broker too
            self._check_fork()
            same = [e for e in self._idle if e.key == entry.key]
            self._idle = [e for e in self._idle if e.key != entry.key]
        for old in same:
            old.close()
        fresh = PooledConsumer(entry.key)
        fresh.connected = entry.connected
        fresh.uses = 1
        fresh.topic_ids = dict.fromkeys(entry.topic_ids)
        with self._lock:
            self.created += 1
        return fresh

    def release(self, entry: PooledConsumer) -> None:
        """Return a consumer after a successful fetch (unassigned, so it stays quiet); one that
        met a vanished topic is closed."""
        if entry.stale or not entry.unassign():
            entry.close()
            return
        for topic, known in list(entry.topic_ids.items()):
            if known is None:  # a new consumer: the id it knows is the id now
                entry.topic_ids[topic] = self.topic_id(entry.key, topic)
        entry.idle_since = time.monotonic()
        evicted: list[PooledConsumer] = []
        with self._lock:
            self._check_fork()
            self._idle.append(entry)
            while len(self._idle) > self.max_idle:
                evicted.append(self._idle.pop(0))
        for old in evicted:
            old.close()

    def idle(self) -> list[PooledConsumer]:
        with self._lock:
            self._check_fork()
            return list(self._idle)

    def forget_topic(self, topic: str) -> None:
        """Close every idle consumer that knew ``topic`` (it vanished)."""
        with self._lock:
            self._check_fork()
            gone = [e for e in self._idle if topic in e.topic_ids]
            self._idle = [e for e in self._idle if topic not in e.topic_ids]
            self._topic_ids = {k: v for k, v in self._topic_ids.items() if k[1] != topic}
        for entry in gone:
            entry.close()

    def clear(self) -> None:
        """Close every idle consumer (tests, shutdown)."""
        with self._lock:
            self._check_fork()
            self._admins = {}
            self._topic_ids = {}
            entries, self._idle = self._idle, []
        for entry in entries:
            entry.close()


def _knew_another(
    entry: PooledConsumer, key: PoolKey, current_ids: Mapping[str, str | None]
) -> bool:
    """Whether ``entry`` knew one of the topics under an id other than its id now (None:
    not known now)."""
    if entry.key != key:
        return False
    return any(
        current is not None and topic in entry.topic_ids and entry.topic_ids[topic] != current
        for topic, current in current_ids.items()
    )


def _describe_topic_id(
    admin: AdminClient, conf: dict[str, Any], topic: str
) -> tuple[str | None, AdminClient]:
    """``topic``'s id from DescribeTopics, :data:`NO_TOPIC` if the cluster does not have it,
    None if the cluster did not say within :data:`TOPIC_ID_TIMEOUT_S` (the fetch that follows
    reports an unreachable broker); and the AdminClient to keep. An unanswered attempt is
    followed by one through a new AdminClient (made from ``conf``), whose metadata names the
    controller as a broker that answers ("Unanswered handles" in
    :mod:`spark_kafka_group.kafka.config`)."""
    deadline = time.monotonic() + TOPIC_ID_TIMEOUT_S
    while True:
        try:
            future = admin.describe_topics(
                TopicCollection([topic]), request_timeout=TOPIC_ID_ATTEMPT_S
            )[topic]
            return str(future.result(timeout=TOPIC_ID_ATTEMPT_S + 1).topic_id), admin
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return NO_TOPIC, admin
            last: Exception = exc
        except Exception as exc:  # a timeout of the future itself
            last = exc
        if deadline - time.monotonic() <= 0:
            log.debug("describing topic %s for the consumer pool failed: %s", topic, last)
            return None, admin
        admin = AdminClient(conf)


_POOL = ConsumerPool()
atexit.register(_POOL.clear)


def consumer_pool() -> ConsumerPool:
    """The process-wide pool used by :func:`spark_kafka_group.fetcher.fetch`."""
    return _POOL
