"""bench_throughput's resource cost: which Spark process is which, and what a window adds up."""

from __future__ import annotations

import pytest

from benchmarks.resources import KINDS, Usage, _kind


@pytest.mark.parametrize(
    ("cmdline", "kind"),
    [
        ("/usr/lib/jvm/java-17/bin/java -cp /x/jars/* -Xmx2g org.apache.spark.deploy.SparkSubmit",
         "jvm"),
        ("/work/.venv/bin/python -m pyspark.daemon", "workers"),
        ("/work/.venv/bin/python3.11 -m pyspark.daemon pyspark.worker", "workers"),
        # A Python streaming source's process, and the planner of a batch read.
        ("/work/.venv/bin/python -m pyspark.sql.streaming.python_streaming_source_runner",
         "planning"),
        ("/work/.venv/bin/python3 -m pyspark.sql.worker.plan_data_source_read", "planning"),
        ("/bin/bash /x/spark-submit pyspark-shell", None),
        ("", None),
    ],
)  # fmt: skip
def test_each_process_of_the_session_has_its_kind(cmdline: str, kind: str | None) -> None:
    assert _kind(cmdline) == kind


def test_cpu_per_million_records_adds_the_kinds() -> None:
    usage = Usage()
    usage.cpu_s.update({"jvm": 1.0, "workers": 0.5, "planning": 0.25})
    usage.peak_rss_mb.update(dict.fromkeys(KINDS, 100.0))
    assert usage.total_cpu_s == pytest.approx(1.75)
    text = usage.describe(500_000)
    assert "CPU s per million records 3.50" in text
    assert "driver JVM 2.00" in text and "planning process 0.50" in text
