"""The ``kafka-group`` command line: operate kafka-group consumer groups like Kafka's own.

    kafka-group list [--store S]          (every command: --store defaults as groupStore does)
    kafka-group describe --store S --group G [--bootstrap-servers B]
    kafka-group reset-offsets --store S --group G --topic T[:p,p] --to-earliest ... [--execute]
    kafka-group export-to-kafka --store S --group G --kafka-group K --bootstrap-servers B
    kafka-group import-from-kafka --store S --group G --kafka-group K --bootstrap-servers B
    kafka-group timeline --store S --group G --out group.png
    kafka-group delete --store S --group G [--yes]
    kafka-group exporter --store S --bootstrap-servers B [--group G ...] [--port 9308]

``--json`` prints a machine-readable result instead of text. Exit codes: 0 success, 1 the
operation failed (the message says why), 2 wrong usage. The logic lives in
:mod:`spark_kafka_group.admin`, :mod:`spark_kafka_group.ops` and
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
from spark_kafka_group.group.metadata import partition_name
from spark_kafka_group.options import read_properties
from spark_kafka_group.store.paths import default_group_store

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


# -- commands ----------------------------------------------------------------------------------


def cmd_list(args: argparse.Namespace) -> int:
    from spark_kafka_group.admin import describe_groups

    groups = describe_groups(args.store, storage_options=_storage_options(args))
    data = {"store": args.store, "groups": [g.summary_json() for g in groups]}

    def text() -> str:
        if not groups:
            return f"No groups in store {args.store}"
        rows = [
            [
                g.group_id,
                g.state.value,
                len(g.members),
                g.generation,
                g.protocol,
                _iso(g.last_record_ms),
            ]
            for g in groups
        ]
        header = ["GROUP", "STATE", "MEMBERS", "GENERATION", "PROTOCOL", "LAST RECORD (UTC)"]
        return _table(rows, header)

    _emit(args, data, text)
    return EXIT_OK


def cmd_describe(args: argparse.Namespace) -> int:
    from spark_kafka_group.ops.lag import describe_with_lag

    report = describe_with_lag(
        args.store,
        args.group,
        bootstrap_servers=args.bootstrap_servers,
        client_conf=_client_conf(args),
        storage_options=_storage_options(args),
    )
    group = report.group

    def text() -> str:
        lines = [
            f"Group {group.group_id} ({group.uri}, log version {group.version})",
            f"  state {group.state.value}, generation {group.generation}, protocol "
            f"{group.protocol or '-'}, leader {group.leader or '-'}",
            "",
        ]
        if group.members:
            rows = [
                [
                    m.member_id,
                    m.instance_id,
                    m.client_host or None,
                    m.generation,
                    _age(m.heartbeat_age_ms(group.now_ms)) + ("" if m.live else " (expired)"),
                    ",".join(partition_name(t, p) for t, p in m.assignment) or None,
                    ",".join(partition_name(t, p) for t, p in m.revoking) or None,
                ]
                for m in group.members
            ]
            header = ["MEMBER", "INSTANCE", "HOST", "GEN", "LAST HEARTBEAT", "ASSIGNED", "REVOKING"]
            lines += [_table(rows, header), ""]
            # Shown only: a member's machine stamps its own time, which may be off; the group
            # itself judges liveness on each member's own clock (docs/clocks.md).
            lines += ["  LAST HEARTBEAT: as the members' machines stamped it (their clocks)", ""]
        else:
            lines += ["  no members", ""]
        rows = [
            [
                p.topic,
                p.partition,
                p.owner + (" (revoking)" if p.owner_state == "revoking" else "")
                if p.owner
                else None,
                p.committed,
                p.log_end,
                p.lag,
                _iso(p.committed_at_ms) if p.committed_at_ms else None,
            ]
            for p in report.partitions
        ]
        header = ["TOPIC", "PARTITION", "OWNER", "COMMITTED", "LOG-END", "LAG", "COMMITTED AT"]
        lines.append(_table(rows, header) if rows else "  no partitions")
        if report.total_lag is not None:
            lines.append(f"\nTotal lag: {report.total_lag}")
        elif not args.bootstrap_servers:
            lines.append("\n(give --bootstrap-servers for log end offsets and lag)")
        if report.missing_topics:
            lines.append(f"Topics no longer on the cluster: {', '.join(report.missing_topics)}")
        return "\n".join(lines)

    _emit(args, report.to_json(), text)
    return EXIT_OK


def _reset_mode(args: argparse.Namespace) -> tuple[str, int | str | None]:
    if args.to_earliest:
        return "to-earliest", None
    if args.to_latest:
        return "to-latest", None
    if args.to_offset is not None:
        return "to-offset", args.to_offset
    if args.to_datetime is not None:
        return "to-datetime", args.to_datetime
    return "shift-by", args.shift_by


def cmd_reset_offsets(args: argparse.Namespace) -> int:
    from spark_kafka_group.admin import describe_group, reset_offsets
    from spark_kafka_group.kafka.cluster import KafkaCluster
    from spark_kafka_group.ops.reset import parse_topic_spec, resolve_partitions, target_offsets

    storage = _storage_options(args)
    specs = [parse_topic_spec(t) for t in args.topic]
    mode, value = _reset_mode(args)
    if mode == "to-offset" and args.to_offset < 0:
        raise _UsageError("--to-offset must be >= 0")
    info = describe_group(args.store, args.group, storage_options=storage)
    with KafkaCluster(args.bootstrap_servers, client_conf=_client_conf(args)) as cluster:
        partitions = resolve_partitions(cluster, specs)
        target = target_offsets(cluster, partitions, info.committed, mode=mode, value=value)
    plan = reset_offsets(
        args.store, args.group, target.offsets, execute=args.execute, storage_options=storage
    )
    data = {
        "group": args.group,
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

    def text() -> str:
        rows = [
            [tp.topic, tp.partition, current, new, None]
            if tp not in target.clamped
            else [tp.topic, tp.partition, current, new, f"clamped from {target.clamped[tp][0]}"]
            for tp, (current, new) in sorted(plan.items())
        ]
        head = _table(rows, ["TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET", "NOTE"])
        if args.execute:
            return f"Reset the offsets of group {args.group}:\n{head}"
        return f"Plan for group {args.group} (nothing changed; add --execute to apply):\n{head}"

    _emit(args, data, text)
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from spark_kafka_group.admin import describe_existing_group
    from spark_kafka_group.kafka.cluster import KafkaCluster
    from spark_kafka_group.kafka.consumer_group_offsets import commit_to_kafka_group

    info = describe_existing_group(args.store, args.group, storage_options=_storage_options(args))
    offsets = dict(info.committed)
    if args.topic:
        topics = set(args.topic)
        offsets = {tp: o for tp, o in offsets.items() if tp[0] in topics}
    kafka_group = args.kafka_group or args.group
    if args.dry_run or not offsets:
        done = {}
    else:
        with KafkaCluster(args.bootstrap_servers, client_conf=_client_conf(args)) as cluster:
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
    from spark_kafka_group.admin import reset_offsets
    from spark_kafka_group.kafka.cluster import KafkaCluster
    from spark_kafka_group.kafka.consumer_group_offsets import kafka_group_offsets

    kafka_group = args.kafka_group or args.group
    with KafkaCluster(args.bootstrap_servers, client_conf=_client_conf(args)) as cluster:
        offsets = kafka_group_offsets(cluster, kafka_group)
    if args.topic:
        topics = set(args.topic)
        offsets = {tp: o for tp, o in offsets.items() if tp[0] in topics}
    if not offsets:
        raise KafkaGroupError(
            f"Kafka consumer group {kafka_group!r} on {args.bootstrap_servers!r} has no "
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
    if args.bootstrap_servers and tl.partitions:
        from spark_kafka_group.ops.lag import log_end_offsets

        log_end, _ = log_end_offsets(args.bootstrap_servers, _client_conf(args), tl.partitions)
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
    from spark_kafka_group.admin import describe_existing_group
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
        bootstrap_servers=args.bootstrap_servers,
        client_conf=_client_conf(args),
        storage_options=_storage_options(args),
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
        description="Operate spark-kafka-group consumer groups (group logs in Delta tables).",
    )
    parser.add_argument("--version", action="version", version=f"kafka-group {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # Listed for --help; main() hands its arguments to spark_kafka_group.quickstart.
    sub.add_parser("quickstart", help="two queries share a topic as one group, on this machine")

    def common(p: argparse.ArgumentParser, *, group: bool = True, read: bool = True) -> None:
        p.add_argument(
            "--store",
            default=None,
            help="the group store (the groupStore option); default as the source's: "
            "$SPARK_KAFKA_GROUP_STORE, else ~/.spark-kafka-group/groups",
        )
        p.add_argument(
            "--store-option",
            action="append",
            metavar="KEY=VALUE",
            help="delta-rs storage option (the groupStore.* options), e.g. AWS_REGION=eu-west-1",
        )
        if group:
            p.add_argument("--group", required=True, help="the group id (the groupId option)")
        p.add_argument("--json", action="store_true", help="print JSON instead of text")

    def kafka(p: argparse.ArgumentParser, *, required: bool) -> None:
        p.add_argument(
            "--bootstrap-servers",
            required=required,
            default=None if required else os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
            help="Kafka bootstrap servers"
            + ("" if required else " (default $KAFKA_BOOTSTRAP_SERVERS)"),
        )
        p.add_argument(
            "--command-config",
            metavar="FILE",
            help="Kafka client properties file (security.protocol, sasl.*, ssl.* ...)",
        )
        p.add_argument(
            "--kafka-option", action="append", metavar="KEY=VALUE", help="a Kafka client setting"
        )

    p = sub.add_parser("list", help="groups in a store, with state and member count")
    common(p, group=False)
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("describe", help="members, owners, committed offsets and lag")
    common(p)
    kafka(p, required=False)
    p.set_defaults(func=cmd_describe)

    p = sub.add_parser(
        "reset-offsets",
        help="set committed offsets (prints the plan; --execute applies it)",
        description="Set the committed offsets of a group without live members. Prints the "
        "plan and changes nothing unless --execute is given.",
    )
    common(p)
    kafka(p, required=True)
    p.add_argument(
        "--topic",
        action="append",
        required=True,
        metavar="TOPIC[:P,P]",
        help="topic, or topic:partitions (repeatable)",
    )
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true", help="the log start offset")
    how.add_argument("--to-latest", action="store_true", help="the log end offset")
    how.add_argument("--to-offset", type=int, metavar="N", help="offset N")
    how.add_argument(
        "--to-datetime",
        metavar="ISO",
        help="first offset at or after this time (ISO 8601; no zone = local time)",
    )
    how.add_argument("--shift-by", type=int, metavar="N", help="committed offset + N (N < 0 ok)")
    p.add_argument("--execute", action="store_true", help="apply the plan")
    p.set_defaults(func=cmd_reset_offsets)

    p = sub.add_parser("export-to-kafka", help="copy committed offsets to a Kafka consumer group")
    common(p)
    kafka(p, required=True)
    p.add_argument("--kafka-group", help="the Kafka consumer group (default: --group)")
    p.add_argument("--topic", action="append", help="only this topic (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="show what would be exported")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "import-from-kafka", help="seed a group from a Kafka consumer group's committed offsets"
    )
    common(p)
    kafka(p, required=True)
    p.add_argument("--kafka-group", help="the Kafka consumer group (default: --group)")
    p.add_argument("--topic", action="append", help="only this topic (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="show the plan, change nothing")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("timeline", help="PNG of partition ownership, rebalances and commits")
    common(p)
    kafka(p, required=False)
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
        help="serve groups' lag to Prometheus (kafka_exporter's metric names)",
        description="Serve the lag, committed offsets and members of groups at /metrics, "
        "under kafka_exporter's metric names and labels, figured at each scrape.",
    )
    common(p, group=False)
    kafka(p, required=True)
    p.add_argument(
        "--group", action="append", help="only this group (repeatable; default: every group)"
    )
    p.add_argument("--port", type=int, default=9308, help="HTTP port (default 9308; 0: any)")
    p.add_argument("--addr", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    p.set_defaults(func=cmd_exporter)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["quickstart"]:  # options of its own: kafka-group quickstart --help
        from spark_kafka_group.quickstart import main as quickstart

        return quickstart(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_OK
    # The source's rule, so a group created with default options is found with none here.
    args.store = (args.store or "").strip() or default_group_store()
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
