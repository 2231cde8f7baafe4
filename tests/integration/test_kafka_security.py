"""The Java client's security settings, end to end against Apache Kafka's SASL_PLAINTEXT
(SCRAM-SHA-512) and SSL listeners: a ``format("kafka-group")`` query reads and commits through
each, written as a Spark or Flink job writes them (``kafka.sasl.jaas.config`` with
ScramLoginModule, ``kafka.ssl.truststore.*``, ``kafka.ssl.keystore.*``), which
``kafka/java_settings.py`` translates for librdkafka on the driver and the executors; and
``kafka-group describe`` takes the same settings from a ``--command-config`` file. A wrong
password fails within seconds naming the setting, and nothing is read or committed.

The listeners are the suite's own broker's (spark_kafka_group/testing/kafka_broker.py), so
these tests need it: with ``$KAFKA_BOOTSTRAP_SERVERS`` (an external cluster) they skip."""

from __future__ import annotations

import datetime
import time
import uuid
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12
from cryptography.x509.oid import NameOID
from pyspark.errors import StreamingQueryException

from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.kafka.cluster import KafkaCluster
from spark_kafka_group.kafka.consumer_group_offsets import kafka_group_offsets
from spark_kafka_group.ops.admin import describe_group
from spark_kafka_group.quickstart.sample_data import create_topic, produce_sample
from spark_kafka_group.testing.kafka_broker import (
    SCRAM_MECHANISM,
    SCRAM_PASSWORD,
    SCRAM_USER,
    KafkaBroker,
)
from spark_kafka_group.testing.waiting import wait_until
from tests.integration.cli_support import GroupDriver, run_cli
from tests.streaming import Collected, expected_records, run_available_now, source_options
from tests.streaming import start_query as start_streaming_query

pytestmark = [pytest.mark.broker, pytest.mark.spark]

WRONG_PASSWORD = "not-the-password"


def _jaas(password: str) -> str:
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{SCRAM_USER}" password="{password}";'
    )


def sasl_settings(password: str = SCRAM_PASSWORD) -> dict[str, str]:
    """The Java client's SASL/SCRAM settings, as a Spark job's kafka.* options hold them."""
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": SCRAM_MECHANISM,
        "sasl.jaas.config": _jaas(password),
    }


@pytest.fixture(scope="module")
def broker(kafka_broker: KafkaBroker | None) -> KafkaBroker:
    if kafka_broker is None:
        pytest.skip(
            "the SASL and SSL listeners are the suite's own Kafka broker's; "
            "$KAFKA_BOOTSTRAP_SERVERS names an external cluster"
        )
    return kafka_broker


@pytest.fixture
def produced(broker: KafkaBroker, topic_name: str) -> dict[int, int]:
    """Ten records in each of the two partitions of a fresh topic (written in plain text)."""
    create_topic(broker.bootstrap_servers, topic_name, 2)
    return produce_sample(broker.bootstrap_servers, topic_name, partitions=2, per_partition=10)


def _properties_file(path: Path, settings: dict[str, str]) -> str:
    """A Kafka client properties file, as Kafka's tools take with --command-config."""
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    return str(path)


