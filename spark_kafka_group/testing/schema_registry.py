"""A schema registry for the tests: Apicurio Registry with its in-memory storage, run from the
distribution that scripts/setup unpacked with Maven (the ``schema-registry`` module of
jvm/pom.xml), serving its Confluent-compatible API at :data:`URL`.

That is the address docs/getting-started.md's registry example names, Apicurio Registry's own
default, so the docs test runs the example as written: the registry listens on port
:data:`PORT` of 127.0.0.1, which must be free. Each start is a new, empty registry.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import urllib.request
from pathlib import Path
from types import TracebackType

from spark_kafka_group.testing.kafka_broker import java_binary, jvm_parts_dir
from spark_kafka_group.testing.servers import ServerDidNotStart, ServerProcess

PORT = 8080
#: The registry's Confluent-compatible API (what confluent-kafka's SchemaRegistryClient takes
#: as its ``url``).
URL = f"http://localhost:{PORT}/apis/ccompat/v7"
#: About 15 s on two idle cores; more while the machine builds and installs.
START_TIMEOUT_S = 120.0
INSTALL_HINT = (
    "It is the schema-registry module of jvm/pom.xml: run scripts/setup, or "
    "mvn -q -f jvm/pom.xml package -Djvm.cache=$PWD/.jvm"
)
# A small heap and a quick start on two cores; the registry holds a few test schemas.
_JVM_OPTIONS = ["-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]


def runner_jar() -> Path:
    """The registry's Quarkus runner jar (its ``lib/`` beside it)."""
    folder = jvm_parts_dir("schema-registry")
    found = sorted(folder.glob("apicurio-registry-app-*-runner.jar"))
    if not found:
        raise FileNotFoundError(
            f"No apicurio-registry-app-*-runner.jar in {folder}. {INSTALL_HINT}"
        )
    return found[-1]


def _check_port_free() -> None:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", PORT))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            raise ServerDidNotStart(
                f"the schema registry test server needs port {PORT} of 127.0.0.1 (the "
                f"docs' registry address, {URL}), and another process listens there: stop "
                f"it (`ss -ltnp 'sport = :{PORT}'` names it) and run the tests again"
            ) from exc


def _list_subjects() -> None:
    with urllib.request.urlopen(f"{URL}/subjects", timeout=5) as response:
        subjects = json.load(response)
    if not isinstance(subjects, list):
        raise RuntimeError(f"GET {URL}/subjects answered {subjects!r}, not a list of subjects")


class SchemaRegistry:
    """Apicurio Registry on :data:`URL`. :meth:`start` launches it and returns at once, so
    that it starts while the caller prepares other things; :meth:`wait` returns its URL once
    it answers. A context manager: started on entry (and waited for), stopped on exit."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._server: ServerProcess | None = None
        self._ready = False

    def start(self) -> None:
        if self._server is not None:
            return
        jar = runner_jar()
        _check_port_free()
        self.workdir.mkdir(parents=True, exist_ok=True)
        args = [
            java_binary(),
            *_JVM_OPTIONS,
            f"-Djava.io.tmpdir={self.workdir}",
            "-Dquarkus.http.host=127.0.0.1",
            f"-Dquarkus.http.port={PORT}",
            "-jar",
            str(jar),
        ]
        self._server = ServerProcess(
            "schema registry (Apicurio Registry)",
            args,
            self.workdir / "schema-registry.log",
            dict(os.environ),
        )

    def wait(self) -> str:
        """The registry's URL, once it answers (started first if it was not)."""
        self.start()
        assert self._server is not None
        if not self._ready:
            self._server.wait(_list_subjects, install_hint=INSTALL_HINT, timeout_s=START_TIMEOUT_S)
            self._ready = True
        return URL

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
            self._ready = False

    def __enter__(self) -> str:
        try:
            return self.wait()
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
