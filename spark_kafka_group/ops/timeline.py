"""Partition ownership, rebalances and commits over a group's whole log: ``kafka-group timeline``.

:func:`build_timeline` replays every record of the group log (not just from the latest
snapshot) through the protocol's fold and notes, after each record, who holds which partition,
when a generation starts and what was committed. :func:`render_png` draws it with matplotlib
(the optional ``timeline`` extra), through its object API on an Agg canvas of its own: no
display needed, and the process's pyplot backend (a user's notebook) is left alone. One lane per
partition coloured by owner (hatched while the
partition is being revoked), a dashed line at every generation change (rebalance), and a
second panel with each partition's committed offset over time and, when the log end offsets
are known, its current lag.

Times are the records' timestamps: each writer's own wall clock. They are shown, never
compared: a member on a machine whose clock is off draws its records off by as much (the
order of records is the log's, always right). The group never decides on them
(:mod:`spark_kafka_group.group.clocks`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from spark_kafka_group.errors import KafkaGroupError
from spark_kafka_group.group import GroupMetadata, RecordKind
from spark_kafka_group.group import apply as apply_record
from spark_kafka_group.group.metadata import TopicPartition, partition_name
from spark_kafka_group.group.payloads import (
    ExpirePayload,
    GenerationPayload,
    JoinPayload,
    LeavePayload,
)
from spark_kafka_group.store import GroupLog, GroupLogNotFoundError, group_log_uri

#: What gives ``kafka-group timeline`` its matplotlib, which the package does not require.
INSTALL_TIMELINE = "pip install matplotlib"

#: The records that are member events, and their payload types (each has a reason).
_MEMBER_EVENTS: dict[str, type[JoinPayload] | type[LeavePayload] | type[ExpirePayload]] = {
    RecordKind.JOIN.value: JoinPayload,
    RecordKind.LEAVE.value: LeavePayload,
    RecordKind.EXPIRE.value: ExpirePayload,
}


@dataclass
class Segment:
    """``member_id`` held ``topic-partition`` (``state`` assigned or revoking) in [start, end)."""

    topic: str
    partition: int
    member_id: str
    state: str
    start_ms: int
    end_ms: int


@dataclass(frozen=True)
class Rebalance:
    """A generation change: the group completed a join phase."""

    generation: int
    timestamp_ms: int
    version: int
    leader: str | None
    members: tuple[str, ...]
    reason: str | None


@dataclass(frozen=True)
class Commit:
    timestamp_ms: int
    topic: str
    partition: int
    offset: int
    member_id: str | None


@dataclass(frozen=True)
class MemberEvent:
    """JOIN, LEAVE or EXPIRE of a member."""

    kind: str
    timestamp_ms: int
    member_id: str
    instance_id: str | None
    reason: str | None


@dataclass
class Timeline:
    group_id: str
    uri: str
    records: int = 0
    version: int = -1
    first_ms: int = 0
    last_ms: int = 0
    state: str = "Empty"
    generation: int = 0
    segments: list[Segment] = field(default_factory=list)
    rebalances: list[Rebalance] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    events: list[MemberEvent] = field(default_factory=list)
    #: Member ids in order of first appearance (the colour order of the picture).
    members: list[str] = field(default_factory=list)
    instance_ids: dict[str, str | None] = field(default_factory=dict)

    @property
    def partitions(self) -> list[TopicPartition]:
        seen = {TopicPartition(s.topic, s.partition) for s in self.segments}
        seen |= {TopicPartition(c.topic, c.partition) for c in self.commits}
        return sorted(seen)

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary (the ``--json`` output of ``kafka-group timeline``)."""
        parts = []
        for tp in self.partitions:
            commits = [c for c in self.commits if (c.topic, c.partition) == tp]
            parts.append(
                {
                    "topic": tp[0],
                    "partition": tp[1],
                    "owners": [
                        {
                            "member_id": s.member_id,
                            "state": s.state,
                            "from_ms": s.start_ms,
                            "to_ms": s.end_ms,
                        }
                        for s in self.segments
                        if (s.topic, s.partition) == tp
                    ],
                    "commits": len(commits),
                    "last_committed": commits[-1].offset if commits else None,
                }
            )
        return {
            "group": self.group_id,
            "uri": self.uri,
            "version": self.version,
            "records": self.records,
            "first_ms": self.first_ms,
            "last_ms": self.last_ms,
            "first": _iso(self.first_ms),
            "last": _iso(self.last_ms),
            "state": self.state,
            "generation": self.generation,
            "rebalances": [
                {
                    "generation": r.generation,
                    "timestamp_ms": r.timestamp_ms,
                    "time": _iso(r.timestamp_ms),
                    "version": r.version,
                    "leader": r.leader,
                    "members": list(r.members),
                    "reason": r.reason,
                }
                for r in self.rebalances
            ],
            "members": [
                {"member_id": m, "instance_id": self.instance_ids.get(m)} for m in self.members
            ],
            "member_events": [
                {
                    "kind": e.kind,
                    "timestamp_ms": e.timestamp_ms,
                    "member_id": e.member_id,
                    "reason": e.reason,
                }
                for e in self.events
            ],
            "commits": len(self.commits),
            "partitions": parts,
        }


