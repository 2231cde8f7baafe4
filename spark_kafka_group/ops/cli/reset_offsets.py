"""``kafka-group reset-offsets``: the plan of new committed offsets, applied with
``--execute``, as ``kafka-consumer-groups --reset-offsets``."""

from __future__ import annotations

import argparse
import json
import sys

from spark_kafka_group.errors import KafkaGroupError
from spark_kafka_group.group.metadata import partition_name
from spark_kafka_group.ops.cli.arguments import (
    EXIT_OK,
    Subparsers,
    _UsageError,
    group_ids,
    kafka_arguments,
    kafka_cluster,
    storage_options,
    store_arguments,
)


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "reset-offsets",
        help="set committed offsets (prints the plan; --execute applies it)",
        description="Set the committed offsets of groups without live members, as "
        "kafka-consumer-groups --reset-offsets does. Prints the plan (GROUP TOPIC PARTITION "
        "NEW-OFFSET) and changes nothing unless --execute is given.",
    )
    store_arguments(p, group="many")
    kafka_arguments(p, needed=True)
    p.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC[:P,P]",
        help="topic, or topic:partitions (repeatable)",
    )
    p.add_argument(
        "--all-topics",
        action="store_true",
        help="every partition the group has a committed offset for",
    )
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true", help="the log start offset")
    how.add_argument("--to-latest", action="store_true", help="the log end offset")
    how.add_argument(
        "--to-current",
        action="store_true",
        help="the committed offset (the log end where there is none)",
    )
    how.add_argument("--to-offset", type=int, metavar="N", help="offset N")
    how.add_argument(
        "--to-datetime",
        metavar="ISO",
        help="first offset at or after this time (ISO 8601; no zone = local time)",
    )
    how.add_argument(
        "--by-duration",
        metavar="PnDTnHnMnS",
        help="first offset at or after now minus this ISO 8601 duration, e.g. PT30M",
    )
    how.add_argument("--shift-by", type=int, metavar="N", help="committed offset + N (N < 0 ok)")
    how.add_argument(
        "--from-file",
        metavar="CSV",
        help="the offsets of a plan in Kafka's CSV format (what --export prints)",
    )
    p.add_argument("--export", action="store_true", help="print the plan as CSV (for --from-file)")
    p.add_argument("--dry-run", action="store_true", help="only print the plan (the default)")
    p.add_argument("--execute", action="store_true", help="apply the plan")
    p.set_defaults(func=run)


def _reset_mode(args: argparse.Namespace) -> tuple[str, int | str | None]:
    for mode, value in (
        ("to-earliest", args.to_earliest or None),
        ("to-latest", args.to_latest or None),
        ("to-current", args.to_current or None),
        ("to-offset", args.to_offset),
        ("to-datetime", args.to_datetime),
        ("by-duration", args.by_duration),
        ("shift-by", args.shift_by),
        ("from-file", args.from_file),
    ):
        if value is not None:
            return mode, None if value is True else value
    raise _UsageError("give one reset scenario, e.g. --to-earliest")  # pragma: no cover


def run(args: argparse.Namespace) -> int:
    from spark_kafka_group.group import SystemClock, TopicPartition
    from spark_kafka_group.ops.admin import describe_existing_group, reset_offsets
    from spark_kafka_group.ops.kafka_views import reset_view
    from spark_kafka_group.ops.reset import (
        export_reset_plan,
        parse_reset_plan,
        parse_topic_spec,
        resolve_partitions,
        target_offsets,
    )

    storage = storage_options(args)
    mode, value = _reset_mode(args)
    if mode == "to-offset" and args.to_offset < 0:
        raise _UsageError("--to-offset must be >= 0")
    if args.execute and args.dry_run:
        raise _UsageError("give --execute or --dry-run, not both")
    groups = group_ids(args)
    planned: dict[str, dict[TopicPartition, int]] = {}
    if mode == "from-file":
        if args.topic or args.all_topics:
            raise _UsageError("--from-file takes its partitions from the file: drop --topic")
        try:
            with open(args.from_file, encoding="utf-8") as f:
                planned = parse_reset_plan(f.read(), groups=groups, path=args.from_file)
        except OSError as exc:
            raise _UsageError(f"--from-file {args.from_file!r}: {exc.strerror or exc}") from None
    elif bool(args.topic) == bool(args.all_topics):
        raise _UsageError("give --topic TOPIC[:P,P] (repeatable) or --all-topics")
    specs = [parse_topic_spec(t) for t in args.topic or ()]
    now_ms = SystemClock().now_ms()
    results = []
    with kafka_cluster(args) as cluster:
        named = resolve_partitions(cluster, specs) if specs else []
        for group_id in groups:
            info = describe_existing_group(args.store, group_id, storage_options=storage)
            if mode == "from-file":
                partitions = sorted(planned.get(group_id, {}))
                if not partitions:
                    raise KafkaGroupError(
                        f"--from-file {args.from_file}: no offsets for group {group_id!r}"
                    )
            elif args.all_topics:  # Kafka's: every partition the group has committed
                partitions = sorted(info.committed)
            else:
                partitions = named
            target = target_offsets(
                cluster,
                partitions,
                info.committed,
                mode=mode,
                value=value,
                now_ms=now_ms,
                planned=planned.get(group_id),
            )
            plan = reset_offsets(
                args.store, group_id, target.offsets, execute=args.execute, storage_options=storage
            )
            results.append((group_id, target, plan))
    data = [
        {
            "group": group_id,
            "store": args.store,
            "mode": mode,
            "value": value,
            "executed": bool(args.execute),
            "partitions": [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "current": current,
                    "new": new,
                    **({"requested": target.clamped[tp][0]} if tp in target.clamped else {}),
                }
                for tp, (current, new) in sorted(plan.items())
            ],
        }
        for group_id, target, plan in results
    ]
    plans = {g: {tp: new for tp, (_, new) in plan.items()} for g, _, plan in results}
    if args.export:
        print(export_reset_plan(plans), end="")
    elif args.json:
        print(json.dumps(data[0] if len(data) == 1 else data, indent=2, default=str))
    else:
        print(reset_view({g: {(tp.topic, tp.partition): o for tp, o in p.items()}
                          for g, p in plans.items()}))  # fmt: skip
    for group_id, target, _ in results:
        for tp, (asked, used) in sorted(target.clamped.items()):
            print(
                f"{group_id} {partition_name(tp.topic, tp.partition)}: new offset {asked} is "
                f"outside the log; set to {used}",
                file=sys.stderr,
            )
    if not args.execute:
        print("Nothing changed (a plan); add --execute to apply it.", file=sys.stderr)
    return EXIT_OK
