"""Into Delta: ``ExactlyOnceDeltaWriter`` against Spark's Delta sink, throughput and takeover.

Run it in the pyspark of jvm/pom.xml's delta-spark jar (``.venv-maven-spark``, which
scripts/setup creates; the jars come from ``.jvm/delta-spark``):

    .venv-maven-spark/bin/python -m benchmarks.bench_delta_sink
    .venv-maven-spark/bin/python -m benchmarks.bench_delta_sink --only takeover --rounds 3

By default the run starts a single-node Apache Kafka (KRaft) from the jars scripts/setup
fetched; ``--bootstrap-servers`` uses an existing cluster. Every ``format("kafka-group")``
query writes the source's key, value, topic, partition, offset and timestamp columns into a
fresh Delta table on local disk, by one of four sinks:

- ``writer``: ``foreachBatch(ExactlyOnceDeltaWriter(table, group=...))`` (delta-rs; exactly
  once across the group);
- ``delta``: Spark's Delta sink, ``writeStream.format("delta")`` (delta-spark);
- ``delta-table``: the same with the source's ``deltaSinkTable`` option naming the table (a
  new owner starts past what the old owner's query landed; exactly once across the group);
- ``append``: ``foreachBatch`` appending each batch's Arrow table with delta-rs
  (``write_deltalake``), no offsets recorded: the writer's transfer without its rules.

**Throughput.** A topic of ``--partitions`` partitions is filled with ``--records`` records
(``--value-bytes`` values), then read by one query per sink in a ``local[2]`` session, batches
of ``--batch-records`` (``maxOffsetsPerTrigger``), back to back. The steady state leaves out the
first batch with rows (the member's join, the table's creation, the first Python workers):
rows over the trigger time of the later batches, from the query progress. Each sink runs
``--rounds`` times, interleaved; the best round counts (the broker shares the cores).

**Takeover.** Two members of one group write one table with the same sink while a producer
writes one record to every partition every ``--produce-interval-ms``: a survivor in this
session and a victim, a process of its own (this module with ``--victim``). Once both write,
the victim's whole process group is killed (SIGKILL) and the figure is the time from the kill
to the end of the survivor's first batch with records of the victim's partitions (its Delta
commit done), from the survivor's progress; and the time from the kill to that batch's
planning (the source's ``latestOffset`` returned: the new owner's start decided, without the
sink's write, which takes seconds on Spark's Delta sink and varies most). Session timeout 6 s,
heartbeat 0.5 s, trigger ``--trigger-ms``; ``--rounds`` rounds per sink, the medians count.

The last line is ``key=value`` pairs (a sink's ``-`` written ``_``): ``<sink>_rps``
(throughput), ``<sink>_takeover_s`` and ``<sink>_takeover_planned_s`` (medians),
``writer_vs_delta`` (writer / delta throughput), ``takeover_writer_minus_delta_s``,
``planned_writer_minus_delta_s``, and the same three of ``delta_table`` (what
``deltaSinkTable`` costs Spark's Delta sink).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from benchmarks.bench_throughput import prefill
from benchmarks.harness import (
    FAST_MEMBER_OPTIONS,
    add_broker_argument,
    bootstrap_or_kafka,
    fresh_topic,
    print_result,
    spark_session,
)
from spark_kafka_group.testing.production import SteadyProducer
from spark_kafka_group.testing.waiting import wait_until

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SINKS = ("writer", "delta", "delta-table", "append")
COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")
#: Delta's SQL extension and catalog (as conf/spark-defaults.conf sets them).
DELTA_SQL_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
VICTIM_LANDED = "VICTIM-LANDED"


# ---------------------------------------------------------------------------- figures


def progress_dicts(query: Any) -> list[dict[str, Any]]:
    """The query's recent progress as plain dicts."""
    return [p if isinstance(p, dict) else json.loads(p.json) for p in query.recentProgress]


