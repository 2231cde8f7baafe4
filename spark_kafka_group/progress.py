"""Offsets from Spark's query progress, committed from the user's driver process.

The group member commits every batch itself from ``latestOffset``/``commit()``, but Spark
does not always give it the chance for the last batch (docs/design.md, "Spark facts that
shape the reader": with pyspark 4.0 / 4.1 and Trigger.AvailableNow nothing is called after
the single batch; after ``query.stop()`` the last batch's ``commit()`` never comes). Spark's
query progress does carry every completed batch's end offset, which for this source names the
group, the store, the member and the generation
(:class:`~spark_kafka_group.source.offsets.SourceOffset`). So:

* :class:`GroupProgressListener`, added by :func:`spark_kafka_group.register`, commits on the
  member's behalf, as soon as a batch completes, the offsets of the partitions the member is
  giving up (a rebalance waits for them); the member records the others itself at the next
  trigger and its group folds them into the log once a second, so that the log's writes do
  not grow with the number of queries. When the query terminates the listener commits the
  last completed batch whole (idempotent: whatever the member already committed is skipped)
  and then writes the LEAVE of its dynamic members. The member also leaves by itself when
  the query's streaming-source process ends (:mod:`spark_kafka_group.source.lifecycle`);
  whichever comes first writes the LEAVE, the other finds the member gone;
* :func:`leave_group` does the same for one query, explicitly.

Storage credentials for an object-store group log come from the environment here (the
``groupStore.*`` options are not part of the progress); pass ``storage_options`` otherwise.
"""

from __future__ import annotations

import ast
import json
import logging
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pyspark.sql.streaming import StreamingQuery, StreamingQueryListener

from spark_kafka_group.admin import commit_for_member, leave_for_member
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
    revoking_only: bool = False,
) -> int:
    """Commit the ``kafka-group`` end offsets of one query progress; how many were written.
    ``clients``: group log clients by (store, group) to reuse across calls (and to add to).
    ``revoking_only``: only the partitions their member is giving up."""
    return _commit(
        group_offsets(progress),
        storage_options=storage_options,
        clients=clients,
        revoking_only=revoking_only,
    )


def _commit(
    offsets: Iterable[SourceOffset],
    *,
    storage_options: Mapping[str, str] | None,
    clients: Clients | None,
    revoking_only: bool = False,
) -> int:
    written = 0
    for offset in offsets:
        if offset.member and offset.offsets:
            written += commit_for_member(
                offset.store,
                offset.group,
                offset.member,
                offset.generation,
                offset.offsets,
                starts=offset.starts,
                storage_options=storage_options,
                client=_cached_client(clients, offset, storage_options),
                revoking_only=revoking_only,
            )
    return written


def leave_group(query: StreamingQuery, *, storage_options: Mapping[str, str] | None = None) -> None:
    """Commit the query's last completed batch and leave its group now (after stop or
    termination). Not needed: a query's member leaves by itself when the query ends (see the
    module docstring); kept for explicit use. Static members (``groupInstanceId``) commit but
    stay, as in Kafka."""
    progress = query.lastProgress
    commit_progress(progress, storage_options=storage_options)
    _leave(group_offsets(progress), storage_options=storage_options, clients=None)


def _leave(
    offsets: Iterable[SourceOffset],
    *,
    storage_options: Mapping[str, str] | None,
    clients: Clients | None,
) -> None:
    for offset in offsets:
        if offset.member:
            leave_for_member(
                offset.store,
                offset.group,
                offset.member,
                storage_options=storage_options,
                client=_cached_client(clients, offset, storage_options),
                reason="its query terminated",
            )


class GroupProgressListener(StreamingQueryListener):
    """Commits for ``kafka-group`` queries what their members cannot (see the module
    docstring): partitions being given up as each batch completes, the last batch and the
    LEAVE when the query terminates."""

    def __init__(self, storage_options: Mapping[str, str] | None = None) -> None:
        self._init(storage_options)

    def _init(self, storage_options: Mapping[str, str] | None) -> None:
        self._storage_options = storage_options
        # One client per group log, kept across batches: each commit then folds only the
        # records written since the last one (a new client replays from the latest snapshot,
        # ~50 ms of driver CPU per batch and query).
        self._clients: Clients = {}
        # The members each running query (by run id) has reported in its progress: they leave
        # when it terminates.
        self._members: dict[str, dict[tuple[str, str, str], SourceOffset]] = {}
        self._lock = threading.Lock()

    # Spark Connect pickles listeners to run them on the server: only the options travel.
    def __getstate__(self) -> dict[str, Any]:
        return {"storage_options": self._storage_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._init(state["storage_options"])

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        with self._lock:
            members = self._members.setdefault(str(_field(progress, "runId")), {})
            for offset in group_offsets(progress):
                members[(offset.store, offset.group, offset.member)] = offset
            try:
                commit_progress(
                    progress,
                    storage_options=self._storage_options,
                    clients=self._clients,
                    revoking_only=True,
                )
            except Exception:
                self._clients.clear()  # e.g. the store was replaced: open it afresh next time
                log.warning("kafka-group: committing from query progress failed", exc_info=True)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        # After the last progress (the listener bus keeps the order): its offsets are each
        # member's last completed batch. Spark never calls the source's commit() for it.
        with self._lock:
            members = self._members.pop(str(event.runId), {})
            options, clients = self._storage_options, self._clients
            try:
                _commit(members.values(), storage_options=options, clients=clients)
                _leave(members.values(), storage_options=options, clients=clients)
            except Exception:
                log.warning("kafka-group: leaving at query termination failed", exc_info=True)


def _field(progress: Any, name: str) -> Any:
    return progress[name] if isinstance(progress, Mapping) else getattr(progress, name)
