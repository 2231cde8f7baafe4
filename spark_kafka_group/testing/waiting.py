"""Waiting for real processes (brokers, member processes, Spark queries) to reach a state."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(
    predicate: Callable[..., object], timeout_s: float, what: str, *, poll_s: float = 0.25
) -> None:
    """Poll ``predicate`` until it is true; raise naming ``what`` after ``timeout_s``.

    It waits on other processes, so it reads this machine's monotonic clock; the failure is an
    :class:`AssertionError` so that a test using it fails (rather than errors) on a timeout.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
