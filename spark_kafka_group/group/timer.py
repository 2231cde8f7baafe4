"""Clock injection. Protocol code takes ``now_ms`` arguments and never reads a clock; drivers
pass ``clock.now_ms()`` from one of these.

Two readings: ``now_ms`` is the wall clock, stamped on the records a member writes (shown to
people, and differences between two stamps of one writer); ``monotonic_ms`` is what a member
measures its own waits with (see :mod:`spark_kafka_group.group.clocks`). Neither is ever
compared with another machine's."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...

    def monotonic_ms(self) -> int: ...


class SystemClock:
    """Wall-clock and monotonic milliseconds, for drivers."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


class ManualClock:
    """A clock that only moves when told to (tests)."""

    def __init__(self, start_ms: int = 0) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def monotonic_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError(f"a clock cannot go back ({ms} ms)")
        self._now += ms
        return self._now

    def set(self, now_ms: int) -> None:
        self._now = now_ms
