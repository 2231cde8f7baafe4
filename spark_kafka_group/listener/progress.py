"""Offsets from Spark's query progress, committed from the user's driver process.

The group member commits every batch itself from ``latestOffset``/``commit()``, but Spark
does not always give it the chance for the last batch (docs/design.md, "Spark facts that
shape the reader": with pyspark 4.0 / 4.1 and Trigger.AvailableNow nothing is called after
the single batch; after ``query.stop()`` the last batch's ``commit()`` never comes). Spark's
query progress does carry every completed batch's end offset, which for this source names the
group, the store, the member and the generation
(:class:`~spark_kafka_group.source.offsets.SourceOffset`). So:

* :class:`GroupProgressListener`, added by :func:`spark_kafka_group.register`, commits each
  completed batch's offsets on the member's behalf (idempotent: whatever the member already
  committed is skipped) in a commit object of its own for the member, never an append to the
  group log (:func:`~spark_kafka_group.listener.writes.commit_batch_for_member`). It writes no
  LEAVE: only the member knows whether a batch it handed to Spark is still without its commit
  (``query.stop()`` interrupted it, perhaps after its sink ran), and then it must not leave
  (:mod:`spark_kafka_group.member.close`). The member leaves by itself when its query stops
  (the reader's ``stop()``, and :mod:`spark_kafka_group.source.lifecycle` when the
  streaming-source process ends), after waiting for this listener's commit of the last batch;
* :func:`~spark_kafka_group.ops.leave.leave_group` commits the last completed batch and leaves
  for one query, explicitly.

Storage credentials for an object-store group log come from the environment here (the
``groupStore.*`` options are not part of the progress); pass ``storage_options`` otherwise.
"""

from __future__ import annotations

import ast
import json
import logging
import threading
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import (
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
)

from spark_kafka_group.listener.writes import commit_batch_for_member
from spark_kafka_group.member.log_client import GroupLogClient
from spark_kafka_group.source.offsets import SourceOffset

log = logging.getLogger(__name__)


def group_offsets(progress: Any) -> Iterator[SourceOffset]:
    """The ``kafka-group`` end offsets in one query progress (a dict or a progress object)."""
    if progress is None:
        return
    sources = progress["sources"] if isinstance(progress, Mapping) else progress.sources
    for source in sources:
        offset = source_offset(source, "endOffset")
        if offset is not None:
            yield offset


def source_offset(source: Any, name: str) -> SourceOffset | None:
    """The offset ``name`` (``startOffset``, ``endOffset``, ``latestOffset``) of one source of
    a query progress, if it is a ``kafka-group`` offset; else None."""
    value = source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)
    if isinstance(value, str):
        value = _parse_offset(value)
    if isinstance(value, Mapping) and {"group", "store", "member", "offsets"} <= set(value):
        return SourceOffset.from_json(value)
    return None


