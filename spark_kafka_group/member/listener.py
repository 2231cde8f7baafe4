"""The user's rebalance listener (option ``rebalanceListener = "module:Class"``).

Like Kafka's ``ConsumerRebalanceListener``: ``on_partitions_assigned``,
``on_partitions_revoked`` and ``on_partitions_lost`` run on the driver, in the query's
streaming-source process, with a sorted list of ``TopicPartition(topic, partition)`` named
tuples. Every method is optional. An exception in the listener is logged, never fatal to the
query.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any, Protocol

from spark_kafka_group.errors import OptionError
from spark_kafka_group.group.metadata import TopicPartition

log = logging.getLogger(__name__)


class RebalanceListener(Protocol):
    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None: ...
    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None: ...
    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None: ...


class RebalanceListenerRunner:
    def __init__(self, listener: Any | None) -> None:
        self._listener = listener

    @classmethod
    def load(cls, spec: str | None) -> RebalanceListenerRunner:
        if not spec:
            return cls(None)
        module_name, _, class_name = spec.partition(":")
        try:
            target: Any = importlib.import_module(module_name)
            for part in class_name.split("."):
                target = getattr(target, part)
            return cls(target())
        except Exception as exc:
            raise OptionError(
                f"Option 'rebalanceListener' = {spec!r}: cannot create the listener "
                f"({type(exc).__name__}: {exc}). The module must be importable on the driver "
                "and the class must take no arguments."
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
