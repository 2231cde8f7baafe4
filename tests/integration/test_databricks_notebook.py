"""jobs/databricks_notebook.py under "Run all", as on Databricks classic and serverless compute:
every cell in order through Spark Connect in a fresh process (tests/notebook_app.py), its
ingest with Trigger.AvailableNow. Real broker, real Delta group log; the test checks the table,
the group's commits, that the member left and that no cell left a query running (on classic
compute a displayed stream is a member that takes partitions from the ingest)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import spark_kafka_group
from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample
from spark_kafka_group.testing.waiting import wait_until
from tests.processes import REPO
from tests.spark_apps import AppProcess
from tests.streaming import expected_records

pytestmark = [pytest.mark.spark, pytest.mark.broker]

NOTEBOOK = REPO / "jobs" / "databricks_notebook.py"


@pytest.mark.parametrize("compute", ["classic", "serverless"])
def test_the_databricks_notebook_runs_all_through_spark_connect_with_available_now(
    compute: str, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    group = "events-ingest"
    create_topic(bootstrap_servers, topic_name, 3)
    counts = produce_sample(bootstrap_servers, topic_name, partitions=3, per_partition=100)
    config = {
        "notebook": str(NOTEBOOK),
        "warehouse": str(tmp_path / "warehouse"),
        "compute": compute,
        "widgets": {
            "bootstrap_servers": bootstrap_servers,
            "topic": topic_name,
            "group_id": group,
            "group_store": group_store,
            "table": "events_raw",
            "checkpoint": str(tmp_path / "checkpoint"),
        },
    }
    app = AppProcess(
        ["-m", "tests.notebook_app", json.dumps(config)], log=tmp_path / "notebook.log", env={}
    )
    try:
        done = app.expect("done", timeout_s=400)
        assert app.finish() == 0, app.log_tail()
    finally:
        app.kill()

    # The AvailableNow ingest read every record once into the table.
    assert sorted(map(tuple, done["table_rows"])) == expected_records(counts)
    # Only the Spark SQL cells over the group log were left out (no Delta jars for Spark here).
    source = NOTEBOOK.read_text()
    assert len(done["skipped"]) == source.count("# needs: Delta Lake in Spark") == 3
    assert len(done["ran"]) + len(done["skipped"]) == source.count("# COMMAND ----------") + 1
    # No cell displays a stream (serverless refuses it; on classic compute it would be a member
    # still running), and nothing is left running.
    assert not [d for d in done["displayed"] if d.get("streaming")], done["displayed"]
    assert done["active"] == []
    # What the ingest wrote, then the lag cell's table: every partition committed to its end.
    preview, lag = done["displayed"]
    assert preview["rows"] and {"partition", "offset"} <= set(preview["rows"][0])
    ends = {(topic_name, p): n for p, n in counts.items()}
    assert {(r["topic"], r["partition"]): (r["committed"], r["lag"]) for r in lag["rows"]} == {
        tp: (n, 0) for tp, n in ends.items()
    }
    # The group log holds the commits, and the member left as its query ended.
    wait_until(
        lambda: spark_kafka_group.describe_group(group_store, group).committed == ends,
        30,
        f"the commits of {ends}",
    )
    assert not spark_kafka_group.describe_group(group_store, group).members
