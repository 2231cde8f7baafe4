"""How far a query is behind the log end, from its query progress: Spark's Kafka lag figures.

Spark's own Kafka source reports ``minOffsetsBehindLatest`` / ``maxOffsetsBehindLatest`` /
``avgOffsetsBehindLatest`` in ``sources[].metrics``. A Python data source cannot fill
``metrics``, but from pyspark 4.2 its progress carries ``latestOffset`` (the source's
``reportLatestOffset``: the log end offsets the source last saw) beside ``endOffset`` (where
the batch ended). :func:`lag` computes Spark's three figures from those two, per
``kafka-group`` source, over the partitions in the batch's end offset: this query's share of
the group. ``kafka-group describe`` shows the whole group's lag.

pyspark 4.0 / 4.1 have no ``reportLatestOffset``: the ``latestOffset`` they put in the
progress of a Python source is the source's ``latestOffset()`` answer, i.e. the batch's own
end (observed on 4.0), which says nothing about the log end. The figures are ``None`` there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spark_kafka_group.listener.progress import source_offset
from spark_kafka_group.source.pyspark_features import HAS_ADMISSION_CONTROL


@dataclass(frozen=True)
class OffsetsBehindLatest:
    """Spark's Kafka lag figures for one ``kafka-group`` source of a query progress.

    Each figure is ``latest - end`` over the partitions of the batch's end offset (records
    available but not yet read); ``None`` on pyspark < 4.2 (no log end in the progress),
    when the progress has no ``latestOffset``, or when it shares no partition with the end.
    """

    group: str
    #: Position of the source in the progress's ``sources``.
    source_index: int
    #: How many partitions the figures cover.
    partitions: int
    min_offsets_behind_latest: int | None
    max_offsets_behind_latest: int | None
    avg_offsets_behind_latest: float | None

    def as_spark_metrics(self) -> dict[str, str]:
        """The figures as Spark's Kafka source puts them in ``sources[].metrics`` (strings;
        empty when unknown, as Spark's is)."""
        if self.min_offsets_behind_latest is None:
            return {}
        return {
            "minOffsetsBehindLatest": str(self.min_offsets_behind_latest),
            "maxOffsetsBehindLatest": str(self.max_offsets_behind_latest),
            "avgOffsetsBehindLatest": str(self.avg_offsets_behind_latest),
        }


def lag(progress: Any) -> list[OffsetsBehindLatest]:
    """Spark's offsets-behind-latest figures for each ``kafka-group`` source in ``progress``.

    ``progress`` is a query progress as pyspark gives it (``query.lastProgress``, an item of
    ``query.recentProgress``, a listener event's ``progress``) or its JSON as a dict. Sources
    of other formats are left out.
    """
    if progress is None:
        return []
    sources = progress["sources"] if isinstance(progress, Mapping) else progress.sources
    result = []
    for index, source in enumerate(sources):
        end = source_offset(source, "endOffset")
        if end is None:
            continue
        latest = source_offset(source, "latestOffset") if HAS_ADMISSION_CONTROL else None
        behind = [
            latest.offsets[tp] - position
            for tp, position in sorted(end.offsets.items())
            if latest is not None and tp in latest.offsets
        ]
        result.append(
            OffsetsBehindLatest(
                group=end.group,
                source_index=index,
                partitions=len(behind),
                min_offsets_behind_latest=min(behind) if behind else None,
                max_offsets_behind_latest=max(behind) if behind else None,
                avg_offsets_behind_latest=sum(behind) / len(behind) if behind else None,
            )
        )
    return result
