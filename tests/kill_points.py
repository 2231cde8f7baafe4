"""Kill a test member (tests/member_app.py) with SIGKILL at a chosen point of one batch's life,
in whichever of its processes reaches that point first: the driver script (``foreachBatch``,
the progress listener), Spark's streaming-source process (the reader and its group member) or,
on Spark's Delta sink, a task of the batch.

The points, in the order a batch meets them:

- ``before-sink``: the batch is planned (Spark's offset log has it, the group member handed it
  out) and in the sink's hands (``foreachBatch``, or a task of the batch on Spark's Delta
  sink); nothing of it is committed.
- ``after-sink``: its Delta commit is made; Spark's commit log does not have it yet. On Spark's
  Delta sink a task of the batch first makes the batch's commit log entry a FIFO
  (:func:`block_commit_log`): Spark opens it right after the sink's commit, to see whether the
  batch is already there, and waits; the driver kills once the table has the batch
  (:func:`kill_after_sink_commit`).
- ``before-group-commit``: Spark's commit log has it; neither the reader's commit
  (``GroupMember.commit``) nor the progress listener's has started.
- ``during-group-commit``: a commit object holding the batch's end is written (by the member's
  step or by the progress listener); the group's fold has not brought it into the log.

The member arms the last two: after the batch's Delta commit (``foreachBatch``) or in a task of
the batch (Spark's Delta sink: the group commits come after Spark's commit log either way) it
writes the batch's end offsets to ``$KILL_POINT_ARMED`` (a file); the hooks below, installed in
every Python process of the member by ``tests/kill_points_site/sitecustomize.py`` when
``$KILL_POINT`` names one of them, kill at the first commit that reaches one of those ends.
Every kill first appends a line to ``$KILL_POINT_LOG``: which point, in which process, what
the batch was.

The tests chain the kills in one run (:data:`BOTH_WAYS`, :func:`chain`): one victim process,
killed at each point in turn, restarted at once or kept down until its partitions moved.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # not imported in the member's processes
    from tests.processes import MemberProcess

POINTS = ("before-sink", "after-sink", "before-group-commit", "during-group-commit")
#: The environment of a member process that is to kill itself (:func:`member_env`).
POINT_ENV = "KILL_POINT"
ARMED_ENV = "KILL_POINT_ARMED"
LOG_ENV = "KILL_POINT_LOG"
#: The member's process group (:func:`start_member`).
GROUP_ENV = "KILL_POINT_MEMBER_GROUP"
#: The directory whose sitecustomize.py calls :func:`install` in every process of the member.
SITE_DIR = Path(__file__).resolve().parent / "kill_points_site"


def member_env(point: str, workdir: Path, name: str) -> dict[str, str]:
    """The environment that makes a member process kill itself at ``point``."""
    if point not in POINTS:
        raise ValueError(f"kill point {point!r}: one of {', '.join(POINTS)}")
    return {
        "PYTHONPATH": os.pathsep.join([str(SITE_DIR), str(SITE_DIR.parent.parent)]),
        POINT_ENV: point,
        ARMED_ENV: str(workdir / f"{name}-kill-armed.json"),
        LOG_ENV: str(workdir / f"{name}-kills.jsonl"),
    }


def kills(workdir: Path, name: str) -> list[dict]:
    """What the member's kills logged, oldest first."""
    path = workdir / f"{name}-kills.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def point() -> str | None:
    return os.environ.get(POINT_ENV)


def start_member() -> None:
    """In the member's driver script as it starts, before Spark: forget what an earlier
    incarnation armed and counted, and name the member's process group to every process
    started from here (Spark's Python daemon puts its task workers in a group of their own)."""
    disarm()
    os.environ[GROUP_ENV] = str(os.getpgrp())


def kill(where: str, **detail: object) -> None:
    """Log the kill, then SIGKILL the member's whole process group (driver, JVM, the
    streaming-source process) and this process's (a task's Python worker and its daemon)."""
    line = {"point": point(), "where": where, "pid": os.getpid(), **detail}
    with open(os.environ[LOG_ENV], "a") as log:
        log.write(json.dumps(line) + "\n")
        log.flush()
        os.fsync(log.fileno())
    os.killpg(int(os.environ.get(GROUP_ENV, os.getpgrp())), signal.SIGKILL)
    os.killpg(os.getpgrp(), signal.SIGKILL)


def arm(batch_id: int, ends: Mapping[tuple[str, int], int], *, by: int | None = None) -> None:
    """The batch ``batch_id`` with these end offsets (some of its partitions' at least) landed
    or is landing: the group-commit points kill at the first commit that reaches one of them.
    ``by``: the member's driver process (default: this one)."""
    armed = Path(os.environ[ARMED_ENV])
    temporary = armed.with_suffix(".tmp")
    data = {
        "batch": batch_id,
        "by": os.getpid() if by is None else by,
        "ends": [[t, p, e] for (t, p), e in sorted(ends.items())],
    }
    temporary.write_text(json.dumps(data))
    temporary.replace(armed)