def _pkcs12_key_store(directory: Path, password: str) -> Path:
    """A client key and self-signed certificate in a password-protected PKCS12 store."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "skg-test-client")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .sign(key, hashes.SHA256())
    )
    store = directory / "client.p12"
    store.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"client", key, certificate, None, BestAvailableEncryption(password.encode())
        )
    )
    return store


def _read_and_committed(
    spark, options: dict[str, str], checkpoint: Path, group_store: str, group: str, topic: str,
    produced: dict[int, int],
) -> None:  # fmt: skip
    """Run ``options`` to the end (AvailableNow): every record read, every offset committed."""
    collected = run_available_now(spark, options, str(checkpoint))
    assert collected.records == expected_records(produced)
    ends = {(topic, p): n for p, n in produced.items()}
    wait_until(
        lambda: describe_group(group_store, group).committed == ends,
        60,
        "the group log to hold the run's final offsets",
    )


def test_a_query_reads_commits_and_mirrors_through_sasl_scram_with_java_settings(
    spark, broker: KafkaBroker, topic_name: str, group_store: str, produced, tmp_path: Path
) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    kafka_options = {f"kafka.{key}": value for key, value in sasl_settings().items()}
    options = source_options(
        broker.sasl_bootstrap_servers, topic_name, group, group_store,
        commitToKafka="true", **kafka_options,
    )  # fmt: skip
    _read_and_committed(
        spark, options, tmp_path / "checkpoint", group_store, group, topic_name, produced
    )
    # commitToKafka went through the SASL listener too.
    with KafkaCluster(broker.bootstrap_servers) as cluster:
        wait_until(
            lambda: (
                kafka_group_offsets(cluster, group)
                == {TopicPartition(topic_name, p): n for p, n in produced.items()}
            ),
            30,
            "the Kafka group to hold the run's final offsets",
        )
    # kafka-group describe takes the same Java settings from a --command-config file.
    config = _properties_file(tmp_path / "client.properties", sasl_settings())
    described = run_cli(
        "describe", "--store", group_store, "--group", group,
        "--bootstrap-server", broker.sasl_bootstrap_servers, "--command-config", config,
        "--json",
    )  # fmt: skip
    assert described.code == 0, described.err
    assert described.json()["total_lag"] == 0


def test_a_query_reads_and_commits_through_ssl_with_java_trust_and_key_stores(
    spark, broker: KafkaBroker, topic_name: str, group_store: str, produced, tmp_path: Path
) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    assert broker.ca_pem is not None
    store_password = "store-secret"
    key_store = _pkcs12_key_store(tmp_path, store_password)
    options = source_options(
        broker.ssl_bootstrap_servers,
        topic_name,
        group,
        group_store,
        **{
            "kafka.security.protocol": "SSL",
            "kafka.ssl.truststore.location": str(broker.ca_pem),
            "kafka.ssl.truststore.type": "PEM",
            # The broker does not ask for a client certificate; librdkafka still opens the
            # store with its password when each client (driver, executors) is created.
            "kafka.ssl.keystore.location": str(key_store),
            "kafka.ssl.keystore.type": "PKCS12",
            "kafka.ssl.keystore.password": store_password,
            "kafka.ssl.key.password": store_password,
            "kafka.ssl.endpoint.identification.algorithm": "https",
        },
    )
    _read_and_committed(
        spark, options, tmp_path / "checkpoint", group_store, group, topic_name, produced
    )


def test_a_wrong_password_fails_within_seconds_naming_the_setting_and_nothing_is_read(
    spark, broker: KafkaBroker, topic_name: str, group_store: str, produced, tmp_path: Path
) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    kafka_options = {f"kafka.{k}": v for k, v in sasl_settings(WRONG_PASSWORD).items()}
    options = source_options(
        broker.sasl_bootstrap_servers, topic_name, group, group_store,
        commitToKafka="true", **kafka_options,
    )  # fmt: skip
    collected = Collected()
    started = time.monotonic()
    query = start_streaming_query(spark, options, str(tmp_path / "checkpoint"), collected)
    try:
        with pytest.raises(StreamingQueryException) as failed:
            query.awaitTermination(60)  # raises the query's error once it ended with one
    finally:
        query.stop()
    elapsed_s = time.monotonic() - started
    error = str(failed.value)
    assert "refused this client" in error and "SCRAM-SHA-512" in error
    assert "kafka.sasl.jaas.config" in error
    assert WRONG_PASSWORD not in error and SCRAM_PASSWORD not in error
    # One refused login is enough: no retries (3 x 10 s by default) before saying so.
    assert elapsed_s < 15, f"the query took {elapsed_s:.1f}s to fail"
    assert collected.count() == 0
    assert describe_group(group_store, group).committed == {}
    with KafkaCluster(broker.bootstrap_servers) as cluster:
        assert kafka_group_offsets(cluster, group) == {}

    # kafka-group describe says the same with the same settings in a --command-config
    # file, and, without a trust store, names the TLS settings.
    GroupDriver(group_store, group, {topic_name: 2}).rebalance(["A"])
    wrong = _properties_file(tmp_path / "wrong.properties", sasl_settings(WRONG_PASSWORD))
    started = time.monotonic()
    refused = run_cli(
        "describe", "--store", group_store, "--group", group,
        "--bootstrap-server", broker.sasl_bootstrap_servers, "--command-config", wrong,
    )  # fmt: skip
    assert refused.code != 0
    assert "refused this client" in refused.err and "kafka.sasl.jaas.config" in refused.err
    assert WRONG_PASSWORD not in refused.err
    untrusted = _properties_file(tmp_path / "untrusted.properties", {"security.protocol": "SSL"})
    refused = run_cli(
        "describe", "--store", group_store, "--group", group,
        "--bootstrap-server", broker.ssl_bootstrap_servers, "--command-config", untrusted,
    )  # fmt: skip
    assert refused.code != 0
    assert "certificate verify failed" in refused.err
    assert "kafka.ssl.truststore.location" in refused.err
    assert time.monotonic() - started < 15
