"""The kill points of test_exactly_once_delta.py, each with the other way back: where that
chain restarts the victim on its checkpoint this one moves its partitions, and the other way
round (kill_points.other_way). A file of its own, so that the two chains run side by side on
the suite's two workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import kill_points
from tests.delta_kills import writer_kill_chain

pytestmark = [pytest.mark.spark, pytest.mark.broker]


@pytest.mark.long
def test_a_member_killed_at_each_point_the_other_way_leaves_no_duplicate(
    spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    writer_kill_chain(spark, bootstrap_servers, topic_name, group_store, tmp_path,
                      kill_points.other_way(kill_points.KILLS))  # fmt: skip
