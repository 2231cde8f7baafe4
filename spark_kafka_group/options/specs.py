"""Every option of the source, declared: name, type, default, checks and documentation.

Parsing is a loop over :data:`OPTION_SPECS` (:mod:`spark_kafka_group.options.parse`), the
reference page is generated from them (:mod:`spark_kafka_group.options.docs`), and
``GroupSettings`` takes its defaults from them. A default that another layer applies too is
read from that layer (the group protocol's from :mod:`spark_kafka_group.group.defaults`), never
written here a second time.
"""

from __future__ import annotations

import os

from spark_kafka_group.kafka.config import OffsetFetchRetry
from spark_kafka_group.options.group import GROUP_SPECS
from spark_kafka_group.options.kafka import KAFKA_FAMILY
from spark_kafka_group.options.offsets import (
    ENDING_WORDS,
    STARTING_WORDS,
    TIMESTAMP_STRATEGY,
    TIMESTAMPS_JSON,
    no_earliest_end,
    offsets_type,
)
from spark_kafka_group.options.spec import OptionSpec
from spark_kafka_group.options.store import STORE_FAMILY
from spark_kafka_group.options.subscription import ASSIGNMENT_JSON, PATTERN, TOPICS
from spark_kafka_group.options.values import (
    BOOLEAN,
    BYTES,
    DURATION,
    EPOCH_MS,
    INTEGER,
    MILLISECONDS,
    STRING,
    non_negative,
    positive,
)


