"""A group store that cannot commit with an atomic put-if-absent is refused when the group log is
opened, with a message naming the store and what to configure; nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_kafka_group.store import GroupLog, safety
from spark_kafka_group.store.safety import UnsafeGroupStoreError, check_storage_options

# An endpoint nothing listens on: a refusal must come before any request.
NOWHERE = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_ALLOW_HTTP": "true"}


@pytest.mark.parametrize(
    ("options", "named", "fix"),
    [
        ({"conditional_put": "disabled"}, "conditional_put=disabled", "Remove the option"),
        ({"AWS_CONDITIONAL_PUT": "Disabled"}, "conditional_put=Disabled", "If-None-Match"),
        ({"AWS_S3_ALLOW_UNSAFE_RENAME": "true"}, "AWS_S3_ALLOW_UNSAFE_RENAME=true", "Remove it"),
        ({"aws_s3_locking_provider": "dynamodb"}, "AWS_S3_LOCKING_PROVIDER=dynamodb", "ignore it"),
    ],
)
def test_options_that_break_put_if_absent_are_refused_at_open(
    options: dict[str, str], named: str, fix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(safety, "_stale_commit_accepted", _must_not_run)
    with pytest.raises(UnsafeGroupStoreError) as refused:
        GroupLog.open("s3://bucket/groups/g", storage_options={**NOWHERE, **options})
    message = str(refused.value)
    assert "s3://bucket/groups/g" in message and named in message and fix in message


def test_the_environment_counts_on_s3_only() -> None:
    env = {"AWS_S3_ALLOW_UNSAFE_RENAME": "true", "AWS_S3_LOCKING_PROVIDER": "dynamodb"}
    with pytest.raises(UnsafeGroupStoreError, match="AWS_S3_ALLOW_UNSAFE_RENAME"):
        check_storage_options("s3a://bucket/g", {}, env)
    # Azure, GCS and local stores do not read these variables
    for uri in ("az://container/g", "abfss://c@account.dfs.core.windows.net/g", "gs://b/g", "/x"):
        check_storage_options(uri, {}, env)
    # safe values pass
    check_storage_options(
        "s3://bucket/g", {"conditional_put": "etag", "AWS_S3_ALLOW_UNSAFE_RENAME": "false"}, {}
    )


def test_a_store_that_lets_a_stale_commit_through_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The probe's verdict (on a real server see tests/integration/test_object_stores.py):
    a store that accepted the stale commit is refused, naming it and what to use instead."""
    deleted: list[str] = []
    monkeypatch.setattr(safety, "_stale_commit_accepted", lambda probe, options: True)
    monkeypatch.setattr(safety, "_delete", lambda probe, options: deleted.append(probe))
    with pytest.raises(UnsafeGroupStoreError) as refused:
        GroupLog.open("s3://weak-store/groups/g", storage_options=NOWHERE)
    message = str(refused.value)
    assert "s3://weak-store/groups/g" in message
    assert "If-None-Match" in message and "conditional writes" in message
    assert len(deleted) == 1 and deleted[0].startswith("s3://weak-store/groups/g/.skg-probe-")


def test_local_stores_are_not_probed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(safety, "_stale_commit_accepted", _must_not_run)
    GroupLog.open(str(tmp_path / "g"))


def _must_not_run(probe: str, options: dict[str, str]) -> bool:
    raise AssertionError(f"the store was probed: {probe}")