def _iso(ms: int) -> str | None:
    if not ms:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds")


def _held(group: GroupMetadata) -> dict[TopicPartition, tuple[str, str]]:
    out: dict[TopicPartition, tuple[str, str]] = {}
    for m in group.members.values():
        for tp in m.revoking:
            out[tp] = (m.member_id, "revoking")
        for tp in m.assignment:
            out[tp] = (m.member_id, "assigned")
    return out


def build_timeline(
    store: str, group_id: str, *, storage_options: Mapping[str, str] | None = None
) -> Timeline:
    """Replay the whole group log of ``group_id`` into a :class:`Timeline`."""
    uri = group_log_uri(store, group_id)
    try:
        table = GroupLog.open(uri, storage_options=storage_options, create=False)
    except GroupLogNotFoundError:
        raise GroupLogNotFoundError(
            f"There is no group log for group {group_id!r} at {uri}: check --store and --group"
        ) from None
    piece = table.read_slice()
    tl = Timeline(group_id=group_id, uri=table.uri, version=piece.version)
    group = GroupMetadata(group_id)
    open_segments: dict[TopicPartition, Segment] = {}
    pending_reason: str | None = None
    for version, record in piece.records:
        ts = int(record.timestamp_ms)
        tl.records += 1
        if not tl.first_ms:
            tl.first_ms = ts
        tl.last_ms = max(tl.last_ms, ts)
        kind = record.kind
        mid = record.member_id
        if mid and kind != RecordKind.SNAPSHOT and mid not in tl.instance_ids:
            tl.members.append(mid)
            tl.instance_ids[mid] = record.instance_id
        event = _MEMBER_EVENTS.get(str(kind))
        if event is not None and mid:
            reason = event.of(record).reason or None
            tl.events.append(MemberEvent(str(kind), ts, mid, record.instance_id, reason))
        apply_record(group, record)
        if group.rebalance_reason:
            pending_reason = group.rebalance_reason
        if kind == RecordKind.GENERATION:
            generation = GenerationPayload.of(record)
            tl.rebalances.append(
                Rebalance(
                    generation=int(record.generation or 0),
                    timestamp_ms=ts,
                    version=version,
                    leader=generation.leader,
                    members=generation.members,
                    reason=pending_reason,
                )
            )
            pending_reason = None
        elif kind == RecordKind.COMMIT and record.topic is not None:
            tl.commits.append(
                Commit(ts, record.topic, int(record.partition or 0), int(record.offset or 0), mid)
            )
        held = _held(group)
        for tp in list(open_segments):
            seg = open_segments[tp]
            if held.get(tp) != (seg.member_id, seg.state):
                seg.end_ms = ts
                del open_segments[tp]
        for tp, (owner, state) in held.items():
            if tp not in open_segments:
                seg = Segment(tp[0], tp[1], owner, state, ts, ts)
                open_segments[tp] = seg
                tl.segments.append(seg)
                if owner not in tl.instance_ids:
                    tl.members.append(owner)
                    tl.instance_ids[owner] = group.members[owner].instance_id
    for seg in open_segments.values():
        seg.end_ms = tl.last_ms
    tl.state = group.state.value
    tl.generation = group.generation
    return tl


def _time_unit(span_s: float) -> tuple[str, float]:
    if span_s > 3 * 3600:
        return "hours", 3600.0
    if span_s > 180:
        return "minutes", 60.0
    return "seconds", 1.0


