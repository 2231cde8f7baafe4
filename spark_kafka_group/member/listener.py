"""The user's rebalance listener (option ``rebalanceListener = "module:Class"``).

Like Kafka's ``ConsumerRebalanceListener``: ``on_partitions_assigned``,
``on_partitions_revoked`` and ``on_partitions_lost`` run on the driver, in the query's
streaming-source process, with a sorted list of ``TopicPartition(topic, partition)`` named
tuples. Every method is optional. An exception in the listener is logged, never fatal to the
query.
"""

from __future__ import annotations

import logging
from typing import Any

from spark_kafka_group.errors import OptionError
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.user_class import resolve_class

log = logging.getLogger(__name__)

LISTENER_OPTION = "Option 'rebalanceListener'"
LISTENER_EXAMPLE = "my_pkg.listeners:AuditListener"


class RebalanceListenerRunner:
    def __init__(self, listener: Any | None) -> None:
        self._listener = listener

    @classmethod
    def load(cls, spec: str | None) -> RebalanceListenerRunner:
        if not spec:
            return cls(None)
        listener_class = resolve_class(
            spec, subject=f"{LISTENER_OPTION} = {spec!r}", example=LISTENER_EXAMPLE
        )
        try:
            return cls(listener_class())
        except Exception as exc:
            raise OptionError(
                f"{LISTENER_OPTION} = {spec!r}: cannot create the listener "
                f"({type(exc).__name__}: {exc}): the class must take no constructor arguments."
            ) from None

    def assigned(self, partitions: list[TopicPartition]) -> None:
        self._call("on_partitions_assigned", partitions)

    def revoked(self, partitions: list[TopicPartition]) -> None:
        self._call("on_partitions_revoked", partitions)

    def lost(self, partitions: list[TopicPartition]) -> None:
        self._call("on_partitions_lost", partitions)

    def _call(self, method: str, partitions: list[TopicPartition]) -> None:
        callback = getattr(self._listener, method, None)
        if callback is None:
            return
        try:
            callback(list(partitions))
        except Exception:
            log.exception("rebalance listener %s failed (ignored)", method)
