"""The Delta tests' view of their table (rows as (partition, offset, writer)) and the chain of
kills they share: after each kill of :func:`tests.kill_points.chain`, once a moved victim's
partitions have their new owner, no (partition, offset) may be in the table twice."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from deltalake import DeltaTable

from spark_kafka_group.testing.waiting import wait_until
from tests import kill_points
from tests.groups import stable_with
from tests.processes import MemberProcess


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
        if then == "moves":
            wait_until(lambda: stable_with(store, group, 1, partitions), 60,
                       f"the victim's expiry after its kill {point}")  # fmt: skip
        twice = twice_in_table(uri)
        assert not twice, f"after the kill {point}: {len(twice)} records twice: {twice[:10]}"
        print(f"kill {point}, then it {then}: {seconds:.1f}s")
