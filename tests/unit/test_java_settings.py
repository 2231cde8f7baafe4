"""Java Kafka client security settings -> librdkafka: every mapping, on real key and trust stores.

The stores are generated here (``cryptography`` for PEM and PKCS12 key stores, the JDK's
``keytool`` for Java-made JKS / PKCS12 trust stores). Each translated setting is then given to
a real librdkafka client, which opens the files and checks the passwords when it is created.
"""

from __future__ import annotations

import datetime
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from spark_kafka_group.errors import OptionError
from spark_kafka_group.kafka.config import client_config
from spark_kafka_group.kafka.java_settings import JKS_MAGIC, translate_java_settings
from spark_kafka_group.options import parse_options

PLAIN = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s3cret";'  # noqa: E501
SCRAM = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="pw";'
)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _certificate(
    subject: str, key: Any, issuer: str, issuer_key: Any, ca: bool
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .sign(issuer_key, hashes.SHA256())
    )


def _keytool() -> str:
    found = shutil.which("keytool")
    assert found, "keytool (JDK/JRE) is needed: scripts/setup installs Java"
    return found


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("stores")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("test-ca", ca_key, "test-ca", ca_key, ca=True)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _certificate("client", key, "test-ca", ca_key, ca=False)
    pem = serialization.Encoding.PEM
    files = {
        "ca.pem": ca.public_bytes(pem),
        "client.pem": cert.public_bytes(pem),
        # A PEM key store as Kafka's KIP-651 has it: the encrypted key and the chain, one file.
        "keystore.pem": key.private_bytes(
            pem,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"keypw"),
        )
        + cert.public_bytes(pem)
        + ca.public_bytes(pem),
        "client.key": key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
        "keystore.p12": pkcs12.serialize_key_and_certificates(
            b"client", key, cert, [ca], serialization.BestAvailableEncryption(b"storepw")
        ),
    }
    paths = {}
    for name, data in files.items():
        paths[name] = d / name
        paths[name].write_bytes(data)
    for name, store_type in (("truststore.jks", "JKS"), ("truststore.p12", "PKCS12")):
        paths[name] = d / name
        subprocess.run(
            [
                *(_keytool(), "-importcert", "-noprompt", "-alias", "ca"),
                *("-file", str(paths["ca.pem"]), "-keystore", str(paths[name])),
                *("-storetype", store_type, "-storepass", "changeit"),
            ],
            check=True,
            capture_output=True,
        )
    paths["keystore.jks"] = d / "keystore.jks"
    subprocess.run(
        [
            *(_keytool(), "-importkeystore", "-noprompt"),
            *("-srckeystore", str(paths["keystore.p12"]), "-srcstoretype", "PKCS12"),
            *("-srcstorepass", "storepw", "-destkeystore", str(paths["keystore.jks"])),
            *("-deststoretype", "JKS", "-deststorepass", "storepw"),
        ],
        check=True,
        capture_output=True,
    )
    return paths


def librdkafka_accepts(settings: dict[str, str]) -> None:
    """Create a real librdkafka client: it loads the TLS files and checks their passwords."""
    conf = client_config("127.0.0.1:1", settings)
    conf["group.id"] = "java-settings-test"
    Consumer(conf).close()


# ------------------------------------------------------------------------------- SASL


@pytest.mark.parametrize(
    ("jaas", "mechanism", "user", "password"),
    [
        (PLAIN, "PLAIN", "alice", "s3cret"),
        (SCRAM, "SCRAM-SHA-256", "bob", "pw"),
        (SCRAM, "SCRAM-SHA-512", "bob", "pw"),
        # Databricks shades the Kafka client; quotes, escapes and ';' inside values.
        (
            "kafkashaded.org.apache.kafka.common.security.plain.PlainLoginModule required\n"
            '  username="$ConnectionString"  password="Endpoint=sb://x/;Key=\\"q\\"";',
            "PLAIN",
            "$ConnectionString",
            'Endpoint=sb://x/;Key="q"',
        ),
        # unquoted values and no trailing ';'
        (PLAIN.replace('"alice"', "alice").rstrip(";"), "PLAIN", "alice", "s3cret"),
    ],
)
def test_plain_and_scram_login_modules_become_username_and_password(
    jaas: str, mechanism: str, user: str, password: str
) -> None:
    given = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": jaas,
    }
    out = translate_java_settings(given)
    assert out == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,  # stays as given
        "sasl.username": user,
        "sasl.password": password,
    }
    librdkafka_accepts(out)


def test_login_module_and_username_must_agree() -> None:
    given = {"sasl.mechanism": "PLAIN", "sasl.jaas.config": PLAIN}
    assert translate_java_settings({**given, "sasl.username": "alice"})["sasl.username"] == "alice"
    with pytest.raises(OptionError) as info:
        translate_java_settings({**given, "sasl.username": "mallory"}, prefix="kafka.")
    assert "kafka.sasl.jaas.config" in str(info.value) and "kafka.sasl.username" in str(info.value)
    assert "s3cret" not in str(info.value)


