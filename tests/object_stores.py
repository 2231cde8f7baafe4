"""Real object-store servers for the tests, started by the tests and bound to 127.0.0.1.

- S3: SeaweedFS, started by :func:`spark_kafka_group.testing.seaweedfs.seaweedfs` (shared
  with the benchmarks).
- Azure Blob: Azurite (npm ``azurite``, installed by ``scripts/_bootstrap.sh`` into
  ``<venv>/azurite``), in memory.

Session-scoped fixtures yield an :class:`ObjectStore`: a root URI (bucket / container) and the
delta-rs storage options to reach it. Each test takes a fresh prefix under the root with
:meth:`ObjectStore.fresh`. A server that cannot start fails the tests that need it (with its
log), never skips them.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_kafka_group.testing.seaweedfs import seaweedfs
from spark_kafka_group.testing.servers import (
    ObjectStore,
    ServerDidNotStart,
    ServerProcess,
    free_port,
)

#: Azurite's fixed development account (public, documented by Azure).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
AZURE_CONTAINER = "groups"
AZURITE_URL_ENV = "AZURITE_BLOB_STORAGE_URL"


def _venv_tool(*parts: str) -> Path:
    return Path(sys.prefix).joinpath(*parts)


def _azure_options() -> dict[str, str]:
    # Azurite's account on the URL in $AZURITE_BLOB_STORAGE_URL (set by the fixture). An
    # explicit azure_storage_endpoint instead breaks delta-rs 1.6 appends after version 1
    # ("Invalid table version: 1"); the emulator switch does not.
    return {"azure_storage_use_emulator": "true"}


def _create_container(port: int) -> None:
    from azure.core.exceptions import ResourceExistsError
    from azure.storage.blob import BlobServiceClient

    client = BlobServiceClient.from_connection_string(
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};"
        f"AccountKey={AZURITE_KEY};BlobEndpoint=http://127.0.0.1:{port}/{AZURITE_ACCOUNT};",
        retry_total=0,  # the start-up loop retries
        connection_timeout=5,
    )
    with contextlib.suppress(ResourceExistsError):
        client.create_container(AZURE_CONTAINER)


def azurite_command() -> Path:
    """Where ``scripts/_bootstrap.sh`` installs Azurite's blob server."""
    return _venv_tool("azurite", "node_modules", ".bin", "azurite-blob")


@contextlib.contextmanager
def azurite(workdir: Path) -> Iterator[ObjectStore]:
    """Azurite's blob service, in memory, with the container created first."""
    command = azurite_command()
    if not command.exists():
        pytest.fail(
            f"the Azure Blob test server (Azurite) is not installed at {command}; run "
            "scripts/setup (it runs npm install azurite into the virtualenv)",
            pytrace=False,
        )
    port = free_port()
    args = [
        str(command), "--inMemoryPersistence", "--blobHost", "127.0.0.1", "--blobPort", str(port),
        "--skipApiVersionCheck", "--disableTelemetry",
    ]  # fmt: skip
    server = ServerProcess("Azure Blob (Azurite)", args, workdir / "azurite.log", dict(os.environ))
    store = ObjectStore("az", f"az://{AZURE_CONTAINER}", _azure_options())
    # Where delta-rs (object_store) finds the emulator; inherited by the processes tests start.
    previous = os.environ.get(AZURITE_URL_ENV)
    os.environ[AZURITE_URL_ENV] = f"http://127.0.0.1:{port}"
    try:
        server.wait(
            lambda: _create_container(port),
            install_hint="Run scripts/setup (it runs npm install azurite into the virtualenv).",
        )
        yield store
    finally:
        server.stop()
        if previous is None:
            os.environ.pop(AZURITE_URL_ENV, None)
        else:
            os.environ[AZURITE_URL_ENV] = previous


# -- fixtures (imported by tests/conftest.py) ----------------------------------------------------


@contextlib.contextmanager
def _failing_the_tests() -> Iterator[None]:
    """A server that cannot start fails the tests that need it, with its log (never skips)."""
    try:
        yield
    except ServerDidNotStart as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def s3_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStore]:
    """A SeaweedFS S3 server for the session."""
    with _failing_the_tests(), seaweedfs(tmp_path_factory.mktemp("s3")) as store:
        yield store


@pytest.fixture(scope="session")
def azure_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStore]:
    """An Azurite blob server for the session."""
    with _failing_the_tests(), azurite(tmp_path_factory.mktemp("azure")) as store:
        yield store


#: The stores a test runs on with ``@pytest.mark.parametrize("any_store", STORE_KINDS,
#: indirect=True)``.
STORE_KINDS = ("local", "s3", "az")


@pytest.fixture
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, str]]:
    """``(group store URI, storage options)`` on the store named by the parameter: a fresh
    prefix on the session's server, or a temporary directory."""
    kind = request.param
    if kind == "local":
        return str(tmp_path / "groups"), {}
    store: ObjectStore = request.getfixturevalue({"s3": "s3_store", "az": "azure_store"}[kind])
    return store.fresh(), dict(store.storage_options)
