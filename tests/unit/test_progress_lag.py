"""spark_kafka_group.lag on the progress shapes pyspark produces (4.3 JSON and objects, 4.0).

The pyspark version the module sees (HAS_ADMISSION_CONTROL) is patched, so every shape is
tested whatever pyspark runs the tests.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pyspark.sql.streaming.listener import StreamingQueryProgress

import spark_kafka_group
from spark_kafka_group.listener import lag as progress_lag
from spark_kafka_group.listener.lag import OffsetsBehindLatest

OFFSET = {
    "group": "g-lag",
    "store": "/tmp/groups",
    "generation": 1,
    "member": "spark-kafka-group-vm-24510-27f690639231",
    "starts": {},
}

# Batch 1 of a real pyspark 4.3 run (tests/integration/test_progress_lag.py), as
# json.loads(progress.json) gives it: three partitions at 47/47/46 of 101.
PROGRESS_43: dict[str, Any] = {
    "id": "d70b4de6-a28c-432d-bbd4-000024bf73bc",
    "runId": "522e51fd-640c-436e-803c-6033483f4956",
    "name": None,
    "timestamp": "2026-11-23T11:00:51.375Z",
    "batchId": 1,
    "batchDuration": 401,
    "numInputRows": 70,
    "inputRowsPerSecond": 19.4,
    "processedRowsPerSecond": 174.6,
    "durationMs": {"latestOffset": 14, "triggerExecution": 401},
    "stateOperators": [],
    "sources": [
        {
            "description": "org.apache.spark.sql.execution.datasources.v2.python."
            "PythonMicroBatchStreamWithTriggerAvailableNow@54625f6e",
            "startOffset": {**OFFSET, "offsets": {"t": {"0": 24, "1": 23, "2": 23}}},
            "endOffset": {**OFFSET, "offsets": {"t": {"0": 47, "1": 47, "2": 46}}},
            "latestOffset": {**OFFSET, "offsets": {"t": {"0": 101, "1": 101, "2": 101}}},
            "numInputRows": 70,
            "inputRowsPerSecond": 19.4,
            "processedRowsPerSecond": 174.6,
        }
    ],
    "sink": {"description": "ForeachBatchSink", "numOutputRows": -1},
}


@pytest.fixture(autouse=True)
def _newest_pyspark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Behave as on pyspark >= 4.2 whatever pyspark runs the tests; one test turns it off."""
    monkeypatch.setattr(progress_lag, "HAS_ADMISSION_CONTROL", True)


EXPECTED = OffsetsBehindLatest(
    group="g-lag",
    source_index=0,
    partitions=3,
    min_offsets_behind_latest=54,
    max_offsets_behind_latest=55,
    avg_offsets_behind_latest=pytest.approx((54 + 54 + 55) / 3),  # type: ignore[arg-type]
)


def test_lag_from_a_progress_dict() -> None:
    assert spark_kafka_group.lag(PROGRESS_43) == [EXPECTED]


def test_lag_from_pyspark_progress_objects() -> None:
    # What query.lastProgress / recentProgress and listener events hold: offsets as JSON text.
    progress = StreamingQueryProgress.fromJson(PROGRESS_43)
    assert isinstance(progress.sources[0].endOffset, str)
    assert spark_kafka_group.lag(progress) == [EXPECTED]
    assert spark_kafka_group.lag(progress)[0].as_spark_metrics() == {
        "minOffsetsBehindLatest": "54",
        "maxOffsetsBehindLatest": "55",
        "avgOffsetsBehindLatest": str((54 + 54 + 55) / 3),
    }


@pytest.mark.parametrize("latest", [None, "None", "null"])
def test_no_latest_offset_no_figures(latest: str | None) -> None:
    # The end offset as pyspark 4.0 / 4.1 write it (the repr of the offset dict); a
    # listener's progress object holds str(None) for a missing latestOffset.
    progress = copy.deepcopy(PROGRESS_43)
    source = progress["sources"][0]
    source["endOffset"] = repr(source["endOffset"])
    source["latestOffset"] = latest
    _assert_no_figures(spark_kafka_group.lag(progress))


def test_pyspark_40_and_41_report_the_batch_end_as_latest(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without reportLatestOffset (pyspark < 4.2), Spark puts the source's latestOffset()
    # answer, the batch's own end, in the progress: no lag can be read from it.
    monkeypatch.setattr(progress_lag, "HAS_ADMISSION_CONTROL", False)
    progress = copy.deepcopy(PROGRESS_43)
    source = progress["sources"][0]
    source["endOffset"] = source["latestOffset"] = repr(source["endOffset"])
    _assert_no_figures(spark_kafka_group.lag(progress))
    _assert_no_figures(spark_kafka_group.lag(PROGRESS_43))


def _assert_no_figures(result: list[OffsetsBehindLatest]) -> None:
    (figures,) = result
    assert figures.group == "g-lag" and figures.partitions == 0
    assert figures.min_offsets_behind_latest is None
    assert figures.max_offsets_behind_latest is None
    assert figures.avg_offsets_behind_latest is None
    assert figures.as_spark_metrics() == {}


def test_other_sources_are_left_out_and_partitions_must_be_in_both() -> None:
    progress = copy.deepcopy(PROGRESS_43)
    ours = progress["sources"][0]
    # format("kafka") and rate sources beside ours
    kafka = {**ours, "endOffset": {"t": {"0": 5}}, "latestOffset": {"t": {"0": 9}}}
    rate = {**ours, "endOffset": "12", "latestOffset": None}
    # a partition the latest offsets do not know (just assigned) is not counted
    ours["endOffset"]["offsets"]["t"]["3"] = 7
    progress["sources"] = [kafka, rate, ours]
    (figures,) = spark_kafka_group.lag(json.loads(json.dumps(progress)))
    assert figures.source_index == 2 and figures.partitions == 3
    assert (figures.min_offsets_behind_latest, figures.max_offsets_behind_latest) == (54, 55)


def test_no_progress_yet() -> None:
    assert spark_kafka_group.lag(None) == []
