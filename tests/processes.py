"""Group members as separate OS processes (tests/member_app.py): kill / pause / restart tests."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from spark_kafka_group.testing.waiting import wait_until

REPO = Path(__file__).resolve().parent.parent
#: Run as a module from the repository root, as the tests import it.
MEMBER_APP = "tests.member_app"
#: How long a stopped member's processes may take to end after its driver: its member's close
#: waits up to ``LEAVE_GRACE_S`` (5 s) for the last batch's commit.
CLOSE_TIMEOUT_S = 15.0


class MemberProcess:
    """One ``tests/member_app.py`` process; its journal survives restarts (appended to)."""

    def __init__(
        self,
        workdir: Path,
        name: str,
        *,
        bootstrap_servers: str,
        topic: str,
        group_id: str,
        group_store: str,
        instance_id: str | None = None,
        session_timeout_ms: int = 6000,
        heartbeat_ms: int = 500,
        extra: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        #: Set in the environment of the next start (e.g. tests/kill_points.py's member_env).
        self.env = dict(env or {})
        self.journal = workdir / f"{name}.jsonl"
        self.log = workdir / f"{name}.log"
        self.args = [
            sys.executable, "-m", MEMBER_APP,
            "--bootstrap-servers", bootstrap_servers,
            "--topic", topic,
            "--group-id", group_id,
            "--group-store", group_store,
            "--journal", str(self.journal),
            "--checkpoint", str(workdir / f"{name}-checkpoint"),
            "--session-timeout-ms", str(session_timeout_ms),
            "--heartbeat-ms", str(heartbeat_ms),
        ]  # fmt: skip
        if instance_id:
            self.args += ["--instance-id", instance_id]
        self.args += extra or []
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> MemberProcess:
        env = {**os.environ, "PYTHONPATH": str(REPO), **self.env}
        with open(self.log, "ab") as log:
            # Its own process group: the member lives in Spark's Python worker processes and
            # the JVM, not only in the driver script, so signals go to the whole group.
            self.process = subprocess.Popen(
                self.args,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=REPO,
                start_new_session=True,
            )
        self.starts += 1
        return self

    def set_arg(self, flag: str, value: str) -> None:
        """Change the value of ``flag`` for the next start."""
        self.args[self.args.index(flag) + 1] = value

    def wait_for_exit(self, what: str, timeout_s: float = 120) -> subprocess.Popen[bytes]:
        """Wait for the running process to end by itself (``what`` names it in the timeout)."""
        process = self.process
        assert process is not None
        wait_until(lambda: process.poll() is not None, timeout_s, what)
        return process

    def signal(self, sig: int) -> None:
        """Signal every process of the member (driver script, JVM, Python workers)."""
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)

    def kill(self) -> None:
        """SIGKILL: no leave, no final commit: the group notices by the session timeout."""
        assert self.process is not None
        self.signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self, timeout_s: float = 120) -> None:
        """SIGTERM: stop the query, commit, leave; SIGKILL if it does not finish in time (longer
        than the member's own 60 s wait for a gap between batches, so that a stop that found
        none fails with the member's error, not a SIGKILL)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
        # The streaming-source process outlives the driver while its member closes (it waits
        # for the commit of its last batch, then leaves or stays): let it finish, as a user's
        # stop does, then kill whatever the driver left behind (JVM, workers).
        deadline = time.monotonic() + CLOSE_TIMEOUT_S
        while self._group_alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.signal(signal.SIGKILL)

    def _group_alive(self) -> bool:
        assert self.process is not None
        try:
            os.killpg(self.process.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def batches(self) -> list[dict]:
        if not self.journal.exists():
            return []
        lines = self.journal.read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def records(self) -> list[tuple[int, int]]:
        return [(p, o) for b in self.batches() for p, o in b["records"]]

    def partitions(self, since: float = 0.0) -> set[int]:
        return {p for b in self.batches() if b["time"] >= since for p, _ in b["records"]}

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""
