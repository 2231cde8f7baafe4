"""The group's options (the member's protocol settings): their specs, types and checks."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from spark_kafka_group.errors import OptionError
from spark_kafka_group.group import defaults
from spark_kafka_group.group.assignors import Assignor, AssignorLookupError, load_assignor
from spark_kafka_group.group.config import MAX_SESSION_TIMEOUT_MS, MIN_SESSION_TIMEOUT_MS
from spark_kafka_group.options.spec import OptionSpec
from spark_kafka_group.options.values import (
    DURATION,
    MILLISECONDS,
    STRING,
    ValueType,
    duration_text,
    non_negative,
    not_empty,
    positive,
    within,
)
from spark_kafka_group.store.paths import GROUP_STORE_ENV, validate_group_id
from spark_kafka_group.store.table_properties import DEFAULT_LOG_RETENTION_MS
from spark_kafka_group.user_class import check_class_spec

_SESSION_BOUNDS = "Kafka's group.min.session.timeout.ms / group.max.session.timeout.ms"


def _assignment_strategy(name: str, value: str) -> tuple[Assignor, ...]:
    """A comma-separated list of assignors, most preferred first."""
    entries = [e.strip() for e in value.split(",") if e.strip()]
    if not entries:
        raise OptionError(
            f"Option {name!r} = {value!r} names no assignor: give one or more, most "
            "preferred first, e.g. 'cooperative-sticky' or 'cooperative-sticky,range'."
        )
    assignors: list[Assignor] = []
    for entry in entries:
        try:
            assignor = load_assignor(entry)
        except AssignorLookupError as exc:
            raise OptionError(f"Option {name!r} = {value!r}: {exc}") from None
        if any(a.name == assignor.name for a in assignors):
            raise OptionError(
                f"Option {name!r} = {value!r} lists the assignor {assignor.name!r} "
                "twice: list each once, most preferred first."
            )
        assignors.append(assignor)
    return tuple(assignors)


ASSIGNORS: ValueType[tuple[Assignor, ...]] = ValueType("comma-separated list", _assignment_strategy)


def group_store_from_environment() -> str | None:
    """``$SPARK_KAFKA_GROUP_STORE`` of the driver, when the ``groupStore`` option is not given."""
    return os.environ.get(GROUP_STORE_ENV, "").strip() or None


def check_group_store_given(values: Mapping[str, Any]) -> None:
    """No store is implied: the same ``groupId`` in two stores is two groups, each reading every
    partition, and a query cannot see another machine's store to warn about it."""
    if values["groupStore"] is not None:
        return
    group_id = values["groupId"]
    raise OptionError(
        f"Option 'groupStore' is required for group {group_id!r} (or set ${GROUP_STORE_ENV} "
        f"on the driver): the group is the Delta table <groupStore>/{group_id}, so queries "
        f"with groupId {group_id!r} in different stores are different groups and each reads "
        "every partition. Give every query of the group the same shared store, e.g. "
        ".option('groupStore', 's3://my-bucket/kafka-groups'); a local directory such as "
        "'~/.spark-kafka-group/groups' is shared only by queries whose drivers run on this "
        "machine."
    )


def group_id_rule(name: str, text: str, value: str) -> None:
    """The store's rule: the group id names the log's directory."""
    if value:
        validate_group_id(value)


CLASS_NAME: ValueType[str] = ValueType("`module:Class`", STRING.parse)


def class_name(name: str, text: str, value: str) -> None:
    check_class_spec(
        value, subject=f"Option {name!r} = {text!r}", example="my_pkg.listeners:AuditListener"
    )


def long_enough_retention(name: str, text: str, value: int) -> None:
    """At least :data:`DEFAULT_LOG_RETENTION_MS`: the log's files must outlive every read."""
    if value < DEFAULT_LOG_RETENTION_MS:
        least = duration_text(DEFAULT_LOG_RETENTION_MS)
        raise OptionError(
            f"Option {name!r} = {text!r} is shorter than {least}, the least the group "
            f"log allows (its files must outlive every read); use '{least}' or more, e.g. '7d'."
        )


def check_heartbeat_within_session(values: Mapping[str, Any]) -> None:
    heartbeat, session = values["heartbeatIntervalMs"], values["sessionTimeoutMs"]
    if heartbeat >= session:
        raise OptionError(
            f"Option 'heartbeatIntervalMs' = {heartbeat} must be lower than 'sessionTimeoutMs' = "
            f"{session} (Kafka recommends at most a third of it), or the member expires between "
            "two heartbeats."
        )