def steady_rate(progress: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Rows per second of the batches with rows after the first one (start-up), over their
    trigger time; ``startup_s`` is the first data batch's trigger time (with every empty
    trigger before it)."""
    rows = 0
    seconds = 0.0
    startup = 0.0
    seen_data = False
    for p in progress:
        took = p["durationMs"].get("triggerExecution", 0) / 1000
        if not seen_data:
            startup += took
            seen_data = p["numInputRows"] > 0
            continue
        if p["numInputRows"] > 0:
            rows += p["numInputRows"]
            seconds += took
    return {
        "rps": rows / seconds if seconds else 0.0,
        "rows": float(rows),
        "seconds": seconds,
        "startup_s": startup,
    }


def _as_dict(offset: Any) -> dict[str, Any]:
    """A source offset of the progress as a dict (JSON text or already parsed; {} for none)."""
    if isinstance(offset, str):
        offset = json.loads(offset)
    return dict(offset) if isinstance(offset, dict) else {}


def partitions_read(progress: Mapping[str, Any]) -> set[int]:
    """The partitions a kafka-group batch read records of (its end offset past where it
    began: the previous end, or the start the offset carries for a partition new in it)."""
    (source,) = progress["sources"]
    start, end = _as_dict(source.get("startOffset")), _as_dict(source.get("endOffset"))
    read = set()
    for topic, ends in (end.get("offsets") or {}).items():
        begun = {
            **((end.get("starts") or {}).get(topic) or {}),
            **((start.get("offsets") or {}).get(topic) or {}),
        }
        for partition, offset in (ends or {}).items():
            if partition in begun and offset > begun[partition]:
                read.add(int(partition))
    return read


def _into_batch(progress: Mapping[str, Any], phase: str) -> float:
    """The batch's start plus its ``phase`` duration (Spark's ``durationMs``): epoch seconds."""
    from datetime import datetime

    began = datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
    return began + progress["durationMs"].get(phase, 0) / 1000


def batch_end(progress: Mapping[str, Any]) -> float:
    """When the batch ended (its sink done, its commit log written): epoch seconds."""
    return _into_batch(progress, "triggerExecution")


def batch_planned(progress: Mapping[str, Any]) -> float:
    """When the batch's end offsets were decided (the source's ``latestOffset`` returned, where
    a new owner's start is found, ``deltaSinkTable``'s look at the table included): epoch
    seconds."""
    return _into_batch(progress, "latestOffset")


def first_batch(
    progress: Iterable[Mapping[str, Any]], partitions: set[int], after: float
) -> Mapping[str, Any] | None:
    """The first batch ended after ``after`` that read one of ``partitions``."""
    for p in progress:
        if batch_end(p) > after and p["numInputRows"] and partitions_read(p) & partitions:
            return p
    return None


def first_landing(
    progress: Iterable[Mapping[str, Any]], partitions: set[int], after: float
) -> float | None:
    """The end of the first batch ended after ``after`` that read one of ``partitions``."""
    batch = first_batch(progress, partitions, after)
    return None if batch is None else batch_end(batch)


def value_within(find: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """The first value ``find`` returns that is not None, polled; AssertionError after
    ``timeout_s``."""
    found: list[Any] = [None]

    def ready() -> bool:
        found[0] = find()
        return found[0] is not None

    wait_until(ready, timeout_s, what, poll_s=0.1)
    return found[0]


# ---------------------------------------------------------------------------- sinks


def delta_conf() -> dict[str, str]:
    """delta-spark's jars from ``.jvm/delta-spark`` on ``spark.jars``, with Delta's SQL set-up."""
    from spark_kafka_group.testing.kafka_broker import jvm_parts_dir

    jars = sorted(str(j) for j in jvm_parts_dir("delta-spark").glob("*.jar"))
    if not jars:
        raise SystemExit(
            f"No delta-spark jars in {jvm_parts_dir('delta-spark')}: run scripts/setup, and this "
            "benchmark with .venv-maven-spark/bin/python (the Spark line of those jars)"
        )
    return {"spark.jars": ",".join(jars), **DELTA_SQL_CONF}


def start_query(
    spark: Any,
    sink: str,
    options: Mapping[str, str],
    table: str,
    checkpoint: str,
    *,
    trigger_ms: int,
    tag: str | None = None,
) -> Any:
    """A kafka-group query writing ``table`` through ``sink``; ``tag`` adds a ``writer``
    column (the member's name)."""
    from pyspark.sql import functions as F

    reader = spark.readStream.format("kafka-group")
    for key, value in options.items():
        reader = reader.option(key, value)
    frame = reader.load().select(*COLUMNS)
    if tag is not None:
        frame = frame.withColumn("writer", F.lit(tag))
    writer = frame.writeStream.option("checkpointLocation", checkpoint).trigger(
        processingTime=f"{trigger_ms} milliseconds"
    )
    if sink in ("delta", "delta-table"):
        return writer.format("delta").start(table)
    return writer.foreachBatch(batch_function(sink, table, options["groupId"])).start()


def batch_function(sink: str, table: str, group: str) -> Callable[[Any, int], None]:
    if sink == "writer":
        from spark_kafka_group import ExactlyOnceDeltaWriter

        return ExactlyOnceDeltaWriter(table, group=group)
    if sink != "append":
        raise ValueError(f"sink {sink!r}: one of {', '.join(SINKS)}")
    from deltalake import write_deltalake

    def append(frame: Any, batch_id: int) -> None:
        rows = frame.toArrow()
        if rows.num_rows:
            write_deltalake(table, rows, mode="append")

    return append


def source_options(
    servers: str, topic: str, group: str, store: str, *, sink: str, table: str
) -> dict[str, str]:
    """The source's options for a query writing ``table`` through ``sink``."""
    return {
        "kafka.bootstrap.servers": servers,
        "subscribe": topic,
        "groupId": group,
        "groupStore": store,
        "startingOffsets": "earliest",
        "assignmentStrategy": "cooperative-sticky",
        **FAST_MEMBER_OPTIONS,
        **({"deltaSinkTable": table} if sink == "delta-table" else {}),
    }


def key(sink: str) -> str:
    """The sink's name in the figures' keys."""
    return sink.replace("-", "_")


# ---------------------------------------------------------------------------- throughput


def throughput_round(
    spark: Any, sink: str, servers: str, topic: str, total: int, work: str, batch_records: int
) -> dict[str, float]:
    name = f"{sink}-{uuid.uuid4().hex[:6]}"
    table = os.path.join(work, f"table-{name}")
    options = {
        **source_options(
            servers, topic, f"bench-delta-{name}", os.path.join(work, "groups"),
            sink=sink, table=table,
        ),
        "maxOffsetsPerTrigger": str(batch_records),
    }  # fmt: skip
    query = start_query(
        spark, sink, options, table, os.path.join(work, f"checkpoint-{name}"), trigger_ms=0
    )
    try:
        wait_until(
            lambda: (
                sum(p["numInputRows"] for p in progress_dicts(query)) >= total or not query.isActive
            ),
            600,
            f"{sink}: {total} records read",
        )
    finally:
        query.stop()
    if query.exception() is not None:
        raise RuntimeError(f"{sink}: the query failed: {query.exception()}")
    return steady_rate(progress_dicts(query))


# ---------------------------------------------------------------------------- takeover


def victim_main(args: argparse.Namespace) -> int:
    """The victim member: writes the table with ``--sink`` until it is killed."""
    spark = spark_session("bench_delta_sink victim", master="local[1]", conf=delta_conf())
    query = start_query(
        spark, args.sink, json.loads(args.victim), args.table, args.checkpoint,
        trigger_ms=args.trigger_ms, tag="victim",
    )  # fmt: skip
    while query.isActive:
        if any(p["numInputRows"] for p in progress_dicts(query)):
            print(VICTIM_LANDED, flush=True)
            break
        time.sleep(0.2)
    query.awaitTermination()
    return 1


def takeover_round(
    spark: Any, sink: str, servers: str, topic: str, partitions: int, work: str, trigger_ms: int
) -> tuple[float, float]:
    """Seconds from the victim's kill to the survivor's first landing of its partitions, and to
    the planning of that batch (its sink's write left out)."""
    name = f"{sink}-{uuid.uuid4().hex[:6]}"
    table = os.path.join(work, f"takeover-{name}")
    options = source_options(
        servers, topic, f"bench-takeover-{name}", os.path.join(work, "groups"),
        sink=sink, table=table,
    ) | {"startingOffsets": "latest"}  # fmt: skip
    victim = subprocess.Popen(
        [
            sys.executable, "-m", "benchmarks.bench_delta_sink", "--sink", sink,
            "--victim", json.dumps(options), "--table", table,
            "--checkpoint", os.path.join(work, f"checkpoint-victim-{name}"),
            "--trigger-ms", str(trigger_ms),
        ],
        cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO), stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True, start_new_session=True,
    )  # fmt: skip
    survivor = None
    try:
        assert victim.stdout is not None
        for line in victim.stdout:  # the victim's start-up, then its first landed batch
            if line.strip() == VICTIM_LANDED:
                break
        else:
            raise RuntimeError(f"{sink}: the victim ended before writing (exit {victim.wait()})")
        survivor = start_query(
            spark, sink, options, table, os.path.join(work, f"checkpoint-survivor-{name}"),
            trigger_ms=trigger_ms, tag="survivor",
        )  # fmt: skip
        mine = value_within(lambda: _settled_share(survivor, partitions), 120, "a stable share")
        victims = set(range(partitions)) - mine
        killed = time.time()
        os.killpg(victim.pid, signal.SIGKILL)
        batch = value_within(
            lambda: first_batch(progress_dicts(survivor), victims, killed),
            120,
            f"{sink}: the victim's partitions landing from the survivor",
        )
        return batch_end(batch) - killed, batch_planned(batch) - killed
    finally:
        if victim.poll() is None:
            os.killpg(victim.pid, signal.SIGKILL)
        victim.wait()
        if survivor is not None:
            survivor.stop()


