"""The parsed options: :class:`SourceOptions` and the member's :class:`GroupSettings`.

``GroupSettings`` takes every default from the option specs, so code that builds one (tests,
benchmarks, tools) names only what differs from a query's defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_kafka_group.group.assignors import Assignor, builtin_assignors
from spark_kafka_group.group.config import GroupConfig
from spark_kafka_group.kafka.config import OffsetFetchRetry
from spark_kafka_group.options.offsets import OffsetLimit
from spark_kafka_group.options.specs import SPECS_BY_NAME


def _spec_default(option: str) -> Callable[[], Any]:
    """The default of ``option`` as the option parser gives it."""
    return SPECS_BY_NAME[option].default_value


@dataclass(frozen=True)
class GroupSettings:
    """The member's group-protocol settings (Kafka consumer equivalents in parentheses)."""

    group_id: str
    #: ``groupStore``: where the group log lives (no default: see the option).
    store: str
    storage_options: Mapping[str, str] = field(default_factory=dict)
    # heartbeat.interval.ms
    heartbeat_interval_ms: int = field(default_factory=_spec_default("heartbeatIntervalMs"))
    # session.timeout.ms
    session_timeout_ms: int = field(default_factory=_spec_default("sessionTimeoutMs"))
    # max.poll.interval.ms
    rebalance_timeout_ms: int = field(default_factory=_spec_default("rebalanceTimeoutMs"))
    #: The assignors this member supports, most preferred first; the group uses the one
    #: every member supports (partition.assignment.strategy).
    assignment_strategy: tuple[Assignor, ...] = field(
        default_factory=_spec_default("assignmentStrategy")
    )
    instance_id: str | None = None  # group.instance.id
    # scheduled.rebalance.max.delay.ms
    scheduled_rebalance_max_delay_ms: int = field(
        default_factory=_spec_default("scheduledRebalanceMaxDelayMs")
    )
    rebalance_listener: str | None = None
    #: group.initial.rebalance.delay.ms (a broker setting in Kafka; here the group's first
    #: member's, as it starts the rebalance).
    initial_rebalance_delay_ms: int = field(
        default_factory=_spec_default("initialRebalanceDelayMs")
    )
    #: How long the group log keeps its history for Delta time travel (groupLogRetention).
    log_retention_ms: int = field(default_factory=_spec_default("groupLogRetention"))

    @property
    def protocol_names(self) -> tuple[str, ...]:
        """The protocols this member sends when it joins, most preferred first."""
        return tuple(a.name for a in self.assignment_strategy)

    @property
    def assignors(self) -> dict[str, Assignor]:
        """Every assignor this member can run as the leader: the built-ins and its own."""
        return {**builtin_assignors(), **{a.name: a for a in self.assignment_strategy}}

    @property
    def group_config(self) -> GroupConfig:
        """The group coordinator's configuration as this member runs it (as the leader)."""
        return GroupConfig(
            scheduled_rebalance_max_delay_ms=self.scheduled_rebalance_max_delay_ms,
            assignors=self.assignors,
            initial_rebalance_delay_ms=self.initial_rebalance_delay_ms,
        )


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    subscribe: tuple[str, ...] | None
    subscribe_pattern: str | None
    assign: Mapping[str, tuple[int, ...]] | None
    group: GroupSettings
    starting_offsets: OffsetLimit
    #: ``endingOffsets`` / ``endingTimestamp`` / ``endingOffsetsByTimestamp`` (batch reads only);
    #: ``None`` when none is given.
    ending_offsets: OffsetLimit | None
    fail_on_data_loss: bool
    max_offsets_per_trigger: int | None
    #: ``maxBytesPerTrigger``: about this many bytes of keys and values per micro-batch.
    max_bytes_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    #: ``parallelism``: about this many Spark tasks read a batch.
    parallelism: int
    min_partitions: int | None
    max_records_per_partition: int | None
    include_headers: bool
    poll_timeout_ms: int
    commit_to_kafka: bool
    import_from_kafka_group: str | None
    #: ``deltaSinkTable``: the table Spark's Delta sink writes (a takeover reads what landed).
    delta_sink_table: str | None
    #: librdkafka settings from ``kafka.*`` options, prefix removed, Java keys translated.
    kafka_params: Mapping[str, str]
    fetch_offset_retry: OffsetFetchRetry
