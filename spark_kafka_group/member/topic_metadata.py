"""Topic metadata for the member, refreshed on its own thread.

The leader's assignment and the periodic "did the partition counts change?" check need the
cluster's topics. Fetching them inside the member's protocol step would stall heartbeats for
as long as the cluster takes to answer (up to the client's 30 s timeout during a broker
outage) and get a healthy member expired. So the step only reads this cache.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

log = logging.getLogger(__name__)


class TopicMetadataCache:
    def __init__(self, fetch: Callable[[], Mapping[str, int]], *, interval_s: float) -> None:
        self._fetch = fetch
        self._interval_s = interval_s
        self._value: dict[str, int] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def refresh(self) -> dict[str, int]:
        """Fetch now (raises the cluster's clear errors, e.g. a missing broker)."""
        value = {str(t): int(n) for t, n in self._fetch().items()}
        self._value = value
        return value

    def get(self) -> dict[str, int] | None:
        """The latest topic -> partition count, or None if never fetched."""
        return self._value

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="kafka-group-metadata", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self.refresh()
            except Exception as exc:  # keep the last snapshot; the next round retries
                log.warning("topic metadata refresh failed (keeping the last one): %s", exc)
