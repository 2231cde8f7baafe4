"""The kill points of test_exactly_once_spark_delta.py's chain, each with the other way back:
where that chain moves the victim's partitions this one restarts it on its checkpoint, and the
other way round (kill_points.other_way); and after the restart at ``before-sink``, a kill after
the sink's commit from which the victim returns on its checkpoint once its partitions moved
(kill_points.RETURNS). No zombie here: every record lands exactly once. A file of its own, so
that the two chains run side by side on the phase's two workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import kill_points
from tests.delta_kills import assert_each_record_once
from tests.spark_delta_kills import SCHEDULE, every_record_in_the_table, spark_sink_chain

pytestmark = [pytest.mark.maven_spark, pytest.mark.spark, pytest.mark.broker]

#: kill_points.other_way(SCHEDULE), with kill_points.RETURNS right after the restart at
#: before-sink (whose batch the returning incarnation runs again first); one point never twice
#: in a row (the kill log could not tell the two kills apart).
OTHER_WAY = [
    ("before-sink", "restarts"),
    kill_points.RETURNS,
    ("during-group-commit", "restarts"),
    ("after-sink", "restarts"),
    ("before-group-commit", "moves"),
]


# Five delta-spark applications started one after the other, 50 to 115 s each from start to
# kill on two cores: past pytest's 600 s default on a loaded machine.
@pytest.mark.long
@pytest.mark.timeout(900)
def test_a_member_killed_at_each_point_the_other_way_through_spark_s_delta_sink(
    delta_spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    schedule = OTHER_WAY
    assert sorted(k for k in schedule if k != kill_points.RETURNS) == sorted(
        kill_points.other_way(SCHEDULE)
    )
    with spark_sink_chain(
        delta_spark, bootstrap_servers, topic_name, group_store, tmp_path, schedule
    ) as chain:
        final = every_record_in_the_table(chain)
    rows = assert_each_record_once(chain.uri, final)
    kills = [f"{k['point']} ({k['where']})" for k in kill_points.kills(tmp_path, "victim")]
    print(f"killed at {'; '.join(kills)}; {len(rows)} produced, each in the table once")
