"""The member's liveness lease (:mod:`spark_kafka_group.store.leases`): renewing its own once a
heartbeat interval, watching the other members' for changes, and dropping a departed member's.
Both intervals count on the member's monotonic clock (the injected one)."""

from __future__ import annotations

import logging

from spark_kafka_group.errors import GroupStoreError
from spark_kafka_group.group.metadata import LEASES
from spark_kafka_group.member.log_client import GroupLogClient

log = logging.getLogger(__name__)


class LeaseKeeper:
    """One member's side of the leases of its group log (none: liveness is in the log)."""

    def __init__(self, client: GroupLogClient) -> None:
        self._client = client
        self._clock = client.clock
        self._leases = client.leases
        # On the member's monotonic clock: when it last listed and renewed the leases.
        self._read_ms = -(10**15)
        self._renewed_ms = -(10**15)
        # Its lease's renewal number: grows at every renewal (see store/leases.py).
        self._number = 0

    @property
    def enabled(self) -> bool:
        """The group log has leases (else members write HEARTBEAT records)."""
        return self._leases is not None

    def renew(self, member_id: str, interval_ms: int) -> None:
        """Renew ``member_id``'s lease once a heartbeat interval (its monotonic clock), under a
        number that grows at every renewal: its wall clock in ms while that runs forward, so
        that members of earlier releases, which read it as a time, keep reading it right."""
        mono = self._clock.monotonic_ms()
        if self._leases is None or mono - self._renewed_ms < interval_ms:
            return
        self._number = max(self._number + 1, self._clock.now_ms())
        self._leases.renew(member_id, self._number)
        self._renewed_ms = mono
        self._client.watch.saw_leases({member_id: self._number}, mono)

    def watch(self, member_id: str, interval_ms: int) -> None:
        """List the leases once a heartbeat interval while another member has one: a member is
        silent when its lease has not changed for its session timeout since this member saw
        it change, so a change must be seen soon after it happens (a member that died is
        then expired within its session timeout and two heartbeat intervals). The listing is
        a read, not a write: it never competes with the group log's compare-and-swap."""
        mono = self._clock.monotonic_ms()
        if self._leases is None or mono - self._read_ms < interval_ms:
            return
        if any(
            LEASES in m.profile.features and m.member_id != member_id
            for m in self._client.coordinator.group.members.values()
        ):
            self._client.read_leases()
            self._read_ms = mono

    def drop(self, member_id: str) -> None:
        """Forget a member that left or expired, and delete its lease."""
        self._client.watch.forget_member(member_id)
        try:
            if self._leases is not None:
                self._leases.drop(member_id)
        except GroupStoreError as exc:  # a leftover lease only costs a listing entry
            log.debug("group %s: lease of %s not dropped: %s", self._client.group_id,
                      member_id, exc)  # fmt: skip