def _parse_offset(text: str) -> Any:
    """An end offset from the progress: JSON, or (pyspark 4.0 / 4.1 Python sources) the
    ``repr`` of the offset dict."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None


Clients = dict[tuple[str, str], GroupLogClient]


def _cached_client(
    clients: Clients | None, offset: SourceOffset, storage_options: Mapping[str, str] | None
) -> GroupLogClient | None:
    if clients is None:
        return None
    key = (offset.store, offset.group)
    client = clients.get(key)
    if client is None:
        client = clients[key] = GroupLogClient(
            offset.store, offset.group, storage_options=storage_options, create=False
        )
    return client


def commit_progress(
    progress: Any,
    *,
    storage_options: Mapping[str, str] | None = None,
    clients: Clients | None = None,
    sink_files: SinkFiles | None = None,
) -> int:
    """Commit the ``kafka-group`` end offsets of one query progress; how many were written.
    ``clients``: group log clients by (store, group) to reuse across calls (and to add to);
    ``sink_files`` the same for the completed-batch records of ``deltaSinkTable`` queries,
    written after the commit (:mod:`spark_kafka_group.sink.takeover`)."""
    written = 0
    for offset in group_offsets(progress):
        if not offset.member:
            continue
        batch_id = _batch_id(progress)
        if offset.offsets:
            written += commit_batch_for_member(
                offset.store,
                offset.group,
                offset.member,
                offset.generation,
                offset.offsets,
                batch_id=batch_id,
                starts=offset.starts,
                storage_options=storage_options,
                client=_cached_client(clients, offset, storage_options),
            )
        if offset.sink_batches:
            _record_completed(progress, offset, batch_id, storage_options, sink_files)
    return written


SinkFiles = dict[tuple[str, str], Any]  # (store, group) -> SinkBatchFiles


def _record_completed(
    progress: Any,
    offset: SourceOffset,
    batch_id: int,
    storage_options: Mapping[str, str] | None,
    sink_files: SinkFiles | None,
) -> None:
    from spark_kafka_group.sink.spark_delta import record_completed
    from spark_kafka_group.sink.takeover import CompletedBatch, batch_end

    completed = CompletedBatch(str(_field(progress, "id")), batch_id, batch_end(offset))
    record_completed(
        offset.store, offset.group, offset.member, completed,
        storage_options=storage_options, files=sink_files,
    )  # fmt: skip


def _batch_id(progress: Any) -> int:
    """The progress's batch id, which numbers the listener's commit object (Spark's query
    progress always carries it)."""
    value = progress.get("batchId") if isinstance(progress, Mapping) else progress.batchId
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(
            f"a query progress with kafka-group offsets has batchId {value!r}, not a batch "
            "number: the progress listener numbers its commit object by it; pass Spark's "
            "query progress (which always has one)"
        )
    return value


class GroupProgressListener(StreamingQueryListener):
    """Commits every completed batch of ``kafka-group`` queries (see the module docstring)."""

    def __init__(self, storage_options: Mapping[str, str] | None = None) -> None:
        self._init(storage_options)

    def _init(self, storage_options: Mapping[str, str] | None) -> None:
        self._storage_options = storage_options
        # One client per group log, kept across batches: each commit then folds only the
        # records written since the last one (a new client replays from the latest snapshot,
        # ~50 ms of driver CPU per batch and query).
        self._clients: Clients = {}
        self._sink_files: SinkFiles = {}
        self._lock = threading.Lock()

    # Spark Connect pickles listeners to run them on the server: only the options travel.
    def __getstate__(self) -> dict[str, Any]:
        return {"storage_options": self._storage_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._init(state["storage_options"])

    @property
    def _jlistener(self) -> Any:
        """What the driver's JVM calls: :class:`_EventsAsJson` instead of pyspark's own adapter
        (Spark Connect does not use it: there the listener runs on the server, its events
        already JSON)."""
        if not hasattr(self, "_jlistenerobj"):
            from pyspark import SparkContext

            wrapper = SparkContext._jvm.PythonStreamingQueryListenerWrapper  # type: ignore[union-attr]
            self._jlistenerobj = wrapper(_EventsAsJson(self))
        return self._jlistenerobj

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        with self._lock:
            try:
                commit_progress(
                    progress,
                    storage_options=self._storage_options,
                    clients=self._clients,
                    sink_files=self._sink_files,
                )
            except Exception:
                self._clients.clear()
                self._sink_files.clear()  # e.g. the store was replaced: open it afresh next time
                log.warning("kafka-group: committing from query progress failed", exc_info=True)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        # No LEAVE here: the member decides (see the module docstring).
        pass


def _field(progress: Any, name: str) -> Any:
    return progress[name] if isinstance(progress, Mapping) else getattr(progress, name)


class _EventsAsJson:
    """Hands a listener each event as Spark Connect does: one call for the event's JSON, parsed
    in Python. pyspark's own adapter reads the event over py4j field by field, and every Java
    map in it ends its iteration with an exception that pyspark classifies by asking the JVM
    for a dozen classes by name. Each of those lookups searches every jar of the driver's class
    path, and one batch's progress made several hundred: with a query running two batches a
    second, the driver JVM's listener thread used half a core."""

    def __init__(self, listener: StreamingQueryListener) -> None:
        self._listener = listener

    def onQueryStarted(self, jevent: Any) -> None:
        self._listener.onQueryStarted(QueryStartedEvent.fromJson(json.loads(jevent.json())))

    def onQueryProgress(self, jevent: Any) -> None:
        self._listener.onQueryProgress(QueryProgressEvent.fromJson(json.loads(jevent.json())))

    def onQueryIdle(self, jevent: Any) -> None:
        self._listener.onQueryIdle(QueryIdleEvent.fromJson(json.loads(jevent.json())))

    def onQueryTerminated(self, jevent: Any) -> None:
        event = QueryTerminatedEvent.fromJson(json.loads(jevent.json()))
        self._listener.onQueryTerminated(event)

    class Java:  # what py4j makes of this object in the JVM
        implements: ClassVar[list[str]] = [
            "org.apache.spark.sql.streaming.PythonStreamingQueryListener"
        ]
