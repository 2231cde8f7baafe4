"""Refuse a group store on which delta-rs cannot commit with an atomic put-if-absent.

Every append to a group log is a compare-and-swap on the Delta version: the commit file of
version ``N+1`` must be created only if it does not exist yet. delta-rs (>= 1.6.0, the lowest
version pinned in pyproject) writes every commit on S3, S3-compatible stores, ADLS / Azure Blob
and GCS as a conditional put (``If-None-Match: *``, or the store's create-only precondition); on a
local disk as a rename that fails if the target exists. Two things can still break it:

- storage options that switch it off or ask for something delta-rs no longer does
  (:func:`check_storage_options`): refused by name before anything is written;
- a store that ignores the precondition (an old or partial S3 implementation): found by
  :func:`probe_put_if_absent`, which commits version 1 of a scratch table twice, the second
  time from a stale snapshot, and expects the second commit to be refused.

Nothing falls back to an unsafe write: a store that fails either check is refused with a
message naming it and what to configure.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Mapping

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError

from spark_kafka_group.errors import GroupStoreError, UnsafeGroupStoreError

log = logging.getLogger(__name__)

#: Prefix of scratch objects members write next to a group log (ignored by every reader).
PROBE_PREFIX = ".skg-probe-"

_S3_SCHEMES = frozenset({"s3", "s3a"})
_TRUE = frozenset({"true", "1", "yes", "on"})


def _scheme(uri: str) -> str:
    return uri.split("://", 1)[0].lower() if "://" in uri else ""


def _lookup(options: Mapping[str, str], env: Mapping[str, str], *names: str) -> str | None:
    """The value of the first of ``names`` set in ``options`` (any case), else in ``env``."""
    lowered = {k.lower(): v for k, v in options.items()}
    for name in names:
        if name.lower() in lowered:
            return str(lowered[name.lower()])
    for name in names:
        if name.upper() in env:
            return env[name.upper()]
    return None


def check_storage_options(
    uri: str, storage_options: Mapping[str, str] | None, env: Mapping[str, str] | None = None
) -> None:
    """Refuse options (or, on S3, environment variables) that make commits unsafe or fail."""
    options = dict(storage_options or {})
    env = os.environ if env is None else env
    scheme = _scheme(uri)
    if scheme not in _S3_SCHEMES:
        return
    put = _lookup(options, env, "conditional_put", "aws_conditional_put")
    if put is not None and put.strip().lower() == "disabled":
        raise UnsafeGroupStoreError(
            f"group store {uri}: conditional_put={put} turns off the conditional put every "
            "group-log commit needs (delta-rs then refuses to commit). Remove the option: "
            "S3 and S3-compatible stores (R2, MinIO, SeaweedFS) commit with If-None-Match by "
            "default"
        )
    unsafe = _lookup(options, env, "AWS_S3_ALLOW_UNSAFE_RENAME")
    if unsafe is not None and unsafe.strip().lower() in _TRUE:
        raise UnsafeGroupStoreError(
            f"group store {uri}: AWS_S3_ALLOW_UNSAFE_RENAME={unsafe} asks for commits without "
            "an atomic put-if-absent, so two members could both write the same log version. "
            "Remove it (from the groupStore.* options and the environment); use a store that "
            "honours If-None-Match conditional puts"
        )
    locking = _lookup(options, env, "AWS_S3_LOCKING_PROVIDER")
    if locking is not None and locking.strip():
        raise UnsafeGroupStoreError(
            f"group store {uri}: AWS_S3_LOCKING_PROVIDER={locking} is not supported: delta-rs "
            "1.6.1 and newer ignore it (they have no DynamoDB log store) and the group log "
            "relies on the store's conditional put alone. Remove the option (and "
            "DELTA_DYNAMO_TABLE_NAME) from the groupStore.* options and the environment; the "
            "store must honour If-None-Match"
        )


_probed: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
_probe_lock = threading.Lock()


def probe_put_if_absent(directory: str, storage_options: Mapping[str, str] | None) -> None:
    """Check once per process and store that ``directory``'s store refuses a stale commit.

    Writes a scratch Delta table ``<directory>/.skg-probe-<id>``: version 0, then version 1
    twice, the second time from a snapshot still at version 0 and without retries. A store
    that honours put-if-absent refuses the second; one that does not lets it overwrite the
    first, and the group log there would fork. The scratch table is deleted afterwards.
    Local paths are not probed (delta-rs commits there with an exclusive rename).
    """
    options = dict(storage_options or {})
    key = (directory.rstrip("/").rsplit("/", 1)[0], tuple(sorted(options.items())))
    with _probe_lock:
        if key in _probed:
            return
        probe = f"{directory.rstrip('/')}/{PROBE_PREFIX}{uuid.uuid4().hex[:12]}"
        try:
            accepted_twice = _stale_commit_accepted(probe, options)
        except (DeltaError, OSError) as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            raise GroupStoreError(
                f"cannot write to the group store {directory} ({type(exc).__name__}: "
                f"{first[:300]}); check the path, its permissions and the groupStore.* "
                "storage options"
            ) from None
        finally:
            _delete(probe, options)
        if accepted_twice:
            raise UnsafeGroupStoreError(
                f"group store {directory}: the store accepted two commits of the same Delta "
                "version (a stale commit overwrote the first), so it does not honour the "
                "conditional put (If-None-Match: *) that makes a group-log append atomic; two "
                "members could both win the same version. Use a store that supports "
                "conditional writes (AWS S3, R2, MinIO and SeaweedFS do; check the version of "
                "your S3-compatible server and any proxy in front of it), ADLS or GCS"
            )
        _probed.add(key)


def _stale_commit_accepted(probe: str, options: dict[str, str]) -> bool:
    data = pa.table({"probe": pa.array([0], pa.int32())})
    no_retry = CommitProperties(max_commit_retries=0)
    write_deltalake(probe, data, mode="error", storage_options=options or None)
    first = DeltaTable(probe, storage_options=options or None)
    stale = DeltaTable(probe, storage_options=options or None)
    write_deltalake(first, data, mode="append", commit_properties=no_retry)
    try:
        write_deltalake(stale, data, mode="append", commit_properties=no_retry)
    except CommitFailedError:
        return False
    return True


def _delete(probe: str, options: dict[str, str]) -> None:
    import pyarrow.fs as pafs
    from deltalake.fs import DeltaStorageHandler

    parent, name = probe.rsplit("/", 1)
    try:
        pafs.PyFileSystem(DeltaStorageHandler(parent, options)).delete_dir(name)
    except Exception as exc:  # a leftover probe is ignored by readers; never fail for it
        log.warning("could not delete the store probe %s: %s", probe, exc)
