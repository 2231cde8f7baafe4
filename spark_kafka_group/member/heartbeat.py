"""The member's background thread: steps the protocol every heartbeat interval.

Timer bookkeeping only (as kafka-python's ``heartbeat.py``); what a step does is the member's
business. A failing step (e.g. the group store briefly unavailable) is logged and retried
with exponential backoff, never fatal: the reader keeps consuming what it owns meanwhile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from spark_kafka_group.retry import Backoff

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 10.0
#: After n failed steps in a row the delay doubles n times (on the step's own delay), at most
#: :data:`MAX_BACKOFF_S`.
FAILURE_BACKOFF = Backoff(base_s=1.0, cap_s=MAX_BACKOFF_S, max_doublings=6)


class HeartbeatThread:
    def __init__(self, step: Callable[[], None], delay_s: Callable[[], float]) -> None:
        self._step = step
        self._delay_s = delay_s
        self._stop = threading.Event()
        # Set by wake() (or stop()): step now instead of at the end of the delay.
        self._woken = threading.Event()
        self._thread: threading.Thread | None = None
        self._failures = 0

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="kafka-group-heartbeat", daemon=True
            )
            self._thread.start()

    @property
    def running(self) -> bool:
        """Started and not stopped: this thread steps the member."""
        return self._thread is not None and not self._stop.is_set()

    def wake(self) -> None:
        """Step as soon as possible (a commit was recorded: write it out now)."""
        self._woken.set()

    def stop(self, *, wait: bool = True) -> None:
        """Stop stepping. ``wait``: until a step under way has ended, so that the caller owns
        the member from then on (its close)."""
        self._stop.set()
        self._woken.set()
        thread = self._thread
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        while True:
            self._woken.wait(self._next_delay())
            self._woken.clear()
            if self._stop.is_set():
                return
            try:
                self._step()
                self._failures = 0
            except Exception as exc:
                self._failures += 1
                log.warning(
                    "group member background step failed (%d in a row), retrying in %.1fs: %s",
                    self._failures,
                    self._next_delay(),
                    exc,
                )

    def _next_delay(self) -> float:
        delay = self._delay_s()
        if self._failures:
            delay = FAILURE_BACKOFF.with_base(delay).delay_s(self._failures)
        return delay
