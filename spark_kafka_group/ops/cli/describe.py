"""``kafka-group describe``: offsets and lag, members or state of groups, as
``kafka-consumer-groups --describe``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from spark_kafka_group.ops.cli.arguments import (
    EXIT_OK,
    Subparsers,
    _UsageError,
    client_conf,
    group_ids,
    kafka_arguments,
    storage_options,
    store_arguments,
    timeout_s,
)


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "describe",
        help="offsets and lag (default), --members or --state of groups",
        description="Describe groups as kafka-consumer-groups --describe does: --offsets "
        "(the default) prints GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG "
        "CONSUMER-ID HOST CLIENT-ID; --members the members and their partition counts "
        "(--verbose: their partitions); --state the group's state, where COORDINATOR (ID) is "
        "the group log and its version (a group log has no coordinator broker).",
    )
    store_arguments(p, group="many")
    kafka_arguments(p, needed=False)
    p.add_argument("--offsets", action="store_true", help="partitions, offsets and lag")
    p.add_argument("--members", action="store_true", help="the members")
    p.add_argument(
        "--verbose",
        dest="verbose_members",
        action="store_true",
        help="with --members: each member's partitions",
    )
    p.add_argument("--state", action="store_true", help="the group's state")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from spark_kafka_group.ops.admin import describe_existing_group
    from spark_kafka_group.ops.kafka_views import (
        group_notice,
        members_view,
        offsets_view,
        state_view,
    )
    from spark_kafka_group.ops.lag import with_lag

    views = [v for v in ("offsets", "members", "state") if getattr(args, v)]
    if len(views) > 1:
        raise _UsageError("give one of --offsets, --members, --state")
    if args.verbose_members and views != ["members"]:
        raise _UsageError("--verbose goes with --members")
    view = views[0] if views else "offsets"
    servers = (args.bootstrap_server or "").strip() or None
    storage = storage_options(args)
    reports = []
    for group_id in group_ids(args):
        group = describe_existing_group(args.store, group_id, storage_options=storage)
        reports.append(
            with_lag(
                group,
                bootstrap_servers=servers if view == "offsets" else None,
                client_conf=client_conf(args),
                timeout_s=timeout_s(args),
            )
        )
    if args.json:
        data: Any = reports[0].to_json() if len(reports) == 1 else [r.to_json() for r in reports]
        print(json.dumps(data, indent=2, default=str))
        return EXIT_OK
    for report in reports:
        notice = group_notice(report.group)
        if notice:
            print(notice, file=sys.stderr)
        if view == "members":
            print(members_view(report.group, verbose=args.verbose_members))
        elif view == "state":
            print(state_view(report.group))
        else:
            print(offsets_view(report))
            if servers is None:
                print(
                    "\n(LOG-END-OFFSET and LAG need the cluster: add --bootstrap-server or set "
                    "$KAFKA_BOOTSTRAP_SERVERS)",
                    file=sys.stderr,
                )
            if report.missing_topics:
                print(
                    f"Topics no longer on the cluster: {', '.join(report.missing_topics)}",
                    file=sys.stderr,
                )
    return EXIT_OK
