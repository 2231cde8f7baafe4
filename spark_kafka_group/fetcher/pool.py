"""Module-level pool of fetch consumers, so a reused Python worker does not reconnect per task.

Keyed by ``(bootstrap servers, client configuration)``. A consumer returned to the pool is
unassigned, so an idle consumer sends no fetch requests; the next fetch assigns its own
partition and offset (a re-assign costs about one ``fetch.wait.max.ms``, an open connection
is kept). librdkafka's pause/resume is not used: a resume took 0.7-1 s in librdkafka 2.16.
Bounded (:data:`MAX_IDLE`), idle consumers expire after :data:`IDLE_TTL_S`, a consumer that
saw an error is closed instead of returned, and a forked child never uses its parent's.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer

from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.kafka.config import ErrorTracker, client_config

log = logging.getLogger(__name__)

#: Idle consumers kept per Python worker process (each holds a connection and up to
#: ``queued.max.messages.kbytes`` of prefetched records).
MAX_IDLE = 4
#: Idle consumers older than this are closed instead of reused.
IDLE_TTL_S = 300.0

#: librdkafka requires a group id for a consumer; it is never used to join a group or
#: commit (partitions are assigned, auto commit and offset store are off).
FETCHER_GROUP_ID = "spark-kafka-group-fetcher"

# Defaults tuned for bulk reads of one partition at a time; ``kafka.*`` options override.
# fetch.wait.max.ms is low because a consumer moving to another partition first waits for
# its in-flight (long-poll) fetch; idle pooled consumers are unassigned, so they do not poll.
FETCH_DEFAULTS: dict[str, Any] = {
    "group.id": FETCHER_GROUP_ID,
    "isolation.level": "read_uncommitted",
    "max.partition.fetch.bytes": 8 * 1024 * 1024,
    "fetch.max.bytes": 64 * 1024 * 1024,
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
        self.consumer = Consumer(consumer_config(key[0], dict(key[1]), self.errors))
        #: The consumer has had an answer from the cluster (not "never connected").
        self.connected = False
        #: The partition currently assigned, or None.
        self.assigned: TopicPartition | None = None
        self.idle_since = time.monotonic()
        self.uses = 0
        #: How many times the consumer was assigned a partition.
        self.assigns = 0

    def unassign(self) -> bool:
        """Stop fetching (before going idle); False if the consumer is unusable."""
        if self.assigned is None:
            return True
        try:
            self.consumer.unassign()
        except Exception as exc:  # a broken consumer is closed, not pooled
            log.debug("unassigning a fetch consumer failed: %s", exc)
            return False
        self.assigned = None
        return True

    def close(self) -> None:
        self.assigned = None
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
        self._pid = os.getpid()
        self.created = 0
        self.reused = 0

    def _check_fork(self) -> None:
        if os.getpid() != self._pid:
            # librdkafka threads do not survive fork: forget (never close) the parent's.
            self._idle = []
            self._pid = os.getpid()
            self.created = self.reused = 0

    def acquire(self, key: PoolKey) -> PooledConsumer:
        """An idle consumer for ``key`` (the most recently used), or a new one."""
        expired: list[PooledConsumer] = []
        chosen: PooledConsumer | None = None
        with self._lock:
            self._check_fork()
            now = time.monotonic()
            keep: list[PooledConsumer] = []
            for entry in self._idle:
                (expired if now - entry.idle_since > self.idle_ttl_s else keep).append(entry)
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
        return chosen

    def release(self, entry: PooledConsumer) -> None:
        """Return a consumer after a successful fetch (unassigned, so it stays quiet)."""
        if not entry.unassign():
            entry.close()
            return
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

    def clear(self) -> None:
        """Close every idle consumer (tests, shutdown)."""
        with self._lock:
            self._check_fork()
            entries, self._idle = self._idle, []
        for entry in entries:
            entry.close()


_POOL = ConsumerPool()
atexit.register(_POOL.clear)


def consumer_pool() -> ConsumerPool:
    """The process-wide pool used by :func:`spark_kafka_group.fetcher.fetch`."""
    return _POOL