def test_mechanism_must_match_the_login_module_exactly() -> None:
    # librdkafka (like the Java client) refuses a lower-case mechanism name.
    with pytest.raises(OptionError, match=r"ScramLoginModule, but sasl\.mechanism is 'scram-sha"):
        translate_java_settings({"sasl.mechanism": "scram-sha-512", "sasl.jaas.config": SCRAM})
    with pytest.raises(OptionError, match=r"PlainLoginModule, but sasl\.mechanism is not set"):
        translate_java_settings({"sasl.jaas.config": PLAIN})


def test_two_login_modules_are_refused() -> None:
    with pytest.raises(OptionError, match="2 login module entries"):
        translate_java_settings({"sasl.mechanism": "PLAIN", "sasl.jaas.config": PLAIN + PLAIN})


# -------------------------------------------------------------------------------- TLS


@pytest.mark.parametrize("declared", [None, "PEM"])
def test_pem_trust_store_becomes_ca_location(stores: dict[str, Path], declared: str | None) -> None:
    given = {"security.protocol": "SSL", "ssl.truststore.location": str(stores["ca.pem"])}
    if declared:
        given["ssl.truststore.type"] = declared
    out = translate_java_settings(given)
    assert out == {"security.protocol": "SSL", "ssl.ca.location": str(stores["ca.pem"])}
    librdkafka_accepts(out)
    with pytest.raises(OptionError, match=r"ssl\.truststore\.password cannot be used"):
        translate_java_settings({**given, "ssl.truststore.password": "x"})


def test_pem_trust_store_text_becomes_ca_pem(stores: dict[str, Path]) -> None:
    text = stores["ca.pem"].read_text()
    out = translate_java_settings(
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": text,
        }
    )
    assert out == {"security.protocol": "SSL", "ssl.ca.pem": text}
    librdkafka_accepts(out)


@pytest.mark.parametrize(
    ("store", "declared", "kind", "fix"),
    [
        ("truststore.p12", None, "PKCS12", "openssl pkcs12 -in"),
        ("truststore.p12", "PKCS12", "PKCS12", "openssl pkcs12 -in"),
        ("truststore.jks", None, "JKS", "keytool -importkeystore"),
        ("truststore.jks", "JKS", "JKS", "keytool -importkeystore"),
    ],
)
def test_pkcs12_and_jks_trust_stores_are_refused_with_the_conversion(
    stores: dict[str, Path], store: str, declared: str | None, kind: str, fix: str
) -> None:
    location = str(stores[store])
    given = {"ssl.truststore.location": location, "ssl.truststore.password": "changeit"}
    if declared:
        given["ssl.truststore.type"] = declared
    with pytest.raises(OptionError) as info:
        translate_java_settings(given, prefix="kafka.")
    message = str(info.value)
    assert f"is a {kind} trust store" in message and location in message
    assert fix in message and "kafka.ssl.ca.location" in message
    assert "changeit" not in message


def test_jks_is_recognised_by_its_magic_bytes(stores: dict[str, Path], tmp_path: Path) -> None:
    assert stores["truststore.jks"].read_bytes()[:4] == JKS_MAGIC
    renamed = tmp_path / "trust.p12"  # the name says nothing: the content decides
    renamed.write_bytes(stores["truststore.jks"].read_bytes())
    with pytest.raises(OptionError, match="is a JKS trust store"):
        translate_java_settings({"ssl.truststore.location": str(renamed)})
    with pytest.raises(OptionError, match="cannot be read on this machine"):
        translate_java_settings({"ssl.truststore.location": str(tmp_path / "missing.jks")})


@pytest.mark.parametrize("declared", [None, "PKCS12", "pkcs12"])
def test_pkcs12_key_store_keeps_librdkafkas_keys(
    stores: dict[str, Path], declared: str | None
) -> None:
    given = {
        "security.protocol": "SSL",
        "ssl.keystore.location": str(stores["keystore.p12"]),
        "ssl.keystore.password": "storepw",
        "ssl.key.password": "storepw",  # Java's key password; librdkafka uses the store's
        "ssl.truststore.location": str(stores["ca.pem"]),
    }
    if declared:
        given["ssl.keystore.type"] = declared
    out = translate_java_settings(given)
    assert out == {
        "security.protocol": "SSL",
        "ssl.keystore.location": str(stores["keystore.p12"]),
        "ssl.keystore.password": "storepw",
        "ssl.ca.location": str(stores["ca.pem"]),
    }
    librdkafka_accepts(out)
    # The mapping is real: librdkafka opens the store with that password.
    with pytest.raises(KafkaException, match="PKCS#12"):
        librdkafka_accepts({**out, "ssl.keystore.password": "wrong"})
    with pytest.raises(OptionError) as info:
        translate_java_settings({**given, "ssl.key.password": "other"}, prefix="kafka.")
    assert "kafka.ssl.key.password differs from kafka.ssl.keystore.password" in str(info.value)


