"""Spark applications of their own, in fresh processes: chosen tests on a ``local-cluster``
master (executors in separate JVMs with their own Python workers), and Spark Connect clients.

A Python process hosts one SparkContext at a time, and the suite's session-scoped ``local[2]``
one lives in the pytest process, so each of these runs in a process of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: The master of the ``spark`` fixture (tests/conftest.py); ``local[2]`` when unset.
SPARK_MASTER_ENV = "SPARK_KAFKA_GROUP_TEST_MASTER"
#: Two workers with one core and 1024 MB each: two executor JVMs (Spark's default executor
#: memory, 1g, is exactly what a worker offers).
LOCAL_CLUSTER = "local-cluster[2,1,1024]"


def private_spark_home(root: Path) -> Path:
    """A SPARK_HOME for one application: the installed pyspark's files (symlinked) with a
    ``work`` directory of its own.

    In ``local-cluster`` mode every worker creates ``$SPARK_HOME/work/<app id>/<executor id>``
    and starts the executor JVM there. With a pip-installed pyspark that directory is inside
    site-packages: shared by every application of every process using the install, kept for
    7 days (``spark.worker.cleanup.appDataTtl``), with application ids that are only unique
    per second and per Master (two applications started in the same second in two processes
    both get ``app-<second>-0000`` and write their executors' logs into the same files). When
    a worker cannot create that directory or start the process there, the launch fails before
    the executor runs; the Master relaunches at once, with no pause, and after 10 such failures
    in a row (``spark.deploy.maxExecutorRetries``, within milliseconds) it removes the
    application: "Master removed our application: FAILED". (An executor process that starts
    and then dies never counts: every start resets the count, so a JVM that crashes or
    registers late gives relaunches or a wait, not that message; a wrong ``PYSPARK_PYTHON``
    fails tasks, not executors.) A private,
    fresh ``work`` directory
    takes the shared state out of the launch, and holds this application's logs only
    (:func:`cluster_logs`).
    """
    import pyspark

    installed = Path(pyspark.__file__).resolve().parent
    home = root / "spark-home"
    home.mkdir(parents=True)
    for entry in installed.iterdir():
        if entry.name != "work":
            (home / entry.name).symlink_to(entry)
    (home / "work").mkdir()
    return home


def cluster_logs(spark_home: Path, *, tail_lines: int = 40) -> str:
    """The last lines of every executor's stderr under ``spark_home``'s work directory."""
    parts = []
    for stderr in sorted((spark_home / "work").glob("app-*/*/stderr")):
        lines = stderr.read_text(errors="replace").splitlines()
        parts.append(f"--- {stderr.relative_to(spark_home)}\n" + "\n".join(lines[-tail_lines:]))
    return "\n".join(parts) or f"(no executor logs under {spark_home / 'work'})"


def run_tests_on_local_cluster(
    node_ids: Sequence[str],
    *,
    bootstrap_servers: str,
    workdir: Path,
    timeout_s: float = 600,
) -> subprocess.CompletedProcess[str]:
    """Run pytest ``node_ids`` in a fresh process whose ``spark`` fixture is a
    ``local-cluster`` session with a private SPARK_HOME, against the caller's broker."""
    spark_home = private_spark_home(workdir)
    env = {
        SPARK_MASTER_ENV: LOCAL_CLUSTER,
        "SPARK_HOME": str(spark_home),
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap_servers,
    }
    result = run_python(
        ["-m", "pytest", "-p", "no:cacheprovider", "-q", "-m", "spark", *node_ids],
        env=env,
        timeout_s=timeout_s,
    )
    if result.returncode != 0:
        raise AssertionError(
            f"tests on {LOCAL_CLUSTER} failed (exit {result.returncode}):\n"
            f"{result.stdout[-20000:]}\n{result.stderr[-5000:]}\n"
            f"executor logs:\n{cluster_logs(spark_home)}"
        )
    return result


def run_python(
    args: Sequence[str], *, env: Mapping[str, str], timeout_s: float
) -> subprocess.CompletedProcess[str]:
    """This interpreter with ``args`` in the repository (:func:`child_env`)."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env=child_env(env),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def child_env(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment plus ``extra``, with this repository (worktree) first on
    the path and Spark's Python workers on this interpreter
    (docs/design.md, "Spark facts that shape the reader")."""
    env = dict(os.environ, PYTHONPATH=str(REPO), **extra)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


class AppProcess:
    """A Spark application in a fresh process that reports events on stdout, one JSON object
    per line after :data:`EVENT_PREFIX`, and reads commands from stdin (tests/connect_app.py).
    Its stderr (Spark's logs) goes to ``log``."""

    EVENT_PREFIX = "APP-EVENT "

    def __init__(self, args: Sequence[str], *, log: Path, env: Mapping[str, str]) -> None:
        self.log = log
        self._stderr = open(log, "wb")  # noqa: SIM115 (closed in finish)
        self.process = subprocess.Popen(
            [sys.executable, *args],
            cwd=REPO,
            env=child_env(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            # Its own process group: its JVM and Spark's Python processes go with it (kill).
            start_new_session=True,
        )
        self._events: queue.Queue[tuple[str, dict] | None] = queue.Queue()
        threading.Thread(target=self._read_events, daemon=True).start()

    def _read_events(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(self.EVENT_PREFIX):
                event = json.loads(line[len(self.EVENT_PREFIX) :])
                self._events.put((event.pop("event"), event))
        self._events.put(None)  # stdout closed: the process is ending

    def expect(self, name: str, timeout_s: float) -> dict:
        """The next event, which must be ``name``; its fields."""
        try:
            item = self._events.get(timeout=timeout_s)
        except queue.Empty:
            raise AssertionError(f"no {name!r} within {timeout_s}s\n{self.log_tail()}") from None
        if item is None:
            self.process.wait(30)
            raise AssertionError(
                f"the application exited ({self.process.returncode}) before {name!r}\n"
                f"{self.log_tail()}"
            )
        got, fields = item
        assert got == name, f"expected {name!r}, got {got!r} {fields}\n{self.log_tail()}"
        return fields

    def send(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def finish(self, timeout_s: float = 120) -> int:
        """Wait for the exit (then kill whatever is left); the exit code."""
        try:
            return self.process.wait(timeout_s)
        finally:
            self.kill()

    def kill(self) -> None:
        """SIGKILL the application's whole process group (idempotent)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self._stderr.close()

    def log_tail(self, lines: int = 60) -> str:
        text = self.log.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


def emit(event: str, **fields: object) -> None:
    """Report an event to the :class:`AppProcess` that started this process."""
    print(AppProcess.EVENT_PREFIX + json.dumps({"event": event, **fields}), flush=True)
