"""Kill a test member (tests/member_app.py) with SIGKILL at a chosen point of one batch's life,
in whichever of its processes reaches that point first: the driver script (``foreachBatch``,
the progress listener) or Spark's streaming-source process (the reader and its group member).

The points, in the order a batch meets them:

- ``before-sink``: the batch is planned (Spark's offset log has it, the group member handed it
  out) and in ``foreachBatch``'s hands; nothing of it is written.
- ``after-sink``: its Delta commit is made; Spark's commit log does not have it yet.
- ``before-group-commit``: Spark's commit log has it; neither the reader's commit
  (``GroupMember.commit``) nor the progress listener's has started.
- ``during-group-commit``: a commit object holding the batch's end is written (by the member's
  step or by the progress listener); the group's fold has not brought it into the log.

The driver arms the last two: after the batch's Delta commit it writes the batch's end offsets
to ``$KILL_POINT_ARMED`` (a file); the hooks below, installed in every Python process of the
member by ``tests/kill_points_site/sitecustomize.py`` when ``$KILL_POINT`` names one of them,
kill at the first commit that reaches one of those ends. Every kill first appends a line to
``$KILL_POINT_LOG``: which point, in which process, what the batch was.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Mapping
from pathlib import Path

POINTS = ("before-sink", "after-sink", "before-group-commit", "during-group-commit")
#: The environment of a member process that is to kill itself (:func:`member_env`).
POINT_ENV = "KILL_POINT"
ARMED_ENV = "KILL_POINT_ARMED"
LOG_ENV = "KILL_POINT_LOG"
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


def kill(where: str, **detail: object) -> None:
    """Log the kill, then SIGKILL the member's whole process group (driver, JVM, workers)."""
    line = {"point": point(), "where": where, "pid": os.getpid(), **detail}
    with open(os.environ[LOG_ENV], "a") as log:
        log.write(json.dumps(line) + "\n")
        log.flush()
        os.fsync(log.fileno())
    os.killpg(os.getpgrp(), signal.SIGKILL)


def arm(batch_id: int, ends: Mapping[tuple[str, int], int]) -> None:
    """The batch ``batch_id`` with these end offsets landed: the group-commit points kill at
    the first commit that reaches one of them."""
    armed = Path(os.environ[ARMED_ENV])
    temporary = armed.with_suffix(".tmp")
    data = {
        "batch": batch_id,
        "by": os.getpid(),
        "ends": [[t, p, e] for (t, p), e in sorted(ends.items())],
    }
    temporary.write_text(json.dumps(data))
    temporary.replace(armed)


def disarm() -> None:
    """Forget what an earlier incarnation of the member armed (its process starts)."""
    Path(os.environ[ARMED_ENV]).unlink(missing_ok=True)


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
