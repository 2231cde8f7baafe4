"""CPU time and resident memory of a Spark session's processes, read from ``/proc``.

In ``local[N]`` mode a pyspark session is this Python process (the benchmark) with, below it,
one driver JVM that is also the executor. The JVM starts Python processes of its own:

- the **Python workers** (``pyspark.daemon`` and the workers it forks), which run ``read()``
  of a Python data source, one task at a time each;
- the **planning process**: every other Python process below the JVM, e.g. the long-lived
  process of a Python streaming source (``latestOffset``, ``partitions``, ``commit``) or the
  short-lived planner of a batch read.

:class:`SessionProcesses` samples them in a background thread; :meth:`SessionProcesses.window`
measures one query: the CPU seconds each kind of process used during the window, and the
largest resident set (``VmRSS``) one process of each kind had while it ran.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

KINDS = ("jvm", "workers", "planning")
_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Usage:
    """One window: CPU seconds per kind of process, peak RSS (MB) of one process per kind."""

    cpu_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(KINDS, 0.0))
    peak_rss_mb: dict[str, float] = field(default_factory=lambda: dict.fromkeys(KINDS, 0.0))

    @property
    def total_cpu_s(self) -> float:
        return sum(self.cpu_s.values())

    def describe(self, records: int) -> str:
        per_m = 1e6 / records if records else float("nan")
        names = {"jvm": "driver JVM", "workers": "Python workers", "planning": "planning process"}
        rss = ", ".join(f"{names[k]} {self.peak_rss_mb[k]:.0f} MB" for k in KINDS)
        cpu = ", ".join(f"{names[k]} {self.cpu_s[k] * per_m:.2f}" for k in KINDS)
        return f"peak RSS {rss}; CPU s per million records {self.total_cpu_s * per_m:.2f} ({cpu})"


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        tree.setdefault(ppid, []).append(int(name))
    return tree


def _descendants(root: int, tree: dict[int, list[int]]) -> list[int]:
    found, todo = [], list(tree.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(tree.get(pid, []))
    return found


def _read(pid: int) -> tuple[str, float, float] | None:
    """(kind-deciding command line, CPU seconds, RSS MB) of ``pid``, None once it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/status") as f:
            rss = next((line for line in f if line.startswith("VmRSS:")), "VmRSS: 0 kB")
    except OSError:
        return None
    cpu = (int(fields[11]) + int(fields[12])) / _TICKS  # utime + stime
    return cmd, cpu, float(rss.split()[1]) / 1024.0


def _kind(cmd: str) -> str | None:
    words = cmd.split()
    if not words:
        return None
    exe = os.path.basename(words[0])
    if exe == "java":
        return "jvm"
    if exe.startswith("python"):
        return "workers" if "pyspark.daemon" in cmd or "pyspark.worker" in cmd else "planning"
    return None


class SessionProcesses:
    """Samples the Spark processes below this one every ``interval_s`` seconds."""

    def __init__(self, interval_s: float = 0.25) -> None:
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._cpu: dict[int, tuple[str, float]] = {}  # pid -> (kind, last CPU seconds)
        self._peak: dict[str, float] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="proc-sampler")
        self._thread.start()

    def sample(self) -> None:
        tree = _children()
        jvms = [p for p in _descendants(os.getpid(), tree) if _kind(_cmd(p)) == "jvm"]
        pids = set(jvms)
        for jvm in jvms:
            pids.update(_descendants(jvm, tree))
        rss: dict[str, float] = dict.fromkeys(KINDS, 0.0)
        seen: dict[int, tuple[str, float]] = {}
        for pid in pids:
            got = _read(pid)
            if got is None:
                continue
            kind = _kind(got[0])
            if kind is None:
                continue
            seen[pid] = (kind, got[1])
            rss[kind] = max(rss[kind], got[2])
        with self._lock:
            self._cpu.update(seen)
            if self._peak is not None:
                for kind, mb in rss.items():
                    self._peak[kind] = max(self._peak[kind], mb)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    @contextlib.contextmanager
    def window(self) -> Iterator[Usage]:
        """The usage of the block, filled in when it ends."""
        usage = Usage()
        self.sample()
        with self._lock:
            before = {pid: cpu for pid, (_, cpu) in self._cpu.items()}
            self._peak = dict.fromkeys(KINDS, 0.0)
        try:
            yield usage
        finally:
            self.sample()
            with self._lock:
                for pid, (kind, cpu) in self._cpu.items():
                    usage.cpu_s[kind] += cpu - before.get(pid, 0.0)
                usage.peak_rss_mb.update(self._peak or {})
                self._peak = None

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def driver_jvm_pid() -> int:
    """The pid of the session's driver JVM (the java process below this one)."""
    tree = _children()
    for pid in _descendants(os.getpid(), tree):
        if _kind(_cmd(pid)) == "jvm":
            return pid
    raise RuntimeError("No driver JVM below this process: start the SparkSession first")


def _cmd(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