@pytest.mark.parametrize("declared", [None, "PEM"])
def test_pem_key_store_becomes_certificate_and_key_locations(
    stores: dict[str, Path], declared: str | None
) -> None:
    location = str(stores["keystore.pem"])
    given = {
        "security.protocol": "SSL",
        "ssl.keystore.location": location,
        "ssl.key.password": "keypw",
    }
    if declared:
        given["ssl.keystore.type"] = declared
    out = translate_java_settings(given)
    assert out == {
        "security.protocol": "SSL",
        "ssl.certificate.location": location,
        "ssl.key.location": location,
        "ssl.key.password": "keypw",
    }
    librdkafka_accepts(out)
    with pytest.raises(KafkaException):
        librdkafka_accepts({**out, "ssl.key.password": "wrong"})
    with pytest.raises(OptionError, match=r"ssl\.keystore\.password cannot be used"):
        translate_java_settings({**given, "ssl.keystore.password": "x"})


def test_pem_key_and_chain_text_become_key_pem_and_certificate_pem(
    stores: dict[str, Path],
) -> None:
    key, chain = stores["client.key"].read_text(), stores["client.pem"].read_text()
    out = translate_java_settings(
        {
            "security.protocol": "SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": key,
            "ssl.keystore.certificate.chain": chain,
        }
    )
    assert out == {"security.protocol": "SSL", "ssl.key.pem": key, "ssl.certificate.pem": chain}
    librdkafka_accepts(out)


def test_jks_key_store_is_refused_with_the_conversion(stores: dict[str, Path]) -> None:
    location = str(stores["keystore.jks"])
    assert stores["keystore.jks"].read_bytes()[:4] == JKS_MAGIC
    with pytest.raises(OptionError) as info:
        translate_java_settings(
            {"ssl.keystore.location": location, "ssl.keystore.password": "storepw"}
        )
    message = str(info.value)
    assert f"ssl.keystore.location = {location!r} is a JKS key store" in message
    assert "-deststoretype PKCS12" in message and "ssl.keystore.password" in message
    assert "storepw" not in message


@pytest.mark.parametrize(
    ("java", "librdkafka"), [("https", "https"), ("HTTPS", "https"), ("", "none"), ("none", "none")]
)
def test_endpoint_identification(java: str, librdkafka: str) -> None:
    key = "ssl.endpoint.identification.algorithm"
    out = translate_java_settings({"security.protocol": "SSL", key: java})
    assert out == {"security.protocol": "SSL", key: librdkafka}
    librdkafka_accepts(out)


# ------------------------------------------------------------------- where it applies


def test_translation_is_idempotent(stores: dict[str, Path]) -> None:
    given = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": PLAIN,
        "ssl.truststore.location": str(stores["ca.pem"]),
        "ssl.keystore.location": str(stores["keystore.p12"]),
        "ssl.keystore.password": "storepw",
        "ssl.endpoint.identification.algorithm": "",
    }
    once = translate_java_settings(given)
    assert translate_java_settings(once) == once


def test_source_options_and_client_config_translate(stores: dict[str, Path]) -> None:
    """Options (driver and the executors' fetch specs) and client_config (every client,
    the CLI's --command-config included) give librdkafka the translated keys."""
    java = {
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": PLAIN,
        "ssl.truststore.location": str(stores["ca.pem"]),
    }
    opts = parse_options(
        {
            "kafka.bootstrap.servers": "b:9092",
            "subscribe": "t",
            "groupid": "g",
            "groupstore": "/s",
            **{f"kafka.{k}": v for k, v in java.items()},
        }
    )
    expected = {
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "s3cret",
        "ssl.ca.location": str(stores["ca.pem"]),
    }
    assert dict(opts.kafka_params) == expected
    conf = client_config("b:9092", java, for_admin=True)
    assert {k: conf[k] for k in expected} == expected
    assert "sasl.jaas.config" not in conf and "ssl.truststore.location" not in conf
    with pytest.raises(OptionError, match=r"ssl\.truststore\.location = .* is a JKS"):
        client_config("b:9092", {"ssl.truststore.location": str(stores["truststore.jks"])})


def test_every_client_keeps_connections_to_all_brokers_unless_told_otherwise() -> None:
    # librdkafka's sparse connections reconnect without pause to a dead leader that a request
    # waits for (a core's worth of refused connects, measured on a three-node cluster).
    assert client_config("b:9092", {})["enable.sparse.connections"] is False
    assert client_config("b:9092", {}, for_admin=True)["enable.sparse.connections"] is False
    given = client_config("b:9092", {"enable.sparse.connections": "true"})
    assert given["enable.sparse.connections"] == "true"
