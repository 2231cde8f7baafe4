"""Executor-side fetch against a real broker (embedded Tansu, or $KAFKA_BOOTSTRAP_SERVERS)."""

from __future__ import annotations

import logging
import pickle
import time
from collections.abc import Iterator
from concurrent.futures import TimeoutError as FutureTimeoutError

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
from spark_kafka_group.group.metadata import TopicPartition as GroupTopicPartition
from spark_kafka_group.kafka import KafkaCluster
from spark_kafka_group.sample_data import create_topic, produce

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
    producer.flush(10)
    producer.produce(topic_name, key=b"k3", value=b"", partition=0, headers=[("c", b"")])
    producer.flush(10)  # last batch: one record (Tansu's high watermark, see docs/design.md)

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
    try:
        producer.init_transactions(10)
        for txn in range(2):
            producer.begin_transaction()
            for i in range(5):
                producer.produce(topic_name, value=_values(txn * 5 + i), partition=0)
            producer.commit_transaction(10)
    except Exception as exc:  # the broker may not support transactions
        pytest.skip(f"transactions not supported by this broker: {exc}")
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


def test_out_of_range_beyond_high_watermark(
    filled: tuple[str, str, int], caplog: pytest.LogCaptureFixture
) -> None:
    """Requesting offsets beyond the high watermark is out of range (works on any broker; the
    classic retention case, below the log start, needs DeleteRecords: next test)."""
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
    try:
        futures = admin.delete_records([TopicPartition(topic_name, 0, 20)], request_timeout=5)
        for future in futures.values():
            future.result(timeout=5)
    except (Exception, FutureTimeoutError) as exc:
        pytest.skip(f"broker does not support DeleteRecords (Tansu does not): {exc!r}")

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
        assert first.assigns == i and first.assigned is None
    assert pool.created == created
    # A different client configuration gets its own consumer.
    list(fetch(FetchSpec(topic, 0, 0, 5, servers, client_conf=(("client.id", "other"),))))
    assert len(pool.idle()) == 2 and pool.created == created + 1
    pool.clear()
    assert pool.idle() == []


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
