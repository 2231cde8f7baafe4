"""``kafka-group list``: the groups of a store, as ``kafka-consumer-groups --list``."""

from __future__ import annotations

import argparse

from spark_kafka_group.group import GroupState
from spark_kafka_group.ops.cli.arguments import (
    EXIT_OK,
    Subparsers,
    _UsageError,
    storage_options,
    store_arguments,
)
from spark_kafka_group.ops.cli.output import emit


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "list",
        help="the groups of a store (--state: with their states)",
        description="List the groups of the store, one name a line (kafka-consumer-groups "
        "--list). --state adds the STATE column and, given states, keeps only groups in them.",
    )
    store_arguments(p, group="none")
    p.add_argument(
        "--state",
        nargs="?",
        const="",
        default=None,
        metavar="STATES",
        help="show each group's state; with a comma-separated list (e.g. Stable,Empty), only "
        "groups in those states",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from spark_kafka_group.ops.admin import describe_groups
    from spark_kafka_group.ops.kafka_views import list_view

    groups = describe_groups(args.store, storage_options=storage_options(args))
    if args.state:  # Kafka's --state filter: a comma-separated list, any case
        wanted = {s.strip().lower() for s in args.state.split(",") if s.strip()}
        known = {state.value.lower() for state in GroupState}
        unknown = sorted(wanted - known)
        if unknown:
            raise _UsageError(
                f"--state {args.state!r}: unknown state(s) {', '.join(unknown)}; use "
                + ", ".join(state.value for state in GroupState)
            )
        groups = [g for g in groups if g.state.value.lower() in wanted]
    data = {"store": args.store, "groups": [g.summary_json() for g in groups]}

    def text() -> str:
        if not groups and args.state is None:
            return f"No groups in store {args.store}"
        return list_view(groups, state=args.state is not None)

    emit(args, data, text)
    return EXIT_OK
