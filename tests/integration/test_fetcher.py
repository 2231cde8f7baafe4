"""Executor-side fetch against a real broker (the suite's Apache Kafka, or
$KAFKA_BOOTSTRAP_SERVERS)."""

from __future__ import annotations

import logging
import os
import pickle
import time
from collections.abc import Iterator

import pyarrow as pa
import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from spark_kafka_group.errors import BrokerUnavailableError, OffsetOutOfRangeError, OptionError
from spark_kafka_group.fetcher import (
    FetchSpec,
    arrow_schema,
    consumer_pool,
    fetch,
    spark_schema_ddl,
)
from spark_kafka_group.fetcher.pool import TOPIC_ID_TTL_S
from spark_kafka_group.group.metadata import TopicPartition as GroupTopicPartition
from spark_kafka_group.kafka import KafkaCluster
from spark_kafka_group.quickstart.sample_data import create_topic, produce
from spark_kafka_group.testing.waiting import wait_until

pytestmark = pytest.mark.broker

N = 200


@pytest.fixture(scope="module", autouse=True)
def _close_pooled_consumers() -> Iterator[None]:
    yield
    consumer_pool().clear()


def _values(i: int) -> bytes:
    return f"value-{i}".encode()


@pytest.fixture(scope="module")
def filled(bootstrap_servers: str) -> tuple[str, str, int]:
    """A 1-partition topic holding N keyed records (plus sample_data's end-of-batch record)."""
    topic = f"fetch-{time.monotonic_ns() % 10**9}"
    create_topic(bootstrap_servers, topic, 1)
    counts = produce(
        bootstrap_servers, topic, ((0, f"k{i}".encode(), _values(i)) for i in range(N))
    )
    return bootstrap_servers, topic, counts[0]


def _read(spec: FetchSpec) -> pa.Table:
    batches = list(fetch(spec))
    return pa.Table.from_batches(batches, schema=arrow_schema(spec.include_headers))


def _latest(bootstrap_servers: str, topic: str, partition: int = 0) -> int:
    with KafkaCluster(bootstrap_servers) as cluster:
        tp = GroupTopicPartition(topic, partition)
        return cluster.latest_offsets([tp])[tp]


def test_exact_range(filled: tuple[str, str, int]) -> None:
    servers, topic, _ = filled
    table = _read(FetchSpec(topic, 0, 37, 150, servers))
    assert table.column("offset").to_pylist() == list(range(37, 150))
    assert table.column("value").to_pylist() == [_values(i) for i in range(37, 150)]
    assert table.column("key").to_pylist() == [f"k{i}".encode() for i in range(37, 150)]
    assert set(table.column("topic").to_pylist()) == {topic}
    assert set(table.column("partition").to_pylist()) == {0}
    assert set(table.column("timestampType").to_pylist()) <= {0, 1}
    assert table.column("timestamp").null_count == 0


@pytest.mark.parametrize("include_headers", [False, True])
def test_schema_matches_declared(filled: tuple[str, str, int], include_headers: bool) -> None:
    servers, topic, _ = filled
    batches = list(fetch(FetchSpec(topic, 0, 0, 10, servers, include_headers=include_headers)))
    assert batches
    for batch in batches:
        assert batch.schema.equals(arrow_schema(include_headers))
    # ... and the schema pyspark derives from the declared DDL (what 4.2+ checks).
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    expected = to_arrow_schema(StructType(fields), timezone="UTC")
    assert arrow_schema(include_headers).equals(expected)
    ddl = spark_schema_ddl(include_headers)
    assert [part.split()[0] for part in ddl.split(", ")] == [f.name for f in fields]


