"""``kafka-group timeline``: the group's history drawn to a PNG."""

from __future__ import annotations

import argparse
import os

from spark_kafka_group.errors import KafkaGroupError
from spark_kafka_group.ops.cli.arguments import (
    EXIT_OK,
    Subparsers,
    bootstrap,
    client_conf,
    kafka_arguments,
    storage_options,
    store_arguments,
    timeout_s,
)
from spark_kafka_group.ops.cli.output import emit, iso


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "timeline",
        help="PNG of partition ownership, rebalances and commits",
        description="Draw the group's history from its log into a PNG: one lane per partition "
        "coloured by owner (hatched while being revoked), a dashed line at every rebalance "
        "(generation), and the committed offsets over time; with --bootstrap-server also the "
        "log end offsets and the lag now. Needs matplotlib (the timeline extra).",
    )
    store_arguments(p)
    kafka_arguments(p, needed=False)
    p.add_argument("--out", required=True, metavar="FILE.png", help="the PNG file to write")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from spark_kafka_group.ops.timeline import build_timeline, render_png, require_matplotlib

    require_matplotlib()  # before reading the log: say at once what to install
    tl = build_timeline(args.store, args.group, storage_options=storage_options(args))
    log_end = None
    if args.bootstrap_server and tl.partitions:
        from spark_kafka_group.ops.lag import log_end_offsets

        log_end, _ = log_end_offsets(
            bootstrap(args), client_conf(args), tl.partitions, timeout_s=timeout_s(args)
        )
    try:
        render_png(tl, args.out, log_end=log_end)
    except OSError as exc:
        raise KafkaGroupError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    summary = tl.summary()
    summary["out"] = os.path.abspath(args.out)
    summary["png_bytes"] = os.path.getsize(args.out)
    if log_end is not None:
        summary["log_end"] = [
            {"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(log_end.items())
        ]

    def text() -> str:
        lines = [
            f"Wrote {args.out} ({summary['png_bytes']} bytes): group {tl.group_id}, "
            f"{tl.records} records from {iso(tl.first_ms)} to {iso(tl.last_ms)} UTC, "
            f"{len(tl.partitions)} partition(s), {len(tl.members)} member(s), "
            f"{len(tl.commits)} commit(s)."
        ]
        for r in tl.rebalances:
            lines.append(
                f"  generation {r.generation} at {iso(r.timestamp_ms)}: "
                f"{len(r.members)} member(s), leader {r.leader or '-'}"
                + (f" ({r.reason})" if r.reason else "")
            )
        return "\n".join(lines)

    emit(args, summary, text)
    return EXIT_OK
