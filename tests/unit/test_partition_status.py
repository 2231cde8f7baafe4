"""The exporter's Burrow-style partition status: a pure function of lag, commit times, the
owner's liveness and recent sightings of the committed offset, on an injected clock."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from spark_kafka_group.ops.status import (
    CommitSighting,
    PartitionStatus,
    partition_status,
    rewound,
)

STALL_MS = 300_000
NOW = 1_700_000_000_000


def status(**kw: Any) -> PartitionStatus:
    args: dict[str, Any] = {
        "now_ms": NOW,
        "lag": 10,
        "last_moved_ms": NOW - 1_000,
        "owner_live": True,
        "window": (),
        "stall_after_ms": STALL_MS,
    }
    args.update(kw)
    return partition_status(**args)


def test_the_four_statuses() -> None:
    assert status() is PartitionStatus.OK  # lag, but the offset moved a second ago
    assert status(lag=0, last_moved_ms=NOW - 10 * STALL_MS) is PartitionStatus.OK
    assert status(lag=None, last_moved_ms=None) is PartitionStatus.OK
    assert status(last_moved_ms=NOW - STALL_MS) is PartitionStatus.STALL
    assert status(last_moved_ms=NOW - STALL_MS, owner_live=False) is PartitionStatus.STOP
    assert status(last_moved_ms=None, owner_live=False) is PartitionStatus.STOP
    back = [CommitSighting(NOW - 2_000, 50), CommitSighting(NOW - 1_000, 20)]
    assert status(window=back) is PartitionStatus.REWIND
    assert status(window=back, lag=0) is PartitionStatus.REWIND
    # Sightings are ordered by time, not by position in the window.
    assert status(window=list(reversed(back))) is PartitionStatus.REWIND
    forward = [CommitSighting(NOW - 2_000, 20), CommitSighting(NOW - 1_000, 50)]
    assert status(window=forward) is PartitionStatus.OK


sightings = st.lists(
    st.builds(
        CommitSighting,
        at_ms=st.integers(0, 10**9),
        offset=st.integers(0, 10**6),
    ),
    max_size=8,
    unique_by=lambda s: s.at_ms,
)


@given(
    lag=st.one_of(st.none(), st.integers(0, 10**6)),
    moved_ago=st.one_of(st.none(), st.integers(0, 10**9)),
    live=st.booleans(),
    window=sightings,
    stall=st.integers(1, 10**8),
    shift=st.integers(-(10**12), 10**12),
)
def test_properties(lag, moved_ago, live, window, stall, shift) -> None:
    now = NOW
    moved = None if moved_ago is None else now - moved_ago
    got = partition_status(
        now_ms=now,
        lag=lag,
        last_moved_ms=moved,
        owner_live=live,
        window=window,
        stall_after_ms=stall,
    )
    # Only time differences count: the same story told an hour later has the same status.
    shifted = partition_status(
        now_ms=now + shift,
        lag=lag,
        last_moved_ms=None if moved is None else moved + shift,
        owner_live=live,
        window=[CommitSighting(s.at_ms + shift, s.offset) for s in window],
        stall_after_ms=stall,
    )
    assert got is shifted
    if rewound(window):
        assert got is PartitionStatus.REWIND
        return
    # Nothing to read, or the offset moved lately: never a stalled or stopped partition.
    if not lag or (moved is not None and now - moved < stall):
        assert got is PartitionStatus.OK
    else:
        # lag and no move for the stall time: who owns it decides between STALL and STOP
        assert got is (PartitionStatus.STALL if live else PartitionStatus.STOP)


@given(offsets=st.lists(st.integers(0, 10**6), max_size=10))
def test_a_window_rewinds_exactly_when_it_is_not_sorted(offsets: list[int]) -> None:
    window = [CommitSighting(i * 1_000, o) for i, o in enumerate(offsets)]
    assert rewound(window) == (offsets != sorted(offsets))
