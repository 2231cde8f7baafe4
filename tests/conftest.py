"""Shared fixtures: a real broker (Apache Kafka in KRaft mode from the Maven jars, or
$KAFKA_BOOTSTRAP_SERVERS), the quickstart's embedded Tansu for its smoke set, and local Spark."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

from tests.class_archive import set_jvm_options, use_archive
from tests.maven_spark import maven_spark_conf, not_maven_spark_reason
from tests.object_stores import any_store, azure_store, s3_store  # noqa: F401 (fixtures)
from tests.pyspark_bytecode import ensure_bytecode
from tests.spark_apps import SPARK_MASTER_ENV

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_kafka_group.testing.kafka_broker import KafkaBroker
    from spark_kafka_group.testing.kafka_nodes import MultiNodeKafka

# Python workers must run this interpreter (docs/design.md, "Spark facts that shape the reader").
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
# Spark's Python workers (and so the streaming source) import the test modules a test names in
# an option, e.g. assignmentStrategy=tests.custom_assignors:OneAndRestAssignor, as a user's
# driver imports their own: from PYTHONPATH, set before Spark starts.
_REPO = str(Path(__file__).resolve().parent.parent)
if _REPO not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (_REPO, os.environ.get("PYTHONPATH")) if p
    )

set_jvm_options()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files of tests marked ``long`` go first (each file's own order kept): scripts/test's
    two xdist workers take whole files in collection order, and a file of several minutes
    handed out last keeps one worker busy while the other has nothing left to do."""
    long_files = {item.path for item in items if item.get_closest_marker("long")}
    items.sort(key=lambda item: item.path not in long_files)


def pytest_collection_finish(session: pytest.Session) -> None:
    """A run that starts JVMs maps the classes of a Spark driver from an archive
    (tests/class_archive.py), made once per java and pyspark, and Spark's Python processes
    import pyspark from bytecode (tests/pyspark_bytecode.py); a run of unit tests alone does
    not wait for either."""
    if any("tests/unit/" not in item.nodeid for item in session.items):
        use_archive()
        ensure_bytecode()


# Hypothesis profiles, chosen by $HYPOTHESIS_PROFILE (scripts/test sets "ci"). On CI's loaded
# two cores a property test must not fail for being slow: no per-example deadline, no
# too-slow health check, and the same examples every run (derandomize), so a failure is the
# code's and repeats; print_blob lets a failure be replayed elsewhere. "dev" (the default)
# keeps Hypothesis's defaults: random examples and the 200 ms deadline that flags slow code.
settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    print_blob=True,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker | None]:
    """The suite's Apache Kafka: a single-node KRaft cluster started from the jars of
    jvm/pom.xml (spark_kafka_group/testing/kafka_broker.py), or None when
    $KAFKA_BOOTSTRAP_SERVERS names an external cluster."""
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        yield None
        return
    from spark_kafka_group.testing.kafka_broker import KafkaBroker

    with KafkaBroker() as broker:
        yield broker


@pytest.fixture(scope="session")
def bootstrap_servers(kafka_broker: KafkaBroker | None) -> str:
    """A reachable Kafka cluster: $KAFKA_BOOTSTRAP_SERVERS if set, else the suite's Apache
    Kafka broker."""
    if kafka_broker is None:
        return os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    return kafka_broker.bootstrap_servers


@pytest.fixture(scope="session")
def _kafka_nodes_cluster() -> Iterator[MultiNodeKafka]:
    from spark_kafka_group.testing.kafka_nodes import MultiNodeKafka

    with MultiNodeKafka() as nodes:
        yield nodes


@pytest.fixture
def kafka_nodes(_kafka_nodes_cluster: MultiNodeKafka) -> Iterator[MultiNodeKafka]:
    """The three-node Apache Kafka of the failure scenarios (tests marked ``kafka_nodes``),
    started once for the run (about 20 s to start and as long to stop on two cores): every
    node running and every replica in sync when a test gets it, and again after it, whatever
    the test stopped or killed."""
    _heal(_kafka_nodes_cluster)
    yield _kafka_nodes_cluster
    _heal(_kafka_nodes_cluster)


def _heal(nodes: MultiNodeKafka) -> None:
    for node in nodes.nodes:
        if not node.running:
            nodes.restart(node)
    nodes.wait_in_sync()


@pytest.fixture(scope="session")
def tansu_bootstrap_servers() -> Iterator[str]:
    """The quickstart's embedded Tansu broker (pip only), for the small set of tests that
    keeps it supported (tests/integration/test_tansu_smoke.py)."""
    from spark_kafka_group.quickstart.embedded import EmbeddedBroker

    with EmbeddedBroker() as broker:
        yield broker.bootstrap_servers


@pytest.fixture
def topic_name() -> str:
    """A fresh topic name per test (the broker is shared across the session)."""
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local Spark session for the whole run (start-up is the slow part). Its master is
    ``local[2]``, or ``$SPARK_KAFKA_GROUP_TEST_MASTER`` (tests/spark_apps.py). In the
    maven-spark venv it also has jvm/pom.xml's delta-spark and spark-sql-kafka jars with
    Delta's SQL extension (tests/maven_spark.py): one SparkContext per process, so the
    maven_spark tests and the others of that run share it."""
    from pyspark.sql import SparkSession

    import spark_kafka_group

    builder = (
        SparkSession.builder.master(os.environ.get(SPARK_MASTER_ENV, "local[2]"))
        .appName("spark-kafka-group tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.streaming.stopTimeout", "30s")
    )
    for key, value in maven_spark_conf().items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    spark_kafka_group.register(session)
    yield session
    session.stop()


@pytest.fixture
def delta_spark(request: pytest.FixtureRequest) -> SparkSession:
    """The ``spark`` session with delta-spark (Spark SQL over Delta tables, Spark's Delta sink).
    Only the maven-spark venv has it; elsewhere the test skips, naming the venv that runs it
    (scripts/test runs ``-m maven_spark`` there, so the skip is not lost coverage)."""
    reason = not_maven_spark_reason()
    if reason is not None:
        pytest.skip(reason)
    session: SparkSession = request.getfixturevalue("spark")
    return session


@pytest.fixture
def group_store(tmp_path: Path) -> str:
    """A fresh local group store directory."""
    return str(tmp_path / "groups")
