"""The group protocol's defaults, the one place that knows them.

The source's options (:mod:`spark_kafka_group.options`) document and apply these; the group
core's requests (:class:`~spark_kafka_group.group.messages.JoinRequest`), its member metadata
and its configuration (:class:`~spark_kafka_group.group.config.GroupConfig`) default to the
same values. A leaf module (no imports), so that every layer can read it without a cycle.
"""

from __future__ import annotations

#: Kafka consumer's ``session.timeout.ms`` default (option ``sessionTimeoutMs``).
SESSION_TIMEOUT_MS = 45_000
#: Kafka consumer's ``heartbeat.interval.ms`` default (option ``heartbeatIntervalMs``).
HEARTBEAT_INTERVAL_MS = 3_000
#: How long a rebalance waits for members (option ``rebalanceTimeoutMs``). Kafka's
#: ``max.poll.interval.ms`` defaults to 5 minutes; a streaming query's member is polled by its
#: own background thread, so one minute is enough and a departed member's partitions move
#: sooner.
REBALANCE_TIMEOUT_MS = 60_000
#: Kafka broker's ``group.initial.rebalance.delay.ms`` default (option
#: ``initialRebalanceDelayMs``).
INITIAL_REBALANCE_DELAY_MS = 3_000
#: KIP-415 ``scheduled.rebalance.max.delay.ms`` (option ``scheduledRebalanceMaxDelayMs``): a
#: departed static member's partitions are redistributed at once.
SCHEDULED_REBALANCE_MAX_DELAY_MS = 0
