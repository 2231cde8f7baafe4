"""SNAPSHOT records: replaying [SNAPSHOT, later records...] equals replaying the whole log."""

from __future__ import annotations

import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_kafka_group.group import (
    GroupConfig,
    GroupCoordinator,
    GroupState,
    ManualClock,
    replay,
)
from spark_kafka_group.group.offsets import commit_offsets
from spark_kafka_group.store.memory import InMemoryLog, stored
from spark_kafka_group.testing.simulation import SimMember, append


def random_log(seed: int, protocol: str, steps: int) -> list:
    rng = random.Random(seed)
    clock = ManualClock(0)
    log = InMemoryLog()
    meta = {"t": rng.randint(1, 8)}
    cfg = GroupConfig(
        min_session_timeout_ms=1_000,
        scheduled_rebalance_max_delay_ms=3_000,
        initial_rebalance_delay_ms=0,
    )
    live: list[SimMember] = []
    for i in range(steps):
        op = rng.random()
        if op < 0.15 and len(live) < 4:
            live.append(
                SimMember(f"m{i}", log, clock, lambda: meta, protocols=(protocol,),
                       instance_id=f"i{i}" if rng.random() < 0.5 else None,
                       session_timeout_ms=5_000, config=cfg)
            )  # fmt: skip
        elif op < 0.2 and live:
            live.pop(rng.randrange(len(live)))  # crash
        elif op < 0.25:
            meta["t"] = rng.randint(1, 8)
        elif op < 0.3 and live:
            d = live[rng.randrange(len(live))]
            d.fold()
            view = d.coord.member_view(d.member_id)
            recs, _ = commit_offsets(
                d.coord.group,
                d.member_id,
                view.member_generation,
                {tp: rng.randint(0, 100) for tp in view.assignment},
                clock.now_ms(),
            )
            append(log, recs, d.version)
        for d in live:
            d.step()
        clock.advance(rng.randint(100, 2_500))
    return log.records


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    protocol=st.sampled_from(["cooperative-sticky", "range"]),
    cuts=st.lists(st.floats(0, 1), min_size=1, max_size=4),
)
def test_snapshot_then_tail_equals_full_replay(seed: int, protocol: str, cuts: list) -> None:
    records = random_log(seed, protocol, 40)
    full = replay(records, "g")
    for c in cuts:
        k = int(c * len(records))
        snap = GroupCoordinator("g", group=replay(records[:k], "g")).snapshot_record(k)
        json.dumps(snap.payload, allow_nan=False)
        assert replay([stored(snap), *records[k:]], "g") == full
        # a snapshot in the middle of a log is transparent too
        assert replay([*records[:k], stored(snap), *records[k:]], "g") == full


def test_snapshot_keeps_offsets_and_static_state() -> None:
    records = random_log(11, "cooperative-sticky", 60)
    g = replay(records, "g")
    assert g.offsets and g.state in GroupState
    snap = GroupCoordinator("g", group=g).snapshot_record(1)
    restored = replay([stored(snap)], "g")
    assert restored == g and restored.offsets == g.offsets
