"""Group logs written by earlier versions still replay, and records keep their on-disk form.

``fixtures/group_log_v1.jsonl`` holds every record kind as the store keeps it (the envelope
columns, and the payload as the exact JSON string of the ``payload`` column). It was written by
the handlers of commit ac035e9, before record payloads had types: a static and a dynamic
member join, sync, commit (with and without metadata), revoke cooperatively, see a new topic
(METADATA), restart the static member (a JOIN that replaces it), SNAPSHOT, expire the new
incarnation with a scheduled rebalance delay (KIP-415) that later runs out (REBALANCE), leave,
commit as an admin into the Empty group, and DELETE it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from spark_kafka_group.group import (
    GroupConfig,
    GroupCoordinator,
    GroupMetadata,
    GroupProtocolBug,
    GroupRecord,
    GroupState,
    JoinRequest,
    RecordKind,
    TopicPartition,
    latest_snapshot_index,
    replay,
)
from spark_kafka_group.group.metadata import IMPLICIT_REJOIN, LEASES, Opened, ScheduledDelay
from spark_kafka_group.group.payloads import (
    PAYLOAD_TYPES,
    GenerationPayload,
    JoinPayload,
    SyncPayload,
    payload_of,
)

FIXTURE = Path(__file__).parent / "fixtures" / "group_log_v1.jsonl"
#: Kinds added after the fixture was written, so not in it. Each one is new: no record of it
#: was ever written in another form, and its payload round trip is tested by its own tests
#: (OFFSET_DELETE, ``kafka-group delete-offsets``: tests/unit/test_offset_delete.py).
KINDS_ADDED_SINCE = {RecordKind.OFFSET_DELETE.value}
#: Records up to the LEAVE, up to the DELETE.
STABLE_END, EMPTY_END = 45, 48


def fixture_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]


def fixture_records() -> list[GroupRecord]:
    return [GroupRecord(**{**row, "payload": json.loads(row["payload"])}) for row in fixture_rows()]


def keeps(new: Any, old: Any) -> bool:
    """``new`` has everything ``old`` has (objects may have gained keys)."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(k in new and keeps(new[k], v) for k, v in old.items())
    if isinstance(old, list):
        return isinstance(new, list) and len(new) == len(old) and all(map(keeps, new, old))
    return bool(new == old)


def stored(payload: dict[str, Any]) -> str:
    """The payload column as the store writes it."""
    return json.dumps(payload, separators=(",", ":"), sort_keys=True)


def offsets(group: GroupMetadata) -> dict[TopicPartition, tuple[int, int, str | None]]:
    return {tp: (o.offset, o.generation, o.member_id) for tp, o in group.offsets.items()}


def test_an_old_log_replays_to_the_state_it_was_written_with() -> None:
    records = fixture_records()
    assert len(records) == 49

    g = replay(records[:STABLE_END], "orders")
    assert (g.state, g.generation, g.leader, g.protocol) == (
        GroupState.STABLE,
        6,
        "a",
        "cooperative-sticky",
    )
    assert list(g.members) == ["a"]
    a = g.members["a"]
    assert (
        a.profile.client_id,
        a.profile.client_host,
        a.profile.session_timeout_ms,
        a.profile.rebalance_timeout_ms,
    ) == (
        "spark-a",
        "host-a",
        10_000,
        20_000,
    )
    assert a.profile.protocols == (("cooperative-sticky", {"v": 1}), ("range", {}))
    assert a.profile.subscription.topics == ("orders",)
    assert a.assignment == {TopicPartition("orders", p) for p in range(4)}
    assert a.held_since == {
        TopicPartition("orders", 0): 1,
        TopicPartition("orders", 1): 1,
        TopicPartition("orders", 2): 1,
        TopicPartition("orders", 3): 6,
    }
    assert g.fenced == {"b": "inst-b"}  # the static member's first incarnation
    assert g.static_members == {} and g.scheduled == {}
    assert g.assignment_snapshot == {"orders": 4}
    expected = {TopicPartition("orders", p): (12, 6, "a") for p in range(4)}
    expected |= {TopicPartition("orders-eu", p): (3, 3, "b") for p in range(2)}
    assert offsets(g) == expected

    empty = replay(records[:EMPTY_END], "orders")
    assert (empty.state, empty.generation, empty.members) == (GroupState.EMPTY, 7, {})
    assert offsets(empty)[TopicPartition("orders", 0)] == (20, -1, None)  # the admin commit

    assert replay(records, "orders").state == GroupState.DEAD


def test_an_old_log_replays_from_its_snapshot_to_the_same_state() -> None:
    records = fixture_records()[:STABLE_END]
    start = latest_snapshot_index(records)
    assert records[start].kind == RecordKind.SNAPSHOT
    assert replay(records[start:], "orders") == replay(records, "orders")


