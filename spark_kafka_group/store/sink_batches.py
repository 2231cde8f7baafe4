"""The members' batch plans and their listeners' completed batches, beside the group log, for
queries that write through Spark's own Delta sink (the ``deltaSinkTable`` option; the rules are
:mod:`spark_kafka_group.sink.takeover`'s).

``_sink_batches/<member id>@<n>``: the member's newest plans (the n-th write of its life), put
before Spark runs the batch; ``_sink_batches/<member id>~listener@<batch id + 1>``: the newest
batch its progress listener saw complete. Blind puts of numbered files (:mod:`.member_files`),
the previous one deleted; read only when a partition changes owner, when the reader deletes
the files of members gone from the group that no later owner needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from spark_kafka_group.sink.takeover import (
    CompletedBatch,
    PlannedBatch,
    decode_completed,
    decode_plans,
    encode_completed,
    encode_plans,
)
from spark_kafka_group.store.member_files import MemberFiles

SINK_BATCHES_DIR = "_sink_batches"
_LISTENER = "~listener"


@dataclass
class MemberBatches:
    """What one member's files say."""

    plans: list[PlannedBatch] = field(default_factory=list)
    completed: CompletedBatch | None = None


class SinkBatchFiles:
    """The plan and completed-batch files of one group log (``table_uri``)."""

    def __init__(self, table_uri: str, *, storage_options: Mapping[str, str] | None = None) -> None:
        self._files = MemberFiles(
            table_uri, SINK_BATCHES_DIR, "batch plan", storage_options=storage_options
        )
        self.uri = self._files.uri

    def put_plans(self, member_id: str, number: int, plans: Sequence[PlannedBatch]) -> None:
        self._files.write(member_id, number, encode_plans(plans))

    def put_completed(self, member_id: str, completed: CompletedBatch) -> None:
        data = encode_completed(completed)
        self._files.write(member_id + _LISTENER, completed.batch_id + 1, data)

    def read_all(self, *, except_member: str = "") -> dict[str, MemberBatches]:
        """Every member's plans and completed batch (but ``except_member``'s)."""
        found: dict[str, MemberBatches] = {}
        for key, number in sorted(self._files.newest().items()):
            member = key.removesuffix(_LISTENER)
            if member == except_member:
                continue
            data = self._files.read(key, number)
            if data is None:  # replaced since the listing: its writer is alive and going on
                continue
            batches = found.setdefault(member, MemberBatches())
            if key.endswith(_LISTENER):
                batches.completed = decode_completed(data)
            else:
                batches.plans = decode_plans(data)
        return found

    def drop(self, *member_ids: str) -> None:
        """Delete every file of ``member_ids``: their plans and their listeners' batches."""
        self._files.drop(*member_ids, *(m + _LISTENER for m in member_ids))
