"""The group log store against real Delta tables (delta-rs) in tmp_path."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError

from spark_kafka_group.errors import GroupStoreError, IncompatibleGroupStoreError, OptionError
from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.records import RECORD_SCHEMA_VERSION, GroupRecord
from spark_kafka_group.store import (
    AppendConflict,
    GroupLog,
    InvalidGroupIdError,
    group_log_uri,
    list_groups,
)
from spark_kafka_group.store.codec import SCHEMA, to_arrow
from spark_kafka_group.store.leases import LeaseFiles
from spark_kafka_group.store.table import LOG_TABLE_NAME, LogTable
from spark_kafka_group.store.table_properties import retention_properties


def hb(member: str = "m1", ts: int = 0) -> GroupRecord:
    return GroupRecord(kind=RecordKind.HEARTBEAT.value, timestamp_ms=ts, member_id=member)


def commit_rec(offset: int, member: str = "m1") -> GroupRecord:
    return GroupRecord(
        kind=RecordKind.COMMIT.value,
        timestamp_ms=offset,
        member_id=member,
        generation=3,
        topic="t",
        partition=offset % 3,
        offset=offset,
    )


def fill(log: GroupLog, commits: int, per_commit: int = 2) -> int:
    version = log.latest_version()
    for i in range(commits):
        recs = [commit_rec(i * per_commit + j) for j in range(per_commit)]
        version = log.append(recs, expected_version=version)
    return version


def snapshot_files(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


# -- paths -------------------------------------------------------------------------------------


def test_group_log_uri_joins_store_and_group() -> None:
    assert group_log_uri("/data/groups", "g1") == "/data/groups/g1"
    assert (
        group_log_uri("s3://bucket/groups/", "orders.v2_x-1") == "s3://bucket/groups/orders.v2_x-1"
    )


@pytest.mark.parametrize(
    "bad", ["", ".", "..", "a/b", "../x", "-x", "a b", "é", "x" * 256, ".hidden"]
)
def test_group_log_uri_refuses_unsafe_group_ids(bad: str) -> None:
    with pytest.raises(InvalidGroupIdError, match="groupId") as info:
        group_log_uri("/data", bad)
    assert isinstance(info.value, OptionError)
    assert isinstance(info.value, GroupStoreError)


# -- round trip --------------------------------------------------------------------------------


def test_new_log_is_empty_until_the_first_append(tmp_path: Path) -> None:
    log = GroupLog.open(str(tmp_path / "g"))
    assert log.latest_version() == -1
    assert log.read() == []
    assert log.read_slice().version == -1
    assert list_groups(str(tmp_path)) == []


def test_round_trip(tmp_path: Path) -> None:
    log = GroupLog.open(str(tmp_path / "g"))
    first = [
        GroupRecord(
            kind=RecordKind.JOIN.value,
            timestamp_ms=1_700_000_000_000,
            member_id="m-1",
            instance_id="static-1",
            generation=None,
            payload={"topics": ["a", "b"], "session_timeout_ms": 45000, "nested": {"x": None}},
        ),
        GroupRecord(
            kind=RecordKind.SYNC.value,
            timestamp_ms=2,
            member_id="m-1",
            generation=1,
            payload={"é": 1},
        ),
    ]
    assert log.append(first, expected_version=-1) == 0
    second = [commit_rec(2**40), hb("m-2", 7)]
    assert log.append(second, expected_version=0) == 1
    assert log.latest_version() == 1
    assert log.read() == [(0, first[0]), (0, first[1]), (1, second[0]), (1, second[1])]
    assert log.read(after_version=0) == [(1, second[0]), (1, second[1])]
    assert log.read(after_version=1) == []
    # a fresh handle (another member) sees the same log
    other = GroupLog.open(str(tmp_path / "g"), create=False)
    assert other.read() == log.read()
    assert list_groups(str(tmp_path)) == ["g"]
    table = DeltaTable(str(tmp_path / "g"))
    assert table.metadata().name == LOG_TABLE_NAME
    assert table.metadata().configuration["delta.appendOnly"] == "true"
    assert table.to_pyarrow_table()["schema_version"].to_pylist() == [RECORD_SCHEMA_VERSION] * 4


def test_member_leases_written_before_the_log_do_not_block_its_creation(tmp_path: Path) -> None:
    uri = str(tmp_path / "g")
    log = GroupLog.open(uri)
    LeaseFiles(uri).renew("m1", 1_000)  # a member renews its lease before the first append
    assert log.append([hb()], expected_version=-1) == 0
    assert [r.member_id for _, r in GroupLog.open(uri).read()] == ["m1"]
    assert LeaseFiles(uri).read() == {"m1": 1_000}


def test_open_without_create_refuses_a_missing_log(tmp_path: Path) -> None:
    with pytest.raises(GroupStoreError, match=r"no group log at .*nope"):
        GroupLog.open(str(tmp_path / "nope"), create=False)


def test_append_needs_records(tmp_path: Path) -> None:
    log = GroupLog.open(str(tmp_path / "g"))
    with pytest.raises(ValueError):
        log.append([], expected_version=-1)


# -- compare-and-swap --------------------------------------------------------------------------


def test_delta_rs_rebases_blind_appends_unless_retries_are_zero(tmp_path: Path) -> None:
    """Why CAS needs max_commit_retries=0: by default a stale blind append is rebased."""
    uri = str(tmp_path / "plain")
    data = pa.table({"x": [1]})
    write_deltalake(uri, data)
    write_deltalake(DeltaTable(uri), data, mode="append")  # version 1
    stale = DeltaTable(uri, version=0)
    write_deltalake(stale, data, mode="append")  # default retries: no conflict, lands at 2
    assert stale.version() == 2
    stale = DeltaTable(uri, version=0)
    with pytest.raises(CommitFailedError):
        write_deltalake(
            stale, data, mode="append", commit_properties=CommitProperties(max_commit_retries=0)
        )
    assert DeltaTable(uri).version() == 2


def test_append_conflict_between_two_members(tmp_path: Path) -> None:
    a = GroupLog.open(str(tmp_path / "g"))
    b = GroupLog.open(str(tmp_path / "g"))
    assert a.append([hb("a")], expected_version=-1) == 0
    assert b.latest_version() == 0
    assert a.append([hb("a", 1)], expected_version=0) == 1
    with pytest.raises(AppendConflict) as info:
        b.append([hb("b", 1)], expected_version=0)
    assert info.value.expected_version == 0
    assert info.value.latest_version == 1
    assert str(tmp_path / "g") in str(info.value)
    assert [r.member_id for _, r in b.read()] == ["a", "a"]
    # after folding version 1, b's retry lands
    assert b.append([hb("b", 2)], expected_version=1) == 2
    # a's cached snapshot is behind; it must not be able to overwrite either
    with pytest.raises(AppendConflict):
        a.append([hb("a", 3)], expected_version=1)
    assert [(v, r.member_id) for v, r in a.read()] == [(0, "a"), (1, "a"), (2, "b")]


def test_two_members_creating_the_log_conflict(tmp_path: Path) -> None:
    a = GroupLog.open(str(tmp_path / "g"))
    b = GroupLog.open(str(tmp_path / "g"))
    assert a.append([hb("a")], expected_version=-1) == 0
    with pytest.raises(AppendConflict):
        b.append([hb("b")], expected_version=-1)
    assert [r.member_id for _, r in b.read()] == ["a"]


def test_append_ahead_of_the_log_is_an_error(tmp_path: Path) -> None:
    log = GroupLog.open(str(tmp_path / "g"))
    log.append([hb()], expected_version=-1)
    with pytest.raises(GroupStoreError, match="only at version 0") as info:
        log.append([hb()], expected_version=5)
    assert not isinstance(info.value, AppendConflict)


def test_concurrent_threads_each_version_once(tmp_path: Path) -> None:
    uri = str(tmp_path / "g")
    GroupLog.open(uri).append([hb("init")], expected_version=-1)
    conflicts = []

    def writer(name: str) -> None:
        log = GroupLog.open(uri)
        for i in range(8):
            while True:
                version = log.read_slice().version
                try:
                    log.append([hb(name, i), commit_rec(i, name)], expected_version=version)
                    break
                except AppendConflict:
                    conflicts.append(name)

    threads = [threading.Thread(target=writer, args=(f"w{k}",)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = GroupLog.open(uri).read()
    by_version: dict[int, set[str]] = {}
    for version, rec in rows:
        by_version.setdefault(version, set()).add(rec.member_id or "")
    assert all(len(members) == 1 for members in by_version.values())
    assert sorted(by_version) == list(range(1 + 3 * 8))
    assert len(rows) == 1 + 3 * 8 * 2


# -- reads and maintenance ---------------------------------------------------------------------


def test_incremental_read_after_maintenance(tmp_path: Path) -> None:
    log = GroupLog.open(str(tmp_path / "g"))
    last = fill(log, 40)
    assert last == 39
    before = log.read()
    assert log.file_count() == 40
    report = log.maintain(now_ms=123)
    assert report.files_compacted == 40 and report.files_written >= 1
    assert report.files_after < 40
    assert report.checkpoint_version == report.version_after
    assert report.now_ms == 123
    assert report.skipped == []
    # maintenance took Delta versions but wrote no records
    assert log.latest_version() > 39
    assert log.read() == before
    assert log.read(after_version=20) == [(v, r) for v, r in before if v > 20]
    assert log.read(after_version=39) == []
    slice_ = log.read_slice(after_version=39)
    assert slice_.records == [] and slice_.version == log.latest_version()
    # a member that only folded up to 39 must re-read: the maintenance commit took version 40
    with pytest.raises(AppendConflict):
        log.append([hb()], expected_version=39)
    new = log.append([hb("m9")], expected_version=slice_.version)
    assert log.read(after_version=39) == [(new, hb("m9"))]
    # a fresh member reads the compacted table from its checkpoint
    assert GroupLog.open(str(tmp_path / "g")).read() == [*before, (new, hb("m9"))]


def test_maintain_is_cheap_on_a_small_log_and_on_a_new_one(tmp_path: Path) -> None:
    empty = GroupLog.open(str(tmp_path / "e"))
    assert empty.maintain().version_after == -1
    log = GroupLog.open(str(tmp_path / "g"))
    fill(log, 3)
    report = log.maintain()
    assert report.files_compacted == 0  # too few small files to be worth a commit
    assert report.version_after == report.version_before == 2


def test_maintain_while_others_append(tmp_path: Path) -> None:
    uri = str(tmp_path / "g")
    log = GroupLog.open(uri)
    fill(log, 20)
    stop = threading.Event()
    written: list[int] = []

    def appender() -> None:
        me = GroupLog.open(uri)
        i = 0
        while not stop.is_set() or i < 10:
            try:
                me.append([commit_rec(10_000 + i)], expected_version=me.read_slice().version)
                written.append(10_000 + i)
                i += 1
            except AppendConflict:
                pass

    thread = threading.Thread(target=appender)
    thread.start()
    reports = [GroupLog.open(uri).maintain() for _ in range(3)]
    stop.set()
    thread.join()
    assert any(r.files_compacted for r in reports)
    offsets = [r.offset for _, r in GroupLog.open(uri).read()]
    assert offsets == list(range(40)) + written


def test_read_from_latest_snapshot(tmp_path: Path) -> None:
    log = GroupLog.open(str(tmp_path / "g"))
    assert log.read(from_latest_snapshot=True) == []
    fill(log, 5)  # versions 0..4
    assert len(log.read(from_latest_snapshot=True)) == 10  # no snapshot yet: everything
    snap1 = GroupRecord(kind=RecordKind.SNAPSHOT.value, timestamp_ms=1, payload={"state": 1})
    log.append([snap1], expected_version=4)  # 5
    fill(log, 3)  # 6..8
    snap2 = GroupRecord(kind=RecordKind.SNAPSHOT.value, timestamp_ms=2, payload={"state": 2})
    log.append([commit_rec(99), snap2, commit_rec(100)], expected_version=8)  # 9
    fill(log, 2)  # 10..11
    expected = [(9, snap2), (9, commit_rec(100))] + [(v, r) for v, r in log.read() if v >= 10]
    assert log.read(from_latest_snapshot=True) == expected
    # other snapshot kinds
    assert log.read(from_latest_snapshot=True, snapshot_kind="NOPE") == log.read()
    # after_version past the latest snapshot: just the records after it
    assert log.read(after_version=10, from_latest_snapshot=True) == log.read(after_version=10)
    # the same after compaction
    log.maintain()
    assert log.read(from_latest_snapshot=True) == expected
    assert GroupLog.open(str(tmp_path / "g")).read(from_latest_snapshot=True) == expected


def test_newer_record_schema_is_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "g")
    log = GroupLog.open(uri)
    log.append([hb()], expected_version=-1)
    newer = to_arrow([hb("future")], 1).set_column(
        2, pa.field("schema_version", pa.int32(), nullable=False), pa.array([99], pa.int32())
    )
    write_deltalake(DeltaTable(uri), newer, mode="append")
    with pytest.raises(IncompatibleGroupStoreError, match="schema version 99"):
        log.read()


# -- refusals ----------------------------------------------------------------------------------


def test_refuses_a_foreign_delta_table(tmp_path: Path) -> None:
    uri = tmp_path / "g"
    write_deltalake(str(uri), pa.table({"id": [1, 2]}))
    before = snapshot_files(uri)
    with pytest.raises(IncompatibleGroupStoreError) as info:
        GroupLog.open(str(uri))
    message = str(info.value)
    assert str(uri) in message and "not a spark-kafka-group group log" in message
    assert "groupStore or groupId" in message
    assert snapshot_files(uri) == before


def test_refuses_a_foreign_directory(tmp_path: Path) -> None:
    uri = tmp_path / "g"
    uri.mkdir()
    (uri / "notes.txt").write_text("precious")
    with pytest.raises(IncompatibleGroupStoreError, match=r"non-empty directory .*notes\.txt"):
        GroupLog.open(str(uri))
    assert snapshot_files(uri) == {"notes.txt": b"precious"}


def test_refuses_a_file(tmp_path: Path) -> None:
    (tmp_path / "g").write_text("x")
    with pytest.raises(IncompatibleGroupStoreError, match="holds a file"):
        GroupLog.open(str(tmp_path / "g"))


def test_refuses_a_group_log_of_another_format(tmp_path: Path) -> None:
    uri = str(tmp_path / "g")
    write_deltalake(
        uri,
        SCHEMA.empty_table(),
        name=LOG_TABLE_NAME,
        description="spark-kafka-group group log; format=99",
    )
    before = snapshot_files(tmp_path / "g")
    with pytest.raises(IncompatibleGroupStoreError, match=r"format 99.*Upgrade spark-kafka-group"):
        GroupLog.open(uri)
    assert snapshot_files(tmp_path / "g") == before


@pytest.mark.parametrize("damage", ["truncate", "garbage", "delete_first", "delete_all"])
def test_corrupted_log_is_a_clear_error(tmp_path: Path, damage: str) -> None:
    uri = tmp_path / "g"
    log = GroupLog.open(str(uri))
    fill(log, 3)
    commits = sorted((uri / "_delta_log").glob("*.json"))
    if damage == "truncate":
        data = commits[-1].read_bytes()
        commits[-1].write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        commits[-1].write_text("not json")
    elif damage == "delete_first":
        commits[0].unlink()
    else:
        for c in commits:
            c.unlink()
        # (a young log without commits could be one being created right now: age it)
        for p in [uri, *uri.rglob("*")]:
            os.utime(p, (time.time() - 3600, time.time() - 3600))
    with pytest.raises(GroupStoreError) as info:
        GroupLog.open(str(uri))
    message = str(info.value)
    assert str(uri) in message
    assert "corrupted" in message and "choose another groupId" in message
    assert not isinstance(info.value, IncompatibleGroupStoreError)


def test_unwritable_path_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(GroupStoreError, match=r"cannot write the group log at .*file/g"):
        GroupLog.open(str(tmp_path / "file" / "g"))


def test_list_groups(tmp_path: Path) -> None:
    for name in ["b", "a"]:
        GroupLog.open(str(tmp_path / name)).append([hb()], expected_version=-1)
    GroupLog.open(str(tmp_path / "c"))  # opened, never written: no log yet
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "x").write_text("x")
    assert list_groups(str(tmp_path)) == ["a", "b"]
    assert list_groups(str(tmp_path / "missing")) == []


def test_maintain_bounds_the_files_on_disk(tmp_path: Path) -> None:
    short = {
        "delta.logRetentionDuration": "interval 0 seconds",
        "delta.deletedFileRetentionDuration": "interval 0 seconds",
    }
    uri = tmp_path / "g"
    log = GroupLog.open(str(uri), table_properties=short)
    loser = GroupLog.open(str(uri))
    version = fill(log, 30)
    loser.latest_version()
    log.append([hb()], expected_version=version)
    with pytest.raises(AppendConflict):  # writes a data file that never gets committed
        loser.append([hb("loser")], expected_version=version)
    report = log.maintain()
    assert report.skipped == [] and report.files_vacuumed >= 31
    data_files = [p for p in uri.iterdir() if p.suffix == ".parquet"]
    assert len(data_files) == log.file_count() == report.files_after
    assert len(list((uri / "_delta_log").iterdir())) <= 6
    assert [r.member_id for _, r in log.read(after_version=version)] == ["m1"]


def test_a_log_being_created_by_another_member_is_not_refused(tmp_path: Path) -> None:
    """delta-rs writes the data file before the first commit: that window is not "foreign"."""
    uri = tmp_path / "g"
    uri.mkdir()
    (uri / "_delta_log").mkdir()
    data_file = uri / "part-00000-2bf49261-6b09-4a51-80c8-593931a7d3ca-c000.snappy.parquet"
    data_file.write_bytes(b"PAR1")
    # ... and, on a local disk, first under a staging name that it then renames (seen when 8
    # writers created one log at once: test_faults.py::test_commit_conflict_storm)
    staged = uri / "part-00000-0c9e1a2b-9054-4dfd-8f14-7317bca64013-c000.snappy.parquet#1"
    staged.write_bytes(b"PAR1")
    log = GroupLog.open(str(uri))
    assert log.latest_version() == -1
    staged.unlink()
    # the same directory, left like that for long, is refused (never written to)
    old = time.time() - 3600
    for p in [data_file, uri / "_delta_log"]:
        os.utime(p, (old, old))
    with pytest.raises(GroupStoreError, match="without any commit"):
        GroupLog.open(str(uri))
    os.rmdir(uri / "_delta_log")
    with pytest.raises(IncompatibleGroupStoreError, match="not a Delta table"):
        GroupLog.open(str(uri))
    assert data_file.read_bytes() == b"PAR1"


@pytest.mark.parametrize("lead_h", [0, 2])
def test_a_maintainer_whose_clock_is_ahead_leaves_an_append_in_flight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lead_h: int
) -> None:
    """delta-rs ages files on this machine's clock against the store's stamps. Here the
    store's clock is ``lead_h`` hours behind this machine's: it stamped another member's data
    file, whose commit is still to come, with its own now. A full vacuum must leave that file
    (the log would otherwise reference a missing file); files older than the retention by the
    store's clock still go."""
    lead_s = lead_h * 3600
    store_now = LogTable.store_now
    monkeypatch.setattr(LogTable, "store_now", lambda self: store_now(self) - lead_s)
    uri = tmp_path / "g"
    log = GroupLog.open(str(uri), table_properties=retention_properties(3_600_000))
    fill(log, 3)
    in_flight = uri / "part-00000-2bf49261-6b09-4a51-80c8-593931a7d3ca-c000.snappy.parquet"
    leftover = uri / "part-00000-0c9e1a2b-9054-4dfd-8f14-7317bca64013-c000.snappy.parquet"
    for path, age_s in ((in_flight, 0), (leftover, 2 * 3600)):
        path.write_bytes(b"PAR1")
        stamped = time.time() - lead_s - age_s
        os.utime(path, (stamped, stamped))
    report = log.maintain()
    assert report.skipped == []
    assert in_flight.exists()
    assert not leftover.exists()
    assert [r.offset for _, r in log.read()] == list(range(6))


