"""``kafka-group exporter``: serve groups' lag to Prometheus."""

from __future__ import annotations

import argparse

from spark_kafka_group.ops.cli.arguments import (
    EXIT_OK,
    Subparsers,
    bootstrap,
    client_conf,
    kafka_arguments,
    storage_options,
    store_arguments,
)


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "exporter",
        help="serve groups' lag to Prometheus (kafka_exporter's and kafka-lag-exporter's names)",
        description="Serve the lag (in records and seconds), offsets, members and partition "
        "status of groups at /metrics, under kafka_exporter's and kafka-lag-exporter's metric "
        "names and labels. Scrapes within --cache-seconds of a read are answered from it.",
    )
    store_arguments(p, group="none", json_output=False)
    kafka_arguments(p, needed=True)
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
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from spark_kafka_group.ops.exporter import GroupLagCollector, serve

    collector = GroupLagCollector(
        args.store,
        groups=args.group,
        bootstrap_servers=bootstrap(args),
        client_conf=client_conf(args),
        storage_options=storage_options(args),
        cache_s=args.cache_seconds,
        stall_after_s=args.stall_after_seconds,
        cluster_name=args.cluster_name,
    )
    host, port, thread = serve(collector, args.port, args.addr)
    shown = ", ".join(args.group) if args.group else f"every group in {args.store}"
    print(f"Serving the lag of {shown} on http://{host}:{port}/metrics", flush=True)
    thread.join()  # until interrupted (exit 130) or killed
    return EXIT_OK
