"""The progress listener in a classic driver hears each event as one JSON text (as on Spark
Connect), not through pyspark's field-by-field reading of the event over py4j, whose Java map
iterations cost the driver's JVM a class-path search per lookup (spark_kafka_group/listener/
progress.py, ``_EventsAsJson``)."""

from __future__ import annotations

from typing import Any

import pytest

from spark_kafka_group.listener.progress import GroupProgressListener
from spark_kafka_group.testing.waiting import wait_until


class Hearing(GroupProgressListener):
    def __init__(self) -> None:
        super().__init__()
        self.heard: list[Any] = []

    def onQueryProgress(self, event: Any) -> None:
        self.heard.append(event.progress)
        super().onQueryProgress(event)  # not a kafka-group query: nothing to commit


@pytest.mark.spark
def test_the_listener_hears_each_progress_as_its_json(spark) -> None:
    listener = Hearing()
    spark.streams.addListener(listener)
    try:
        query = (
            spark.readStream.format("rate").option("rowsPerSecond", 20).load()
            .writeStream.format("noop").trigger(processingTime="200 milliseconds").start()
        )  # fmt: skip
        try:
            wait_until(lambda: len(listener.heard) >= 2, 60, "two progress events")
        finally:
            query.stop()
    finally:
        spark.streams.removeListener(listener)
    progress = listener.heard[0]
    # fromJson keeps the parsed JSON; pyspark's own adapter keeps the Java object instead
    assert progress._jdict is not None and progress._jprogress is None
    assert isinstance(progress["batchId"], int)
    assert progress["sources"][0]["description"].startswith("RateStream")
    assert progress["numInputRows"] >= 0