#: The group's options, in the order they are parsed.
GROUP_SPECS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "groupId",
        STRING,
        None,
        "The consumer group: every query with the same `groupId` shares the topics' "
        "partitions.\n\n"
        "1-255 letters, digits, `.`, `_` and `-`, not starting with `.` or `-`: it names the "
        "group log's directory. Batch reads need it too (for `startingOffsets=group`).",
        default_doc="required",
        checks=(group_id_rule,),
        required=(
            ": every query with the same groupId shares the topic as one consumer group, "
            "e.g. .option('groupId', 'orders-ingest')."
        ),
        field="group_id",
    ),
    OptionSpec(
        "groupStore",
        STRING,
        None,
        "Where group logs live: `<groupStore>/<groupId>` is the group's Delta table.\n\n"
        "An object-store URI (`s3://`, `abfss://`, `az://`, `gs://`), a shared mount, or a "
        "local directory when every query of the group runs on one machine; see "
        "[Object stores](object-stores.md). A group is its store and its id: give every query "
        "of the group the same store. There is no implied default, because queries whose "
        "drivers run on different machines would each create a group of their own there and "
        "each read every partition.",
        default_doc="required (or `$SPARK_KAFKA_GROUP_STORE` on the driver)",
        fallback=group_store_from_environment,
        field="store",
    ),
    OptionSpec(
        "heartbeatIntervalMs",
        MILLISECONDS,
        str(defaults.HEARTBEAT_INTERVAL_MS),
        "How often a member renews its lease next to the group log (Kafka's "
        "`heartbeat.interval.ms`).\n\n"
        "It must be lower than `sessionTimeoutMs` (Kafka recommends at most a third of it). "
        "Renewing a lease writes nothing to the group log itself; see "
        "[Leases](concepts.md#leases).",
        checks=(positive,),
        field="heartbeat_interval_ms",
    ),
    OptionSpec(
        "sessionTimeoutMs",
        MILLISECONDS,
        str(defaults.SESSION_TIMEOUT_MS),
        "A member whose lease is not renewed for this long is expired (Kafka's "
        "`session.timeout.ms`).\n\n"
        f"From {MIN_SESSION_TIMEOUT_MS} to {MAX_SESSION_TIMEOUT_MS} ms (Kafka's broker defaults "
        "`group.min.session.timeout.ms` and `group.max.session.timeout.ms`), checked when the "
        "query is defined. A static member "
        "(`groupInstanceId`) that stops keeps its partitions this long, waiting for its "
        "restart.",
        checks=(within(MIN_SESSION_TIMEOUT_MS, MAX_SESSION_TIMEOUT_MS, _SESSION_BOUNDS),),
        field="session_timeout_ms",
    ),
    OptionSpec(
        "rebalanceTimeoutMs",
        MILLISECONDS,
        str(defaults.REBALANCE_TIMEOUT_MS),
        "How long a rebalance waits for members to rejoin (the role of Kafka's "
        "`max.poll.interval.ms`).\n\n"
        "**Differs from Kafka's default**: 60 s here, 300 s for `max.poll.interval.ms`. "
        "It also bounds the initial rebalance delay and, with `sessionTimeoutMs`, how long a "
        "Trigger.AvailableNow run waits for its assignment. A group of hundreds of members on "
        "an object store needs more: see [Capacity](operations.md#capacity).",
        checks=(positive,),
        field="rebalance_timeout_ms",
    ),
    OptionSpec(
        "initialRebalanceDelayMs",
        MILLISECONDS,
        str(defaults.INITIAL_REBALANCE_DELAY_MS),
        "An empty group's first rebalance waits this long for more members, again after each "
        "new one (Kafka's broker setting `group.initial.rebalance.delay.ms`).\n\n"
        "Members starting together then share one first generation instead of a rebalance "
        "each. Use `0` for a single query that should start at once.",
        checks=(non_negative,),
        field="initial_rebalance_delay_ms",
    ),
    OptionSpec(
        "assignmentStrategy",
        ASSIGNORS,
        "cooperative-sticky",
        "Assignors in order of preference, comma-separated: `range`, `roundrobin`, `sticky`, "
        "`cooperative-sticky` or your own `module:Class`.\n\n"
        "Kafka's `partition.assignment.strategy`. **Differs from Kafka's default**, "
        "`range,cooperative-sticky`: here `cooperative-sticky` alone, so a rebalance moves only "
        "the partitions that change owner. The group uses an assignor every member "
        "lists; a query with none in common with the running members is refused. See "
        "[Assignors](concepts.md#assignors).",
        field="assignment_strategy",
    ),
    OptionSpec(
        "groupInstanceId",
        STRING,
        None,
        "Static membership (Kafka's `group.instance.id`): a restart within the session "
        "timeout keeps its partitions, with no rebalance.\n\n"
        "Give each query of the group its own stable id. See "
        "[Static membership](concepts.md#static-membership).",
        checks=(not_empty("give a stable name or leave it out"),),
        field="instance_id",
    ),
    OptionSpec(
        "groupLogRetention",
        DURATION,
        duration_text(DEFAULT_LOG_RETENTION_MS),
        "How far back Delta time travel (`versionAsOf` / `timestampAsOf`) reaches on the group "
        "log: its JSON commits and the files compaction replaced are kept this long (`1h`, "
        f"`7d`; at least `{duration_text(DEFAULT_LOG_RETENTION_MS)}`).\n\n"
        "Records themselves are never deleted. How the log's files are kept and compacted, "
        "and when a changed value takes effect: [Retention](operations.md#retention).",
        checks=(long_enough_retention,),
        field="log_retention_ms",
    ),
    OptionSpec(
        "scheduledRebalanceMaxDelayMs",
        MILLISECONDS,
        str(defaults.SCHEDULED_REBALANCE_MAX_DELAY_MS),
        "How long a departed static member's partitions wait for it before they are "
        "reassigned.\n\n"
        "Kafka's consumers have no such setting: it is Kafka Connect's "
        "`scheduled.rebalance.max.delay.ms` (KIP-415), applied here to static members "
        "(`groupInstanceId`). `0`, the default, reassigns them at once, as a Kafka consumer "
        "group does when a static member's session expires.",
        checks=(non_negative,),
        field="scheduled_rebalance_max_delay_ms",
    ),
    OptionSpec(
        "rebalanceListener",
        CLASS_NAME,
        None,
        "A `module:Class` with `on_partitions_assigned`, `on_partitions_revoked` and "
        "`on_partitions_lost(partitions)` methods, run on the driver.",
        checks=(class_name,),
        field="rebalance_listener",
    ),
)
