"""The coordinator's local configuration.

Configuration only shapes the records a member writes (which requests it accepts, how long a
scheduled rebalance delay is); replay never reads it, so members with different settings still
fold the same log to the same state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from spark_kafka_group.group import defaults
from spark_kafka_group.group.assignors import Assignor, builtin_assignors

#: The session timeouts a group accepts (Kafka's broker defaults of
#: group.min.session.timeout.ms / group.max.session.timeout.ms). The ``sessionTimeoutMs`` option
#: is checked against these when a query is defined, the JOIN again by the coordinator.
MIN_SESSION_TIMEOUT_MS = 6_000
MAX_SESSION_TIMEOUT_MS = 1_800_000


@dataclass(frozen=True)
class GroupConfig:
    #: Kafka's group.min.session.timeout.ms / group.max.session.timeout.ms.
    min_session_timeout_ms: int = MIN_SESSION_TIMEOUT_MS
    max_session_timeout_ms: int = MAX_SESSION_TIMEOUT_MS
    #: KIP-415 scheduled.rebalance.max.delay.ms: how long a departed static member's
    #: partitions wait for it (0: redistribute at once).
    scheduled_rebalance_max_delay_ms: int = defaults.SCHEDULED_REBALANCE_MAX_DELAY_MS
    #: Kafka's group.initial.rebalance.delay.ms: the first rebalance of an empty group waits
    #: this long for more members, again after each new one, within the rebalance timeout.
    initial_rebalance_delay_ms: int = defaults.INITIAL_REBALANCE_DELAY_MS
    #: Kafka's group.max.size (None: unbounded).
    max_group_size: int | None = None
    #: Kafka's offset.metadata.max.bytes (characters here).
    max_offset_metadata_length: int = 4096
    #: Assignors by protocol name; the leader must know the group's chosen protocol.
    assignors: Mapping[str, Assignor] = field(default_factory=lambda: dict(builtin_assignors()))
