"""jobs/kafka_to_delta.py: two copies in one group write one Delta table exactly once across a
kill, a clean stop and their restarts, on the suite's broker; and submitted with conf/ on a
local cluster as documented."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import time
import uuid
from functools import partial
from pathlib import Path

import pytest
from deltalake import DeltaTable

from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.ops.admin import describe_group
from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample
from spark_kafka_group.sink.landed import app_id
from spark_kafka_group.source.offsets import SourceOffset
from spark_kafka_group.store.files import query_table
from spark_kafka_group.testing.group_log import group_records
from spark_kafka_group.testing.production import SteadyProducer
from spark_kafka_group.testing.waiting import wait_until
from tests.delivery import check_landed
from tests.groups import committed as committed_offsets
from tests.groups import stable_with
from tests.maven_spark import maven_spark_jars, not_maven_spark_reason
from tests.spark_apps import REPO, child_env, cluster_logs, private_spark_home

JOB = REPO / "jobs" / "kafka_to_delta.py"
SPARK_DEFAULTS = REPO / "conf" / "spark-defaults.conf"
SOURCE_PROPERTIES = REPO / "conf" / "kafka-group-source.properties"
#: The topic's partitions in the churn test: two for each copy.
PARTITIONS = 4


def spark_submit() -> str:
    """The ``spark-submit`` of this interpreter's pyspark."""
    import pyspark

    return str(Path(pyspark.__file__).resolve().parent / "bin" / "spark-submit")


def table_versions(table: Path) -> int:
    """How many commits the Delta table's ``_delta_log`` holds (0 before it exists)."""
    log = table / "_delta_log"
    return len(list(log.glob("*.json"))) if log.is_dir() else 0


def remove_batches_from(checkpoint: Path, *, log: str, first: int) -> list[int]:
    """Delete the checkpoint's ``log`` entries (``offsets`` or ``commits``) for batch ``first``
    and later, with their checksum files; the batch ids deleted."""
    removed = []
    folder = checkpoint / log
    for entry in sorted(folder.iterdir()) if folder.is_dir() else ():
        if entry.name.isdigit() and int(entry.name) >= first:
            entry.unlink()
            (folder / f".{entry.name}.crc").unlink(missing_ok=True)
            removed.append(int(entry.name))
    return removed


def last_batch(checkpoint: Path, log: str) -> int | None:
    folder = checkpoint / log
    ids = [int(e.name) for e in folder.iterdir() if e.name.isdigit()] if folder.is_dir() else []
    return max(ids, default=None)


