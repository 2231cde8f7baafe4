"""``kafka-group import-from-kafka``: seed a group from a Kafka consumer group's
committed offsets."""

from __future__ import annotations

import argparse

from spark_kafka_group.errors import KafkaGroupError
from spark_kafka_group.ops.cli.arguments import (
    EXIT_OK,
    Subparsers,
    bootstrap,
    kafka_arguments,
    kafka_cluster,
    storage_options,
    store_arguments,
)
from spark_kafka_group.ops.cli.output import emit, table


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "import-from-kafka",
        help="seed a group from a Kafka consumer group's committed offsets",
        description="Commit a Kafka consumer group's committed offsets (default: the one named "
        "as --group) into the group's log, so that its queries start where that Kafka consumer "
        "stopped. Refused while the group has live members. --dry-run prints the plan and "
        "changes nothing.",
    )
    store_arguments(p)
    kafka_arguments(p, needed=True)
    p.add_argument("--kafka-group", help="the Kafka consumer group (default: --group)")
    p.add_argument("--topic", action="append", help="only this topic (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="show the plan, change nothing")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from spark_kafka_group.kafka.consumer_group_offsets import kafka_group_offsets
    from spark_kafka_group.ops.admin import reset_offsets

    kafka_group = args.kafka_group or args.group
    with kafka_cluster(args) as cluster:
        offsets = kafka_group_offsets(cluster, kafka_group)
    if args.topic:
        topics = set(args.topic)
        offsets = {tp: o for tp, o in offsets.items() if tp[0] in topics}
    if not offsets:
        raise KafkaGroupError(
            f"Kafka consumer group {kafka_group!r} on {bootstrap(args)!r} has no "
            "committed offsets"
            + (f" for topic(s) {', '.join(args.topic)}" if args.topic else "")
            + ": nothing to import. Check the group name (kafka-consumer-groups --list)."
        )
    plan = reset_offsets(
        args.store,
        args.group,
        offsets,
        execute=not args.dry_run,
        storage_options=storage_options(args),
    )
    data = {
        "group": args.group,
        "kafka_group": kafka_group,
        "dry_run": bool(args.dry_run),
        "partitions": [
            {"topic": t, "partition": p, "current": cur, "new": new}
            for (t, p), (cur, new) in sorted(plan.items())
        ],
    }

    def text() -> str:
        rows = [[t, p, cur, new] for (t, p), (cur, new) in sorted(plan.items())]
        verb = "Would import" if args.dry_run else "Imported"
        return (
            f"{verb} {len(plan)} committed offset(s) of Kafka consumer group {kafka_group} "
            f"into group {args.group}:\n"
            + table(rows, ["TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"])
        )

    emit(args, data, text)
    return EXIT_OK
