"""Shared fixtures: a real broker (embedded Tansu, or KAFKA_BOOTSTRAP_SERVERS) and local Spark."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator

import pytest

# Python workers must run this interpreter (DESIGN section 6).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def bootstrap_servers() -> Iterator[str]:
    """A reachable Kafka cluster: $KAFKA_BOOTSTRAP_SERVERS if set, else an embedded Tansu."""
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        yield external
        return
    from spark_kafka_group.embedded import EmbeddedBroker

    with EmbeddedBroker() as broker:
        yield broker.bootstrap_servers


@pytest.fixture
def topic_name() -> str:
    """A fresh topic name per test (the broker is shared across the session)."""
    return f"t-{uuid.uuid4().hex[:10]}"
