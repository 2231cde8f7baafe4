"""``kafka-group export-to-kafka``: copy a group's committed offsets to a Kafka
consumer group."""

from __future__ import annotations

import argparse

from spark_kafka_group.ops.cli.arguments import (
    EXIT_OK,
    Subparsers,
    kafka_arguments,
    kafka_cluster,
    storage_options,
    store_arguments,
)
from spark_kafka_group.ops.cli.output import emit, table


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "export-to-kafka",
        help="copy committed offsets to a Kafka consumer group",
        description="Commit the group's committed offsets to a Kafka consumer group (default: "
        "the same name), so that Kafka's tools (kafka-consumer-groups, lag exporters) or a plain "
        "Kafka consumer see them. Kafka refuses while that consumer group has active consumers. "
        "--dry-run prints what would be committed and commits nothing.",
    )
    store_arguments(p)
    kafka_arguments(p, needed=True)
    p.add_argument("--kafka-group", help="the Kafka consumer group (default: --group)")
    p.add_argument("--topic", action="append", help="only this topic (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="show what would be exported")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from spark_kafka_group.kafka.consumer_group_offsets import commit_to_kafka_group
    from spark_kafka_group.ops.admin import describe_existing_group

    info = describe_existing_group(args.store, args.group, storage_options=storage_options(args))
    offsets = dict(info.committed)
    if args.topic:
        topics = set(args.topic)
        offsets = {tp: o for tp, o in offsets.items() if tp[0] in topics}
    kafka_group = args.kafka_group or args.group
    if args.dry_run or not offsets:
        done = {}
    else:
        with kafka_cluster(args) as cluster:
            done = commit_to_kafka_group(cluster, kafka_group, offsets)
    data = {
        "group": args.group,
        "kafka_group": kafka_group,
        "dry_run": bool(args.dry_run),
        "offsets": [{"topic": t, "partition": p, "offset": o} for (t, p), o in offsets.items()],
        "exported": len(done),
    }

    def text() -> str:
        if not offsets:
            return f"Group {args.group} has no committed offsets: nothing to export"
        rows = [[t, p, o] for (t, p), o in offsets.items()]
        verb = "Would export" if args.dry_run else "Exported"
        return (
            f"{verb} {len(offsets)} committed offset(s) of group {args.group} to Kafka "
            f"consumer group {kafka_group}:\n" + table(rows, ["TOPIC", "PARTITION", "OFFSET"])
        )

    emit(args, data, text)
    return EXIT_OK
