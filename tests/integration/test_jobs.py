"""jobs/kafka_to_delta.py: Spark's Delta sink, exactly once across a crash and a restart, on the
suite's broker; and the error it gives where delta-spark is missing."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path
from types import ModuleType

import pytest
from deltalake import DeltaTable

from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample
from spark_kafka_group.store.files import query_table
from spark_kafka_group.testing.waiting import wait_until
from tests.maven_spark import DELTA_SQL_CONF, maven_spark_jars, not_maven_spark_reason
from tests.spark_apps import REPO, child_env, cluster_logs, private_spark_home

JOB = REPO / "jobs" / "kafka_to_delta.py"
SPARK_DEFAULTS = REPO / "conf" / "spark-defaults.conf"
SOURCE_PROPERTIES = REPO / "conf" / "kafka-group-source.properties"


def _load_job() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kafka_to_delta", JOB)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def spark_submit() -> str:
    """The ``spark-submit`` of this interpreter's pyspark."""
    import pyspark

    return str(Path(pyspark.__file__).resolve().parent / "bin" / "spark-submit")


def delta_commits(table: Path) -> list[list[dict]]:
    """The actions of each commit in the table's ``_delta_log``, in version order."""
    log = table / "_delta_log"
    return [
        [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
        for path in sorted(log.glob("*.json"))
    ]


def sink_batches(table: Path) -> list[int]:
    """The batch ids Spark's Delta sink recorded (its ``txn`` actions), one per commit."""
    if not (table / "_delta_log").is_dir():
        return []
    return [a["txn"]["version"] for c in delta_commits(table) for a in c if "txn" in a]


def remove_batches_from(checkpoint: Path, *, log: str, first: int) -> list[int]:
    """Delete the checkpoint's ``log`` entries (``offsets`` or ``commits``) for batch ``first``
    and later, with their checksum files; the batch ids deleted."""
    removed = []
    for entry in sorted((checkpoint / log).iterdir()):
        if entry.name.isdigit() and int(entry.name) >= first:
            entry.unlink()
            (checkpoint / log / f".{entry.name}.crc").unlink(missing_ok=True)
            removed.append(int(entry.name))
    return removed


@pytest.mark.maven_spark
@pytest.mark.spark
@pytest.mark.broker
def test_kafka_to_delta_writes_through_spark_delta_sink_exactly_once_across_a_crash(
    bootstrap_servers: str, topic_name: str, group_store: str, tmp_path: Path
) -> None:
    """A crash between the Delta sink's commit of batch N and Spark's commit-log entry for it is
    the window where a sink that is not idempotent writes a batch twice: the restart re-runs
    batch N. The job is killed (SIGKILL, its member never leaves) right after the table shows a
    batch; if the kill came after Spark's commit-log entry, that entry (and any later batch's
    planned offsets) is removed, which is the checkpoint as a kill a moment earlier leaves
    it. So the restart always re-runs a batch that is already in the table."""
    reason = not_maven_spark_reason()
    if reason is not None:
        pytest.skip(reason)
    create_topic(bootstrap_servers, topic_name, 2)
    produced = produce_sample(bootstrap_servers, topic_name, partitions=2, per_partition=60)
    table, checkpoint = tmp_path / "table", tmp_path / "checkpoint"
    submit = [
        spark_submit(), "--master", "local[2]",
        "--jars", ",".join(maven_spark_jars()),
        *(arg for key, value in DELTA_SQL_CONF.items() for arg in ("--conf", f"{key}={value}")),
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.shuffle.partitions=2",
        str(JOB),
        "--bootstrap-servers", bootstrap_servers,
        "--topic", topic_name,
        "--group-id", f"ingest-{uuid.uuid4().hex[:6]}",
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
                lambda: bool(sink_batches(table)) or first.poll() is not None,
                300,
                "the first batch in the Delta table",
                poll_s=0.05,
            )
        finally:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    output = first_log.read_text(errors="replace")
    assert "Sink: Spark's Delta sink" in output, output[-5000:]
    in_table = max(sink_batches(table), default=-1)
    assert in_table >= 0, output[-5000:]
    remove_batches_from(checkpoint, log="commits", first=in_table)
    remove_batches_from(checkpoint, log="offsets", first=in_table + 1)

    second = subprocess.run(
        submit, cwd=REPO, env=env, capture_output=True, text=True, timeout=480, check=False
    )
    assert second.returncode == 0, second.stdout[-5000:] + second.stderr[-5000:]
    total = sum(produced.values())
    assert f"holds {total} records" in second.stdout, second.stdout

    # Every record once, every batch recorded once (the re-run batch was skipped by the sink,
    # not appended again), and every append made by Spark's Delta sink on the executors.
    rows = query_table(DeltaTable(str(table)), 'SELECT "partition", "offset" FROM t')
    keys = sorted(zip(rows["partition"].to_pylist(), rows["offset"].to_pylist(), strict=True))
    assert keys == sorted((p, o) for p, n in produced.items() for o in range(n))
    batches = sink_batches(table)
    assert batches == sorted(set(batches)) and in_table in batches, batches
    appends = [c for c in delta_commits(table) if any("add" in a for a in c)]
    operations = {a["commitInfo"]["operation"] for c in appends for a in c if "commitInfo" in a}
    assert operations == {"STREAMING UPDATE"}, operations


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


@pytest.mark.spark
def test_kafka_to_delta_without_delta_spark_names_the_extra_and_the_jars(
    spark, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = _load_job()
    if not job.missing_delta_classes(spark):
        pytest.skip("this session has delta-spark (the maven-spark venv): nothing is missing")
    args = [
        "--bootstrap-servers", "127.0.0.1:9",  # never reached: the job stops before Kafka
        "--topic", "events",
        "--group-store", str(tmp_path / "groups"),
        "--table", str(tmp_path / "table"),
    ]  # fmt: skip
    assert job.main(args, spark=spark) == 2
    error = capsys.readouterr().err
    for fix in (
        "org.apache.spark.sql.delta.sources.DeltaDataSource",
        "pip install delta-spark",
        "conf/spark-defaults.conf",
        "io.delta:delta-spark_4.2_2.13:4.4.0",
    ):
        assert fix in error, error
    assert not (tmp_path / "table").exists()