def test_the_old_log_has_every_record_kind_but_those_added_since() -> None:
    kinds = {k.value for k in RecordKind}
    assert kinds >= KINDS_ADDED_SINCE
    assert {r.kind for r in fixture_records()} == kinds - KINDS_ADDED_SINCE


def test_every_record_kind_has_one_payload_type() -> None:
    assert set(PAYLOAD_TYPES) == {k.value for k in RecordKind}
    assert all(t.KIND.value == kind for kind, t in PAYLOAD_TYPES.items())


def test_typed_payloads_write_back_the_bytes_an_old_log_holds() -> None:
    """A record's payload is written back byte for byte (keys added since are written only
    when set, so an old record has none). A SNAPSHOT is the whole state's form, which grows
    with the state: it keeps every old key and value."""
    for row, record in zip(fixture_rows(), fixture_records(), strict=True):
        typed = payload_of(record)
        assert type(typed) is PAYLOAD_TYPES[record.kind]
        if record.kind == RecordKind.SNAPSHOT:
            assert keeps(typed.to_dict(), json.loads(row["payload"]))
        else:
            assert stored(typed.to_dict()) == row["payload"], record.kind


def test_typed_payloads_read_what_the_old_writer_meant() -> None:
    records = fixture_records()
    restart = JoinPayload.of(records[25])
    assert (restart.replaces, restart.rebalance, restart.reason) == ("b", False, "query restarted")
    assert restart.profile.subscription.pattern == "orders.*" and restart.owned is None
    rejoin = JoinPayload.of(records[7])
    assert rejoin.owned == frozenset(TopicPartition("orders", p) for p in range(4))
    cooperative = SyncPayload.of(records[9])
    assert cooperative.revoking == {"a": {TopicPartition("orders", 3)}, "b": frozenset()}
    delayed = SyncPayload.of(records[35])
    assert delayed.delay_ms == 4_800 and set(delayed.scheduled) == {"inst-b"}


def test_a_payload_missing_what_replay_needs_is_a_clear_protocol_bug() -> None:
    join = fixture_records()[0]
    broken = dataclasses.replace(join, payload={"client_id": "x"})
    with pytest.raises(GroupProtocolBug, match=r"JOIN record written by 'a' .*session_timeout_ms"):
        replay([broken], "orders")
    with pytest.raises(GroupProtocolBug, match="a JOIN record read as a SYNC record"):
        SyncPayload.of(join)


def test_keys_written_only_when_set_round_trip_through_the_types() -> None:
    """A join with features and an initial rebalance delay, and a generation whose members
    all rejoin implicitly: every record the handlers write reads back to the same bytes."""
    features = (IMPLICIT_REJOIN, LEASES)
    coord = GroupCoordinator("g", GroupConfig(initial_rebalance_delay_ms=3_000))
    records: list[GroupRecord] = []

    def do(result: tuple[list[GroupRecord], object]) -> None:
        coord.apply_all(result[0])
        records.extend(result[0])

    for mid in ("a", "b"):
        request = JoinRequest(mid, ("cooperative-sticky",), topics=("t",), features=features)
        do(coord.join(request, 0))
    do((coord.tick(3_000), None))
    do(coord.sync("a", coord.group.generation, 3_000, metadata={"t": 2}))
    join, generation = JoinPayload.of(records[0]), GenerationPayload.of(records[-2])
    assert join.profile.features == frozenset(features) and join.join_delay_until_ms == 3_000
    assert generation.rejoin_implicitly and coord.group.state == GroupState.STABLE
    for record in records:
        assert stored(payload_of(record).to_dict()) == stored(record.payload), record.kind


def test_scheduled_delays_have_one_encoding_in_syncs_and_snapshots() -> None:
    """A SNAPSHOT and a SYNC encode a scheduled delay alike; only the SNAPSHOT names the record
    that opened it (a SYNC opens its delays itself), and both read back what was written."""
    delay = ScheduledDelay(
        frozenset({TopicPartition("orders", 3)}), 1_700_000_015_500, Opened(7, 12)
    )
    group = GroupMetadata("orders", scheduled={"inst-b": delay})
    in_snapshot = json.loads(json.dumps(group.to_payload()))["scheduled"]
    sync = SyncPayload(
        protocol="range", assignment={}, revoking={}, snapshot={}, scheduled={"inst-b": delay}
    )
    in_sync = json.loads(json.dumps(sync.to_dict()))["scheduled"]
    assert in_snapshot == {"inst-b": {**in_sync["inst-b"], "opened": [7, 12]}}
    assert in_sync == {"inst-b": {"partitions": [["orders", 3]], "until_ms": 1_700_000_015_500}}
    assert GroupMetadata.from_payload(json.loads(json.dumps(group.to_payload()))).scheduled == {
        "inst-b": delay
    }
    written = sync.to_dict()
    assert SyncPayload.from_dict(written).to_dict() == written
