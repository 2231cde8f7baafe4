"""Commits and reads a Kafka consumer group's offsets in a loop, as ``export-to-kafka``,
``import-from-kafka`` and ``commitToKafka`` do, while a test moves the group's coordinator
(tests/integration/test_group_offsets_coordinator_moves.py). A separate process, so that a
client library that crashes takes only it down, and the test sees the signal.

    python -m tests.group_offsets_loop SERVERS GROUP TOPIC PARTITIONS STOP_FILE

Round n commits offset n to every partition (``commit_to_kafka_group``), then reads all the
group's offsets and those of partition 0 (``kafka_group_offsets``). Each round prints a JSON
line: its number, its start on the monotonic clock, how long it took, and whether the reads
returned what was committed (if not, what each read returned; or the error). It stops when
STOP_FILE exists.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.kafka.cluster import KafkaCluster
from spark_kafka_group.kafka.consumer_group_offsets import (
    commit_to_kafka_group,
    kafka_group_offsets,
)


def main(argv: list[str]) -> int:
    servers, group, topic, partitions, stop_file = argv
    tps = [TopicPartition(topic, p) for p in range(int(partitions))]
    stop = Path(stop_file)
    round_number = 0
    with KafkaCluster(servers) as cluster:
        while not stop.exists():
            round_number += 1
            started = time.monotonic()
            line: dict[str, object] = {"round": round_number, "started": started}
            try:
                expected = {tp: round_number for tp in tps}
                commit_to_kafka_group(cluster, group, expected)
                read_all = kafka_group_offsets(cluster, group)
                read_one = kafka_group_offsets(cluster, group, tps[:1])
                line["correct"] = read_all == expected and read_one == {tps[0]: round_number}
                if not line["correct"]:
                    line["read_all"] = {str(tp): o for tp, o in read_all.items()}
                    line["read_one"] = {str(tp): o for tp, o in read_one.items()}
            except Exception as exc:
                line["error"] = f"{type(exc).__name__}: {exc}"
            line["seconds"] = round(time.monotonic() - started, 3)
            print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
