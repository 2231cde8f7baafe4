"""The progress listener travels (Spark Connect pickles listeners) without its open clients."""

from __future__ import annotations

import pickle

from spark_kafka_group.listener.progress import GroupProgressListener


def test_listener_pickles_with_its_options_only() -> None:
    listener = GroupProgressListener({"AWS_REGION": "eu-west-1"})
    listener._clients[("s3://bucket/groups", "g")] = object()  # type: ignore[assignment]
    copy = pickle.loads(pickle.dumps(listener))
    assert copy._storage_options == {"AWS_REGION": "eu-west-1"}
    assert copy._clients == {}
    with copy._lock:  # a working lock of its own
        pass
