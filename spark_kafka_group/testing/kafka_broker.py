"""Apache Kafka for the tests and benchmarks: a single-node KRaft cluster (one JVM, broker and
controller) started from the jars that scripts/setup fetched with Maven (jvm/pom.xml), and
Kafka's own command-line tools run from the same jars.

One broker serves three listeners on loopback, so that one JVM covers every test:

- ``PLAINTEXT``: :attr:`KafkaBroker.bootstrap_servers`, what the suite uses;
- ``SASL_PLAINTEXT`` with SCRAM-SHA-512: :attr:`KafkaBroker.sasl_bootstrap_servers`, user
  :data:`SCRAM_USER` / :data:`SCRAM_PASSWORD`;
- ``SSL``: :attr:`KafkaBroker.ssl_bootstrap_servers`, with a self-signed certificate made at
  start-up by the JDK's keytool for ``localhost`` and ``127.0.0.1`` (:attr:`KafkaBroker.ca_pem`
  is that certificate in PEM, for clients to trust).

Each start is a new, empty cluster in a temporary directory.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from spark_kafka_group.testing.servers import ServerProcess, free_port

SCRAM_MECHANISM = "SCRAM-SHA-512"
SCRAM_USER = "skg-user"
SCRAM_PASSWORD = "skg-user-secret"
START_TIMEOUT_S = 60.0

# Kafka's command-line tools: the script name users know, and the class it runs.
TOOLS = {
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
}

# Small and quick to start on two cores; the broker holds test data only.
_HEAP = ["-Xms128m", "-Xmx512m"]
_JVM_OPTIONS = [
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
]


def jvm_parts_dir(module: str) -> Path:
    """The folder of one module of jvm/pom.xml's jars: ``$SPARK_KAFKA_GROUP_JVM/<module>``,
    by default ``.jvm/<module>`` in the repository."""
    root = os.environ.get("SPARK_KAFKA_GROUP_JVM") or str(
        Path(__file__).resolve().parents[2] / ".jvm"
    )
    folder = Path(root) / module
    if not any(folder.glob("*.jar")):
        raise FileNotFoundError(
            f"No jars in {folder} (the '{module}' module of jvm/pom.xml). Fetch them with "
            "scripts/setup, or: mvn -q -f jvm/pom.xml package -Djvm.cache=$PWD/.jvm"
        )
    return folder


def java_binary() -> str:
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home, "bin", "java") if java_home else None
    if candidate is not None and candidate.exists():
        return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise FileNotFoundError("Apache Kafka needs Java 17+ on PATH (or JAVA_HOME)")
    return found


def java_command(
    main_class: str, args: Sequence[str], *, heap: Sequence[str] = tuple(_HEAP)
) -> list[str]:
    """The command that runs ``main_class`` of the Kafka jars, with a small JVM."""
    classpath = str(jvm_parts_dir("kafka") / "*")
    return [java_binary(), *heap, *_JVM_OPTIONS, "-cp", classpath, main_class, *args]


def kafka_tool(
    name: str, *args: str, timeout: float = 120.0, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's own tools (a key of :data:`TOOLS`, e.g. ``kafka-consumer-groups``)
    from the Maven jars, as its shell script would, and return what it printed."""
    if name not in TOOLS:
        raise ValueError(f"unknown Kafka tool {name!r}; known: {', '.join(sorted(TOOLS))}")
    result = subprocess.run(
        java_command(TOOLS[name], args),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if check and result.returncode != 0:
        raise RuntimeError(
            f"{name} {' '.join(args)} exited with {result.returncode}:\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return result


def cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, base64url without padding (Kafka's Uuid). As
    Kafka's own generator, never one that starts with '-', which its tools would read as an
    option."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


KEYSTORE_PASSWORD = "skg-test-keystore"


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost/127.0.0.1, made with the JDK's keytool: the
    broker's PKCS12 key store, and the certificate in PEM for clients to trust."""
    keytool = str(Path(java_binary()).with_name("keytool"))
    keystore = directory / "broker.p12"
    certificate = directory / "ca.pem"
    common = ["-alias", "broker", "-keystore", str(keystore), "-storepass", KEYSTORE_PASSWORD]
    for args in (
        [
            "-genkeypair",
            "-keyalg",
            "EC",
            "-groupname",
            "secp256r1",
            "-dname",
            "CN=localhost",
            "-ext",
            "SAN=dns:localhost,ip:127.0.0.1",
            "-ext",
            "BC=ca:true",
            "-validity",
            "30",
            "-storetype",
            "PKCS12",
            *common,
        ],
        ["-exportcert", "-rfc", "-file", str(certificate), *common],
    ):
        subprocess.run([keytool, *args], check=True, capture_output=True, stdin=subprocess.DEVNULL)
    return keystore, certificate


class KafkaBroker:
    """A single-node Apache Kafka (KRaft) on loopback, as a context manager."""

    def __init__(self, *, work_dir: Path | None = None) -> None:
        self._own_dir = work_dir is None
        self.work_dir = work_dir or Path(tempfile.mkdtemp(prefix="kafka-broker-"))
        self.port = free_port()
        self.sasl_port = free_port()
        self.ssl_port = free_port()
        self.controller_port = free_port()
        self.bootstrap_servers = f"127.0.0.1:{self.port}"
        self.sasl_bootstrap_servers = f"127.0.0.1:{self.sasl_port}"
        self.ssl_bootstrap_servers = f"localhost:{self.ssl_port}"
        self.ca_pem: Path | None = None
        self._server: ServerProcess | None = None

    def _properties(self, keystore: Path) -> str:
        data = self.work_dir / "data"
        listeners = {
            "PLAINTEXT": f"127.0.0.1:{self.port}",
            "SASL_PLAINTEXT": f"127.0.0.1:{self.sasl_port}",
            "SSL": f"localhost:{self.ssl_port}",
        }
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listeners": ",".join(
                [f"{name}://{addr}" for name, addr in listeners.items()]
                + [f"CONTROLLER://127.0.0.1:{self.controller_port}"]
            ),
            "advertised.listeners": ",".join(
                f"{name}://{addr}" for name, addr in listeners.items()
            ),
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT"
            ),
            "log.dirs": str(data),
            "num.partitions": "1",
            # One broker: every internal topic has one replica; few partitions, so that the
            # first group or transaction does not wait for 50 partitions to be created.
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # Retention tests: segments past retention go within a second or two.
            "log.retention.check.interval.ms": "1000",
            "log.segment.delete.delay.ms": "1000",
            "file.delete.delay.ms": "1000",
            "sasl.enabled.mechanisms": SCRAM_MECHANISM,
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(keystore),
            "ssl.keystore.password": KEYSTORE_PASSWORD,
            "ssl.client.auth": "none",
        }
        return "".join(f"{key}={value}\n" for key, value in settings.items())

    def start(self) -> KafkaBroker:
        keystore, self.ca_pem = _self_signed(self.work_dir)
        config = self.work_dir / "server.properties"
        config.write_text(self._properties(keystore))
        kafka_tool(
            "kafka-storage",
            "format",
            "--cluster-id",
            cluster_id(),
            "--config",
            str(config),
            "--add-scram",
            f"{SCRAM_MECHANISM}=[name={SCRAM_USER},password={SCRAM_PASSWORD}]",
        )
        self._server = ServerProcess(
            "Apache Kafka",
            java_command("kafka.Kafka", [str(config)]),
            self.work_dir / "broker.log",
            dict(os.environ),
        )
        self._server.wait(self._ready, install_hint="Fetch the jars with scripts/setup.")
        return self

    def _ready(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        # A topic created and deleted proves the controller, not just the listener, is up.
        probe = f"skg-ready-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(probe, 1, 1)])[probe].result(timeout=5)
        admin.delete_topics([probe])[probe].result(timeout=5)

    @property
    def log_path(self) -> Path:
        return self.work_dir / "broker.log"

    @property
    def pid(self) -> int | None:
        return self._server.process.pid if self._server is not None else None

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> KafkaBroker:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
