"""The ``kafka.*`` family: librdkafka settings passed through, except those the source owns."""

from __future__ import annotations

from spark_kafka_group.errors import OptionError
from spark_kafka_group.options.spec import OptionSpec
from spark_kafka_group.options.values import STRING, ValueType

#: Prefix of the options passed to the Kafka consumer (any case).
KAFKA_OPTION_PREFIX = "kafka."

#: librdkafka settings the source decides itself, with the reason shown to the user.
OWNED_KAFKA_KEYS: dict[str, str] = {
    "group.id": "use the option 'groupId' instead. This source runs the consumer group "
    "itself, in its group log (<groupStore>/<groupId>), not in the broker's group "
    "coordinator, so a Kafka group.id would be ignored; with commitToKafka=true the offsets "
    "are also committed to the Kafka consumer group named after groupId",
    "group.instance.id": "use the option 'groupInstanceId'",
    "enable.auto.commit": "offsets are committed to the group log after each micro-batch",
    "enable.auto.offset.store": "offsets are committed to the group log after each micro-batch",
    "auto.offset.reset": "use the option 'startingOffsets' (earliest, latest, none or JSON)",
    "auto.commit.interval.ms": "offsets are committed to the group log after each micro-batch",
    "session.timeout.ms": "use the option 'sessionTimeoutMs'",
    "heartbeat.interval.ms": "use the option 'heartbeatIntervalMs'",
    "max.poll.interval.ms": "use the option 'rebalanceTimeoutMs'",
    "partition.assignment.strategy": "use the option 'assignmentStrategy'",
    "group.protocol": "the group protocol is implemented by the source itself",
    "group.remote.assignor": "use the option 'assignmentStrategy'",
    "enable.partition.eof": "the fetcher sets it to find the end of a range",
    "key.deserializer": "records are returned as binary; cast or decode in Spark",
    "value.deserializer": "records are returned as binary; cast or decode in Spark",
}


def kafka_key(option: str) -> str:
    """The librdkafka key of a ``kafka.*`` option, lower-cased; refused if the source owns it."""
    key = option[len(KAFKA_OPTION_PREFIX) :].lower()
    if key in OWNED_KAFKA_KEYS:
        raise OptionError(f"Option 'kafka.{key}' is not allowed: {OWNED_KAFKA_KEYS[key]}.")
    return key


KAFKA_FAMILY = OptionSpec(
    "kafka.<key>",
    ValueType("librdkafka setting", STRING.parse),
    None,
    "Passed to the librdkafka consumer without the prefix: security, fetch tuning.\n\n"
    'The Java client\'s security keys, and the Java consumer settings a `format("kafka")` '
    "job passes (`fetch.max.wait.ms`, `max.poll.records` ...), are translated where "
    "librdkafka has an equivalent and refused with the reason where it has none: see "
    "[Kafka security](kafka-security.md). Keys the source decides itself are refused, each "
    "with what to use instead (below).\n\n"
    "Two librdkafka defaults differ here, for brokers that fail: "
    "`enable.sparse.connections` is false (a connection to every broker, so a request "
    "waiting for a dead leader does not reconnect to it without pause) and "
    "`socket.timeout.ms` is 10000 (a hung broker's connections are closed after 10 s, about "
    "when Kafka fences it, instead of 60 s). Set either to change it.",
    default_doc="—",
)