def cpus_of_this_process() -> int:
    """``parallelism``'s default: the CPUs this process may run on (the driver's, where the
    options are parsed), which ``local[*]`` gives Spark's tasks."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# Every option other than the kafka.* / groupStore.* families, with its default.
_SOURCE_SPECS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "kafka.bootstrap.servers",
        STRING,
        None,
        "The Kafka cluster's bootstrap servers, comma-separated `host:port`.",
        default_doc="required",
        required=", e.g. .option('kafka.bootstrap.servers', 'broker1:9092,broker2:9092').",
        field="bootstrap_servers",
    ),
    OptionSpec(
        "subscribe",
        TOPICS,
        None,
        "Comma-separated topics to read as a member of the group.",
        default_doc="required, or `subscribePattern` or `assign`",
        field="subscribe",
    ),
    OptionSpec(
        "subscribePattern",
        PATTERN,
        None,
        "A regular expression of topics to read; it must match the whole topic name.\n\n"
        "It is a Python regular expression (Python's `re`), not a Java one as in Spark's "
        "Kafka source: the common syntax (`orders-.*`, `(orders|payments)\\.v[0-9]+`) means "
        "the same, and Java-only syntax (`\\p{...}`, `\\Q...\\E`, `&&` in a class, "
        "`(?<name>...)`) is refused with what to write instead. "
        "A topic created later that matches is picked up while the query runs (the group "
        "rebalances) and starts at its earliest offset.",
        default_doc="required, or `subscribe` or `assign`",
        field="subscribe_pattern",
    ),
    OptionSpec(
        "assign",
        ASSIGNMENT_JSON,
        None,
        'JSON `{"topic": [0, 1]}`: read exactly these partitions without joining the group, '
        "as Kafka's `assign()`.\n\n"
        "Such a query commits its offsets to the group only while the group has no subscribing "
        "members, as in Kafka: a commit while queries subscribe with the same `groupId` fails "
        "the query with `CommitRejectedError`, naming the group and those members. Queries "
        "with `assign` do not split partitions between them: two `assign` "
        "queries with the same `groupId` and partitions both read all of them, as two Kafka "
        "consumers using `assign()` would. A partition number the topic does not have is an "
        "error naming the topic's partition count.",
        default_doc="required, or `subscribe` or `subscribePattern`",
        field="assign",
    ),
    OptionSpec(
        "startingOffsets",
        offsets_type(STARTING_WORDS),
        None,
        "Where a partition the group never committed starts: `earliest`, `latest`, `none` "
        "(fail) or JSON per partition.\n\n"
        'JSON is `{"topic": {"0": 23, "1": -2}}` (-2 earliest, -1 latest; unlisted partitions: '
        "latest). **Differs from Spark**, whose JSON must list every partition of the "
        "subscribed topics. A committed offset always wins over this option. A partition "
        "discovered later (a new partition, a new topic matching `subscribePattern`, also one "
        "created while the query was stopped) starts at **earliest** whatever this says, as in "
        "Spark's Kafka source, so nothing written to it before its discovery is lost.\n\n"
        "Batch reads accept `earliest` (their default), JSON without -1, or `group`: the "
        "group's committed offsets, partitions without a commit from earliest. `group` is "
        "refused in streams, which always continue from the group's commits. Both defaults are "
        "those of Spark's Kafka source: a new stream reads what arrives after it starts.",
        default_doc="`latest` (streams), `earliest` (batch reads)",
    ),
    OptionSpec(
        "failOnDataLoss",
        BOOLEAN,
        "true",
        "Fail when a position is out of range (retention deleted the records, or the topic "
        "was re-created).\n\n"
        "`false` continues at the nearest offset that still exists (below the log start: the "
        "log start; past the end, for instance on a re-created topic: the earliest offset, as "
        "Spark does) and logs how many offsets it skipped.",
        field="fail_on_data_loss",
    ),
    OptionSpec(
        "maxOffsetsPerTrigger",
        INTEGER,
        None,
        "At most this many records per micro-batch, split across partitions in proportion to "
        "their backlog.\n\n"
        "Ignored by batch reads, as in Spark.",
        checks=(positive,),
        field="max_offsets_per_trigger",
    ),
    OptionSpec(
        "maxBytesPerTrigger",
        BYTES,
        None,
        "About this many bytes of keys and values (and headers, with `includeHeaders`) per "
        "micro-batch (`64m`, `1g`; a bare number is bytes), split across partitions as "
        "`maxOffsetsPerTrigger` splits records.\n\n"
        "A soft limit, as Delta's `maxBytesPerTrigger`: Kafka's offsets count records, so the "
        "source samples the records at each partition's position (its first 50, again after "
        "a minute) and turns the limit into a record count; a batch always takes at least "
        "one record. With `maxOffsetsPerTrigger` too, the smaller batch wins. For topics of "
        "mixed record sizes, where a record count bounds a batch's memory badly. "
        "Ignored by batch reads.\n\n"
        "**Differs from Spark**: Spark's Kafka source has no byte limit.",
        checks=(positive,),
        field="max_bytes_per_trigger",
    ),
    OptionSpec(
        "parallelism",
        INTEGER,
        None,
        "The cores Spark runs the query's tasks on: a batch is read by about this many tasks, "
        "each reading several partitions' ranges, balanced by records.\n\n"
        "A batch of fewer than 20,000 records a task runs fewer tasks (a Python task costs "
        "about what fetching 20,000 records does), one of more than 1,000,000 records a task "
        "more; `minPartitions` and `maxRecordsPerPartition` raise the count. The default, the "
        "number of CPUs the driver's process may use, is Spark's parallelism in `local[*]` "
        "mode; on a cluster set it to the executors' cores (for instance "
        "`spark.sparkContext.defaultParallelism`).\n\n"
        "**Differs from Spark**: Spark's Kafka source runs one task per partition's range.",
        checks=(positive,),
        default_doc="the driver's CPU count",
        fallback=cpus_of_this_process,
        field="parallelism",
    ),
    OptionSpec(
        "minPartitions",
        INTEGER,
        None,
        "At least this many Spark tasks per batch, large offset ranges split among them.\n\n"
        "Raises the number of tasks `parallelism` gives; ranges are still balanced by records "
        "over the tasks, several small ones sharing a task.",
        checks=(positive,),
        field="min_partitions",
    ),
    OptionSpec(
        "maxRecordsPerPartition",
        INTEGER,
        None,
        "At most this many records per Spark task: a batch with more runs more tasks, large "
        "offset ranges split among them.",
        checks=(positive,),
        field="max_records_per_partition",
    ),
    OptionSpec(
        "includeHeaders",
        BOOLEAN,
        "false",
        "Add a `headers array<struct<key:string,value:binary>>` column.",
        field="include_headers",
    ),
    OptionSpec(
        "kafkaConsumer.pollTimeoutMs",
        MILLISECONDS,
        "120000",
        "An executor fetch that makes no progress for this long fails with an error naming "
        "the partition and the servers.",
        checks=(positive,),
        field="poll_timeout_ms",
    ),
    OptionSpec(
        "commitToKafka",
        BOOLEAN,
        "false",
        "Also commit every accepted offset to the Kafka consumer group named `groupId`, for "
        "Kafka's lag tools.\n\n"
        "Best effort: sent asynchronously after the group log accepted the commit; a failure "
        "is logged and counted and never fails or slows a batch. See "
        "[Lag](operations.md#lag).",
        field="commit_to_kafka",
    ),
    OptionSpec(
        "deltaSinkTable",
        STRING,
        None,
        'The Delta table (path or URI) this query writes with `writeStream.format("delta")`: '
        "a partition taken over from a member that died is not written twice.\n\n"
        "Give every query of the group the same table. Before Spark runs a batch the member "
        "writes its plan beside the group log (`_sink_batches/`); a member taking over a "
        "partition reads, from the table's transactions, which batches of the previous owner's "
        "query landed and starts after them. Needs the progress listener "
        "(`spark_kafka_group.register(spark)`), and the table is opened with the "
        "`groupStore.*` storage options. It does not fence a member paused past its session "
        "timeout that resumes mid-batch; `ExactlyOnceDeltaWriter` in `foreachBatch` does. "
        "See [Exactly once into Delta](concepts.md#exactly-once-into-delta).",
        field="delta_sink_table",
    ),
    OptionSpec(
        "importFromKafkaGroup",
        STRING,
        None,
        "A Kafka consumer group whose committed offsets seed the partitions this group never "
        "committed.\n\n"
        "For migrating a plain Kafka consumer application; it applies before "
        "`startingOffsets`. `kafka-group import-from-kafka` does the same once.",
        field="import_from_kafka_group",
    ),
    # Spark's Kafka source names: timestamp starts, batch ranges, trigger minimums.
    OptionSpec(
        "startingTimestamp",
        EPOCH_MS,
        None,
        "Start every partition the group never committed at its first record with a "
        "timestamp at or after this (epoch ms).\n\n"
        "Takes precedence over `startingOffsetsByTimestamp` and `startingOffsets`, as in "
        "Spark. How timestamps are resolved: "
        "[Where a partition starts](concepts.md#where-a-partition-starts).",
        checks=(non_negative,),
    ),
    OptionSpec(
        "startingOffsetsByTimestamp",
        TIMESTAMPS_JSON,
        None,
        'JSON `{"topic": {"0": 1700000000000}}`: a start timestamp per partition, for '
        "partitions the group never committed.\n\n"
        "Unlisted partitions follow `startingOffsets`; takes precedence over it.",
    ),
    OptionSpec(
        "startingOffsetsByTimestampStrategy",
        TIMESTAMP_STRATEGY,
        "error",
        "When no record is at or after the start timestamp: `error` (fail, naming the "
        "partition) or `latest`.",
    ),
    OptionSpec(
        "endingOffsets",
        offsets_type(ENDING_WORDS),
        None,
        "Batch reads only: where the read ends, `latest` or JSON per partition (-1 latest; "
        "unlisted partitions: latest).\n\n"
        "Refused in streams, as `endingTimestamp` and `endingOffsetsByTimestamp` are; -2 "
        "(earliest) is refused.",
        default_doc="`latest` (batch reads)",
        checks=(no_earliest_end,),
    ),
    OptionSpec(
        "endingTimestamp",
        EPOCH_MS,
        None,
        "Batch reads only: end every partition (exclusive) at its first record at or after "
        "this timestamp (epoch ms; no such record: latest).",
        checks=(non_negative,),
    ),
    OptionSpec(
        "endingOffsetsByTimestamp",
        TIMESTAMPS_JSON,
        None,
        'Batch reads only: JSON `{"topic": {"0": ms}}`, an end timestamp per partition, as '
        "`endingTimestamp`.",
    ),
    OptionSpec(
        "minOffsetsPerTrigger",
        INTEGER,
        None,
        "A trigger with fewer new records plans no batch, unless `maxTriggerDelay` has passed "
        "since the last batch.\n\n"
        "Spark's semantics on every pyspark version; not applied under Trigger.AvailableNow; "
        "at most `maxOffsetsPerTrigger`; ignored by batch reads.",
        checks=(positive,),
        field="min_offsets_per_trigger",
    ),
    OptionSpec(
        "maxTriggerDelay",
        DURATION,
        "15m",
        "With `minOffsetsPerTrigger`: the longest wait between two batches (`500ms`, `30s`, "
        "`15m`, `1h`, `2d`; a bare number is milliseconds).",
        field="max_trigger_delay_ms",
    ),
    # Spark's names and defaults (its Kafka source's KafkaOffsetReaderAdmin).
    OptionSpec(
        "fetchOffset.numRetries",
        INTEGER,
        str(OffsetFetchRetry.num_retries),
        "Attempts, the first included, at a driver-side metadata or ListOffsets call that gets "
        "no answer.\n\n"
        "Each attempt lasts at most `kafka.default.api.timeout.ms` (3 s when no bootstrap "
        "server has ever answered); then the query fails naming the servers, the request, the "
        "time and these options.",
        checks=(positive,),
    ),
    OptionSpec(
        "kafka.default.api.timeout.ms",
        MILLISECONDS,
        str(OffsetFetchRetry.api_timeout_ms),
        "How long one attempt at a driver-side Kafka request (metadata, ListOffsets, a Kafka "
        "group's offsets) keeps sending it again (the Java client's setting of that name).\n\n"
        "Within an attempt, a request that a broker does not answer within 1 s, or answers "
        "with a leadership error (NOT_LEADER_OR_FOLLOWER, a fenced or unknown leader epoch, "
        "no leader yet), is sent again through a new client that asked a broker that answers "
        "for the metadata, so it reaches the partition's new leader once Kafka elected one "
        "(an earlier send's late answer is taken too); a dead node in "
        "`kafka.bootstrap.servers` is skipped while another answers. Authentication and TLS "
        "errors fail at once. See [Broker failures](operations.md#broker-failures).",
        checks=(positive,),
    ),
    OptionSpec(
        "fetchOffset.retryIntervalMs",
        MILLISECONDS,
        str(OffsetFetchRetry.retry_interval_ms),
        "The pause between two of those attempts (Spark's Kafka source uses 1000 ms, though "
        "its guide says 10).",
        checks=(non_negative,),
    ),
)

#: Every option other than the kafka.* / groupStore.* families, in the order they are parsed.
OPTION_SPECS: tuple[OptionSpec, ...] = (*_SOURCE_SPECS[:4], *GROUP_SPECS, *_SOURCE_SPECS[4:])

#: The option families: any key under these prefixes is passed on (documented with the rest).
OPTION_FAMILIES: tuple[OptionSpec, ...] = (KAFKA_FAMILY, STORE_FAMILY)

SPECS_BY_KEY = {spec.name.lower(): spec for spec in OPTION_SPECS}
SPECS_BY_NAME = {spec.name: spec for spec in OPTION_SPECS}
