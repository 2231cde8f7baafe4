"""librdkafka's own mock Kafka cluster (``rdkafka_mock.h``), driven through ctypes from the
librdkafka that confluent-kafka loads: Kafka's wire protocol on loopback, whose answers a test
scripts (``push_errors``: the next requests of an API are answered with these errors).

It answers one request with exactly the error a test needs, every time, which a real broker
only does at the moment its group coordinator moves. Used by
tests/integration/test_group_offsets_coordinator_moves.py, which runs this module in a
subprocess (``python -m tests.librdkafka_mock admin-read | product-read``): the subprocess may
die of the librdkafka bug it reproduces.

* ``admin-read``: the AdminClient's ``list_consumer_group_offsets`` gets an OffsetFetch
  answered NOT_COORDINATOR (a group coordinator that moved). With librdkafka's bug the process
  dies of SIGSEGV; without it, it prints the error and exits 0.
* ``product-read``: kafka-group's reads and commits (``kafka_group_offsets``,
  ``commit_to_kafka_group``) get the same answers; prints a JSON line of what they returned.
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import sys
from typing import Any

import confluent_kafka

#: Kafka API keys.
OFFSET_COMMIT, OFFSET_FETCH = 8, 9


def _librdkafka() -> ctypes.CDLL:
    """The librdkafka confluent-kafka runs on: its wheel's own copy, or the system's when
    confluent-kafka was built against it."""
    package = os.path.dirname(confluent_kafka.__file__)
    bundled = glob.glob(os.path.join(package, os.pardir, "confluent_kafka.libs", "librdkafka*"))
    lib = ctypes.CDLL(bundled[0] if bundled else "librdkafka.so.1")
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_conf_set.argtypes = [
        ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t,
    ]  # fmt: skip
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_topic_create.argtypes = [
        ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
    ]  # fmt: skip
    lib.rd_kafka_mock_push_request_errors_array.argtypes = [
        ctypes.c_void_p, ctypes.c_int16, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int),
    ]  # fmt: skip
    lib.rd_kafka_mock_start_request_tracking.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_get_requests.restype = ctypes.POINTER(ctypes.c_void_p)
    lib.rd_kafka_mock_get_requests.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    lib.rd_kafka_mock_request_api_key.restype = ctypes.c_int16
    lib.rd_kafka_mock_request_api_key.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_request_destroy_array.argtypes = [
        ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
    ]  # fmt: skip
    return lib


class MockKafkaCluster:
    """A mock cluster of ``brokers`` brokers, hosted by a librdkafka handle of its own."""

    def __init__(self, brokers: int = 3) -> None:
        self._lib = lib = _librdkafka()
        conf = lib.rd_kafka_conf_new()
        errstr = ctypes.create_string_buffer(512)
        # The hosting handle talks to no cluster: silence its "no bootstrap.servers" warning.
        lib.rd_kafka_conf_set(conf, b"log_level", b"0", errstr, len(errstr))
        self._host = lib.rd_kafka_new(1, conf, errstr, len(errstr))  # 1: a producer handle
        if not self._host:
            raise RuntimeError(f"rd_kafka_new failed: {errstr.value.decode()}")
        self._cluster = lib.rd_kafka_mock_cluster_new(self._host, brokers)
        self.bootstrap_servers = lib.rd_kafka_mock_cluster_bootstraps(self._cluster).decode()
        lib.rd_kafka_mock_start_request_tracking(self._cluster)

    def create_topic(self, topic: str, partitions: int, replication: int = 3) -> None:
        self._lib.rd_kafka_mock_topic_create(self._cluster, topic.encode(), partitions, replication)

    def push_errors(self, api_key: int, *codes: int) -> None:
        """Answer the next ``len(codes)`` requests of ``api_key`` with these errors."""
        errors = (ctypes.c_int * len(codes))(*codes)
        self._lib.rd_kafka_mock_push_request_errors_array(
            self._cluster, api_key, len(codes), errors
        )

    def requests(self, api_key: int) -> int:
        """How many requests of ``api_key`` the cluster has answered."""
        count = ctypes.c_size_t()
        requests = self._lib.rd_kafka_mock_get_requests(self._cluster, ctypes.byref(count))
        try:
            return sum(
                1
                for n in range(count.value)
                if self._lib.rd_kafka_mock_request_api_key(requests[n]) == api_key
            )
        finally:
            self._lib.rd_kafka_mock_request_destroy_array(requests, count.value)

    def close(self) -> None:
        self._lib.rd_kafka_mock_cluster_destroy(self._cluster)
        self._lib.rd_kafka_destroy(self._host)


#: The answers of a group coordinator that moved, or is loading.
COORDINATOR_MOVING = (
    confluent_kafka.KafkaError.NOT_COORDINATOR,
    confluent_kafka.KafkaError.COORDINATOR_NOT_AVAILABLE,
    confluent_kafka.KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
)


def admin_read(cluster: MockKafkaCluster) -> dict[str, Any]:
    """The AdminClient's committed-offsets request, answered NOT_COORDINATOR."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    cluster.push_errors(OFFSET_FETCH, KafkaError.NOT_COORDINATOR)
    request = ConsumerGroupTopicPartitions("legacy", [TopicPartition("orders", 0)])
    future = admin.list_consumer_group_offsets([request], request_timeout=10)["legacy"]
    try:
        return {"answer": str(future.result(timeout=30).topic_partitions)}
    except Exception as exc:
        return {"error": str(exc)}


def product_read(cluster: MockKafkaCluster) -> dict[str, Any]:
    """kafka-group's commits and reads, each of whose first answers says the coordinator
    moved or is loading."""
    from spark_kafka_group.group.metadata import TopicPartition
    from spark_kafka_group.kafka.cluster import KafkaCluster
    from spark_kafka_group.kafka.consumer_group_offsets import (
        commit_to_kafka_group,
        kafka_group_offsets,
    )

    tp0, tp1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
    with KafkaCluster(cluster.bootstrap_servers) as kafka:
        cluster.push_errors(OFFSET_COMMIT, *COORDINATOR_MOVING)
        committed = commit_to_kafka_group(kafka, "legacy", {tp0: 5, tp1: 6})
        cluster.push_errors(OFFSET_FETCH, *COORDINATOR_MOVING)
        read_all = kafka_group_offsets(kafka, "legacy")
        cluster.push_errors(OFFSET_FETCH, *COORDINATOR_MOVING)
        read_one = kafka_group_offsets(kafka, "legacy", [tp1])
    return {
        "committed": {str(tp): o for tp, o in committed.items()},
        "read_all": {str(tp): o for tp, o in read_all.items()},
        "read_one": {str(tp): o for tp, o in read_one.items()},
        "offset_commits": cluster.requests(OFFSET_COMMIT),
        "offset_fetches": cluster.requests(OFFSET_FETCH),
    }


def main(argv: list[str]) -> int:
    (mode,) = argv
    cluster = MockKafkaCluster()
    cluster.create_topic("orders", 2)
    result = {"admin-read": admin_read, "product-read": product_read}[mode](cluster)
    print(json.dumps(result), flush=True)
    cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
