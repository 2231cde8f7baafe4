"""What the loss of a Kafka node costs a reader: the time from the loss to the first record read
again of a partition the lost node led.

One definition for the failure scenarios (``tests/integration/test_kafka_failures.py``) and
the benchmark that compares sources under the same faults
(``benchmarks/bench_broker_failover.py``): a :class:`Loss` notes, as the node is lost, which
partitions it led and how far each had been read; :func:`first_record_after` finds the first
batch, after the loss, that read one of those partitions past that point.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: One micro-batch as a sink saw it: the wall-clock time (s) it reached the sink, and the
#: ``(partition, offset)`` of every record it read.
Batch = tuple[float, Iterable[tuple[int, int]]]


@dataclass
class Loss:
    """A node lost (killed, stopped, paused) at ``at`` (wall clock, s), with what it led."""

    label: str
    at: float
    partitions: dict[int, int]  # partition it led -> highest offset read before the loss


def highest_read(records: Iterable[tuple[int, int]]) -> dict[int, int]:
    """``partition -> highest offset`` among ``(partition, offset)`` records."""
    out: dict[int, int] = {}
    for p, o in records:
        out[p] = max(out.get(p, -1), o)
    return out


def loss(label: str, at: float, led: Iterable[int], read: Iterable[tuple[int, int]]) -> Loss:
    """The :class:`Loss` of a node that led partitions ``led`` at ``at``, when ``read`` were
    the records read so far (a partition not read yet counts as read up to offset -1)."""
    highest = highest_read(read)
    return Loss(label, at, {p: highest.get(p, -1) for p in led})


def first_record_after(lost: Loss, batches: Iterable[Batch]) -> float | None:
    """Seconds from the loss to the first batch that read a record of a partition the lost
    node led, past what had been read of it before the loss; None when no batch did (or the
    node led nothing)."""
    times = [
        at
        for at, records in batches
        if at > lost.at and any(p in lost.partitions and o > lost.partitions[p] for p, o in records)
    ]
    return min(times) - lost.at if times else None
