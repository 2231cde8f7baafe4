"""Object-store servers that tests and benchmarks start on this machine, bound to 127.0.0.1:
the process with its log, and the store it serves."""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT_S = 60.0


class ServerDidNotStart(RuntimeError):
    """A test server exited or never answered; the message carries the end of its log."""


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


class ServerProcess:
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

    def wait(
        self, ready: Callable[[], None], *, install_hint: str, timeout_s: float = START_TIMEOUT_S
    ) -> None:
        """Call ``ready`` until it stops raising; raise :class:`ServerDidNotStart` with the log
        (and ``install_hint``, how to get the server) if it never does within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
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
        raise ServerDidNotStart(
            f"the {self.name} test server did not start (exit code {self.process.returncode}, "
            f"last check: {last!r}). {install_hint} Its log ({self.log}):\n{tail}"
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(15)
