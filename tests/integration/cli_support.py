"""Build real group logs for the CLI tests by driving the protocol's handlers through
:class:`GroupLogClient` (what a member does), without Spark."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Mapping, Sequence
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from typing import Any

from spark_kafka_group.group import (
    GroupConfig,
    GroupCoordinator,
    GroupError,
    JoinRequest,
    ManualClock,
)
from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.group.offsets import commit_offsets
from spark_kafka_group.member.log_client import GroupLogClient
from spark_kafka_group.ops.cli.main import main


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def run_cli(*argv: str) -> CliResult:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse usage errors
            code = int(exc.code or 0)
    return CliResult(code, out.getvalue(), err.getvalue())


class GroupDriver:
    """Members of one group, moved through joins, syncs, commits and leaves by hand.

    Timestamps come from a manual clock that starts ``start_ago_ms`` before now, so a member
    written last is still live for the real clock of ``reset_offsets`` (which expires members
    past their session timeout).
    """

    def __init__(
        self,
        store: str,
        group_id: str,
        topic_counts: dict[str, int],
        *,
        protocol: str = "range",
        session_timeout_ms: int = 120_000,
        start_ago_ms: int = 60_000,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        self.clock = ManualClock(int(time.time() * 1000) - start_ago_ms)
        self.client = GroupLogClient(
            store,
            group_id,
            clock=self.clock,
            storage_options=storage_options,
            # generations complete at once: rebalance() joins, then syncs, by hand
            config=GroupConfig(initial_rebalance_delay_ms=0),
        )
        self.topic_counts = dict(topic_counts)
        self.protocol = protocol
        self.session_timeout_ms = session_timeout_ms
        self.generation: dict[str, int] = {}

    def _request(self, member: str, instance: str | None = None) -> JoinRequest:
        return JoinRequest(
            member_id=member,
            protocols=[self.protocol],
            topics=sorted(self.topic_counts),
            instance_id=instance,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=30_000,
            client_host="test-host",
        )

    def step(self, ms: int = 1_000) -> None:
        self.clock.advance(ms)

    def join(self, member: str, instance: str | None = None) -> None:
        def decide(work: GroupCoordinator, now: int) -> tuple[list, Any]:
            return work.join(self._request(member, instance), now)

        response = self.client.transact(decide)
        assert response.error is GroupError.NONE, response

    def rebalance(self, members: Sequence[str]) -> int:
        """Every member (re)joins, then the leader syncs: the next Stable generation."""
        for m in members:
            self.step(200)
            self.join(m)
        group = self.client.fold().group
        assert group.state.value == "CompletingRebalance", group.state
        leader, gen = group.leader, group.generation
        assert leader is not None
        self.step(200)

        def sync(work: GroupCoordinator, now: int) -> tuple[list, Any]:
            return work.sync(leader, gen, now, metadata=self.topic_counts)

        response = self.client.transact(sync)
        assert response.error is GroupError.NONE, response
        assert self.client.fold().group.state.value == "Stable"
        return gen

    def commit(self, member: str, offsets: Mapping[tuple[str, int], int]) -> None:
        by_partition = {TopicPartition(*tp): offset for tp, offset in offsets.items()}
        self.step(300)

        def decide(work: GroupCoordinator, now: int) -> tuple[list, Any]:
            return commit_offsets(work.group, member, work.group.generation, by_partition, now)

        response = self.client.transact(decide)
        assert response.accepted == set(offsets), response

    def leave(self, member: str) -> None:
        self.step(500)

        def decide(work: GroupCoordinator, now: int) -> tuple[list, Any]:
            return work.leave(member, now, reason="test leave")

        response = self.client.transact(decide)
        assert response.error is GroupError.NONE, response

    def assignment(self, member: str) -> list[tuple[str, int]]:
        m = self.client.fold().group.members[member]
        return sorted((tp.topic, tp.partition) for tp in m.assignment)