def test_tombstones_and_headers(bootstrap_servers: str, topic_name: str) -> None:
    create_topic(bootstrap_servers, topic_name, 1)
    producer = Producer({"bootstrap.servers": bootstrap_servers, "log_level": 0})
    producer.produce(topic_name, key=b"k0", value=None, partition=0)  # tombstone
    producer.produce(topic_name, key=None, value=b"v1", partition=0)
    producer.produce(
        topic_name, key=b"k2", value=b"v2", partition=0, headers=[("a", b"1"), ("b", None)]
    )
    producer.produce(topic_name, key=b"k3", value=b"", partition=0, headers=[("c", b"")])
    assert producer.flush(10) == 0

    rows = _read(FetchSpec(topic_name, 0, 0, 4, bootstrap_servers, include_headers=True))
    assert rows.column("key").to_pylist() == [b"k0", None, b"k2", b"k3"]
    assert rows.column("value").to_pylist() == [None, b"v1", b"v2", b""]
    assert rows.column("headers").to_pylist() == [
        None,
        None,
        [{"key": "a", "value": b"1"}, {"key": "b", "value": None}],
        [{"key": "c", "value": b""}],
    ]
    plain = _read(FetchSpec(topic_name, 0, 0, 4, bootstrap_servers))
    assert "headers" not in plain.column_names
    assert plain.column("value").to_pylist() == [None, b"v1", b"v2", b""]


def test_spec_pickles(filled: tuple[str, str, int]) -> None:
    servers, topic, _ = filled
    spec = FetchSpec(topic, 0, 3, 9, servers, client_conf=FetchSpec.conf({"client.id": "x"}))
    clone = pickle.loads(pickle.dumps(spec))
    assert clone == spec
    assert _read(clone).column("offset").to_pylist() == list(range(3, 9))


def test_multiple_batches(filled: tuple[str, str, int]) -> None:
    servers, topic, _ = filled
    batches = list(fetch(FetchSpec(topic, 0, 5, 190, servers, max_batch_rows=40)))
    assert len(batches) >= 5
    assert all(0 < b.num_rows <= 40 for b in batches)
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    assert offsets == list(range(5, 190))


def test_range_at_end_of_log(filled: tuple[str, str, int]) -> None:
    servers, topic, count = filled
    end = _latest(servers, topic)
    assert end == count
    # Both return (no wait for records past the end): how soon is benchmarks/bench_fetch_edges.py's.
    table = _read(FetchSpec(topic, 0, end - 5, end, servers))
    assert table.column("offset").to_pylist() == list(range(end - 5, end))
    assert list(fetch(FetchSpec(topic, 0, end, end, servers))) == []


def test_transaction_markers(bootstrap_servers: str, topic_name: str) -> None:
    """Offsets 5 and 11 are commit markers: no hang at the end, no record lost at a gap."""
    create_topic(bootstrap_servers, topic_name, 1)
    producer = Producer(
        {"bootstrap.servers": bootstrap_servers, "transactional.id": topic_name, "log_level": 0}
    )
    producer.init_transactions(30)
    for txn in range(2):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic_name, value=_values(txn * 5 + i), partition=0)
        producer.commit_transaction(30)
    end = _latest(bootstrap_servers, topic_name)
    assert end == 12  # 2 x (five records and the commit marker)
    for conf in ((), (("isolation.level", "read_committed"),)):
        table = _read(FetchSpec(topic_name, 0, 0, end, bootstrap_servers, client_conf=conf))
        assert table.column("offset").to_pylist() == [0, 1, 2, 3, 4, 6, 7, 8, 9, 10]
        # A range ending at a marker (the consumer may return offset 6 too), the next one,
        # and the end.
        for start, stop, expected in ((0, 6, [0, 1, 2, 3, 4]), (6, 11, [6, 7, 8, 9, 10])):
            table = _read(
                FetchSpec(topic_name, 0, start, stop, bootstrap_servers, client_conf=conf)
            )
            assert table.column("offset").to_pylist() == expected
        assert (
            list(fetch(FetchSpec(topic_name, 0, 11, 12, bootstrap_servers, client_conf=conf))) == []
        )