@pytest.mark.parametrize("skew_s", [-3600, 120, 3600])
def test_a_log_being_created_is_judged_young_by_the_stores_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, skew_s: int
) -> None:
    """The files' age is measured on the store's clock, not on this machine's wall clock,
    which may be off (a member whose clock was 120 s ahead refused a log being created)."""
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + skew_s)
    uri = tmp_path / "g"
    uri.mkdir()
    (uri / "_delta_log").mkdir()
    data_file = uri / "part-00000-2bf49261-6b09-4a51-80c8-593931a7d3ca-c000.snappy.parquet"
    data_file.write_bytes(b"PAR1")
    assert GroupLog.open(str(uri)).latest_version() == -1
    old = real_time() - 600  # a leftover, by the store's clock
    for p in [data_file, uri / "_delta_log"]:
        os.utime(p, (old, old))
    with pytest.raises(GroupStoreError, match="without any commit"):
        GroupLog.open(str(uri))
    assert sorted(p.name for p in uri.iterdir()) == ["_delta_log", data_file.name]


def test_maintenance_gives_an_existing_log_the_retention_it_was_opened_with(
    tmp_path: Path,
) -> None:
    """groupLogRetention: a new log is created with it; maintenance sets it on an older one."""
    uri = str(tmp_path / "g")
    version = fill(GroupLog.open(uri), 3)  # created with the default retention, one hour
    hour, week = retention_properties(3_600_000), retention_properties(7 * 86_400_000)
    assert DeltaTable(uri).metadata().configuration.items() >= hour.items()

    log = GroupLog.open(uri, table_properties=week)
    report = log.maintain()
    assert report.skipped == [] and report.retention == week
    assert DeltaTable(uri).metadata().configuration.items() >= week.items()
    assert log.maintain().retention == {}  # already set
    log.append([hb()], expected_version=DeltaTable(uri).version())  # appends go on
    assert len(log.read(after_version=version)) == 1
    created = GroupLog.open(str(tmp_path / "new"), table_properties=week)
    fill(created, 1)
    assert DeltaTable(str(tmp_path / "new")).metadata().configuration.items() >= week.items()


def test_the_default_retention_is_what_logs_were_created_with_before_the_option() -> None:
    """Else the first maintenance of every existing log would rewrite its properties."""
    assert retention_properties(3_600_000) == {
        "delta.logRetentionDuration": "interval 1 hours",
        "delta.deletedFileRetentionDuration": "interval 1 hours",
    }
    assert set(retention_properties(7 * 86_400_000).values()) == {"interval 7 days"}
    assert set(retention_properties(90_000).values()) == {"interval 90 seconds"}
