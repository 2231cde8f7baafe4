"""The Delta tests' view of their table (rows as (partition, offset, writer)) and the chain of
kills they share: after each kill of :func:`tests.kill_points.chain`, once a moved victim's
partitions have their new owner, no (partition, offset) may be in the table twice.

And the two members of the ``ExactlyOnceDeltaWriter`` tests (tests/integration/
test_exactly_once_delta*.py): the victim, a separate process writing the table through its
writer, and the survivor in the test's session, writing through its own; and their kill chain
(:func:`writer_kill_chain`)."""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from spark_kafka_group import ExactlyOnceDeltaWriter
from spark_kafka_group.quickstart.sample_data import create_topic
from spark_kafka_group.testing.production import SteadyProducer
from spark_kafka_group.testing.waiting import wait_until
from tests import kill_points
from tests.groups import stable_with
from tests.processes import MemberProcess
from tests.streaming import source_options, start_query, stop_between_batches


def table_rows(uri: str) -> list[tuple[int, int, str]]:
    """Every row of the table at ``uri`` (none before its first commit)."""
    if not (Path(uri) / "_delta_log").is_dir():
        return []
    table = DeltaTable(uri).to_pyarrow_table(columns=["partition", "offset", "writer"])
    columns = (table[c].to_pylist() for c in ("partition", "offset", "writer"))
    return list(zip(*columns, strict=True))


def twice_in_table(uri: str) -> list[tuple[int, int]]:
    landed = Counter((p, o) for p, o, _ in table_rows(uri))
    return sorted(r for r, n in landed.items() if n > 1)


def kill_in_turn(
    victim: MemberProcess,
    workdir: Path,
    uri: str,
    *,
    store: str,
    group: str,
    partitions: int,
    schedule: kill_points.Kills = kill_points.KILLS,
) -> None:
    """Kill the victim at each point of ``schedule`` (:func:`tests.kill_points.chain`); after a
    kill whose partitions move, wait for the survivor to hold them all. After every kill, no
    record is in the table twice."""
    for point, then, seconds in kill_points.chain(victim, workdir, schedule):
        if then in kill_points.MOVES:
            wait_until(lambda: stable_with(store, group, 1, partitions), 60,
                       f"the victim's expiry after its kill {point}")  # fmt: skip
        twice = twice_in_table(uri)
        assert not twice, f"after the kill {point}: {len(twice)} records twice: {twice[:10]}"
        print(f"kill {point}, then it {then}: {seconds:.1f}s")


PARTITIONS = 6
#: The trigger of the survivor of the kill chains of both paths (the writer's and Spark's Delta
#: sink's), which runs through the whole chain and takes moved partitions over at its next
#: trigger: every trigger has a fixed cost (a Spark job, a Delta commit), and 3 s costs about a
#: quarter less CPU than 1 s (the survivor's JVM over the other-way Spark chain: 62 against 81
#: to 87 core-seconds) in the same time.
SURVIVOR_TRIGGER = "3 seconds"


class Survivor:
    """The member in the test's SparkSession: writes through its own ExactlyOnceDeltaWriter
    (rows tagged ``survivor``) and remembers what it read and what it wrote."""

    def __init__(self, spark, uri: str, group: str, options: dict[str, str], checkpoint: str):
        self.read: list[tuple[int, int]] = []
        #: The partitions of each batch the writer committed (or found already landed).
        self.written: list[set[int]] = []
        self._lock = threading.Lock()
        self._writer = ExactlyOnceDeltaWriter(uri, group=group, transform=self._tag)
        self.query = start_query(
            spark, options, checkpoint, self._batch, available_now=False,
            processing_time=SURVIVOR_TRIGGER,
        )  # fmt: skip

    @staticmethod
    def _tag(rows: pa.Table) -> pa.Table:
        return rows.append_column("writer", pa.array(["survivor"] * rows.num_rows, pa.string()))

    def _batch(self, frame, batch_id: int) -> None:
        rows = frame.toArrow()
        with self._lock:
            self.read.extend(
                zip(rows["partition"].to_pylist(), rows["offset"].to_pylist(), strict=True)
            )
        self._writer.write(rows, batch_id)
        if rows.num_rows:
            with self._lock:
                self.written.append(set(rows["partition"].to_pylist()))

    def batches_written(self) -> int:
        with self._lock:
            return len(self.written)

    def partitions_written_since(self, batches: int) -> set[int]:
        """The partitions of the batches written after the first ``batches``."""
        with self._lock:
            return set().union(*self.written[batches:])


