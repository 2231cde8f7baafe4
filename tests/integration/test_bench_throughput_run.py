"""bench_throughput runs end to end at a tiny size, so that it cannot rot: format("kafka")
(with its defaults and tuned), format("kafka-group"), the raw consumers, the do-nothing source
and the fetch alone read the suite's broker in the pyspark of jvm/pom.xml's spark-sql-kafka
jar; and its latency part, every reader measured once caught up. Its figures are printed,
never asserted; the tests assert that it ran and printed its ``key=value`` line."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.maven_spark import not_maven_spark_reason

pytestmark = [pytest.mark.maven_spark, pytest.mark.spark, pytest.mark.broker]

REPO = Path(__file__).resolve().parents[2]


def _run_and_check(options: list[str], keys: Iterable[str]) -> str:
    """Run the benchmark on the suite's broker with ``options``; every one of ``keys`` must be
    in its last line, and a number. Its output."""
    reason = not_maven_spark_reason()
    if reason is not None:
        pytest.skip(reason)
    command = [sys.executable, "-m", "benchmarks.bench_throughput", *options]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    run = subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    print(run.stdout)  # the figures, for the CI log
    assert run.returncode == 0, (
        f"{' '.join(command)} exited {run.returncode}:\n{run.stderr[-4000:]}"
    )
    last = run.stdout.strip().splitlines()[-1]
    figures = dict(pair.split("=", 1) for pair in last.split())
    for key in keys:
        assert key in figures, f"{key} missing from the last line: {last}"
        assert not math.isnan(float(figures[key])), f"{key} is nan (a reader failed): {last}"
    return run.stdout


def test_bench_throughput_runs_and_prints_its_key_value_line(bootstrap_servers: str) -> None:
    options = [
        "--bootstrap-servers", bootstrap_servers,
        "--only", "throughput", "--records", "4000", "--partitions", "8",
        "--value-bytes", "100", "--rounds", "1",
    ]  # fmt: skip
    readers = ("kafka", "raw", "noop", "fetch")
    _run_and_check(
        options,
        [
            *(f"{r}_rps_100b_8p" for r in readers),
            "kafka_group_rps_100b_8p",
            "kafka_tuned_rps_100b_8p",
            "vs_spark_kafka_100b_8p",
            "vs_tuned_spark_kafka_100b_8p",
            "group_cpu_s_per_m_100b_8p",
            "kafka_cpu_s_per_m_100b_8p",
            "group_startup_s_100b_8p",
        ],
    )


def test_bench_throughput_latency_runs_and_prints_its_key_value_line(
    bootstrap_servers: str,
) -> None:
    options = [
        "--bootstrap-servers", bootstrap_servers, "--only", "latency",
        "--latency-rates", "1000", "--latency-triggers", "default",
        "--latency-seconds", "3", "--latency-warmup", "1", "--latency-rounds", "2",
    ]  # fmt: skip
    out = _run_and_check(
        options,
        [
            "latency_raw_1000_p50_ms",
            "latency_kafka_1000_default_p99_ms",
            "latency_kafka_group_1000_default_p99_ms",
            "latency_plain_1000_default_p99_ms",
            "latency_vs_spark_kafka_p50_1000_default",
        ],
    )
    assert "default trigger, round 2 of 2" in out, out
    assert "the records of all 2 rounds:" in out, out
