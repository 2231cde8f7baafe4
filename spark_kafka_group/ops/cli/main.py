"""The ``kafka-group`` command: its parser, built from one module per command, and
:func:`main`, which runs the command and turns its errors into the documented exit codes."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence

from spark_kafka_group._version import __version__
from spark_kafka_group.errors import KafkaGroupError, OptionError
from spark_kafka_group.ops.cli import (
    delete,
    delete_offsets,
    describe,
    export_to_kafka,
    exporter,
    import_from_kafka,
    list_groups,
    reset_offsets,
    timeline,
)
from spark_kafka_group.ops.cli.arguments import EXIT_FAILED, EXIT_OK, EXIT_USAGE, _UsageError
from spark_kafka_group.options.group import group_store_from_environment
from spark_kafka_group.store.paths import GROUP_STORE_ENV

#: The commands in the order ``--help`` lists them (after ``quickstart``).
COMMANDS = (
    list_groups,
    describe,
    reset_offsets,
    delete_offsets,
    export_to_kafka,
    import_from_kafka,
    timeline,
    delete,
    exporter,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafka-group",
        description="Operate spark-kafka-group consumer groups (group logs in Delta tables) "
        "as kafka-consumer-groups operates Kafka's: the same option names, meanings and "
        "output columns.",
        epilog="Not here, and why: --list --type (every group is a classic-protocol group).",
    )
    parser.add_argument("--version", action="version", version=f"kafka-group {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # Listed for --help; main() hands its arguments to spark_kafka_group.quickstart.run.
    sub.add_parser("quickstart", help="two queries share a topic as one group, on this machine")
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["quickstart"]:  # options of its own: kafka-group quickstart --help
        from spark_kafka_group.quickstart.run import main as quickstart

        return quickstart(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_OK
    # The source's rule: no store is implied, so the CLI never reads a group the queries
    # did not write.
    store = (args.store or "").strip() or group_store_from_environment()
    if store is None:
        parser.error(
            f"--store is required (or ${GROUP_STORE_ENV}): the groupStore your queries "
            "name, e.g. --store s3://my-bucket/kafka-groups"
        )
    args.store = store
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    started = time.monotonic()
    try:
        return int(args.func(args))
    except _UsageError as exc:
        parser.error(str(exc))  # exits 2
    except OptionError as exc:
        print(f"kafka-group {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KafkaGroupError as exc:
        print(f"kafka-group {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"kafka-group {args.command}: interrupted", file=sys.stderr)
        return 130
    finally:
        logging.getLogger(__name__).info("%s took %.1fs", args.command, time.monotonic() - started)
    return EXIT_FAILED  # pragma: no cover - parser.error() exits
