"""What every ``kafka-group`` command shares: the exit codes, the usage error, the store's and
the Kafka client's arguments and how they are read."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

from spark_kafka_group.options import read_properties

if TYPE_CHECKING:
    from spark_kafka_group.kafka.cluster import KafkaCluster

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

#: What ``parser.add_subparsers()`` returns: each command module adds its parser to it.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


class _UsageError(Exception):
    """Wrong usage the parser cannot see (a combination of arguments): :func:`main` turns it
    into the parser's usage error (exit 2), as argparse's own, so it never reaches a user as
    an exception (hence private, and not in :mod:`spark_kafka_group.errors`)."""


def store_arguments(
    p: argparse.ArgumentParser, *, group: str = "one", json_output: bool = True
) -> None:
    """``--store``, ``--store-option``, ``--group`` (``group``: "one", "many" with
    ``--all-groups``, or "none") and ``--json``."""
    p.add_argument(
        "--store",
        default=None,
        help="the group store (the queries' groupStore option); required, or "
        "$SPARK_KAFKA_GROUP_STORE",
    )
    p.add_argument(
        "--store-option",
        action="append",
        metavar="KEY=VALUE",
        help="delta-rs storage option (the groupStore.* options), e.g. AWS_REGION=eu-west-1",
    )
    if group == "one":
        p.add_argument("--group", required=True, help="the group id (the groupId option)")
    elif group == "many":
        p.add_argument(
            "--group", action="append", help="the group id (the groupId option; repeatable)"
        )
        p.add_argument("--all-groups", action="store_true", help="every group in the store")
    if json_output:
        p.add_argument("--json", action="store_true", help="print JSON instead of text")


def kafka_arguments(p: argparse.ArgumentParser, *, needed: bool) -> None:
    """The Kafka client's arguments: ``--bootstrap-server`` (``needed``: the command cannot
    work without it), ``--command-config``, ``--kafka-option`` and ``--timeout``."""
    p.add_argument(
        "--bootstrap-server",
        "--bootstrap-servers",  # this tool's earlier spelling, kept as an alias
        dest="bootstrap_server",
        metavar="SERVERS",
        default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
        help="the Kafka cluster, HOST:PORT[,HOST:PORT] (default $KAFKA_BOOTSTRAP_SERVERS)"
        + ("" if needed else "; without it, no log end offsets or lag"),
    )
    p.add_argument(
        "--command-config",
        metavar="FILE",
        help="Kafka client properties file (security.protocol, sasl.*, ssl.* ...)",
    )
    p.add_argument(
        "--kafka-option", action="append", metavar="KEY=VALUE", help="a Kafka client setting"
    )
    p.add_argument(
        "--timeout",
        type=int,
        metavar="MS",
        help="wait at most MS milliseconds for each request to the cluster, one attempt "
        "(default: as the source, up to 3 attempts of 60 s each, 1 s apart: "
        "fetchOffset.numRetries and kafka.default.api.timeout.ms)",
    )


def key_values(items: Sequence[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise _UsageError(f"{what} {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def properties_file(path: str | None) -> dict[str, str]:
    """A Kafka client properties file (``key=value`` lines, ``#`` comments), as Kafka's
    ``--command-config``."""
    if not path:
        return {}
    try:
        return read_properties(path)
    except OSError as exc:
        raise _UsageError(f"--command-config {path!r}: {exc.strerror or exc}") from None


def storage_options(args: argparse.Namespace) -> dict[str, str] | None:
    opts = key_values(args.store_option, "--store-option")
    return opts or None


def client_conf(args: argparse.Namespace) -> dict[str, str]:
    conf = properties_file(getattr(args, "command_config", None))
    conf.update(key_values(getattr(args, "kafka_option", None), "--kafka-option"))
    return conf


def bootstrap(args: argparse.Namespace) -> str:
    """``--bootstrap-server``, else $KAFKA_BOOTSTRAP_SERVERS; a command that needs Kafka
    and has neither is a usage error that says both."""
    servers = (getattr(args, "bootstrap_server", None) or "").strip()
    if not servers:
        raise _UsageError(
            "the Kafka cluster is not given: add --bootstrap-server HOST:PORT[,HOST:PORT] "
            "or set $KAFKA_BOOTSTRAP_SERVERS"
        )
    return servers


def timeout_s(args: argparse.Namespace) -> float | None:
    ms = getattr(args, "timeout", None)
    return None if ms is None else ms / 1000


def kafka_cluster(args: argparse.Namespace) -> KafkaCluster:
    from spark_kafka_group.ops.lag import open_cluster

    return open_cluster(bootstrap(args), client_conf(args), timeout_s=timeout_s(args))


def group_ids(args: argparse.Namespace) -> list[str]:
    """``--group`` (repeatable) or ``--all-groups``: every group in the store."""
    if getattr(args, "all_groups", False):
        from spark_kafka_group.store import list_groups

        if args.group:
            raise _UsageError("give --group or --all-groups, not both")
        return list_groups(args.store, storage_options=storage_options(args))
    if not args.group:
        raise _UsageError("give --group GROUP (repeatable) or --all-groups")
    return list(dict.fromkeys(args.group))