def disarm() -> None:
    """Forget what an earlier incarnation of the member armed and which batches it counted
    (its process starts)."""
    Path(os.environ[ARMED_ENV]).unlink(missing_ok=True)
    _batches_file().unlink(missing_ok=True)


def _batches_file() -> Path:
    return Path(os.environ[ARMED_ENV]).with_suffix(".batches")


def batch_number(batch_id: int) -> int:
    """The number of batch ``batch_id`` (1 for the first) among the batches with rows this
    incarnation of the member met, counted in a file beside ``$KILL_POINT_ARMED``: each task
    of a batch on Spark's Delta sink runs in a Python worker of its own."""
    path = _batches_file()
    with open(path, "a") as seen:
        seen.write(f"{batch_id}\n")
    batches = sorted({int(line) for line in path.read_text().split()})
    return batches.index(batch_id) + 1


def block_commit_log(checkpoint: str, batch_id: int) -> None:
    """``after-sink`` on Spark's Delta sink, from a task of batch ``batch_id``: its entry in
    Spark's commit log becomes a FIFO. After the sink's commit Spark opens the entry to see
    whether the batch is already committed and waits there for a writer that never comes."""
    entry = Path(checkpoint) / "commits" / str(batch_id)
    if not entry.exists():
        os.mkfifo(entry)


def unblock_commit_log(checkpoint: str) -> None:
    """Remove the FIFOs an earlier incarnation left in Spark's commit log (its process
    starts): Spark would wait on them when it reads the log."""
    commits = Path(checkpoint) / "commits"
    if commits.is_dir():
        for entry in commits.iterdir():
            if stat.S_ISFIFO(entry.lstat().st_mode):
                entry.unlink()


def kill_after_sink_commit(checkpoint: str, landed: Callable[[], int | None]) -> None:
    """``after-sink`` on Spark's Delta sink, in the driver: a thread that kills once Spark's
    commit log is blocked at a batch (:func:`block_commit_log`) and ``landed()`` (the table's
    version of the query's transaction) has that batch."""
    commits = Path(checkpoint) / "commits"

    def blocked() -> int | None:
        if not commits.is_dir():
            return None
        fifos = [e for e in commits.iterdir() if stat.S_ISFIFO(e.lstat().st_mode)]
        return max((int(e.name) for e in fifos), default=None)

    def version() -> int | None:
        try:
            return landed()
        except Exception:  # the table is being committed to: look again
            return None

    def watch() -> None:
        while True:
            batch = blocked()
            seen = version() if batch is not None else None
            if batch is not None and seen is not None and seen >= batch:
                kill("the driver, after the sink's commit (Spark's commit log waits)",
                     batch=batch, table_version=seen)  # fmt: skip
            time.sleep(0.1)

    threading.Thread(target=watch, daemon=True, name="kill-after-sink-commit").start()


def _reached(offsets: Mapping[tuple[str, int], object]) -> dict | None:
    """The armed batch if ``offsets`` (a commit's, by partition) reach one of its ends."""
    path = Path(os.environ[ARMED_ENV])
    if not path.exists():
        return None
    armed = json.loads(path.read_text())
    for topic, partition, end in armed["ends"]:
        value = offsets.get((topic, partition))
        offset = getattr(value, "offset", value)  # a RecordedOffset, or the offset itself
        if isinstance(offset, int) and offset >= end:
            return armed
    return None


def install() -> None:
    """Hook the group-commit points (``$KILL_POINT``); the sink points are the driver's own
    (tests/member_app.py)."""
    if point() == "before-group-commit":
        _hook_commit_calls()
    elif point() == "during-group-commit":
        _hook_commit_objects()


def _hook_commit_calls() -> None:
    from spark_kafka_group.listener import progress
    from spark_kafka_group.member.member import GroupMember

    member_commit = GroupMember.commit

    def commit(self, offsets, **kwargs):
        armed = _reached(offsets)
        if armed is not None:
            kill("the reader's commit", batch=armed["batch"], armed_by=armed["by"],
                 offsets=_json(offsets))  # fmt: skip
        return member_commit(self, offsets, **kwargs)

    listener_commit = progress.commit_batch_for_member

    def commit_batch_for_member(store, group_id, member_id, generation, offsets, **kwargs):
        armed = _reached(offsets)
        if armed is not None:
            kill("the progress listener's commit", batch=armed["batch"], armed_by=armed["by"],
                 offsets=_json(offsets))  # fmt: skip
        return listener_commit(store, group_id, member_id, generation, offsets, **kwargs)

    GroupMember.commit = commit  # type: ignore[method-assign]
    progress.commit_batch_for_member = commit_batch_for_member


