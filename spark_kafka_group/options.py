"""The source's options, parsed once into a typed, validated :class:`SourceOptions`.

Spark hands a Python data source its options lower-cased (``CaseInsensitiveDict``), so every
name is matched case-insensitively and messages quote the documented spelling. Option names
are public API: keep them.

* ``kafka.*`` keys pass through to librdkafka (security, fetch tuning, ...) except the keys
  the source must own, which are refused with the option to use instead. The Java client's
  security keys are translated to librdkafka's (:mod:`spark_kafka_group.kafka.java_settings`).
* ``groupStore.*`` keys pass through to delta-rs as storage options (S3, ADLS, GCS).
* Anything else that is not a known option is an error naming it and the closest valid name.
"""

from __future__ import annotations

import difflib
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from spark_kafka_group.errors import OptionError
from spark_kafka_group.group.assignors import (
    Assignor,
    AssignorLookupError,
    builtin_assignors,
    load_assignor,
)
from spark_kafka_group.group.config import MAX_SESSION_TIMEOUT_MS, MIN_SESSION_TIMEOUT_MS
from spark_kafka_group.group.metadata import TopicPartition, partition_name
from spark_kafka_group.kafka.config import OffsetFetchRetry
from spark_kafka_group.kafka.java_settings import translate_java_settings
from spark_kafka_group.store.paths import default_group_store, validate_group_id
from spark_kafka_group.store.table_properties import DEFAULT_LOG_RETENTION_MS
from spark_kafka_group.user_class import check_class_spec

OffsetMode = Literal["earliest", "latest", "none", "group", "json"]

#: Kafka's special ListOffsets timestamps, also used by Spark's per-partition JSON.
EARLIEST = -2
LATEST = -1