def test_aborted_and_open_transactions_under_read_committed(
    bootstrap_servers: str, topic_name: str
) -> None:
    """Aborted records are skipped without a wait, a range of aborted records ends at once, and
    an open transaction's records come only after its commit."""
    create_topic(bootstrap_servers, topic_name, 1)
    writer, holder = (
        Producer(
            {
                "bootstrap.servers": bootstrap_servers,
                "transactional.id": f"{topic_name}-{name}",
                "log_level": 0,
            }
        )
        for name in ("writer", "holder")
    )
    for producer in (writer, holder):
        producer.init_transactions(30)

    def transaction(producer: Producer, first: int, end: str | None) -> None:
        producer.begin_transaction()
        for i in range(first, first + 3):
            producer.produce(topic_name, value=_values(i), partition=0)
        producer.flush(30)
        if end == "commit":
            producer.commit_transaction(30)
        elif end == "abort":
            producer.abort_transaction(30)

    # 0-2 committed, 3 marker; 4-6 aborted, 7 marker; 8-10 committed, 11 marker.
    transaction(writer, 0, "commit")
    transaction(writer, 4, "abort")
    transaction(writer, 8, "commit")
    committed = (("isolation.level", "read_committed"),)
    started = time.monotonic()
    table = _read(FetchSpec(topic_name, 0, 0, 12, bootstrap_servers, client_conf=committed))
    assert table.column("offset").to_pylist() == [0, 1, 2, 8, 9, 10]
    assert (
        list(fetch(FetchSpec(topic_name, 0, 4, 8, bootstrap_servers, client_conf=committed))) == []
    )
    assert time.monotonic() - started < 2.0, "the fetch waited at an aborted range"
    table = _read(FetchSpec(topic_name, 0, 0, 12, bootstrap_servers))
    assert table.column("offset").to_pylist() == [0, 1, 2, 4, 5, 6, 8, 9, 10]

    # An open transaction (12-14) holds the last stable offset at 12: records committed after
    # it (15-17, marker 18) are beyond it until it commits (marker 19).
    transaction(holder, 12, None)
    transaction(writer, 15, "commit")
    assert _latest_committed(bootstrap_servers, topic_name) == 12
    holder.commit_transaction(30)
    assert _latest_committed(bootstrap_servers, topic_name) == 20
    table = _read(FetchSpec(topic_name, 0, 12, 20, bootstrap_servers, client_conf=committed))
    assert table.column("offset").to_pylist() == [12, 13, 14, 15, 16, 17]
    assert table.column("value").to_pylist() == [_values(i) for i in range(12, 18)]


def _latest_committed(bootstrap_servers: str, topic: str) -> int:
    with KafkaCluster(bootstrap_servers, client_conf={"isolation.level": "read_committed"}) as c:
        tp = GroupTopicPartition(topic, 0)
        return c.latest_offsets([tp])[tp]


def test_out_of_range_beyond_high_watermark(
    filled: tuple[str, str, int], caplog: pytest.LogCaptureFixture
) -> None:
    """Requesting offsets beyond the high watermark is out of range (the partition was
    truncated, or the topic re-created); below the log start is the next test."""
    servers, topic, count = filled
    beyond = count + 50
    with pytest.raises(OffsetOutOfRangeError) as info:
        list(fetch(FetchSpec(topic, 0, beyond, beyond + 10, servers)))
    message = str(info.value)
    assert f"{topic}-0" in message and str(beyond) in message and str(count) in message
    assert "failOnDataLoss=false" in message

    with caplog.at_level(logging.WARNING, logger="spark_kafka_group.fetcher"):
        assert (
            list(fetch(FetchSpec(topic, 0, beyond, beyond + 10, servers, fail_on_data_loss=False)))
            == []
        )
    assert any("failOnDataLoss=false" in r.getMessage() for r in caplog.records)


def test_out_of_range_below_log_start(
    bootstrap_servers: str, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    create_topic(bootstrap_servers, topic_name, 1)
    produce(bootstrap_servers, topic_name, ((0, None, _values(i)) for i in range(50)))
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0})
    futures = admin.delete_records([TopicPartition(topic_name, 0, 20)], request_timeout=15)
    for future in futures.values():
        assert future.result(timeout=15).low_watermark == 20

    with pytest.raises(OffsetOutOfRangeError) as info:
        list(fetch(FetchSpec(topic_name, 0, 5, 30, bootstrap_servers)))
    assert "log start offset is 20" in str(info.value)
    with caplog.at_level(logging.WARNING, logger="spark_kafka_group.fetcher"):
        table = _read(FetchSpec(topic_name, 0, 5, 30, bootstrap_servers, fail_on_data_loss=False))
    assert table.column("offset").to_pylist() == list(range(20, 30))
    assert any("log start" in r.getMessage() for r in caplog.records)


