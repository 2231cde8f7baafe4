"""Groups of member processes (:mod:`spark_kafka_group.testing.clock_member_app`), one of them
on a machine whose wall clock is off: used by ``tests/integration/test_clock_skew.py`` and
``benchmarks/bench_clock_skew.py``."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import spark_kafka_group
from spark_kafka_group.group import GroupRecord, RecordKind, replay
from spark_kafka_group.store import GroupLog, group_log_uri

#: The directory holding this ``spark_kafka_group``, first on the members' ``PYTHONPATH`` so
#: that they run the same code as the process starting them (a checkout or an installation).
CODE_ROOT = Path(spark_kafka_group.__file__).resolve().parent.parent
CLOCK_MEMBER_APP = "spark_kafka_group.testing.clock_member_app"
PARTITIONS = 12


class ClockMember:
    """One :mod:`~spark_kafka_group.testing.clock_member_app` process."""

    def __init__(
        self,
        workdir: Path,
        name: str,
        *,
        store: str,
        group: str,
        skew_ms: int,
        heartbeat_ms: int,
        session_timeout_ms: int,
    ) -> None:
        self.name = name
        self.skew_ms = skew_ms
        self.journal = workdir / f"{group}-{name}.jsonl"
        self.log = workdir / f"{group}-{name}.log"
        self.args = [
            sys.executable, "-m", CLOCK_MEMBER_APP,
            "--store", store, "--group", group, "--journal", str(self.journal),
            "--skew-ms", str(skew_ms), "--partitions", str(PARTITIONS),
            "--heartbeat-ms", str(heartbeat_ms), "--session-timeout-ms", str(session_timeout_ms),
        ]  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> ClockMember:
        path = os.pathsep.join(filter(None, [str(CODE_ROOT), os.environ.get("PYTHONPATH")]))
        env = dict(os.environ, PYTHONPATH=path)
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                self.args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.log.parent
            )
        return self

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(30)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.kill()

    def lines(self) -> list[dict]:
        if not self.journal.exists():
            return []
        return [json.loads(line) for line in self.journal.read_text().splitlines() if line]

    def held(self) -> set[int]:
        lines = self.lines()
        return set(lines[-1]["held"]) if lines else set()

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


class SkewedGroup:
    """Three members of one group; the last one's wall clock is off by ``skew_ms``."""

    def __init__(
        self,
        workdir: Path,
        store: str,
        group: str,
        skew_ms: int,
        *,
        heartbeat_ms: int,
        session_timeout_ms: int,
    ) -> None:
        self.store, self.group, self.skew_ms = store, group, skew_ms
        timeouts = {"heartbeat_ms": heartbeat_ms, "session_timeout_ms": session_timeout_ms}
        self.members = [
            ClockMember(workdir, name, store=store, group=group, skew_ms=skew, **timeouts)
            for name, skew in (("steady-1", 0), ("steady-2", 0), ("skewed", skew_ms))
        ]

    @property
    def skewed(self) -> ClockMember:
        return self.members[-1]

    def start(self) -> None:
        for m in self.members:
            m.start()

    def stop(self) -> None:
        for m in self.members:
            m.stop()

    def records(self) -> list[GroupRecord]:
        with contextlib.suppress(Exception):
            log = GroupLog.open(group_log_uri(self.store, self.group), create=False)
            return [r for _, r in log.read()]
        return []

    def expires(self) -> list[GroupRecord]:
        return [r for r in self.records() if r.kind == RecordKind.EXPIRE]

    def split(self) -> dict[str, int]:
        """Partitions each running member holds, by its own journal."""
        running = [m for m in self.members if m.process and m.process.poll() is None]
        return {m.name: len(m.held()) for m in running}

    def logged_split(self) -> list[int]:
        """Partitions each member holds, by the group log."""
        group = replay(self.records(), self.group)
        return sorted(len(m.assignment) for m in group.members.values())

    def fair(self) -> bool:
        running = self.split()
        return sorted(running.values()) == [PARTITIONS // len(running)] * len(running) and (
            self.logged_split() == sorted(running.values())
        )

    def report(self) -> str:
        kinds = Counter(str(r.kind) for r in self.records())
        exited = "".join(
            f"\n{m.name} exited with {m.process.returncode}; the end of its output:\n"
            + "\n".join(m.output().splitlines()[-20:])
            for m in self.members
            if m.process and m.process.poll() is not None
        )
        return (
            f"group {self.group} (skew {self.skew_ms:+d} ms): split {self.split()}, "
            f"log split {self.logged_split()}, EXPIRE {len(self.expires())}, records {dict(kinds)}"
            + exited
        )