# librdkafka settings the source decides itself, with the reason shown to the user.
_OWNED_KAFKA_KEYS: dict[str, str] = {
    "group.id": "use the option 'groupId': the group is coordinated through the group log",
    "group.instance.id": "use the option 'groupInstanceId'",
    "enable.auto.commit": "offsets are committed to the group log after each micro-batch",
    "enable.auto.offset.store": "offsets are committed to the group log after each micro-batch",
    "auto.offset.reset": "use the option 'startingOffsets' (earliest, latest, none or JSON)",
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


@dataclass(frozen=True)
class _Spec:
    """One option as users see it; ``docs/options.md`` is generated from these
    (:mod:`spark_kafka_group.docs_options`), so ``doc`` is the option's user documentation, in
    Markdown: a one-sentence summary, then optionally a blank line and the details."""

    name: str  # documented spelling
    default: str | None
    doc: str
    #: The default as the reference shows it, where ``default`` is not a literal value
    #: (computed, required, or applying only to some reads).
    default_doc: str | None = None


# Every option other than the kafka.* / groupStore.* families, with its default.
OPTION_SPECS: tuple[_Spec, ...] = (
    _Spec(
        "kafka.bootstrap.servers",
        None,
        "The Kafka cluster's bootstrap servers, comma-separated `host:port`.",
        default_doc="required",
    ),
    _Spec(
        "subscribe",
        None,
        "Comma-separated topics to read as a member of the group.",
        default_doc="required, or `subscribePattern` or `assign`",
    ),
    _Spec(
        "subscribePattern",
        None,
        "A regular expression of topics to read; it must match the whole topic name.\n\n"
        "A topic created later that matches is picked up while the query runs (the group "
        "rebalances) and starts at its earliest offset.",
        default_doc="required, or `subscribe` or `assign`",
    ),
    _Spec(
        "assign",
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
    ),
    _Spec(
        "groupId",
        None,
        "The consumer group: every query with the same `groupId` shares the topics' "
        "partitions.\n\n"
        "1-255 letters, digits, `.`, `_` and `-`, not starting with `.` or `-`: it names the "
        "group log's directory. Batch reads need it too (for `startingOffsets=group`).",
        default_doc="required",
    ),
    _Spec(
        "groupStore",
        None,
        "Where group logs live: `<groupStore>/<groupId>` is the group's Delta table.\n\n"
        "A local directory, a shared mount or an object-store URI (`s3://`, `abfss://`, "
        "`az://`, `gs://`). Members on different machines must use shared storage; see "
        "[Object stores](object-stores.md).",
        default_doc="`$SPARK_KAFKA_GROUP_STORE`, else `~/.spark-kafka-group/groups`",
    ),
    _Spec(
        "startingOffsets",
        "earliest",
        "Where a partition the group never committed starts: `earliest`, `latest`, `none` "
        "(fail) or JSON per partition.\n\n"
        'JSON is `{"topic": {"0": 23, "1": -2}}` (-2 earliest, -1 latest; unlisted partitions: '
        "latest). A committed offset always wins over this option. A partition discovered "
        "later (a new partition, a new topic matching `subscribePattern`, also one created "
        "while the query was stopped) starts at **earliest** whatever this says, as in "
        "Spark's Kafka source, so nothing written to it before its discovery is lost.\n\n"
        "Batch reads accept `earliest` (the default), JSON without -1, or `group`: the group's "
        "committed offsets, partitions without a commit from earliest. `group` is refused in "
        "streams, which always continue from the group's commits.",
    ),
    _Spec(
        "failOnDataLoss",
        "true",
        "Fail when a position is out of range (retention deleted the records, or the topic "
        "was re-created).\n\n"
        "`false` continues at the nearest offset that still exists (below the log start: the "
        "log start; past the end, for instance on a re-created topic: the earliest offset, as "
        "Spark does) and logs how many offsets it skipped.",
    ),
    _Spec(
        "maxOffsetsPerTrigger",
        None,
        "At most this many records per micro-batch, split across partitions in proportion to "
        "their backlog.\n\n"
        "Ignored by batch reads, as in Spark.",
    ),
    _Spec(
        "minPartitions",
        None,
        "Split large offset ranges so that a batch has at least this many Spark tasks.",
    ),
    _Spec(
        "maxRecordsPerPartition",
        None,
        "Split an offset range above this many records into several Spark tasks.",
    ),
    _Spec(
        "includeHeaders",
        "false",
        "Add a `headers array<struct<key:string,value:binary>>` column.",
    ),
    _Spec(
        "kafkaConsumer.pollTimeoutMs",
        "120000",
        "An executor fetch that makes no progress for this long fails with an error naming "
        "the partition and the servers.",
    ),
    _Spec(
        "heartbeatIntervalMs",
        "3000",
        "How often a member renews its lease next to the group log (Kafka's "
        "`heartbeat.interval.ms`).\n\n"
        "It must be lower than `sessionTimeoutMs` (Kafka recommends at most a third of it). "
        "Renewing a lease writes nothing to the group log itself; see "
        "[Leases](concepts.md#leases).",
    ),
    _Spec(
        "sessionTimeoutMs",
        "45000",
        "A member whose lease is not renewed for this long is expired (Kafka's "
        "`session.timeout.ms`).\n\n"
        "From 6000 to 1800000 ms (Kafka's broker defaults `group.min.session.timeout.ms` and "
        "`group.max.session.timeout.ms`), checked when the query is defined. A static member "
        "(`groupInstanceId`) that stops keeps its partitions this long, waiting for its "
        "restart.",
    ),
    _Spec(
        "rebalanceTimeoutMs",
        "60000",
        "How long a rebalance waits for members to rejoin (Kafka's `max.poll.interval.ms`).\n\n"
        "It also bounds the initial rebalance delay and, with `sessionTimeoutMs`, how long a "
        "Trigger.AvailableNow run waits for its assignment. A group of hundreds of members on "
        "an object store needs more: see [Capacity](operations.md#capacity).",
    ),
    _Spec(
        "initialRebalanceDelayMs",
        "3000",
        "An empty group's first rebalance waits this long for more members, again after each "
        "new one (Kafka's broker setting `group.initial.rebalance.delay.ms`).\n\n"
        "Members starting together then share one first generation instead of a rebalance "
        "each. Use `0` for a single query that should start at once.",
    ),
    _Spec(
        "assignmentStrategy",
        "cooperative-sticky",
        "Assignors in order of preference, comma-separated: `range`, `roundrobin`, `sticky`, "
        "`cooperative-sticky` or your own `module:Class`.\n\n"
        "Kafka's `partition.assignment.strategy`. The group uses an assignor every member "
        "lists; a query with none in common with the running members is refused. See "
        "[Assignors](concepts.md#assignors).",
    ),
    _Spec(
        "groupInstanceId",
        None,
        "Static membership (Kafka's `group.instance.id`): a restart within the session "
        "timeout keeps its partitions, with no rebalance.\n\n"
        "Give each query of the group its own stable id. See "
        "[Static membership](concepts.md#static-membership).",
    ),
    _Spec(
        "groupLogRetention",
        "1h",
        "How far back Delta time travel (`versionAsOf` / `timestampAsOf`) reaches on the group "
        "log: its JSON commits and the files compaction replaced are kept this long (`1h`, "
        "`7d`; at least `1h`).\n\n"
        "Records themselves are never deleted: query the whole history by `log_version` or "
        "timestamp at any time. A new log is created with it; on an existing one the group's "
        "leader sets it at its next maintenance (give every query of the group the same).",
    ),
    _Spec(
        "scheduledRebalanceMaxDelayMs",
        "0",
        "How long a departed static member's partitions wait for it before they are "
        "reassigned (Kafka's KIP-415).",
    ),
    _Spec(
        "rebalanceListener",
        None,
        "A `module:Class` with `on_partitions_assigned`, `on_partitions_revoked` and "
        "`on_partitions_lost(partitions)` methods, run on the driver.",
    ),
    _Spec(
        "commitToKafka",
        "false",
        "Also commit every accepted offset to the Kafka consumer group named `groupId`, for "
        "Kafka's lag tools.\n\n"
        "Best effort: sent asynchronously after the group log accepted the commit; a failure "
        "is logged and counted and never fails or slows a batch. See "
        "[Lag](operations.md#lag).",
    ),
    _Spec(
        "importFromKafkaGroup",
        None,
        "A Kafka consumer group whose committed offsets seed the partitions this group never "
        "committed.\n\n"
        "For migrating a plain Kafka consumer application; it applies before "
        "`startingOffsets`. `kafka-group import-from-kafka` does the same once.",
    ),
    # Spark's Kafka source names: timestamp starts, batch ranges, trigger minimums.
    _Spec(
        "startingTimestamp",
        None,
        "Start every partition the group never committed at its first record with a "
        "timestamp at or after this (epoch ms).\n\n"
        "Takes precedence over `startingOffsetsByTimestamp` and `startingOffsets`, as in "
        "Spark. How timestamps are resolved: "
        "[Where a partition starts](concepts.md#where-a-partition-starts).",
    ),
    _Spec(
        "startingOffsetsByTimestamp",
        None,
        'JSON `{"topic": {"0": 1700000000000}}`: a start timestamp per partition, for '
        "partitions the group never committed.\n\n"
        "Unlisted partitions follow `startingOffsets`; takes precedence over it.",
    ),
    _Spec(
        "startingOffsetsByTimestampStrategy",
        "error",
        "When no record is at or after the start timestamp: `error` (fail, naming the "
        "partition) or `latest`.",
    ),
    _Spec(
        "endingOffsets",
        None,
        "Batch reads only: where the read ends, `latest` or JSON per partition (-1 latest; "
        "unlisted partitions: latest).\n\n"
        "Refused in streams, as `endingTimestamp` and `endingOffsetsByTimestamp` are; -2 "
        "(earliest) is refused.",
        default_doc="`latest` (batch reads)",
    ),
    _Spec(
        "endingTimestamp",
        None,
        "Batch reads only: end every partition (exclusive) at its first record at or after "
        "this timestamp (epoch ms; no such record: latest).",
    ),
    _Spec(
        "endingOffsetsByTimestamp",
        None,
        'Batch reads only: JSON `{"topic": {"0": ms}}`, an end timestamp per partition, as '
        "`endingTimestamp`.",
    ),
    _Spec(
        "minOffsetsPerTrigger",
        None,
        "A trigger with fewer new records plans no batch, unless `maxTriggerDelay` has passed "
        "since the last batch.\n\n"
        "Spark's semantics on every pyspark version; not applied under Trigger.AvailableNow; "
        "at most `maxOffsetsPerTrigger`; ignored by batch reads.",
    ),
    _Spec(
        "maxTriggerDelay",
        "15m",
        "With `minOffsetsPerTrigger`: the longest wait between two batches (`500ms`, `30s`, "
        "`15m`, `1h`, `2d`; a bare number is milliseconds).",
    ),
    # Spark's names and defaults (its Kafka source's KafkaOffsetReaderAdmin).
    _Spec(
        "fetchOffset.numRetries",
        "3",
        "Attempts, the first included, at a driver-side metadata or ListOffsets call that gets "
        "no answer.\n\n"
        "Each attempt waits at most 10 s (3 s when every bootstrap server refuses the "
        "connection); then the query fails naming the servers.",
    ),
    _Spec(
        "fetchOffset.retryIntervalMs",
        "1000",
        "The pause between two of those attempts (Spark's Kafka source uses 1000 ms, though "
        "its guide says 10).",
    ),
)

#: The option families: any key under these prefixes is passed on (documented with the rest).
OPTION_FAMILIES: tuple[_Spec, ...] = (
    _Spec(
        "kafka.<key>",
        None,
        "Passed to the librdkafka consumer without the prefix: security, fetch tuning.\n\n"
        "The Java client's security keys are translated or refused with the librdkafka key to "
        "use: see [Kafka security](kafka-security.md). Keys the source decides itself are "
        "refused, each with what to use instead (below).",
        default_doc="—",
    ),
    _Spec(
        "groupStore.<key>",
        None,
        "Storage options for delta-rs without the prefix, e.g. `groupStore.AWS_REGION`.\n\n"
        "Give the same options (without the prefix) to "
        "`spark_kafka_group.register(spark, storage_options={...})`: the listener that commits "
        "each completed batch runs in the driver, which does not see the source's options. "
        "See [Object stores](object-stores.md).",
        default_doc="—",
    ),
)

_SPECS_BY_KEY = {spec.name.lower(): spec for spec in OPTION_SPECS}


@dataclass(frozen=True)
class AtTimestamp:
    """The first offset whose record timestamp is at or after ``ms`` (epoch milliseconds)."""

    ms: int


@dataclass(frozen=True)
class OffsetLimit:
    """One end of an offset range, as Spark's ``KafkaOffsetRangeLimit``: ``startingOffsets`` (where
    a partition the group never committed starts) or ``endingOffsets`` (batch reads).

    ``mode`` is earliest / latest / none / group, or ``json`` with ``per_partition`` holding
    ``{TopicPartition: offset}`` where offset may be :data:`EARLIEST` or :data:`LATEST`.
    Partitions absent from the JSON get ``latest``, as in Spark's Kafka source. The timestamp
    options take precedence, as in Spark: ``timestamp_ms`` (``startingTimestamp``) over
    ``by_timestamp`` (``startingOffsetsByTimestamp``; unlisted partitions follow ``mode``).
    ``no_match_latest``: a timestamp after every record means latest (else an error).
    """

    mode: OffsetMode
    per_partition: Mapping[TopicPartition, int] = field(default_factory=dict)
    by_timestamp: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp_ms: int | None = None
    no_match_latest: bool = False

    def for_partition(self, topic: str, partition: int) -> int | AtTimestamp | None:
        """EARLIEST, LATEST, an exact offset or a timestamp; ``None`` means "no reset policy"
        (``none``) or "the group's committed offset" (``group``)."""
        if self.timestamp_ms is not None:
            return AtTimestamp(self.timestamp_ms)
        tp = TopicPartition(topic, partition)
        if tp in self.by_timestamp:
            return AtTimestamp(self.by_timestamp[tp])
        if self.mode == "earliest":
            return EARLIEST
        if self.mode == "latest":
            return LATEST
        if self.mode in ("none", "group"):
            return None
        return self.per_partition.get(tp, LATEST)


@dataclass(frozen=True)
class GroupSettings:
    """The member's group-protocol settings (Kafka consumer equivalents in parentheses)."""

    group_id: str
    store: str
    storage_options: Mapping[str, str]
    heartbeat_interval_ms: int  # heartbeat.interval.ms
    session_timeout_ms: int  # session.timeout.ms
    rebalance_timeout_ms: int  # max.poll.interval.ms
    #: The assignors this member supports, most preferred first; the group uses the one
    #: every member supports (partition.assignment.strategy).
    assignment_strategy: tuple[Assignor, ...]
    instance_id: str | None  # group.instance.id
    scheduled_rebalance_max_delay_ms: int  # scheduled.rebalance.max.delay.ms
    rebalance_listener: str | None
    #: group.initial.rebalance.delay.ms (a broker setting in Kafka; here the group's first
    #: member's, as it starts the rebalance).
    initial_rebalance_delay_ms: int = 3000
    #: How long the group log keeps its history for Delta time travel (groupLogRetention).
    log_retention_ms: int = DEFAULT_LOG_RETENTION_MS

    @property
    def protocol_names(self) -> tuple[str, ...]:
        """The protocols this member sends when it joins, most preferred first."""
        return tuple(a.name for a in self.assignment_strategy)

    @property
    def assignors(self) -> dict[str, Assignor]:
        """Every assignor this member can run as the leader: the built-ins and its own."""
        return {**builtin_assignors(), **{a.name: a for a in self.assignment_strategy}}


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
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    min_partitions: int | None
    max_records_per_partition: int | None
    include_headers: bool
    poll_timeout_ms: int
    commit_to_kafka: bool
    import_from_kafka_group: str | None
    #: librdkafka settings from ``kafka.*`` options, prefix removed, Java keys translated.
    kafka_params: Mapping[str, str]
    fetch_offset_retry: OffsetFetchRetry


#: Options starting with this (any case) are delta-rs storage options of the group store.
STORE_OPTION_PREFIX = "groupstore."


def storage_options_from(raw: Mapping[str, str]) -> dict[str, str]:
    """The ``groupStore.<key>`` options of ``raw`` as delta-rs storage options ``{key: value}``
    (what :func:`spark_kafka_group.register` and ``leave_group`` need on an object store)."""
    return {
        key[len(STORE_OPTION_PREFIX) :]: str(value)
        for key, value in raw.items()
        if key.lower().startswith(STORE_OPTION_PREFIX)
    }


def parse_options(raw: Mapping[str, str]) -> SourceOptions:
    """Validate ``raw`` (as given to ``DataSource.__init__``) into :class:`SourceOptions`."""
    values: dict[str, str] = {}
    kafka_params: dict[str, str] = {}
    storage_options = storage_options_from(raw)
    for key, value in raw.items():
        lower = key.lower()
        if lower in _SPECS_BY_KEY:
            values[lower] = str(value)
        elif lower.startswith(STORE_OPTION_PREFIX):
            continue
        elif lower.startswith("kafka."):
            kafka_key = key[len("kafka.") :].lower()
            if kafka_key in _OWNED_KAFKA_KEYS:
                raise OptionError(
                    f"Option 'kafka.{kafka_key}' is not allowed: {_OWNED_KAFKA_KEYS[kafka_key]}."
                )
            kafka_params[kafka_key] = str(value)
        else:
            raise OptionError(_unknown_option_message(key))

    def get(name: str) -> str | None:
        spec = _SPECS_BY_KEY[name.lower()]
        return values.get(name.lower(), spec.default)

    servers = (get("kafka.bootstrap.servers") or "").strip()
    if not servers:
        raise OptionError(
            "Option 'kafka.bootstrap.servers' is required, e.g. "
            ".option('kafka.bootstrap.servers', 'broker1:9092,broker2:9092')."
        )

    subscribe, pattern, assign = _parse_subscription(
        get("subscribe"), get("subscribePattern"), get("assign")
    )

    group_id = (get("groupId") or "").strip()
    if not group_id:
        raise OptionError(
            "Option 'groupId' is required: every query with the same groupId shares the topic "
            "as one consumer group, e.g. .option('groupId', 'orders-ingest')."
        )
    validate_group_id(group_id)  # the store's rule: the group id names the log's directory

    heartbeat = _positive_int("heartbeatIntervalMs", get("heartbeatIntervalMs"))
    session = _session_timeout_ms(get("sessionTimeoutMs"))
    if heartbeat >= session:
        raise OptionError(
            f"Option 'heartbeatIntervalMs' = {heartbeat} must be lower than 'sessionTimeoutMs' = "
            f"{session} (Kafka recommends at most a third of it), or the member expires between "
            "two heartbeats."
        )
    strategy = _assignment_strategy(get("assignmentStrategy") or "")
    listener = get("rebalanceListener")
    if listener is not None:
        listener = check_class_spec(
            listener,
            subject=f"Option 'rebalanceListener' = {listener!r}",
            example="my_pkg.listeners:AuditListener",
        )
    instance_id = get("groupInstanceId")
    if instance_id is not None and not instance_id.strip():
        raise OptionError("Option 'groupInstanceId' is empty: give a stable name or leave it out.")

    group = GroupSettings(
        group_id=group_id,
        store=(get("groupStore") or "").strip() or default_group_store(),
        storage_options=storage_options,
        heartbeat_interval_ms=heartbeat,
        session_timeout_ms=session,
        rebalance_timeout_ms=_positive_int("rebalanceTimeoutMs", get("rebalanceTimeoutMs")),
        assignment_strategy=strategy,
        instance_id=instance_id.strip() if instance_id else None,
        scheduled_rebalance_max_delay_ms=_non_negative_int(
            "scheduledRebalanceMaxDelayMs", get("scheduledRebalanceMaxDelayMs")
        ),
        rebalance_listener=listener.strip() if listener else None,
        initial_rebalance_delay_ms=_non_negative_int(
            "initialRebalanceDelayMs", get("initialRebalanceDelayMs")
        ),
        log_retention_ms=_log_retention_ms(get("groupLogRetention") or ""),
    )

    return SourceOptions(
        bootstrap_servers=servers,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        group=group,
        starting_offsets=_starting_offsets(get),
        ending_offsets=_ending_offsets(get),
        fail_on_data_loss=_bool("failOnDataLoss", get("failOnDataLoss")),
        max_offsets_per_trigger=_optional_positive("maxOffsetsPerTrigger", get),
        min_offsets_per_trigger=_min_offsets_per_trigger(get),
        max_trigger_delay_ms=_duration_ms("maxTriggerDelay", get("maxTriggerDelay") or ""),
        min_partitions=_optional_positive("minPartitions", get),
        max_records_per_partition=_optional_positive("maxRecordsPerPartition", get),
        include_headers=_bool("includeHeaders", get("includeHeaders")),
        poll_timeout_ms=_positive_int(
            "kafkaConsumer.pollTimeoutMs", get("kafkaConsumer.pollTimeoutMs")
        ),
        commit_to_kafka=_bool("commitToKafka", get("commitToKafka")),
        import_from_kafka_group=(get("importFromKafkaGroup") or "").strip() or None,
        kafka_params=translate_java_settings(kafka_params, prefix="kafka."),
        fetch_offset_retry=OffsetFetchRetry(
            num_retries=_positive_int("fetchOffset.numRetries", get("fetchOffset.numRetries")),
            retry_interval_ms=_non_negative_int(
                "fetchOffset.retryIntervalMs", get("fetchOffset.retryIntervalMs")
            ),
        ),
    )


def check_stream_options(options: SourceOptions) -> None:
    """What a stream refuses (``spark.readStream``), as Spark's ``validateStreamOptions``."""
    if options.ending_offsets is not None:
        raise OptionError(
            "Options 'endingOffsets', 'endingTimestamp' and 'endingOffsetsByTimestamp' are not "
            "valid in streaming queries: a stream has no end. Remove them, use "
            "Trigger.AvailableNow to stop at the offsets available at start, or read a range "
            "with spark.read.format('kafka-group')."
        )
    if options.starting_offsets.mode == "group":
        raise OptionError(
            "Option 'startingOffsets' = 'group' is for batch reads (spark.read): a stream always "
            "continues from the group's committed offsets, and 'startingOffsets' only says where "
            "partitions without a commit start (earliest, latest, none or JSON)."
        )


def check_batch_options(options: SourceOptions) -> None:
    """What a batch read refuses (``spark.read``), as Spark's ``validateBatchOptions``; the
    trigger options are ignored with a warning, as Spark does."""
    starting = options.starting_offsets
    if starting.timestamp_ms is None and starting.mode in ("latest", "none"):
        raise OptionError(
            f"Option 'startingOffsets' = {starting.mode!r} is not valid for batch reads: use "
            "'earliest' (the default), 'group' (the group's committed offsets), JSON offsets "
            "or a timestamp option."
        )
    latest = sorted(tp for tp, o in starting.per_partition.items() if o == LATEST)
    if starting.mode == "json" and latest:
        raise OptionError(
            f"Option 'startingOffsets': partition {partition_name(*latest[0])} -> -1 (latest) "
            "is not valid for batch reads: give an offset or -2 (earliest)."
        )
    for name, value in (
        ("maxOffsetsPerTrigger", options.max_offsets_per_trigger),
        ("minOffsetsPerTrigger", options.min_offsets_per_trigger),
    ):
        if value is not None:
            logging.getLogger(__name__).warning("Option %r is ignored in batch reads.", name)


def _unknown_option_message(key: str) -> str:
    lower = key.lower()
    if lower in ("group.id", "groupid ", "consumer.group.id"):
        return f"Unknown option {key!r}: use 'groupId'."
    names = [spec.name for spec in OPTION_SPECS]
    by_lower = {name.lower(): name for name in names}
    close = difflib.get_close_matches(lower, list(by_lower), n=1, cutoff=0.6)
    hint = f" Did you mean '{by_lower[close[0]]}'?" if close else ""
    return (
        f"Unknown option {key!r}.{hint} Valid options: {', '.join(names)}; "
        "plus 'kafka.*' (passed to the Kafka consumer) and 'groupStore.*' (storage options)."
    )


def _assignment_strategy(value: str) -> tuple[Assignor, ...]:
    """``assignmentStrategy``: a comma-separated list, most preferred first."""
    entries = [e.strip() for e in value.split(",") if e.strip()]
    if not entries:
        raise OptionError(
            f"Option 'assignmentStrategy' = {value!r} names no assignor: give one or more, most "
            "preferred first, e.g. 'cooperative-sticky' or 'cooperative-sticky,range'."
        )
    assignors: list[Assignor] = []
    for entry in entries:
        try:
            assignor = load_assignor(entry)
        except AssignorLookupError as exc:
            raise OptionError(f"Option 'assignmentStrategy' = {value!r}: {exc}") from None
        if any(a.name == assignor.name for a in assignors):
            raise OptionError(
                f"Option 'assignmentStrategy' = {value!r} lists the assignor {assignor.name!r} "
                "twice: list each once, most preferred first."
            )
        assignors.append(assignor)
    return tuple(assignors)


def _suggestion(value: str, choices: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(value, choices, n=1, cutoff=0.5)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _parse_subscription(
    subscribe: str | None, pattern: str | None, assign: str | None
) -> tuple[tuple[str, ...] | None, str | None, dict[str, tuple[int, ...]] | None]:
    given = [
        n
        for n, v in (("subscribe", subscribe), ("subscribePattern", pattern), ("assign", assign))
        if v is not None
    ]
    if len(given) != 1:
        what = "none was given" if not given else f"got {', '.join(repr(g) for g in given)}"
        raise OptionError(
            "Exactly one of the options 'subscribe', 'subscribePattern' or 'assign' is required; "
            f"{what}."
        )
    if subscribe is not None:
        topics = tuple(t.strip() for t in subscribe.split(",") if t.strip())
        if not topics:
            raise OptionError(
                f"Option 'subscribe' = {subscribe!r} names no topic: give a comma-separated list "
                "such as 'orders,payments'."
            )
        return topics, None, None
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise OptionError(
                f"Option 'subscribePattern' = {pattern!r} is not a valid regular expression: {exc}."
            ) from None
        if not pattern.strip():
            raise OptionError(
                "Option 'subscribePattern' is empty: give a regex such as 'orders-.*'."
            )
        return None, pattern, None
    assert assign is not None
    example = 'e.g. {"orders": [0, 1, 2]}'
    try:
        parsed = json.loads(assign)
    except json.JSONDecodeError as exc:
        raise OptionError(
            f"Option 'assign' = {assign!r} is not valid JSON ({exc.msg}); {example}."
        ) from None
    if not isinstance(parsed, dict) or not parsed:
        raise OptionError(
            f"Option 'assign' = {assign!r} must be a non-empty JSON object; {example}."
        )
    result: dict[str, tuple[int, ...]] = {}
    for topic, partitions in parsed.items():
        if (
            not isinstance(partitions, list)
            or not partitions
            or not all(
                isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions
            )
        ):
            raise OptionError(
                f"Option 'assign': topic {topic!r} maps to {partitions!r}; expected a non-empty "
                f"list of partition numbers >= 0, {example}."
            )
        result[topic] = tuple(sorted(set(partitions)))
    return None, None, result


def _starting_offsets(get: Callable[[str], str | None]) -> OffsetLimit:
    strategy = (get("startingOffsetsByTimestampStrategy") or "").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(
            f"Option 'startingOffsetsByTimestampStrategy' = {strategy!r} is not valid: use "
            "'error' (fail when no record is at or after the timestamp) or 'latest'."
        )
    words: tuple[OffsetMode, ...] = ("earliest", "latest", "none", "group")
    return _offset_limit(get, "starting", words, no_match_latest=strategy == "latest")


def _ending_offsets(get: Callable[[str], str | None]) -> OffsetLimit | None:
    names = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
    if all(get(name) is None for name in names):
        return None
    # As Spark: an end after every record is the latest offset.
    limit = _offset_limit(get, "ending", ("latest",), no_match_latest=True)
    if EARLIEST in limit.per_partition.values():
        raise OptionError(
            f"Option 'endingOffsets' = {get('endingOffsets')!r}: an ending offset cannot be -2 "
            "(earliest); use an offset, or -1 for latest."
        )
    return limit


def _offset_limit(
    get: Callable[[str], str | None],
    which: Literal["starting", "ending"],
    words: tuple[OffsetMode, ...],
    *,
    no_match_latest: bool,
) -> OffsetLimit:
    """``<which>Offsets`` with ``<which>Timestamp`` and ``<which>OffsetsByTimestamp``."""
    mode, per_partition = _offsets_json(
        f"{which}Offsets", get(f"{which}Offsets") or words[0], words
    )
    return OffsetLimit(
        mode=mode,
        per_partition=per_partition,
        by_timestamp=_timestamps_json(f"{which}OffsetsByTimestamp", get),
        timestamp_ms=_timestamp(f"{which}Timestamp", get),
        no_match_latest=no_match_latest,
    )


def _offsets_json(
    name: str, value: str, words: tuple[OffsetMode, ...]
) -> tuple[OffsetMode, dict[TopicPartition, int]]:
    """A mode word, or JSON ``{"topic": {"partition": offset}}`` (-2 earliest, -1 latest)."""
    text = value.strip()
    for word in words:
        if text.lower() == word:
            return word, {}
    example = (
        f"{', '.join(words)}, or JSON such as " + '{"orders": {"0": 23, "1": -2}} '
        "(-2 = earliest, -1 = latest)"
    )
    if not text.startswith("{"):
        raise OptionError(
            f"Option {name!r} = {value!r} is not valid: use {example}."
            + _suggestion(text.lower(), words)
        )
    return "json", _partition_map(name, value, minimum=EARLIEST, example=example)


def _timestamps_json(name: str, get: Callable[[str], str | None]) -> dict[TopicPartition, int]:
    value = get(name)
    if value is None:
        return {}
    return _partition_map(
        name, value, minimum=0, example='JSON such as {"orders": {"0": 1700000000000}}'
    )


def _partition_map(
    name: str, value: str, *, minimum: int, example: str
) -> dict[TopicPartition, int]:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise OptionError(
            f"Option {name!r} = {value!r} is not valid JSON ({exc.msg}); use {example}."
        ) from None
    if not isinstance(parsed, dict):
        raise OptionError(f"Option {name!r} = {value!r}: use {example}.")
    result: dict[TopicPartition, int] = {}
    for topic, numbers in parsed.items():
        if not isinstance(numbers, dict):
            raise OptionError(
                f"Option {name!r}: topic {topic!r} maps to {numbers!r}; expected an object of "
                f"partition -> {'offset' if minimum < 0 else 'timestamp'}, {example}."
            )
        for partition, number in numbers.items():
            if (
                not str(partition).isdigit()
                or not isinstance(number, int)
                or isinstance(number, bool)
                or number < minimum
            ):
                allowed = (
                    "offsets are >= 0, -2 (earliest) or -1 (latest)"
                    if minimum < 0
                    else "timestamps are epoch milliseconds >= 0"
                )
                raise OptionError(
                    f"Option {name!r}: {topic!r} partition {partition!r} -> {number!r} is not "
                    f"valid; partitions are numbers >= 0 and {allowed}."
                )
            result[TopicPartition(topic, int(partition))] = number
    return result


def _timestamp(name: str, get: Callable[[str], str | None]) -> int | None:
    value = get(name)
    return None if value is None else _non_negative_int(name, value)


def _min_offsets_per_trigger(get: Callable[[str], str | None]) -> int | None:
    minimum = _optional_positive("minOffsetsPerTrigger", get)
    maximum = _optional_positive("maxOffsetsPerTrigger", get)
    if minimum is not None and maximum is not None and minimum > maximum:
        raise OptionError(
            f"Option 'minOffsetsPerTrigger' = {minimum} is higher than 'maxOffsetsPerTrigger' = "
            f"{maximum}: a batch could never satisfy both; lower it or raise the maximum."
        )
    return minimum


_DURATION_UNITS_MS = {
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


def _duration_ms(name: str, value: str) -> int:
    """Spark's time strings: ``500ms``, ``30s``, ``15m``, ``1h``, ``2d``; a bare number is ms."""
    match = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|min|h|d)?\s*", value.lower())
    if not match:
        raise OptionError(
            f"Option {name!r} = {value!r} is not a duration: use a number with a unit such as "
            "'500ms', '30s', '15m', '1h' or '2d' (a bare number is milliseconds)."
        )
    return int(match.group(1)) * _DURATION_UNITS_MS[match.group(2) or "ms"]


def _log_retention_ms(value: str) -> int:
    """``groupLogRetention``: a duration, at least the default (see DEFAULT_LOG_RETENTION_MS)."""
    retention = _duration_ms("groupLogRetention", value)
    if retention < DEFAULT_LOG_RETENTION_MS:
        raise OptionError(
            f"Option 'groupLogRetention' = {value!r} is shorter than 1h, the least the group "
            "log allows (its files must outlive every read); use '1h' or more, e.g. '7d'."
        )
    return retention


def _bool(name: str, value: str | None) -> bool:
    text = (value or "").strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise OptionError(f"Option {name!r} = {value!r} must be 'true' or 'false'.")


def _int(name: str, value: str | None) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise OptionError(f"Option {name!r} = {value!r} is not a whole number.") from None


def _positive_int(name: str, value: str | None) -> int:
    number = _int(name, value)
    if number <= 0:
        raise OptionError(f"Option {name!r} = {value!r} must be a positive number.")
    return number


def _non_negative_int(name: str, value: str | None) -> int:
    number = _int(name, value)
    if number < 0:
        raise OptionError(f"Option {name!r} = {value!r} must be 0 or more.")
    return number


def _session_timeout_ms(value: str | None) -> int:
    """``sessionTimeoutMs``: within the bounds every group accepts (checked again at join)."""
    number = _int("sessionTimeoutMs", value)
    if not MIN_SESSION_TIMEOUT_MS <= number <= MAX_SESSION_TIMEOUT_MS:
        raise OptionError(
            f"Option 'sessionTimeoutMs' = {value!r} is outside the range a group accepts: use "
            f"{MIN_SESSION_TIMEOUT_MS} to {MAX_SESSION_TIMEOUT_MS} ms (Kafka's "
            "group.min.session.timeout.ms / group.max.session.timeout.ms)."
        )
    return number


def _optional_positive(name: str, get: Callable[[str], str | None]) -> int | None:
    value = get(name)
    return None if value is None else _positive_int(name, value)


def read_properties(path: str) -> dict[str, str]:
    """``key=value`` lines with ``#``/``!`` comments: Kafka's client properties files and the
    option files in ``conf/``. Raises OSError if the file cannot be read."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if not line or line.startswith(("#", "!")):
                continue
            key, sep, value = line.partition("=")
            if sep:
                out[key.strip()] = value.strip()
    return out