def test_pool_reuses_consumer(filled: tuple[str, str, int]) -> None:
    servers, topic, _ = filled
    pool = consumer_pool()
    pool.clear()
    list(fetch(FetchSpec(topic, 0, 0, 50, servers)))
    [first] = pool.idle()
    created = pool.created
    # The next fetches (same partition, or another range) reuse it: re-assigned, and
    # unassigned while idle in the pool.
    for i, (start, stop) in enumerate(((50, 120), (120, 121), (10, 20), (20, 199)), start=2):
        table = _read(FetchSpec(topic, 0, start, stop, servers, max_batch_rows=30))
        assert table.column("offset").to_pylist() == list(range(start, stop))
        assert pool.idle() == [first]
        assert first.assigns == i and not first.assigned
    assert pool.created == created
    # A different client configuration gets its own consumer.
    list(fetch(FetchSpec(topic, 0, 0, 5, servers, client_conf=(("client.id", "other"),))))
    assert len(pool.idle()) == 2 and pool.created == created + 1
    pool.clear()
    assert pool.idle() == []


def test_pool_closes_a_consumer_that_knew_a_deleted_topic(
    bootstrap_servers: str, topic_name: str
) -> None:
    """A pooled consumer that fetched a topic is not handed the topic created again under the
    same name (a new topic id): on some brokers librdkafka crashes the process then."""
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        pytest.skip("deletes a topic: only on the suite's own broker")
    pool = consumer_pool()
    pool.clear()
    create_topic(bootstrap_servers, topic_name, 1)
    produce(bootstrap_servers, topic_name, [(0, None, b"old")])
    assert _read(FetchSpec(topic_name, 0, 0, 1, bootstrap_servers)).column("value").to_pylist() == [
        b"old"
    ]
    [old] = pool.idle()
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 0})
    admin.delete_topics([topic_name])[topic_name].result(15)
    wait_until(lambda: topic_name not in admin.list_topics(timeout=5).topics, 30, "the topic to go")
    create_topic(bootstrap_servers, topic_name, 1)
    produce(bootstrap_servers, topic_name, [(0, None, b"new")])
    time.sleep(TOPIC_ID_TTL_S)  # the pool asks the topic's id again
    created = pool.created
    assert _read(FetchSpec(topic_name, 0, 0, 1, bootstrap_servers)).column("value").to_pylist() == [
        b"new"
    ]
    assert pool.created == created + 1 and old not in pool.idle()
    # The new consumer is reused while the topic stays the same.
    [new] = pool.idle()
    _read(FetchSpec(topic_name, 0, 0, 1, bootstrap_servers))
    assert pool.idle() == [new] and pool.created == created + 1
    pool.clear()


def test_invalid_client_conf() -> None:
    with pytest.raises(OptionError, match=r"no\.such\.property"):
        list(
            fetch(FetchSpec("t", 0, 0, 10, "127.0.0.1:1", client_conf=(("no.such.property", "1"),)))
        )


def test_unreachable_broker_fails_with_clear_error() -> None:
    # It fails (no hang); how soon after fetch_timeout_s is benchmarks/bench_fetch_edges.py's.
    with pytest.raises(BrokerUnavailableError) as info:
        list(fetch(FetchSpec("t", 0, 0, 10, "127.0.0.1:1", fetch_timeout_s=3)))
    assert "127.0.0.1:1" in str(info.value) and "t-0" in str(info.value)
    assert consumer_pool().idle() == [] or all(
        e.key[0] != "127.0.0.1:1" for e in consumer_pool().idle()
    )


@pytest.fixture(scope="module")
def wide(bootstrap_servers: str) -> tuple[str, str, int]:
    """A 6-partition topic holding N records in each partition."""
    topic = f"fetch-wide-{time.monotonic_ns() % 10**9}"
    create_topic(bootstrap_servers, topic, 6)
    records = ((p, None, _values(i)) for i in range(N) for p in range(6))
    produce(bootstrap_servers, topic, records, producer_config={"linger.ms": 50})
    return bootstrap_servers, topic, 6


