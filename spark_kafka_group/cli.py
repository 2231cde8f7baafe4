"""The ``kafka-group`` command line: operate kafka-group consumer groups like Kafka's own.

    kafka-group list [--state [STATES]]   (every command: --store defaults as groupStore does)
    kafka-group describe (--group G ... | --all-groups) [--offsets | --members [--verbose] |
        --state] [--bootstrap-server B]
    kafka-group reset-offsets (--group G ... | --all-groups) (--topic T[:p,p] | --all-topics)
        (--to-earliest | --to-latest | --to-current | --to-offset N | --to-datetime ISO |
         --by-duration PnDTnHnMnS | --shift-by N | --from-file CSV) [--export] [--execute]
    kafka-group delete-offsets --group G --topic T[:p,p] ... --bootstrap-server B
    kafka-group export-to-kafka --group G --kafka-group K --bootstrap-server B
    kafka-group import-from-kafka --group G --kafka-group K --bootstrap-server B
    kafka-group timeline --group G --out group.png
    kafka-group delete --group G [--yes]
    kafka-group exporter --bootstrap-server B [--group G ...] [--port 9308]

Names, meanings and output columns are ``kafka-consumer-groups``'s; every command that talks
to Kafka takes ``--bootstrap-server`` (default ``$KAFKA_BOOTSTRAP_SERVERS``), ``--command-config``
and ``--timeout``. ``--json`` prints a machine-readable result instead of text. Exit codes:
0 success, 1 the
operation failed (the message says why), 2 wrong usage. The logic lives in
:mod:`spark_kafka_group.ops.admin`, :mod:`spark_kafka_group.ops` and
:mod:`spark_kafka_group.kafka.consumer_group_offsets`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

from spark_kafka_group._version import __version__
from spark_kafka_group.errors import KafkaGroupError, OptionError
from spark_kafka_group.group import GroupState
from spark_kafka_group.group.metadata import partition_name
from spark_kafka_group.options import read_properties
from spark_kafka_group.options.group import group_store_from_environment
from spark_kafka_group.store.paths import GROUP_STORE_ENV

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class _UsageError(Exception):
    pass


# -- helpers -----------------------------------------------------------------------------------


def _key_values(items: Sequence[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise _UsageError(f"{what} {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def _properties_file(path: str | None) -> dict[str, str]:
    """A Kafka client properties file (``key=value`` lines, ``#`` comments), as Kafka's
    ``--command-config``."""
    if not path:
        return {}
    try:
        return read_properties(path)
    except OSError as exc:
        raise _UsageError(f"--command-config {path!r}: {exc.strerror or exc}") from None


def _storage_options(args: argparse.Namespace) -> dict[str, str] | None:
    opts = _key_values(args.store_option, "--store-option")
    return opts or None


def _client_conf(args: argparse.Namespace) -> dict[str, str]:
    conf = _properties_file(getattr(args, "command_config", None))
    conf.update(_key_values(getattr(args, "kafka_option", None), "--kafka-option"))
    return conf


def _iso(ms: int | None) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _age(ms: int) -> str:
    s = ms / 1000
    if s < 120:
        return f"{s:.1f}s"
    if s < 7200:
        return f"{s / 60:.1f}m"
    return f"{s / 3600:.1f}h"


def _table(rows: list[list[Any]], header: list[str]) -> str:
    cells = [[str("-" if v is None else v) for v in row] for row in [header, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells
    )


def _emit(args: argparse.Namespace, data: Any, text: Callable[[], str]) -> None:
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=False, default=str))
    else:
        print(text())


def _bootstrap(args: argparse.Namespace) -> str:
    """``--bootstrap-server``, else $KAFKA_BOOTSTRAP_SERVERS; a command that needs Kafka
    and has neither is a usage error that says both."""
    servers = (getattr(args, "bootstrap_server", None) or "").strip()
    if not servers:
        raise _UsageError(
            "the Kafka cluster is not given: add --bootstrap-server HOST:PORT[,HOST:PORT] "
            "or set $KAFKA_BOOTSTRAP_SERVERS"
        )
    return servers


def _timeout_s(args: argparse.Namespace) -> float | None:
    ms = getattr(args, "timeout", None)
    return None if ms is None else ms / 1000


def _cluster(args: argparse.Namespace) -> Any:
    from spark_kafka_group.ops.lag import open_cluster

    return open_cluster(_bootstrap(args), _client_conf(args), timeout_s=_timeout_s(args))


def _group_ids(args: argparse.Namespace) -> list[str]:
    """``--group`` (repeatable) or ``--all-groups``: every group in the store."""
    if getattr(args, "all_groups", False):
        from spark_kafka_group.store import list_groups

        if args.group:
            raise _UsageError("give --group or --all-groups, not both")
        return list_groups(args.store, storage_options=_storage_options(args))
    if not args.group:
        raise _UsageError("give --group GROUP (repeatable) or --all-groups")
    return list(dict.fromkeys(args.group))


# -- commands ----------------------------------------------------------------------------------


def cmd_list(args: argparse.Namespace) -> int:
    from spark_kafka_group.ops.admin import describe_groups
    from spark_kafka_group.ops.kafka_views import list_view

    groups = describe_groups(args.store, storage_options=_storage_options(args))
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

    _emit(args, data, text)
    return EXIT_OK


def cmd_describe(args: argparse.Namespace) -> int:
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
    storage = _storage_options(args)
    reports = []
    for group_id in _group_ids(args):
        group = describe_existing_group(args.store, group_id, storage_options=storage)
        reports.append(
            with_lag(
                group,
                bootstrap_servers=servers if view == "offsets" else None,
                client_conf=_client_conf(args),
                timeout_s=_timeout_s(args),
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


def cmd_reset_offsets(args: argparse.Namespace) -> int:
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

    storage = _storage_options(args)
    mode, value = _reset_mode(args)
    if mode == "to-offset" and args.to_offset < 0:
        raise _UsageError("--to-offset must be >= 0")
    if args.execute and args.dry_run:
        raise _UsageError("give --execute or --dry-run, not both")
    groups = _group_ids(args)
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
    with _cluster(args) as cluster:
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


def cmd_delete_offsets(args: argparse.Namespace) -> int:
    import re

    from spark_kafka_group.ops.admin import describe_existing_group
    from spark_kafka_group.ops.delete_offsets import (
        UNKNOWN_TOPIC_OR_PARTITION,
        delete_offsets,
        partitions_to_delete,
    )
    from spark_kafka_group.ops.kafka_views import delete_offsets_view
    from spark_kafka_group.ops.reset import parse_topic_spec

    storage = _storage_options(args)
    specs = [parse_topic_spec(t) for t in args.topic]
    info = describe_existing_group(args.store, args.group, storage_options=storage)
    with _cluster(args) as cluster:  # the named topics' partitions, missing ones left out
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


def cmd_export(args: argparse.Namespace) -> int:
    from spark_kafka_group.kafka.consumer_group_offsets import commit_to_kafka_group
    from spark_kafka_group.ops.admin import describe_existing_group

    info = describe_existing_group(args.store, args.group, storage_options=_storage_options(args))
    offsets = dict(info.committed)
    if args.topic:
        topics = set(args.topic)
        offsets = {tp: o for tp, o in offsets.items() if tp[0] in topics}
    kafka_group = args.kafka_group or args.group
    if args.dry_run or not offsets:
        done = {}
    else:
        with _cluster(args) as cluster:
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
            f"consumer group {kafka_group}:\n" + _table(rows, ["TOPIC", "PARTITION", "OFFSET"])
        )

    _emit(args, data, text)
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    from spark_kafka_group.kafka.consumer_group_offsets import kafka_group_offsets
    from spark_kafka_group.ops.admin import reset_offsets

    kafka_group = args.kafka_group or args.group
    with _cluster(args) as cluster:
        offsets = kafka_group_offsets(cluster, kafka_group)
    if args.topic:
        topics = set(args.topic)
        offsets = {tp: o for tp, o in offsets.items() if tp[0] in topics}
    if not offsets:
        raise KafkaGroupError(
            f"Kafka consumer group {kafka_group!r} on {_bootstrap(args)!r} has no "
            "committed offsets"
            + (f" for topic(s) {', '.join(args.topic)}" if args.topic else "")
            + ": nothing to import. Check the group name (kafka-consumer-groups --list)."
        )
    plan = reset_offsets(
        args.store,
        args.group,
        offsets,
        execute=not args.dry_run,
        storage_options=_storage_options(args),
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
            + _table(rows, ["TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"])
        )

    _emit(args, data, text)
    return EXIT_OK


def cmd_timeline(args: argparse.Namespace) -> int:
    from spark_kafka_group.ops.timeline import build_timeline, render_png, require_matplotlib

    require_matplotlib()  # before reading the log: say at once what to install
    tl = build_timeline(args.store, args.group, storage_options=_storage_options(args))
    log_end = None
    if args.bootstrap_server and tl.partitions:
        from spark_kafka_group.ops.lag import log_end_offsets

        log_end, _ = log_end_offsets(
            _bootstrap(args), _client_conf(args), tl.partitions, timeout_s=_timeout_s(args)
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
            f"{tl.records} records from {_iso(tl.first_ms)} to {_iso(tl.last_ms)} UTC, "
            f"{len(tl.partitions)} partition(s), {len(tl.members)} member(s), "
            f"{len(tl.commits)} commit(s)."
        ]
        for r in tl.rebalances:
            lines.append(
                f"  generation {r.generation} at {_iso(r.timestamp_ms)}: "
                f"{len(r.members)} member(s), leader {r.leader or '-'}"
                + (f" ({r.reason})" if r.reason else "")
            )
        return "\n".join(lines)

    _emit(args, summary, text)
    return EXIT_OK


def cmd_delete(args: argparse.Namespace) -> int:
    from spark_kafka_group.ops.admin import describe_existing_group
    from spark_kafka_group.ops.delete import delete_group

    storage = _storage_options(args)
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
    _emit(
        args,
        data,
        lambda: (
            f"Deleted group {deleted.group_id} ({deleted.uri}) and its "
            f"{deleted.committed} committed offset(s)"
        ),
    )
    return EXIT_OK


def cmd_exporter(args: argparse.Namespace) -> int:
    from spark_kafka_group.ops.exporter import GroupLagCollector, serve

    collector = GroupLagCollector(
        args.store,
        groups=args.group,
        bootstrap_servers=_bootstrap(args),
        client_conf=_client_conf(args),
        storage_options=_storage_options(args),
        cache_s=args.cache_seconds,
        stall_after_s=args.stall_after_seconds,
        cluster_name=args.cluster_name,
    )
    host, port, thread = serve(collector, args.port, args.addr)
    shown = ", ".join(args.group) if args.group else f"every group in {args.store}"
    print(f"Serving the lag of {shown} on http://{host}:{port}/metrics", flush=True)
    thread.join()  # until interrupted (exit 130) or killed
    return EXIT_OK


# -- parser ------------------------------------------------------------------------------------


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

    def common(p: argparse.ArgumentParser, *, group: str = "one", json_output: bool = True) -> None:
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

    def kafka(p: argparse.ArgumentParser, *, needed: bool) -> None:
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
            "(default: up to 3 attempts of 10 s each, 1 s apart, as the source's "
            "fetchOffset.numRetries)",
        )

    p = sub.add_parser(
        "list",
        help="the groups of a store (--state: with their states)",
        description="List the groups of the store, one name a line (kafka-consumer-groups "
        "--list). --state adds the STATE column and, given states, keeps only groups in them.",
    )
    common(p, group="none")
    p.add_argument(
        "--state",
        nargs="?",
        const="",
        default=None,
        metavar="STATES",
        help="show each group's state; with a comma-separated list (e.g. Stable,Empty), only "
        "groups in those states",
    )
    p.set_defaults(func=cmd_list)

    p = sub.add_parser(
        "describe",
        help="offsets and lag (default), --members or --state of groups",
        description="Describe groups as kafka-consumer-groups --describe does: --offsets "
        "(the default) prints GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG "
        "CONSUMER-ID HOST CLIENT-ID; --members the members and their partition counts "
        "(--verbose: their partitions); --state the group's state, where COORDINATOR (ID) is "
        "the group log and its version (a group log has no coordinator broker).",
    )
    common(p, group="many")
    kafka(p, needed=False)
    p.add_argument("--offsets", action="store_true", help="partitions, offsets and lag")
    p.add_argument("--members", action="store_true", help="the members")
    p.add_argument(
        "--verbose",
        dest="verbose_members",
        action="store_true",
        help="with --members: each member's partitions",
    )
    p.add_argument("--state", action="store_true", help="the group's state")
    p.set_defaults(func=cmd_describe)

    p = sub.add_parser(
        "reset-offsets",
        help="set committed offsets (prints the plan; --execute applies it)",
        description="Set the committed offsets of groups without live members, as "
        "kafka-consumer-groups --reset-offsets does. Prints the plan (GROUP TOPIC PARTITION "
        "NEW-OFFSET) and changes nothing unless --execute is given.",
    )
    common(p, group="many")
    kafka(p, needed=True)
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
    p.set_defaults(func=cmd_reset_offsets)

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
    common(p)
    kafka(p, needed=True)
    p.add_argument(
        "--topic",
        action="append",
        required=True,
        metavar="TOPIC[:P,P]",
        help="topic, or topic:partitions (repeatable)",
    )
    p.set_defaults(func=cmd_delete_offsets)

    p = sub.add_parser(
        "export-to-kafka",
        help="copy committed offsets to a Kafka consumer group",
        description="Commit the group's committed offsets to a Kafka consumer group (default: "
        "the same name), so that Kafka's tools (kafka-consumer-groups, lag exporters) or a plain "
        "Kafka consumer see them. Kafka refuses while that consumer group has active consumers. "
        "--dry-run prints what would be committed and commits nothing.",
    )
    common(p)
    kafka(p, needed=True)
    p.add_argument("--kafka-group", help="the Kafka consumer group (default: --group)")
    p.add_argument("--topic", action="append", help="only this topic (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="show what would be exported")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "import-from-kafka",
        help="seed a group from a Kafka consumer group's committed offsets",
        description="Commit a Kafka consumer group's committed offsets (default: the one named "
        "as --group) into the group's log, so that its queries start where that Kafka consumer "
        "stopped. Refused while the group has live members. --dry-run prints the plan and "
        "changes nothing.",
    )
    common(p)
    kafka(p, needed=True)
    p.add_argument("--kafka-group", help="the Kafka consumer group (default: --group)")
    p.add_argument("--topic", action="append", help="only this topic (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="show the plan, change nothing")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser(
        "timeline",
        help="PNG of partition ownership, rebalances and commits",
        description="Draw the group's history from its log into a PNG: one lane per partition "
        "coloured by owner (hatched while being revoked), a dashed line at every rebalance "
        "(generation), and the committed offsets over time; with --bootstrap-server also the "
        "log end offsets and the lag now. Needs matplotlib (the timeline extra).",
    )
    common(p)
    kafka(p, needed=False)
    p.add_argument("--out", required=True, metavar="FILE.png", help="the PNG file to write")
    p.set_defaults(func=cmd_timeline)

    p = sub.add_parser(
        "delete",
        help="delete a group without live members: its log, offsets and leases",
        description="Delete a group: its group log (with its committed offsets) and the "
        "member leases beside it. Refused while the group has live members. Asks for "
        "confirmation unless --yes is given.",
    )
    common(p)
    p.add_argument("--yes", action="store_true", help="delete without asking")
    p.set_defaults(func=cmd_delete)

    p = sub.add_parser(
        "exporter",
        help="serve groups' lag to Prometheus (kafka_exporter's and kafka-lag-exporter's names)",
        description="Serve the lag (in records and seconds), offsets, members and partition "
        "status of groups at /metrics, under kafka_exporter's and kafka-lag-exporter's metric "
        "names and labels. Scrapes within --cache-seconds of a read are answered from it.",
    )
    common(p, group="none", json_output=False)
    kafka(p, needed=True)
    p.add_argument(
        "--group", action="append", help="only this group (repeatable; default: every group)"
    )
    p.add_argument("--port", type=int, default=9308, help="HTTP port (default 9308; 0: any)")
    p.add_argument("--addr", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    p.add_argument(
        "--cache-seconds",
        type=float,
        default=10.0,
        metavar="S",
        help="answer scrapes within S seconds of a read from it, without reading the store "
        "or the cluster again (default 10; 0: read at every scrape)",
    )
    p.add_argument(
        "--stall-after-seconds",
        type=float,
        default=300.0,
        metavar="S",
        help="a partition with lag whose committed offset stays put S seconds is STALL (a live "
        "owner) or STOP (none) (default 300)",
    )
    p.add_argument(
        "--cluster-name",
        default="default",
        help="the cluster_name label of the kafka-lag-exporter series (default: default)",
    )
    p.set_defaults(func=cmd_exporter)
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


if __name__ == "__main__":
    raise SystemExit(main())
