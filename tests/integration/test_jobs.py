"""jobs/kafka_to_delta.py: exactly once into Delta across a crash and a restart, on the suite's
broker; and submitted with conf/ on a local cluster as documented."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

import pytest
from deltalake import DeltaTable

from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample
from spark_kafka_group.sink.landed import app_id
from spark_kafka_group.store.files import query_table
from spark_kafka_group.testing.waiting import wait_until
from tests.maven_spark import maven_spark_jars, not_maven_spark_reason
from tests.spark_apps import REPO, child_env, cluster_logs, private_spark_home

JOB = REPO / "jobs" / "kafka_to_delta.py"
SPARK_DEFAULTS = REPO / "conf" / "spark-defaults.conf"
SOURCE_PROPERTIES = REPO / "conf" / "kafka-group-source.properties"


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


@pytest.mark.spark
@pytest.mark.broker
def test_kafka_to_delta_writes_exactly_once_across_a_crash(
    bootstrap_servers: str, topic_name: str, group_store: str, tmp_path: Path
) -> None:
    """A crash after a batch landed in the table and before Spark's commit-log entry for it
    is the window where a sink that is not idempotent writes a batch twice: the restart re-runs
    the batch. The job is killed (SIGKILL, its member never leaves) right after the table shows
    a commit; Spark's last commit-log entry (and any later batch's planned offsets) is removed,
    which is the checkpoint as a kill a moment earlier leaves it. So the restart always re-runs
    a batch whose rows are in the table, and the writer drops them."""
    create_topic(bootstrap_servers, topic_name, 2)
    produced = produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=60)
    table, checkpoint = tmp_path / "table", tmp_path / "checkpoint"
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
        "--checkpoint", str(checkpoint),
        "--max-offsets-per-trigger", "40",
        "--option", "startingOffsets=earliest",
        "--option", "heartbeatIntervalMs=500",
        "--option", "sessionTimeoutMs=6000",
    ]  # fmt: skip
    env = child_env({})

    first_log = tmp_path / "first-run.log"
    with open(first_log, "wb") as out:
        first = subprocess.Popen(
            [*submit, "--trigger", "4s"],  # the documented short form
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            wait_until(
                lambda: table_versions(table) > 0 or first.poll() is not None,
                300,
                "the first batch in the Delta table",
                poll_s=0.05,
            )
        finally:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    output = first_log.read_text(errors="replace")
    assert "Sink: ExactlyOnceDeltaWriter" in output, output[-5000:]
    assert table_versions(table) > 0, output[-5000:]
    committed = last_batch(checkpoint, "commits")
    if committed is not None:
        remove_batches_from(checkpoint, log="commits", first=committed)
        remove_batches_from(checkpoint, log="offsets", first=committed + 1)

    second = subprocess.run(
        submit, cwd=REPO, env=env, capture_output=True, text=True, timeout=480, check=False
    )
    assert second.returncode == 0, second.stdout[-5000:] + second.stderr[-5000:]
    total = sum(produced.values())
    assert f"holds {total} records" in second.stdout, second.stdout
    # The re-run batch's rows were in the table: dropped, and the drop logged (spark-submit
    # passes the Python driver's stderr on its stdout).
    assert "not written again" in second.stdout + second.stderr, second.stdout[-5000:]

    # Every record once, and the table records per partition where its rows end.
    delta = DeltaTable(str(table))
    rows = query_table(delta, 'SELECT "partition", "offset" FROM t')
    keys = sorted(zip(rows["partition"].to_pylist(), rows["offset"].to_pylist(), strict=True))
    assert keys == sorted((p, o) for p, n in produced.items() for o in range(n))
    for partition, count in produced.items():
        landed = delta.transaction_version(app_id(group, TopicPartition(topic_name, partition)))
        assert landed == count, (partition, landed)


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