def require_matplotlib() -> None:
    """Refuse, naming the extra to install, when matplotlib is not importable here."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise KafkaGroupError(
            f"drawing the timeline needs matplotlib, which is not installed ({exc}). "
            f"Install it where this command runs: {INSTALL_TIMELINE} (the package's "
            "'timeline' extra)"
        ) from None


def render_png(
    tl: Timeline,
    out: str,
    *,
    log_end: Mapping[TopicPartition, int] | None = None,
    dpi: int = 110,
) -> None:
    """Draw ``tl`` to the PNG file ``out`` (see the module docstring)."""
    require_matplotlib()
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    partitions = tl.partitions
    lanes = {tp: i for i, tp in enumerate(partitions)}
    span_s = max((tl.last_ms - tl.first_ms) / 1000.0, 1e-3)
    unit, div = _time_unit(span_s)

    def x(ms: int) -> float:
        return (ms - tl.first_ms) / 1000.0 / div

    cmap = colormaps["tab20" if len(tl.members) > 10 else "tab10"]
    colours = {m: cmap(i % cmap.N) for i, m in enumerate(tl.members)}
    height = max(2.5, 0.35 * len(partitions) + 1.5)
    fig = Figure(figsize=(12, height + 3.2))
    FigureCanvasAgg(fig)  # the figure's own canvas: no pyplot, no global backend
    ax, ax2 = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [height, 3.2]})
    min_width = span_s / div / 400  # keep instants visible
    for seg in tl.segments:
        lane = lanes[TopicPartition(seg.topic, seg.partition)]
        width = max(x(seg.end_ms) - x(seg.start_ms), min_width)
        ax.barh(
            lane,
            width,
            left=x(seg.start_ms),
            height=0.7,
            color=colours[seg.member_id],
            hatch="///" if seg.state == "revoking" else None,
            edgecolor="black" if seg.state == "revoking" else colours[seg.member_id],
            linewidth=0.4,
        )
    ax.set_yticks(range(len(partitions)))
    ax.set_yticklabels([partition_name(t, p) for t, p in partitions], fontsize=8)
    ax.set_ylim(-0.7, max(len(partitions), 1) - 0.3)
    ax.invert_yaxis()
    ax.set_ylabel("partition")
    for axis in (ax, ax2):
        for r in tl.rebalances:
            axis.axvline(x(r.timestamp_ms), color="crimson", linestyle="--", linewidth=0.9)
    for r in tl.rebalances:
        ax.annotate(
            f"gen {r.generation}",
            (x(r.timestamp_ms), 0),
            xycoords=("data", "axes fraction"),
            xytext=(2, 2),
            textcoords="offset points",
            fontsize=7,
            color="crimson",
            rotation=90,
            va="bottom",
        )
    for e in tl.events:
        if e.kind in (RecordKind.LEAVE, RecordKind.EXPIRE):
            ax.plot(
                x(e.timestamp_ms),
                -0.55,
                marker="v",
                color=colours.get(e.member_id, "grey"),
                markersize=6,
                clip_on=False,
            )

    def label(m: str) -> str:
        inst = tl.instance_ids.get(m)
        short = m if len(m) <= 14 else m[:12] + "…"
        return f"{short} ({inst})" if inst else short

    handles = [Patch(color=colours[m], label=label(m)) for m in tl.members]
    handles.append(Patch(facecolor="white", edgecolor="black", hatch="///", label="revoking"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
    ax.set_title(
        f"group {tl.group_id}: partition ownership ({len(tl.rebalances)} generation(s), "
        f"{tl.records} records, from {_iso(tl.first_ms) or '-'})",
        fontsize=10,
    )

    pcmap = colormaps["tab10"]
    for i, tp in enumerate(partitions):
        commits = [c for c in tl.commits if (c.topic, c.partition) == tp]
        colour = pcmap(i % 10)
        if commits:
            xs = [x(c.timestamp_ms) for c in commits] + [x(tl.last_ms)]
            ys = [c.offset for c in commits] + [commits[-1].offset]
            ax2.step(xs, ys, where="post", color=colour, linewidth=1.2, label=partition_name(*tp))
        end = (log_end or {}).get(tp)
        if end is not None:
            ax2.axhline(end, color=colour, linestyle=":", linewidth=0.8)
            lag = end - commits[-1].offset if commits else None
            ax2.annotate(
                f"lag {lag}" if lag is not None else "no commit",
                (1.0, end),
                xycoords=("axes fraction", "data"),
                xytext=(3, 0),
                textcoords="offset points",
                fontsize=7,
                color=colour,
                va="center",
            )
    ax2.set_ylabel("committed offset")
    ax2.set_xlabel(
        f"{unit} since {_iso(tl.first_ms) or 'start'} (record timestamps: writers' clocks)"
    )
    title = "committed offsets"
    if log_end:
        total = sum(
            max(0, log_end[tp] - [c for c in tl.commits if (c.topic, c.partition) == tp][-1].offset)
            for tp in partitions
            if tp in log_end and any((c.topic, c.partition) == tp for c in tl.commits)
        )
        title += f" (dotted: log end now; total lag {total})"
    ax2.set_title(title, fontsize=9)
    if len(partitions) <= 12 and tl.commits:
        ax2.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=dpi, format="png")
