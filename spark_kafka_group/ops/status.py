"""A partition's consumer status in Burrow's words: OK, STALL, STOP or REWIND.

Burrow judges a partition from a window of its offset commits. The exporter sees the group
log instead, which says more than commits do: whether the partition has a live owner. So:

- ``REWIND``: the committed offset went back within the window (an offset reset, or a
  replay): worth a look, as in Burrow.
- ``OK``: nothing to read (lag 0 or unknown), or the committed offset moved within
  ``stall_after_ms``.
- ``STALL``: lag, a live member owns the partition, and its committed offset has not moved
  for ``stall_after_ms``: the query runs but this partition does not progress.
- ``STOP``: lag, no commit for ``stall_after_ms`` and no live member owns the partition: nobody
  reads it (the queries stopped, or the partition is unassigned).

Pure: every time is a parameter (the exporter passes its own clock's), so it is tested
without waiting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from itertools import pairwise


class PartitionStatus(str, Enum):
    OK = "OK"
    STALL = "STALL"
    STOP = "STOP"
    REWIND = "REWIND"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class CommitSighting:
    """The committed offset one scrape saw (``at_ms``: the exporter's clock)."""

    at_ms: int
    offset: int


def rewound(window: Sequence[CommitSighting]) -> bool:
    """Whether the committed offset went back between two sightings of ``window``."""
    ordered = sorted(window, key=lambda s: s.at_ms)
    return any(b.offset < a.offset for a, b in pairwise(ordered))


def partition_status(
    *,
    now_ms: int,
    lag: int | None,
    last_moved_ms: int | None,
    owner_live: bool,
    window: Sequence[CommitSighting] = (),
    stall_after_ms: int,
) -> PartitionStatus:
    """The status of one partition at ``now_ms``.

    ``lag``: records behind (None: unknown). ``last_moved_ms``: when its committed offset last
    changed (the commit's timestamp; None: never committed). ``window``: the committed offsets
    seen recently, oldest first or not. ``stall_after_ms``: how long an offset may stay put
    while there is lag."""
    if rewound(window):
        return PartitionStatus.REWIND
    if lag is None or lag <= 0:
        return PartitionStatus.OK
    if last_moved_ms is not None and now_ms - last_moved_ms < stall_after_ms:
        return PartitionStatus.OK
    return PartitionStatus.STALL if owner_live else PartitionStatus.STOP
