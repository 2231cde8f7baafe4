"""``kafka-group delete-offsets``: drop a group's committed offsets of topics it no
longer reads, as ``kafka-consumer-groups --delete-offsets``."""

from __future__ import annotations

import argparse
import json
import sys

from spark_kafka_group.group.metadata import partition_name
from spark_kafka_group.ops.cli.arguments import (
    EXIT_FAILED,
    EXIT_OK,
    Subparsers,
    kafka_arguments,
    kafka_cluster,
    storage_options,
    store_arguments,
)


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "delete-offsets",
        help="drop a group's committed offsets of topics it no longer reads",
        description="Delete the committed offsets of topics (or partitions) the group no "
        "longer reads, as kafka-consumer-groups --delete-offsets does, so that their lag "
        "leaves describe and the exporter. A topic that a live member subscribes to is refused "
        "(GROUP_SUBSCRIBED_TO_TOPIC); in an Empty group every topic may go. Prints TOPIC "
        "PARTITION STATUS; exits 1 if any partition was refused. Partitions: every partition "
        "of the topic on the cluster, and any the group committed (a deleted topic's).",
    )
    store_arguments(p)
    kafka_arguments(p, needed=True)
    p.add_argument(
        "--topic",
        action="append",
        required=True,
        metavar="TOPIC[:P,P]",
        help="topic, or topic:partitions (repeatable)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import re

    from spark_kafka_group.ops.admin import describe_existing_group
    from spark_kafka_group.ops.delete_offsets import (
        UNKNOWN_TOPIC_OR_PARTITION,
        delete_offsets,
        partitions_to_delete,
    )
    from spark_kafka_group.ops.kafka_views import delete_offsets_view
    from spark_kafka_group.ops.reset import parse_topic_spec

    storage = storage_options(args)
    specs = [parse_topic_spec(t) for t in args.topic]
    info = describe_existing_group(args.store, args.group, storage_options=storage)
    with kafka_cluster(args) as cluster:  # the named topics' partitions, missing ones left out
        on_cluster = cluster.topic_partitions(pattern="|".join(re.escape(s.topic) for s in specs))
    partitions, unknown = partitions_to_delete(specs, on_cluster, info.committed)
    result = delete_offsets(
        args.store, args.group, partitions, unknown=unknown, storage_options=storage
    )
    statuses = {(tp.topic, tp.partition): status for tp, status in result.statuses.items()}
    if args.json:
        data = {
            "group": args.group,
            "store": args.store,
            "partitions": [
                {
                    "topic": t,
                    "partition": p if p >= 0 else None,
                    "status": status,
                    "deleted": (t, p) in result.deleted,
                }
                for (t, p), status in sorted(statuses.items())
            ],
            "deleted": len(result.deleted),
            "refused": dict(result.refusals),
        }
        print(json.dumps(data, indent=2))
    else:
        print(delete_offsets_view(args.group, statuses))
    for message in result.refusals.values():
        print(f"kafka-group delete-offsets: error: {message}", file=sys.stderr)
    missing = [tp for tp, status in result.statuses.items() if status == UNKNOWN_TOPIC_OR_PARTITION]
    if missing:
        names = ", ".join(
            tp.topic if tp.partition < 0 else partition_name(tp.topic, tp.partition)
            for tp in sorted(missing)
        )
        print(
            f"kafka-group delete-offsets: error: {names}: not on the cluster, and group "
            f"{args.group!r} has no committed offset there. Check --topic (kafka-group "
            "describe lists the group's partitions).",
            file=sys.stderr,
        )
    return EXIT_FAILED if result.failed else EXIT_OK
