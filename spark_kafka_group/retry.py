"""The one retry policy: exponential backoff, capped, with a chosen share of jitter.

Every retry loop of the package pauses by :meth:`Backoff.delay_s` and waits through its
injected clock (:class:`~spark_kafka_group.group.timer.Clock`), so a test clock controls the
whole loop: the group log's compare-and-swap conflicts (``member/log_client.py``), the member's
background step after a failure (``member/heartbeat.py``), and the Kafka client's attempts and
its ListOffsets retries within an attempt (``kafka/cluster.py``).

Written here rather than taken from tenacity or stamina: both measure a retry's elapsed time
with ``time.monotonic`` themselves, which an injected clock cannot reach, and the group log's
loop (decide, append, back off on a lost race) is no function call to wrap.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Backoff:
    """The pause after ``n`` failures in a row: ``base_s`` doubled ``n`` times (at most
    ``max_doublings`` times), at most ``cap_s``; the share ``jitter`` of it is random.

    ``jitter=0`` pauses exactly that long; ``jitter=1`` is "full jitter" (uniform between 0
    and that), so that writers that collided do not collide again in step. ``cap_s=base_s``
    gives a fixed interval.
    """

    base_s: float
    cap_s: float = math.inf
    max_doublings: int = 30
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if not self.base_s >= 0:
            raise ValueError(f"Backoff base_s must be >= 0, not {self.base_s!r}")
        if not self.cap_s >= 0:
            raise ValueError(f"Backoff cap_s must be >= 0, not {self.cap_s!r}")
        if self.max_doublings < 0:
            raise ValueError(f"Backoff max_doublings must be >= 0, not {self.max_doublings!r}")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"Backoff jitter must be between 0 and 1, not {self.jitter!r}")

    def with_base(self, base_s: float) -> Backoff:
        """The same policy on another unit (e.g. how long an append takes on this store)."""
        return replace(self, base_s=base_s)

    def ceiling_s(self, failures: int) -> float:
        """The longest pause after ``failures`` failures in a row (the pause itself when
        there is no jitter)."""
        doublings = min(max(failures, 0), self.max_doublings)
        return min(self.cap_s, self.base_s * 2**doublings)

    def delay_s(self, failures: int, rng: random.Random | None = None) -> float:
        """The pause after ``failures`` failures in a row; ``rng`` draws the jitter (a seeded
        one makes the pauses repeatable)."""
        ceiling = self.ceiling_s(failures)
        if self.jitter == 0.0:
            return ceiling
        return (rng or _RANDOM).uniform(ceiling * (1.0 - self.jitter), ceiling)

    def delays(self, rng: random.Random | None = None) -> Iterator[float]:
        """The pauses after 1, 2, 3, ... failures in a row (endless)."""
        failures = 1
        while True:
            yield self.delay_s(failures, rng)
            failures += 1


_RANDOM = random.Random()
