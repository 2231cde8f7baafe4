"""Target offsets of ``kafka-group reset-offsets`` (the choices of ``kafka-consumer-groups
--reset-offsets``). Writing them is :func:`spark_kafka_group.ops.admin.reset_offsets`.

Every target is clamped to [log start, log end], as Kafka does: an offset outside the log
would only make the next reader fail (``failOnDataLoss``) or reset by policy.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from spark_kafka_group.errors import OptionError
from spark_kafka_group.group.metadata import TopicPartition, partition_name

if TYPE_CHECKING:
    from spark_kafka_group.kafka.cluster import KafkaCluster

log = logging.getLogger(__name__)


MODES = (
    "to-earliest",
    "to-latest",
    "to-current",
    "to-offset",
    "to-datetime",
    "by-duration",
    "shift-by",
    "from-file",
)


@dataclass(frozen=True)
class TopicSpec:
    topic: str
    partitions: tuple[int, ...] | None  # None: every partition


def parse_topic_spec(spec: str) -> TopicSpec:
    """``topic`` or ``topic:0,1,2`` (the ``--topic`` syntax of kafka-consumer-groups)."""
    topic, sep, rest = str(spec).strip().partition(":")
    if not topic:
        raise OptionError(f"--topic {spec!r}: give a topic name, optionally ':0,1,...'")
    if not sep:
        return TopicSpec(topic, None)
    try:
        parts = tuple(sorted({int(p) for p in rest.split(",") if p.strip()}))
    except ValueError:
        raise OptionError(
            f"--topic {spec!r}: partitions must be comma-separated numbers, e.g. {topic}:0,1"
        ) from None
    if not parts or any(p < 0 for p in parts):
        raise OptionError(f"--topic {spec!r}: list at least one partition number >= 0")
    return TopicSpec(topic, parts)


def parse_datetime_ms(text: str) -> int:
    """ISO 8601 (``2024-05-01T12:00:00``, ``...Z``, ``...+02:00``) -> epoch ms.

    Without a time zone the local time zone is used, as kafka-consumer-groups does."""
    value = str(text).strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise OptionError(
            f"--to-datetime {text!r} is not an ISO 8601 date-time, e.g. 2024-05-01T12:00:00 "
            "or 2024-05-01T12:00:00Z"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time
    return int(moment.astimezone(timezone.utc).timestamp() * 1000)


_DURATION = re.compile(
    r"^P(?:(?P<days>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<hours>\d+(?:\.\d+)?)H)?(?:(?P<minutes>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$",
    re.IGNORECASE,
)


def parse_duration_ms(text: str) -> int:
    """An ISO 8601 duration as ``--by-duration`` takes it (Java's ``Duration.parse``):
    ``PnDTnHnMn.nS``, e.g. ``PT1H30M``, ``P1D``, ``PT0.5S``."""
    value = str(text).strip()
    found = _DURATION.match(value)
    if not found or value.upper() in ("P", "PT") or value.upper().endswith("T"):
        raise OptionError(
            f"--by-duration {text!r} is not an ISO 8601 duration; use PnDTnHnMnS, e.g. "
            "PT30M (30 minutes), PT1H30M, P1D"
        )
    parts = {k: float(v) for k, v in found.groupdict().items() if v}
    seconds = (
        parts.get("days", 0) * 86400
        + parts.get("hours", 0) * 3600
        + parts.get("minutes", 0) * 60
        + parts.get("seconds", 0)
    )
    return round(seconds * 1000)


def parse_reset_plan(
    text: str, *, groups: Sequence[str], path: str = "plan"
) -> dict[str, dict[TopicPartition, int]]:
    """A reset plan in Kafka's CSV format (what ``--export`` prints): ``topic,partition,offset``
    lines for one group (``groups`` names it), ``group,topic,partition,offset`` for several."""
    plans: dict[str, dict[TopicPartition, int]] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        cells = [c.strip() for c in line.split(",")]
        try:
            if len(cells) == 3 and len(groups) == 1:
                group, (topic, partition, offset) = groups[0], cells
            elif len(cells) == 4:
                group, topic, partition, offset = cells
            else:
                raise ValueError
            tp = TopicPartition(topic, int(partition))
            plans.setdefault(group, {})[tp] = int(offset)
        except ValueError:
            raise OptionError(
                f"--from-file {path} line {number}: {line!r} is not topic,partition,offset "
                "(one --group) or group,topic,partition,offset (as --export prints)"
            ) from None
    return plans


def export_reset_plan(plans: Mapping[str, Mapping[TopicPartition, int]]) -> str:
    """Kafka's CSV reset plan: ``topic,partition,offset`` for one group, else with the group
    first (``kafka-consumer-groups --reset-offsets --export``)."""
    single = len(plans) == 1
    lines = [
        ",".join(map(str, ([] if single else [group]) + [tp.topic, tp.partition, offset]))
        for group, plan in plans.items()
        for tp, offset in sorted(plan.items())
    ]
    return "".join(line + "\n" for line in lines)


@dataclass(frozen=True)
class ResetTarget:
    offsets: dict[TopicPartition, int]
    #: Partitions whose target was moved into [log start, log end]: tp -> (asked, used).
    clamped: dict[TopicPartition, tuple[int, int]]


def resolve_partitions(cluster: KafkaCluster, specs: Sequence[TopicSpec]) -> list[TopicPartition]:
    """Every partition the ``--topic`` options name (checked against the cluster)."""
    whole = [s.topic for s in specs if s.partitions is None]
    listed: dict[str, set[int]] = {}
    for s in specs:
        if s.partitions is not None:
            listed.setdefault(s.topic, set()).update(s.partitions)
    out: set[TopicPartition] = set()
    if whole:
        counts = cluster.topic_partitions(subscribe=whole)
        out.update(TopicPartition(t, p) for t, n in counts.items() for p in range(n))
    if listed:
        cluster.topic_partitions(assign={t: sorted(ps) for t, ps in listed.items()})
        out.update(TopicPartition(t, p) for t, ps in listed.items() for p in ps)
    return sorted(out)


def target_offsets(
    cluster: KafkaCluster,
    partitions: Sequence[TopicPartition],
    committed: Mapping[TopicPartition, int],
    *,
    mode: str,
    value: int | str | None = None,
    now_ms: int | None = None,
    planned: Mapping[TopicPartition, int] | None = None,
) -> ResetTarget:
    """The new committed offset of each partition for one reset ``mode`` (see :data:`MODES`).

    ``now_ms``: the time ``by-duration`` counts back from. ``planned``: the offsets of a
    ``from-file`` plan (``partitions`` are then its partitions)."""
    if mode not in MODES:
        raise OptionError(f"unknown reset mode {mode!r}; use one of {', '.join(MODES)}")
    earliest = cluster.earliest_offsets(partitions)
    latest = cluster.latest_offsets(partitions)
    wanted: dict[TopicPartition, int] = {}
    if mode == "to-earliest":
        wanted = {tp: earliest[tp] for tp in partitions}
    elif mode == "to-latest":
        wanted = {tp: latest[tp] for tp in partitions}
    elif mode == "to-offset":
        wanted = dict.fromkeys(partitions, _amount(mode, value))
    elif mode == "to-current":
        # Kafka's: the committed offset; the log end where the group has none.
        wanted = {tp: committed.get(tp, latest[tp]) for tp in partitions}
    elif mode == "from-file":
        wanted = {tp: int((planned or {})[tp]) for tp in partitions}
    elif mode in ("to-datetime", "by-duration"):
        if mode == "to-datetime":
            ts = parse_datetime_ms(str(value))
        else:
            if now_ms is None:
                raise OptionError("reset mode by-duration needs the time to count back from")
            ts = now_ms - parse_duration_ms(str(value))
        found = cluster.offsets_for_timestamp(partitions, ts)
        # No record at or after the time: the log end (as Kafka does).
        wanted = {tp: latest[tp] if (o := found.get(tp)) is None else o for tp in partitions}
    else:  # shift-by
        without = [tp for tp in partitions if tp not in committed]
        if without:
            names = ", ".join(partition_name(t, p) for t, p in without)
            raise OptionError(
                f"--shift-by needs a committed offset to shift, and the group has none for "
                f"{names}; use --to-earliest / --to-latest / --to-offset for those partitions"
            )
        shift = _amount(mode, value)
        wanted = {tp: committed[tp] + shift for tp in partitions}
    offsets: dict[TopicPartition, int] = {}
    clamped: dict[TopicPartition, tuple[int, int]] = {}
    for tp, asked in sorted(wanted.items()):
        used = min(max(asked, earliest[tp]), latest[tp])
        if used != asked:
            clamped[tp] = (asked, used)
        offsets[tp] = used
    return ResetTarget(offsets, clamped)


def _amount(mode: str, value: int | str | None) -> int:
    """The offset (``to-offset``) or shift (``shift-by``) the mode takes."""
    if value is None:
        raise OptionError(f"reset mode {mode} needs a number (e.g. --{mode} 100)")
    return int(value)
