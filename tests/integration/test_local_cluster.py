"""The end-to-end exactly-once test and a two-query group test again on a real Spark cluster:
``local-cluster[2,1,1024]``, a Master and two Workers whose executors are separate JVMs with
their own Python workers, so ``read()`` runs in other processes than the driver's stream
reader and gets everything from the pickled input partition (docs/design.md,
"The shape")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.spark_apps import run_tests_on_local_cluster

pytestmark = [pytest.mark.spark, pytest.mark.broker]

HERE = "tests/integration"
ON_A_CLUSTER = [
    f"{HERE}/test_source_end_to_end.py::test_reads_every_record_exactly_once_and_resumes",
    f"{HERE}/test_group_queries.py::test_two_queries_split_the_partitions_and_read_everything_once",
]


@pytest.mark.long
def test_exactly_once_and_a_two_query_group_on_a_local_cluster(
    bootstrap_servers, tmp_path: Path
) -> None:
    result = run_tests_on_local_cluster(
        ON_A_CLUSTER, bootstrap_servers=bootstrap_servers, workdir=tmp_path
    )
    assert re.search(rf"\b{len(ON_A_CLUSTER)} passed\b", result.stdout), result.stdout
    # Both executor JVMs of the one application ran tasks (the Kafka fetches among them).
    executors = sorted((tmp_path / "spark-home" / "work").glob("app-*/*/stderr"))
    assert len(executors) == 2, executors
    for stderr in executors:
        assert "Finished task" in stderr.read_text(errors="replace"), stderr
