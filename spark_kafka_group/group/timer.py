"""Clock injection. Protocol code takes ``now_ms`` arguments and never reads a clock; drivers
pass ``clock.now_ms()`` from one of these.

Two readings and a wait: ``now_ms`` is the wall clock, stamped on the records a member writes
(shown to people, and differences between two stamps of one writer); ``monotonic_ms`` is what
a member measures its own waits with (see :mod:`spark_kafka_group.group.clocks`). Neither is ever
compared with another machine's. ``sleep`` is every wait's pause: a test clock moves instead of
blocking, so the simulation and the unit tests control every wait."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...

    def monotonic_ms(self) -> int: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """Wall-clock and monotonic milliseconds, for drivers."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))


class ManualClock:
    """A clock that only moves when told to (tests)."""

    def __init__(self, start_ms: int = 0) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def monotonic_ms(self) -> int:
        return self._now

    def sleep(self, seconds: float) -> None:
        """Time passes at once: a wait in code under test never blocks the test."""
        self.advance(max(0, round(seconds * 1000)))

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError(f"a clock cannot go back ({ms} ms)")
        self._now += ms
        return self._now

    def set(self, now_ms: int) -> None:
        self._now = now_ms
