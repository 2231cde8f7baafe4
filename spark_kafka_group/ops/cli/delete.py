"""``kafka-group delete``: delete a group without live members."""

from __future__ import annotations

import argparse
import sys

from spark_kafka_group.errors import OptionError
from spark_kafka_group.ops.cli.arguments import (
    EXIT_FAILED,
    EXIT_OK,
    Subparsers,
    storage_options,
    store_arguments,
)
from spark_kafka_group.ops.cli.output import emit


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "delete",
        help="delete a group without live members: its log, offsets and leases",
        description="Delete a group: its group log (with its committed offsets) and the "
        "member leases beside it. Refused while the group has live members. Asks for "
        "confirmation unless --yes is given.",
    )
    store_arguments(p)
    p.add_argument("--yes", action="store_true", help="delete without asking")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from spark_kafka_group.ops.admin import describe_existing_group
    from spark_kafka_group.ops.delete import delete_group

    storage = storage_options(args)
    if not args.yes:
        if not sys.stdin.isatty():
            raise OptionError(
                f"deleting group {args.group!r} needs a confirmation, and stdin is not a "
                "terminal: add --yes to delete without asking"
            )
        group = describe_existing_group(args.store, args.group, storage_options=storage)
        answer = input(
            f"Delete group {args.group} ({group.uri}: state {group.state.value}, "
            f"{len(group.members)} member(s), {len(group.committed)} committed offset(s))? "
            "This cannot be undone. [y/N] "
        )
        if answer.strip().lower() not in ("y", "yes"):
            print(f"Group {args.group} not deleted")
            return EXIT_FAILED
    deleted = delete_group(args.store, args.group, storage_options=storage)
    data = {
        "group": deleted.group_id,
        "uri": deleted.uri,
        "deleted": True,
        "committed_offsets": deleted.committed,
        "expired_members": deleted.expired,
    }
    emit(
        args,
        data,
        lambda: (
            f"Deleted group {deleted.group_id} ({deleted.uri}) and its "
            f"{deleted.committed} committed offset(s)"
        ),
    )
    return EXIT_OK
