"""A topic deleted and created again under a consumer: the client defect behind the executor
crash it caused on Tansu (docs/troubleshooting.md), and the consumer pool that avoids it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.broker]

_REPO = Path(__file__).resolve().parents[2]


def run_probe(servers: str, mode: str) -> subprocess.CompletedProcess[str]:
    """tests/deleted_topic_consumer.py in a process of its own (a crash must not kill pytest)."""
    return subprocess.run(
        [sys.executable, "-m", "tests.deleted_topic_consumer", servers, mode],
        cwd=_REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_consumer_lives_through_its_topic_deleted_and_recreated_on_kafka(
    bootstrap_servers: str,
) -> None:
    """Apache Kafka answers a fetch of a deleted topic with UNKNOWN_TOPIC_ID; the client copes,
    and the source's pool hands the re-created topic to a consumer that reads it."""
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        pytest.skip("deletes topics: only on the suite's own broker")
    for mode in ("client", "pool"):
        probe = run_probe(bootstrap_servers, mode)
        assert probe.returncode == 0, (mode, probe.returncode, probe.stderr[-2000:])
        assert probe.stdout.split() == ["survived", "old,new"], (mode, probe.stdout)


def test_on_tansu_the_client_crashes_and_the_pool_does_not(tansu_bootstrap_servers: str) -> None:
    """librdkafka 2.5-2.16 die (SIGSEGV) when a consumer that knew a topic meets it deleted or
    re-created on Tansu, which answers such a fetch with UNKNOWN_TOPIC_OR_PARTITION. The pool
    closes every consumer that knew a topic under another id, so a Python worker lives on. If a
    new client no longer crashes, this fails: say so in docs/troubleshooting.md."""
    client = run_probe(tansu_bootstrap_servers, "client")
    assert client.returncode == -signal.SIGSEGV, (client.returncode, client.stdout)
    pooled = run_probe(tansu_bootstrap_servers, "pool")
    assert pooled.returncode == 0, (pooled.returncode, pooled.stderr[-2000:])
    assert pooled.stdout.split() == ["survived", "old,new"], pooled.stdout
