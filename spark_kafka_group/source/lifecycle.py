"""The end of a query's streaming-source process: its group member leaves then.

Spark runs a Python stream reader in one process per query on the driver and ends it when the
query ends, whatever the reason (``query.stop()``, the end of a Trigger.AvailableNow run, a
failure, ``spark.stop()``): the JVM sends it SIGTERM (``Process.destroy()``) and closes its
socket. Python's default SIGTERM action kills the process at once, so the reader's ``stop()``
never ran and the member stayed in the group until its session timeout. Here:

* SIGTERM runs the registered ``stop`` callbacks on a separate thread (the main thread may be
  in the middle of a Spark call, which the callbacks must not wait for) and then ends the
  process;
* an interpreter exit (the JVM closed the socket, or went away) runs them through ``atexit``.

Only in Spark's streaming-source process: anywhere else (a test, a user's own process that
builds a reader) nothing is installed. A SIGKILL of the process can run nothing: its member is
replaced when the query restarts from its checkpoint, or expires after its session timeout.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

#: The module Spark runs as the streaming-source process (``python -m ...``).
STREAMING_SOURCE_RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"

# Registered by the reader on Spark's planning thread, which is also the main thread that
# runs signal handlers and atexit: the list is only read there (the SIGTERM handler hands a
# copy to the thread it starts).
_stops: list[Callable[[], None]] = []


def in_streaming_source_process() -> bool:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return spec is not None and spec.name == STREAMING_SOURCE_RUNNER


def stop_on_process_end(stop: Callable[[], None]) -> None:
    """Call ``stop`` (idempotent, thread-safe) when this streaming-source process ends."""
    if not in_streaming_source_process():
        return
    _stops.append(stop)
    if len(_stops) > 1:
        return  # installed at the first registration
    atexit.register(lambda: _run_stops(tuple(_stops)))
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)


def _run_stops(stops: tuple[Callable[[], None], ...]) -> None:
    for stop in stops:
        try:
            stop()
        except Exception:  # one failing stop must not keep the others from running
            log.warning("kafka-group: stopping the reader at process end failed", exc_info=True)


def _on_sigterm(signum: int, frame: object) -> None:
    stops = tuple(_stops)  # on the main thread, which registers them

    def stop_then_exit() -> None:
        try:
            _run_stops(stops)
        finally:
            logging.shutdown()
            os._exit(0)  # what SIGTERM asked for, once the member has left

    threading.Thread(target=stop_then_exit, name="kafka-group-sigterm", daemon=False).start()