def _settled_share(query: Any, partitions: int) -> set[int] | None:
    """The survivor's partitions once its last four data batches read the same proper, non-empty
    share of them (the victim has the rest)."""
    data = [p for p in progress_dicts(query) if p["numInputRows"]][-4:]
    shares = {frozenset(partitions_read(p)) for p in data}
    if len(data) < 4 or len(shares) != 1:
        return None
    (share,) = shares
    return set(share) if 0 < len(share) < partitions else None


# ---------------------------------------------------------------------------- main


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_broker_argument(parser)
    parser.add_argument("--only", choices=("throughput", "takeover"))
    parser.add_argument(
        "--sinks", default=",".join(SINKS), help="comma-separated, of " + ", ".join(SINKS)
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--batch-records", type=int, default=50_000)
    parser.add_argument("--trigger-ms", type=int, default=500)
    parser.add_argument("--produce-interval-ms", type=int, default=100)
    # the victim process (takeover)
    parser.add_argument("--victim", help=argparse.SUPPRESS)
    parser.add_argument("--sink", help=argparse.SUPPRESS)
    parser.add_argument("--table", help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.victim:
        return victim_main(args)
    sinks = [s for s in args.sinks.split(",") if s]
    unknown = set(sinks) - set(SINKS)
    if unknown:
        raise SystemExit(
            f"--sinks: unknown {', '.join(sorted(unknown))}; one of {', '.join(SINKS)}"
        )
    figures: dict[str, object] = {}
    with (
        tempfile.TemporaryDirectory(prefix="bench-delta-sink-") as work,
        bootstrap_or_kafka(args.bootstrap_servers) as servers,
    ):
        spark = spark_session(
            "bench_delta_sink", conf={"spark.driver.memory": "2g", **delta_conf()}
        )
        try:
            if args.only in (None, "throughput"):
                figures.update(throughput(spark, servers, work, sinks, args))
            if args.only in (None, "takeover"):
                figures.update(takeover(spark, servers, work, sinks, args))
        finally:
            spark.stop()
    figures.update(comparisons(figures))
    print_result(figures)
    return 0


def comparisons(figures: Mapping[str, object]) -> dict[str, str]:
    """Each sink against Spark's Delta sink, of what ``figures`` has: the throughput ratio and
    the takeover's difference."""
    compared = {}
    for sink in ("writer", "delta_table"):
        if f"{sink}_rps" in figures and "delta_rps" in figures:
            ratio = float(str(figures[f"{sink}_rps"])) / float(str(figures["delta_rps"]))
            compared[f"{sink}_vs_delta"] = f"{ratio:.3f}"
        for figure, name in (("takeover", "takeover"), ("takeover_planned", "planned")):
            if f"{sink}_{figure}_s" in figures and f"delta_{figure}_s" in figures:
                diff = float(str(figures[f"{sink}_{figure}_s"])) - float(
                    str(figures[f"delta_{figure}_s"])
                )
                compared[f"{name}_{sink}_minus_delta_s"] = f"{diff:.2f}"
    return compared


def throughput(
    spark: Any, servers: str, work: str, sinks: list[str], args: argparse.Namespace
) -> dict[str, object]:
    with fresh_topic(
        servers, "bench-delta", args.partitions, delete=bool(args.bootstrap_servers)
    ) as topic:
        total = prefill(servers, topic, args.records, args.partitions, args.value_bytes)
        print(f"{total} records of {args.value_bytes} bytes in {args.partitions} partitions; "
              f"batches of {args.batch_records}", flush=True)  # fmt: skip
        best: dict[str, dict[str, float]] = {}
        for round_ in range(1, args.rounds + 1):
            for sink in sinks:
                try:
                    rate = throughput_round(
                        spark, sink, servers, topic, total, work, args.batch_records
                    )
                except Exception as exc:  # the other sinks' figures still count
                    print(f"round {round_} {sink}: failed: {exc}", flush=True)
                    continue
                print(f"round {round_} {sink:11s} {rate['rps']:10,.0f} rows/s steady "
                      f"({rate['rows']:,.0f} rows in {rate['seconds']:.2f}s; start-up "
                      f"{rate['startup_s']:.2f}s)", flush=True)  # fmt: skip
                if rate["rps"] > best.get(sink, {"rps": -1.0})["rps"]:
                    best[sink] = rate
    return {f"{key(sink)}_rps": f"{rate['rps']:.0f}" for sink, rate in best.items()}


def takeover(
    spark: Any, servers: str, work: str, sinks: list[str], args: argparse.Namespace
) -> dict[str, object]:
    seconds: dict[str, list[float]] = {sink: [] for sink in sinks}
    planned: dict[str, list[float]] = {sink: [] for sink in sinks}
    with (
        fresh_topic(
            servers, "bench-takeover", args.partitions, delete=bool(args.bootstrap_servers)
        ) as topic,
        SteadyProducer(
            servers, topic, args.partitions, per_round=1,
            interval_s=args.produce_interval_ms / 1000,
        ),
    ):  # fmt: skip
        for round_ in range(1, args.rounds + 1):
            for sink in sinks:
                try:
                    took, plan = takeover_round(
                        spark, sink, servers, topic, args.partitions, work, args.trigger_ms
                    )
                except Exception as exc:  # the other sinks' figures still count
                    print(f"round {round_} {sink}: failed: {exc}", flush=True)
                    continue
                seconds[sink].append(took)
                planned[sink].append(plan)
                print(
                    f"round {round_} {sink:11s} takeover {took:.2f}s (planned at {plan:.2f}s)",
                    flush=True,
                )
    medians: dict[str, object] = {}
    for figure, rounds in (("takeover", seconds), ("takeover_planned", planned)):
        medians |= {
            f"{key(sink)}_{figure}_s": f"{statistics.median(v):.2f}"
            for sink, v in rounds.items()
            if v
        }
    return medians


if __name__ == "__main__":
    sys.exit(main())