def _hook_commit_objects() -> None:
    from spark_kafka_group.store.commit_objects import CommitObjectFiles

    put = CommitObjectFiles.put

    def put_then_kill(self, obj):
        put(self, obj)
        armed = _reached(obj.offsets)
        if armed is not None:
            kill(
                f"after writing the commit object of {obj.writer or 'the member'}",
                batch=armed["batch"],
                armed_by=armed["by"],
                offsets=_json(obj.offsets),
            )

    CommitObjectFiles.put = put_then_kill  # type: ignore[method-assign]


def _json(offsets: Mapping[tuple[str, int], object]) -> dict[str, int]:
    return {
        f"{t}-{p}": int(getattr(v, "offset", v))  # type: ignore[call-overload]
        for (t, p), v in sorted(offsets.items())
    }


#: Each kill point once, the two ways a member comes back taking turns: the victim restarts at
#: once on its checkpoint (its session timeout outlasts the restart, so the restart replaces it)
#: or its partitions move (it stays down past its session timeout; a new member on a new
#: checkpoint comes for the next kill). A chain's last kill is a move: the survivor then takes
#: everything. A third way back, ``returns`` (:data:`RETURNS`): its partitions move, then it
#: restarts on its checkpoint as a new member of the group.
KILLS = [(point, ("restarts", "moves")[number % 2]) for number, point in enumerate(POINTS)]
#: A member application's restart takes 20 to 60 s on a loaded two-core machine: one that
#: outlasted its session timeout would be a ``returns``, not the ``restarts`` meant.
SESSION_MS = {"restarts": 120_000, "moves": 6000, "returns": 6000}
#: The ways back after which the victim's partitions move (the chain's caller waits for their
#: new owner before the victim's next incarnation starts).
MOVES = ("moves", "returns")
#: Killed after the sink's commit, down until its partitions moved, back on its checkpoint.
#: Right after a restart at ``before-sink`` (whose batch this incarnation ran again, so that
#: batch completed under the member that planned it, the previous one), what its query landed
#: past the group's commit is known only across its incarnations' files.
RETURNS = ("after-sink", "returns")


Kills = Sequence[tuple[str, str]]


def other_way(schedule: Kills) -> list[tuple[str, str]]:
    """Each point of ``schedule`` with the other way back, the restarts first (a chain ends
    with a move)."""
    flipped = [(point, "moves" if then == "restarts" else "restarts") for point, then in schedule]
    return sorted(flipped, key=lambda kill: kill[1] == "moves")


#: Every kill point both ways, in one chain: :data:`KILLS`, then each point the other way. A
#: kill costs about 40 s of a loaded core (a Spark application's start, two batches, an
#: expiry after a move); one chain saves a second survivor, group and drain.
BOTH_WAYS = [*KILLS, *other_way(KILLS)]


def first_incarnation(workdir: Path, name: str, schedule: Kills = KILLS) -> dict[str, object]:
    """``MemberProcess`` arguments of the victim ``name``'s first incarnation (kill 0)."""
    return {
        "env": member_env(schedule[0][0], workdir, name),
        "session_timeout_ms": SESSION_MS[schedule[0][1]],
    }


def prepare(victim: MemberProcess, workdir: Path, schedule: Kills, number: int) -> None:
    """Set up the victim's incarnation for kill ``number`` > 0 of ``schedule`` (before its
    start): its kill point, its session timeout, and a new checkpoint after a move."""
    point, then = schedule[number]
    victim.env = member_env(point, workdir, victim.name)
    victim.set_arg("--session-timeout-ms", str(SESSION_MS[then]))
    if number and schedule[number - 1][1] == "moves":  # a new query takes a share back
        victim.set_arg("--checkpoint", str(workdir / f"{victim.name}-checkpoint-{number}"))


def chain(
    victim: MemberProcess, workdir: Path, schedule: Kills = KILLS
) -> Iterator[tuple[str, str, float]]:
    """Kill the victim at each point of ``schedule`` in turn: its first incarnation is running
    (made with :func:`first_incarnation`), each next one is started here. After each kill,
    once it was checked to be the expected point in a batch this incarnation armed, yields
    (point, then, seconds since the incarnation's start) for the caller's waits and checks."""
    # Two processes of one incarnation may log one kill (below): the log tells two kills
    # apart only by their points.
    assert all(a[0] != b[0] for a, b in itertools.pairwise(schedule)), schedule
    started = time.monotonic()
    for number, (point, then) in enumerate(schedule):
        if number:
            prepare(victim, workdir, schedule, number)
            started = time.monotonic()
            victim.start()
        process = victim.wait_for_exit(f"the victim's kill {point}")
        logged = kills(workdir, victim.name)
        # Two processes of one incarnation can reach its point at once (the reader's commit
        # and the progress listener's): each logs before the process group dies.
        points = [k["point"] for k in logged]
        points = [p for i, p in enumerate(points) if i == 0 or p != points[i - 1]]
        assert points == [p for p, _ in schedule[: number + 1]], logged
        # a group-commit point kills at the batch this incarnation armed
        assert logged[-1].get("armed_by", process.pid) == process.pid, logged
        yield point, then, time.monotonic() - started