class JobCopy:
    """One copy of the job, submitted as a user submits it, each start on the same checkpoint;
    the output of every start is appended to ``<name>.log``."""

    def __init__(self, name: str, submit: list[str], tmp_path: Path) -> None:
        self.name = name
        self.checkpoint = tmp_path / f"{name}-checkpoint"
        self.args = [
            *submit,
            "--checkpoint", str(self.checkpoint),
            "--option", f"kafka.client.id={name}",  # names the copy's member in the group
        ]  # fmt: skip
        self.log = tmp_path / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._since = 0  # where the current start's output begins in the log

    def start(self) -> None:
        self._since = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as out:
            # Its own process group: the JVM, the Python driver and Spark's Python workers.
            self.process = subprocess.Popen(
                self.args, cwd=REPO, env=child_env({}), stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    def kill(self) -> None:
        """SIGKILL to every process of the copy: no stop, no leave."""
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> int:
        """The clean stop: SIGTERM to the job's Python process, the child spark-submit
        started (a signal to spark-submit would stop Spark under the query); the exit code."""
        assert self.process is not None
        os.kill(self.driver_pid(), signal.SIGTERM)
        try:
            return self.process.wait(90)
        finally:
            self.kill()  # whatever the stop left behind

    def driver_pid(self) -> int:
        assert self.process is not None
        for entry in Path("/proc").iterdir():
            with contextlib.suppress(OSError):
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if parent == self.process.pid and str(JOB) in (entry / "cmdline").read_text():
                    return int(entry.name)
        raise AssertionError(f"{self.name}: no Python process of {JOB} under spark-submit")

    def output(self, *, current: bool = False) -> str:
        text = self.log.read_bytes()[self._since if current else 0 :]
        return text.decode(errors="replace")


def members_of(group_store: str, group: str, copy: JobCopy) -> dict[str, set[int]]:
    """The copy's members in the group now (normally one), each with the partitions it holds."""
    return {
        m.member_id: {tp.partition for tp in m.assignment}
        for m in describe_group(group_store, group).members
        if m.client_id == copy.name
    }


def held_by(group_store: str, group: str, copy: JobCopy) -> set[int]:
    """The partitions the group gives the copy's members now."""
    return set().union(*members_of(group_store, group, copy).values())


def replayed_partitions(checkpoint: Path, batch: int) -> set[int]:
    """The partitions batch ``batch`` of the checkpoint read records of: its end offset past
    where it began (:meth:`SourceOffset.start_of`). A restart runs the batch again."""

    def offset(number: int) -> SourceOffset | None:
        entry = checkpoint / "offsets" / str(number)
        if not entry.is_file():
            return None
        return SourceOffset.from_json(json.loads(entry.read_text().splitlines()[-1]))

    end, previous = offset(batch), offset(batch - 1)
    assert end is not None, f"no offsets entry for batch {batch} in {checkpoint}"
    return {
        tp.partition
        for tp, at in end.offsets.items()
        if (start := end.start_of(tp, previous)) is not None and at > start
    }


def landed_ends(table: Path, group: str, topic: str) -> dict[int, int]:
    """Per partition, the offset its rows in the table end at (0: none yet)."""
    if table_versions(table) == 0:
        return {}
    delta = DeltaTable(str(table))
    ends = {}
    for partition in range(PARTITIONS):
        end = delta.transaction_version(app_id(group, TopicPartition(topic, partition)))
        ends[partition] = end or 0
    return ends


@pytest.mark.spark
@pytest.mark.broker
def test_copies_of_kafka_to_delta_write_exactly_once_under_churn(
    bootstrap_servers: str, topic_name: str, group_store: str, tmp_path: Path
) -> None:
    """Two copies of the job in one group write one table while 150 records a second arrive.

    Each copy is killed in turn, a then b: the victim is killed (SIGKILL, its member never leaves)
    right after one of its batches landed in the table, and Spark's last commit-log entry (and
    any later batch's planned offsets) is removed from its checkpoint, which is the checkpoint
    as a kill a moment earlier leaves it. It stays down until its session timed out and the
    other copy wrote its partitions: that copy starts them at the group's commit, below what
    the victim landed, and the writer drops what it reads again. Then the victim restarts on
    its checkpoint: the batch it runs again is of partitions the other copy owns now, and is
    skipped. After the first kill, b is also stopped cleanly (SIGTERM to its Python process:
    its query stops, it exits 0) and restarted on its checkpoint, both starts at once (a
    restart costs about 30 s on two cores). The table ends with every produced record once."""
    create_topic(bootstrap_servers, topic_name, PARTITIONS)
    table = tmp_path / "table"
    group = f"ingest-{uuid.uuid4().hex[:6]}"
    submit = [
        spark_submit(), "--master", "local[2]",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.shuffle.partitions=2",
        str(JOB),
        "--bootstrap-servers", bootstrap_servers,
        "--topic", topic_name,
        "--group-id", group,
        "--group-store", group_store,
        "--table", str(table),
        "--trigger", "2s",  # the documented short form
        "--max-offsets-per-trigger", "2000",
        "--option", "startingOffsets=earliest",
        "--option", "heartbeatIntervalMs=500",
        "--option", "sessionTimeoutMs=6000",
    ]  # fmt: skip
    a, b = JobCopy("copy-a", submit, tmp_path), JobCopy("copy-b", submit, tmp_path)
    began = time.monotonic()

    def phase(what: str) -> None:
        print(f"{time.monotonic() - began:5.1f} s: {what}")

    def back(copies: tuple[JobCopy, ...], since: set[str]) -> bool:
        """Both copies hold partitions of a stable group, ``copies`` as new members."""
        return stable_with(group_store, group, 2, PARTITIONS) and all(
            {m for m, parts in members_of(group_store, group, copy).items() if parts} - since
            for copy in copies
        )

    def kill_after_a_landed_batch(victim: JobCopy, other: JobCopy) -> None:
        """The kill right after a batch of the victim landed (its commit-log entry written,
        then removed), the victim down until ``other`` wrote its partitions, its restart; the
        restart skips that batch, whose partitions ``other`` owns now, and ``other`` dropped
        what it read again below what the victim had landed."""
        held = held_by(group_store, group, victim)
        assert held, describe_group(group_store, group)
        seen = last_batch(victim.checkpoint, "commits")
        wait_until(
            lambda: last_batch(victim.checkpoint, "commits") != seen,
            60, f"a batch of {victim.name} in the table", poll_s=0.05,
        )  # fmt: skip
        victim.kill()
        committed = last_batch(victim.checkpoint, "commits")
        assert committed is not None
        remove_batches_from(victim.checkpoint, log="commits", first=committed)
        remove_batches_from(victim.checkpoint, log="offsets", first=committed + 1)
        replayed = replayed_partitions(victim.checkpoint, committed)
        assert replayed, f"{victim.name}'s batch {committed} read no records"
        at_kill = landed_ends(table, group, topic_name)
        # What the group had committed of the victim's partitions: where other takes them over.
        taken = {tp.partition: end for tp, end in committed_offsets(group_store, group).items()}
        phase(f"{victim.name} killed after its batch {committed} of {sorted(replayed)} landed: "
              f"landed {at_kill}, committed {taken}")  # fmt: skip

        def moved() -> bool:
            if not stable_with(group_store, group, 1, PARTITIONS):
                return False
            now = landed_ends(table, group, topic_name)
            return all(now[p] > at_kill[p] for p in held)

        wait_until(moved, 90, f"{other.name} writing {victim.name}'s partitions {held}", poll_s=0.5)
        phase(f"{other.name} wrote {victim.name}'s partitions; {victim.name} restarts")
        dropped = [
            f"holds partition {topic_name}-{partition} offsets {taken.get(partition, 0)} to"
            for partition in replayed
            if taken.get(partition, 0) < at_kill[partition]
        ]
        wait_until(
            lambda: all(line in other.output() for line in dropped),
            30, f"{other.name} dropping what it read again below {at_kill}",
        )  # fmt: skip
        victim.start()
        skipped = [f"Skipping {topic_name}-{partition} [" for partition in replayed]
        wait_until(
            lambda: all(line in victim.output(current=True) for line in skipped),
            180, f"{victim.name}'s restart skipping its batch {committed} of {sorted(replayed)}",
        )  # fmt: skip

    producer = SteadyProducer(
        bootstrap_servers, topic_name, PARTITIONS, per_round=15, interval_s=0.4
    )
    try:
        producer.start()
        a.start()
        b.start()
        wait_until(
            lambda: stable_with(group_store, group, 2, PARTITIONS) and table_versions(table),
            240, "both copies in the group and writing the table",
        )  # fmt: skip
        assert "Sink: ExactlyOnceDeltaWriter" in a.output(), a.output()[-5000:]
        phase("both copies in the group, writing")

        for number, (victim, other) in enumerate([(a, b), (b, a)]):
            before = set(members_of(group_store, group, victim))
            kill_after_a_landed_batch(victim, other)
            restarted: tuple[JobCopy, ...] = (victim,)
            if number == 0:
                # Meanwhile a clean stop of b, and its restart: both come back as new members
                # (one whose stop cut a batch stays in the group until its restart replaces it).
                before |= set(members_of(group_store, group, b))
                code = b.stop()
                assert code == 0, first_errors(b.output(current=True))
                phase("copy b stopped (exit 0); it restarts")
                b.start()
                restarted = (a, b)
            wait_until(partial(back, restarted, before), 180, "copies a and b back in the group")
            phase("copies a and b back in the group")

        final = producer.stop()
        phase(f"produced {sum(final.values())}")
        wait_until(
            lambda: landed_ends(table, group, topic_name) == final,
            120, f"every produced record in the table ({sum(final.values())})", poll_s=0.5,
        )  # fmt: skip
    finally:
        producer.stop()
        for copy in (a, b):
            if copy.process is not None:
                copy.kill()

    rows = query_table(DeltaTable(str(table)), 'SELECT "partition", "offset" FROM t')
    landed = list(zip(rows["partition"].to_pylist(), rows["offset"].to_pylist(), strict=True))
    result = check_landed(
        final, landed, group_records(group_store, group), topic=topic_name, sink="delta"
    )
    assert result.duplicated == 0 and not result.lost, result.details()
    result.assert_ok()
    phase("every record in the table once")


def first_errors(output: str, *, limit: int = 12) -> str:
    """The job's ``error:`` lines and the first exception lines of Spark's log (its stack
    traces left out), then the output's last lines."""
    found = [
        line for line in output.splitlines()
        if line.startswith("error:") or re.match(r"^\S*(Exception|Error)\b", line)
        or line.startswith("Caused by:")
    ]  # fmt: skip
    return "\n".join(found[:limit]) + "\n...\n" + output[-3000:]


def packed_environment(path: Path, *, marker: Path) -> Path:
    """A stand-in for a packed virtualenv (``venv-pack``): ``bin/python`` notes the directory it
    runs in, then runs this interpreter (which has spark-kafka-group and delta-spark)."""
    script = f'#!/bin/sh\necho "$PWD" >> "{marker}"\nexec "{sys.executable}" "$@"\n'.encode()
    info = tarfile.TarInfo("bin/python")
    info.size, info.mode = len(script), 0o755
    with tarfile.open(path, "w:gz") as archive:
        archive.addfile(info, io.BytesIO(script))
    return path


def with_values(conf: str, values: dict[str, str | None]) -> str:
    """``conf`` (spark-defaults.conf lines) with the values of ``values``'s keys replaced, a key
    mapped to None removed, and keys it lacks appended; every other line as written."""
    lines, seen = [], set()
    for line in conf.splitlines():
        key = line.split(maxsplit=1)[0] if line.strip() and not line.startswith("#") else None
        if key in values:
            seen.add(key)
            if values[key] is not None:
                lines.append(f"{key} {values[key]}")
            continue
        lines.append(line)
    lines += [f"{k} {v}" for k, v in values.items() if k not in seen and v is not None]
    return "\n".join(lines) + "\n"


@pytest.mark.maven_spark
@pytest.mark.spark
@pytest.mark.broker
def test_conf_files_submit_kafka_to_delta_on_a_local_cluster_as_documented(
    bootstrap_servers: str, topic_name: str, group_store: str, tmp_path: Path
) -> None:
    """conf/spark-defaults.conf in client mode as its comments say (the packed environment's
    path filled in and the archive unpacked where spark-submit runs; delta-spark's jars listed
    offline), and conf/kafka-group-source.properties as written with the flags that override
    it. The executors' and the driver's Python must be the archive's (a wrong
    spark.pyspark.python or spark.archives fails the fetch tasks or the source's planning on
    the driver), and the options file's groupId and startingOffsets must be the ones used."""
    reason = not_maven_spark_reason()
    if reason is not None:
        pytest.skip(reason)
    create_topic(bootstrap_servers, topic_name, 2)
    produced = produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=50)
    marker = tmp_path / "environment-python.log"
    conf = tmp_path / "spark-defaults.conf"
    conf.write_text(
        with_values(
            SPARK_DEFAULTS.read_text(encoding="utf-8"),
            {
                "spark.archives": f"{packed_environment(tmp_path / 'env.tar.gz', marker=marker)}"
                "#environment",
                # the file's offline alternative to spark.jars.packages: tests never fetch
                "spark.jars.packages": None,
                "spark.jars": ",".join(maven_spark_jars()),
            },
        ),
        encoding="utf-8",
    )
    # Client mode: the same archive unpacked where spark-submit runs (the file's step).
    with tarfile.open(tmp_path / "env.tar.gz") as archive:
        archive.extractall(tmp_path / "environment", filter="tar")
    home = private_spark_home(tmp_path)
    env = child_env({"SPARK_HOME": str(home)})
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):  # the conf file's lines decide
        env.pop(name)
    table = tmp_path / "table"
    result = subprocess.run(
        [
            str(home / "bin" / "spark-submit"), "--master", "local-cluster[1,1,1024]",
            "--properties-file", str(conf),
            str(JOB), "--options-file", str(SOURCE_PROPERTIES),
            "--bootstrap-servers", bootstrap_servers, "--topic", topic_name,
            "--group-store", group_store,
            "--table", str(table), "--checkpoint", str(tmp_path / "checkpoint"),
        ],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=480, check=False,
    )  # fmt: skip
    report = f"{first_errors(result.stdout + result.stderr)}\n{cluster_logs(home)}"
    assert result.returncode == 0, report
    total = sum(produced.values())
    assert f"holds {total} records" in result.stdout, report
    rows = query_table(DeltaTable(str(table)), 'SELECT "partition", "offset" FROM t')
    keys = sorted(zip(rows["partition"].to_pylist(), rows["offset"].to_pylist(), strict=True))
    assert keys == sorted((p, o) for p, n in produced.items() for o in range(n))
    # The options file's groupId (events-ingest) named the group log.
    assert (Path(group_store) / "events-ingest" / "_delta_log").is_dir()
    # The executor's Python workers ran the archive's python, unpacked in its work directory.
    where = marker.read_text(encoding="utf-8").split() if marker.exists() else []
    executor_dirs = [d for d in where if Path(d).is_relative_to(home / "work")]
    assert executor_dirs, f"the archive's python never ran on the executor: {where}\n{report}"
    assert str(tmp_path) in where, f"the driver's python was not the archive's: {where}"