def assert_each_record_once(uri: str, final: dict[int, int]) -> list[tuple[int, int, str]]:
    rows = table_rows(uri)
    landed = Counter((p, o) for p, o, _ in rows)
    produced = {(p, o) for p, n in final.items() for o in range(n)}
    twice = sorted(r for r, n in landed.items() if n > 1)
    assert not twice, f"{len(twice)} records in the table twice: {twice[:10]}"
    assert set(landed) == produced, (
        f"lost: {sorted(produced - set(landed))[:10]}, extra: {sorted(set(landed) - produced)[:10]}"
    )
    return rows


@contextmanager
def two_members(
    spark, servers: str, topic: str, store: str, tmp_path: Path, group: str, **victim: object
) -> Iterator[tuple[MemberProcess, Survivor, SteadyProducer]]:
    """The victim (a process writing tmp_path/events-table) and the survivor (this session)
    in one stable group, the producer running; everything stopped on the way out."""
    create_topic(servers, topic, PARTITIONS)
    member = MemberProcess(
        tmp_path, "victim", bootstrap_servers=servers, topic=topic, group_id=group,
        group_store=store, **victim,  # type: ignore[arg-type]
    )  # fmt: skip
    producer = SteadyProducer(servers, topic, PARTITIONS)
    member.start()
    options = source_options(servers, topic, group, store)
    uri = str(tmp_path / "events-table")
    survivor = Survivor(spark, uri, group, options, str(tmp_path / "survivor-checkpoint"))
    try:
        wait_until(lambda: stable_with(store, group, 2, PARTITIONS), 180, "two stable members")
        producer.start()
        yield member, survivor, producer
    finally:
        producer.stop()
        if survivor.query.isActive:
            stop_between_batches(survivor.query)
        member.signal(signal.SIGCONT)
        member.stop()
    assert survivor.query.exception() is None, survivor.query.exception()


def stop_producing_and_wait_for_the_table(producer: SteadyProducer, uri: str) -> dict[int, int]:
    time.sleep(2)
    final = producer.stop()
    total = sum(final.values())
    wait_until(lambda: len(table_rows(uri)) >= total, 120, "every record in the table")
    time.sleep(2)  # anything landing twice would land now
    return final


#: The victim kills itself at its kill point in the KILL_BATCH-th batch with rows of each start.
KILL_BATCH = 2


def writer_kill_chain(
    spark, servers: str, topic: str, store: str, tmp_path: Path, schedule: kill_points.Kills
) -> None:
    """The victim is killed (SIGKILL, whole process group) at each point of ``schedule``
    (tests/kill_points.py): before the sink, after the sink's Delta commit (before Spark's
    commit log), after Spark's commit log (before the group commit), during the group commit
    (its commit object written, not folded into the log). Then it restarts at once on its
    checkpoint (Spark re-runs a batch its commit log does not have) or its partitions move
    (the survivor reads from the group's committed offset). Whatever was read again is
    dropped as already in the table: after every kill no (partition, offset) is in the table
    twice, and at the end every produced one is there once. One chain of incarnations, one
    survivor: a Spark application's start is most of each case's cost."""
    uri = str(tmp_path / "events-table")
    group = "g-delta-kill"
    with two_members(
        spark, servers, topic, store, tmp_path, group,
        extra=["--delta-table", uri, "--kill-batch", str(KILL_BATCH)],
        **kill_points.first_incarnation(tmp_path, "victim", schedule),
    ) as (victim, survivor, producer):  # fmt: skip
        kill_in_turn(victim, tmp_path, uri, store=store, group=group, partitions=PARTITIONS,
                     schedule=schedule)  # fmt: skip
        final = stop_producing_and_wait_for_the_table(producer, uri)
    rows = assert_each_record_once(uri, final)
    # Records the victim had landed were read again (by the survivor from the group's committed
    # offset, or by the restarted victim re-running a batch Spark's commit log did not have)
    # and the writers dropped them.
    by_victim = {(p, o) for p, o, who in rows if who != "survivor"}
    victim_reads = Counter((p, o) for p, o in victim.records())
    read_again = by_victim & ({r for r, n in victim_reads.items() if n > 1} | set(survivor.read))
    assert read_again, "nothing the victim landed was read again: the kill points missed"
    # What a sink without the writer would have written twice, in batches of the victim's
    # incarnations (process id: batch ids)
    spanned: dict[int, set[int]] = {}
    for batch in victim.batches():
        if any(tuple(r) in read_again for r in batch["records"]):
            spanned.setdefault(batch["pid"], set()).add(batch["batch"])
    print(
        f"killed at {'; '.join(k['where'] for k in kill_points.kills(tmp_path, 'victim'))}; the "
        f"victim landed {len(by_victim)} records, {len(read_again)} of them were read again and "
        f"dropped; {sum(final.values())} produced, each in the table once; the batches read "
        f"again, by incarnation: {sorted((pid, sorted(b)) for pid, b in spanned.items())}"
    )
