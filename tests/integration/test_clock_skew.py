"""Members whose machines' wall clocks disagree share one group on a real Delta group log.

Member processes (``tests/clock_member_app.py``: a :class:`GroupMember`, no Spark, no broker)
on one local store; one member of each group has its ``time.time()`` / ``time.time_ns()``
shifted, as on a drifted machine. Short timeouts (heartbeat 1 s, session 6 s) so that CI sees
many session timeouts go by; ``benchmarks/bench_clock_skew.py`` runs the same with the default
timeouts for five minutes.
"""

from __future__ import annotations

import time
from pathlib import Path

from spark_kafka_group.testing.skewed_group import PARTITIONS, SkewedGroup
from spark_kafka_group.testing.waiting import wait_until

HEARTBEAT_MS, SESSION_MS = 1_000, 6_000
SKEWS = {"behind-120s": -120_000, "ahead-120s": 120_000, "ahead-1h": 3_600_000}
#: How long the groups run once settled: more than ten session timeouts.
RUN_S = 70


def group(tmp_path: Path, name: str, skew_ms: int) -> SkewedGroup:
    return SkewedGroup(
        tmp_path, str(tmp_path / "groups"), name, skew_ms,
        heartbeat_ms=HEARTBEAT_MS, session_timeout_ms=SESSION_MS,
    )  # fmt: skip


def test_members_whose_clocks_are_off_are_never_expired_and_get_their_share(
    tmp_path: Path,
) -> None:
    """Three groups at once, one skew each: no EXPIRE record and a fair split throughout."""
    groups = [group(tmp_path, f"skew-{name}", skew) for name, skew in SKEWS.items()]
    try:
        for g in groups:
            g.start()
        wait_until(lambda: all(g.fair() for g in groups), 90, "every group settled and fair")
        end = time.monotonic() + RUN_S
        while time.monotonic() < end:
            for g in groups:
                assert g.expires() == [], g.report()
                assert all(m.process and m.process.poll() is None for m in g.members), g.report()
            time.sleep(5)
        for g in groups:
            assert g.expires() == [], g.report()
            assert g.fair(), g.report()
    finally:
        for g in groups:
            g.stop()
    for g in groups:  # each member left at its stop: nobody had to be expired
        assert g.expires() == [], g.report()


def test_a_killed_member_whose_clock_is_ahead_loses_its_partitions_in_its_session_timeout(
    tmp_path: Path,
) -> None:
    """Its partitions are held by the others within the session timeout + 2 heartbeat
    intervals of the kill, measured on the survivors' monotonic clock (the journals' clock,
    one per machine, so the test's own)."""
    g = group(tmp_path, "killed-ahead", 120_000)
    try:
        g.start()
        wait_until(g.fair, 90, "the group settled and fair")
        time.sleep(3 * SESSION_MS / 1000)  # past several session timeouts: still fair
        assert g.fair() and g.expires() == [], g.report()
        victim = g.skewed
        victim_id = victim.lines()[-1]["member"]
        killed_at = time.monotonic()
        victim.kill()
        survivors = g.members[:2]
        wait_until(
            lambda: set().union(*(m.held() for m in survivors)) == set(range(PARTITIONS)),
            60,
            "the survivors hold every partition",
            poll_s=0.1,
        )
        taken_s = took_over_at(survivors, killed_at) - killed_at
        print(f"partitions of the killed member held by the others {taken_s:.2f} s after the kill")
        assert taken_s <= (SESSION_MS + 2 * HEARTBEAT_MS) / 1000, (taken_s, g.report())
        assert [r.member_id for r in g.expires()] == [victim_id], g.report()
        wait_until(g.fair, 30, "a fair split between the two survivors")
    finally:
        g.stop()


def took_over_at(survivors, since: float) -> float:
    """The first time (monotonic) after ``since`` at which the survivors' journals together
    show every partition held."""
    events = sorted(
        (line["mono"], i, set(line["held"])) for i, m in enumerate(survivors) for line in m.lines()
    )
    held: dict[int, set[int]] = {}
    for mono, i, partitions in events:
        held[i] = partitions
        if mono >= since and set().union(*held.values()) == set(range(PARTITIONS)):
            return mono
    raise AssertionError("the survivors' journals never show every partition held")