def _by_partition(batches: list[pa.RecordBatch]) -> dict[int, list[int]]:
    """Each partition's offsets in the order fetched (a batch holds several partitions)."""
    offsets: dict[int, list[int]] = {}
    for batch in batches:
        columns = batch.column("partition").to_pylist(), batch.column("offset").to_pylist()
        for partition, offset in zip(*columns, strict=True):
            offsets.setdefault(partition, []).append(offset)
    return offsets


def test_ranges_of_a_task_are_fetched_together_each_exactly(
    wide: tuple[str, str, int],
) -> None:
    """A task's ranges go to one consumer at once; each partition's records come back in
    offset order, exactly its range, though the partitions hold more (a range that is done
    leaves the assignment while the others are read)."""
    servers, topic, partitions = wide
    ranges = {p: (10 * p, 10 * p + 20 + 25 * p) for p in range(partitions)}
    pool = consumer_pool()
    pool.clear()
    specs = [FetchSpec(topic, p, a, b, servers, max_batch_rows=16) for p, (a, b) in ranges.items()]
    got = _by_partition(list(fetch(*specs)))
    assert got == {p: list(range(a, b)) for p, (a, b) in ranges.items()}
    [consumer] = pool.idle()
    assert consumer.assigns == 1 and not consumer.assigned
    # The same consumer reads on from where the ranges ended, and a single range.
    specs = [FetchSpec(topic, p, b, N, servers) for p, (_, b) in ranges.items()]
    batches = list(fetch(*specs))
    assert _by_partition(batches) == {p: list(range(b, N)) for p, (_, b) in ranges.items()}
    # A consume() of records of several partitions is one batch, not one per partition.
    assert any(len(set(b.column("partition").to_pylist())) > 1 for b in batches)
    assert _by_partition(list(fetch(FetchSpec(topic, 3, 0, N, servers)))) == {3: list(range(N))}
    assert pool.idle() == [consumer] and consumer.assigns == 3


def test_ranges_of_two_topics_in_one_fetch(
    wide: tuple[str, str, int], filled: tuple[str, str, int]
) -> None:
    servers, topic, _ = wide
    _, other, _ = filled
    batches = list(
        fetch(FetchSpec(topic, 1, 5, 50, servers), FetchSpec(other, 0, 100, 160, servers))
    )
    table = pa.Table.from_batches(batches, schema=arrow_schema(False))
    got = zip(table.column("topic").to_pylist(), table.column("offset").to_pylist(), strict=True)
    want = [(topic, o) for o in range(5, 50)] + [(other, o) for o in range(100, 160)]
    assert sorted(got) == sorted(want)


def test_a_range_out_of_range_among_others(
    wide: tuple[str, str, int], caplog: pytest.LogCaptureFixture
) -> None:
    """One range beyond its partition's end fails the fetch, naming that partition; with
    ``failOnDataLoss=false`` it is skipped with a warning and the other ranges are read."""
    servers, topic, _ = wide
    latest = _latest(servers, topic, 4)

    def specs(fail: bool) -> list[FetchSpec]:
        return [
            FetchSpec(topic, 2, 0, 30, servers, fail_on_data_loss=fail),
            FetchSpec(topic, 4, latest + 5, latest + 9, servers, fail_on_data_loss=fail),
            FetchSpec(topic, 5, 40, 90, servers, fail_on_data_loss=fail),
        ]

    with pytest.raises(OffsetOutOfRangeError) as info:
        list(fetch(*specs(True)))
    assert f"{topic}-4" in str(info.value) and str(latest + 5) in str(info.value)
    with caplog.at_level(logging.WARNING, logger="spark_kafka_group.fetcher"):
        got = _by_partition(list(fetch(*specs(False))))
    assert got == {2: list(range(0, 30)), 5: list(range(40, 90))}
    assert any(f"{topic}-4" in r.getMessage() for r in caplog.records)
