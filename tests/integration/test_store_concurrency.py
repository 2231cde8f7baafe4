"""Several processes race to append to one group log: each append lands once, at its own version."""

from __future__ import annotations

import multiprocessing as mp
import re
import time
import traceback
from typing import Any

import pytest

from spark_kafka_group.group.kinds import RecordKind
from spark_kafka_group.group.records import GroupRecord
from spark_kafka_group.store import AppendConflict, GroupLog
from spark_kafka_group.store.paths import list_dir
from tests.object_stores import STORE_KINDS

WRITERS = 4
APPENDS = 12
PER_APPEND = 3


def _writer(
    uri: str, options: dict[str, str], name: str, start: Any, results: Any, maintain: bool
) -> None:
    try:
        results.put(_write(uri, options, name, start, maintain))
    except BaseException:
        results.put((name, None, traceback.format_exc()))
        raise


def _write(
    uri: str, options: dict[str, str], name: str, start: Any, maintain: bool
) -> tuple[str, Any, int]:
    log = GroupLog.open(uri, storage_options=options)
    start.wait(30)
    conflicts = 0
    landed: list[tuple[int, int]] = []
    for i in range(APPENDS):
        records = [
            GroupRecord(
                kind=RecordKind.COMMIT.value,
                timestamp_ms=i,
                member_id=name,
                offset=i,
                payload={"k": k},
            )
            for k in range(PER_APPEND)
        ]
        while True:
            expected = log.read_slice().version  # fold everything up to here, then decide
            try:
                landed.append((i, log.append(records, expected_version=expected)))
                break
            except AppendConflict:
                conflicts += 1
        if maintain and i % 4 == 3:
            log.maintain()
    return name, landed, conflicts


@pytest.mark.parametrize("any_store", STORE_KINDS, indirect=True)
def test_processes_racing_to_append(any_store: tuple[str, dict[str, str]]) -> None:
    store, options = any_store
    uri = f"{store}/group"
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(uri, options, f"w{n}", start, results, n == 0))
        for n in range(WRITERS)
    ]
    for p in procs:
        p.start()
    time.sleep(0.5)
    start.set()
    outcomes = [results.get(timeout=120) for _ in procs]
    failures = [error for _, landed, error in outcomes if landed is None]
    assert not failures, failures[0]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0

    log = GroupLog.open(uri, storage_options=options, create=False)
    rows = log.read()
    # every append landed exactly once, all its records at the version its writer was told
    claimed = {(name, i): v for name, landed, _ in outcomes for i, v in landed}
    assert len(claimed) == WRITERS * APPENDS
    assert len(set(claimed.values())) == WRITERS * APPENDS, "two appends got the same version"
    seen: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for version, rec in rows:
        seen.setdefault((rec.member_id or "", rec.offset or 0), []).append(
            (version, rec.payload["k"])
        )
    assert set(seen) == set(claimed)
    for key, entries in seen.items():
        assert entries == [(claimed[key], k) for k in range(PER_APPEND)], key
    # versions only go up; the racing really happened
    assert [v for v, _ in rows] == sorted(v for v, _ in rows)
    assert sum(c for _, _, c in outcomes) > 0
    # losers leave no temporary commit files behind (orphan data files are vacuumed later)
    names = sorted(list_dir(f"{log.uri}/_delta_log", options) or {})
    assert all(
        re.match(r"^(\d{20}\.(json|checkpoint\.parquet)|_last_checkpoint)$", name) for name in names
    ), names
