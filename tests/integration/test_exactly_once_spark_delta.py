"""Exactly once into Delta across the group through Spark's own Delta sink
(``writeStream.format("delta")`` with the ``deltaSinkTable`` option), end to end with delta-spark:
two members write one table; the victim (a separate process) is killed at each point of a
batch's life in turn (tests/kill_points.py), then restarted at once on its checkpoint or kept
down until its partitions moved, and no record lands twice. Then the zombie this path cannot
fence: a member paused mid-batch past its session timeout, resumed after its partitions moved,
lands its batch although the new owner wrote those records too."""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from spark_kafka_group.store.paths import group_log_uri
from spark_kafka_group.store.sink_batches import SinkBatchFiles
from spark_kafka_group.testing.waiting import wait_until
from tests import kill_points
from tests.delta_kills import table_rows
from tests.groups import stable_with
from tests.processes import MemberProcess
from tests.spark_delta_kills import (
    PARTITIONS,
    SCHEDULE,
    committed_rows,
    every_record_in_the_table,
    landed,
    query_id,
    spark_sink_chain,
)

pytestmark = [pytest.mark.maven_spark, pytest.mark.spark, pytest.mark.broker]


def pause_resume(victim: MemberProcess, uri: str, store: str, group: str, pause: Path, producer):
    """The zombie: the victim's new incarnation completes a batch, is paused in its next batch
    with rows until its partitions moved and the survivor wrote every record produced before
    the pause, then resumed. (query id, paused batch id)."""
    victim.env = {}
    victim.set_arg("--session-timeout-ms", "6000")
    victim.set_arg("--checkpoint", str(pause.parent / "victim-checkpoint-zombie"))
    victim.start()
    query = query_id(victim)
    wait_until(lambda: stable_with(store, group, 2, PARTITIONS), 120, "the zombie-to-be's join")
    files = SinkBatchFiles(group_log_uri(store, group))
    wait_until(
        lambda: any(
            b.completed is not None and b.completed.query_id == query
            for b in files.read_all().values()
        ),
        120,
        "a completed batch of the zombie-to-be",
    )
    pause.touch()
    paused = pause.with_name(pause.name + ".paused")
    wait_until(paused.exists, 120, "the victim's pause in a batch")
    produced = dict(producer.produced)
    wait_until(lambda: stable_with(store, group, 1, PARTITIONS), 60, "the paused victim's expiry")
    before = {(p, o) for p, n in produced.items() for o in range(n)}
    wait_until(
        lambda: before <= {(p, o) for p, o, _ in table_rows(uri)},
        120,
        "the survivor's rows of every record produced before the pause",
    )
    victim.signal(signal.SIGCONT)
    batch = int(paused.read_text())
    return query, batch


# About seven minutes on two cores: four Spark applications with delta-spark started one after
# the other (50 to 115 s each from start to kill) and the zombie (110 s), past pytest's 600 s
# default on a loaded machine.
@pytest.mark.long
@pytest.mark.timeout(900)
def test_a_member_killed_at_each_point_through_spark_s_delta_sink_leaves_no_duplicate(
    delta_spark, bootstrap_servers, topic_name, group_store, tmp_path: Path
) -> None:
    """The victim is killed (SIGKILL) at points of a batch's life (tests/kill_points.py):
    before the sink (a task of the batch), after the sink's Delta commit (Spark's commit log
    entry blocked), after Spark's commit log (before the group commit), during the group
    commit; then its partitions move (the survivor starts after what the victim's query landed,
    ``deltaSinkTable``), or it restarts on its checkpoint (Spark's Delta sink skips a batch the
    table has for its query): :data:`SCHEDULE`. After every kill no (partition, offset) is in
    the table twice.

    Then a new incarnation is paused (SIGSTOP) in a batch past its session timeout, its
    partitions move and the survivor writes them, and it is resumed: Spark's Delta sink
    commits under the query's own transaction, which nothing of the survivor's conflicts
    with, so that batch lands although the survivor wrote its records too. At the end every
    produced record is in the table; the records in it twice are exactly the zombie's batch."""
    with spark_sink_chain(
        delta_spark, bootstrap_servers, topic_name, group_store, tmp_path, SCHEDULE
    ) as chain:
        victim = chain.victim
        started = time.monotonic()
        zombie, batch = pause_resume(victim, chain.uri, group_store, chain.group, chain.pause,
                                     chain.producer)  # fmt: skip
        process = victim.process
        assert process is not None
        wait_until(
            lambda: landed(chain.uri, zombie) >= batch or process.poll() is not None,
            60,
            "the zombie's batch to land or its query to end",
        )
        print(f"the zombie: {time.monotonic() - started:.1f}s")
        final = every_record_in_the_table(chain)
    uri = chain.uri
    rows = table_rows(uri)
    in_table = Counter((p, o) for p, o, _ in rows)
    produced = {(p, o) for p, n in final.items() for o in range(n)}
    lost = sorted(produced - set(in_table))
    assert not lost, f"{len(lost)} records lost: {lost[:10]}"
    assert set(in_table) == produced, sorted(set(in_table) - produced)[:10]
    # The zombie's batch landed (not fenced) and is exactly what is in the table twice.
    assert landed(uri, zombie) >= batch, victim.output()[-3000:]
    zombie_rows = committed_rows(uri, zombie, batch)
    twice = {r for r, n in in_table.items() if n > 1}
    assert twice == zombie_rows, (
        f"in the table twice: {len(twice)}, the zombie's batch {batch}: {len(zombie_rows)}; "
        f"twice but not the zombie's: {sorted(twice - zombie_rows)[:10]}, the zombie's but "
        f"once: {sorted(zombie_rows - twice)[:10]}"
    )
    writers = Counter((p, o, w == "survivor") for p, o, w in rows if (p, o) in twice)
    assert set(writers.values()) == {1} and len(writers) == 2 * len(twice), writers
    kills = [
        f"{k['point']}: {k['where']} (batch {k['batch']})"
        for k in kill_points.kills(tmp_path, "victim")
    ]
    print(
        f"killed at {'; '.join(kills)}; {len(produced)} produced, each in the table, "
        f"{len(twice)} of them twice: exactly the zombie's batch {batch}, which the survivor "
        "also wrote"
    )
