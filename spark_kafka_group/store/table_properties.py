"""The group log's retention: how long Delta time travel reaches back (``groupLogRetention``).

Standard library only, so :mod:`spark_kafka_group.options` can check the option without
loading delta-rs. Records themselves are never deleted (the log is append-only and compaction
keeps every record with its ``log_version``); retention bounds only Delta's time travel
(``versionAsOf`` / ``timestampAsOf``), which needs the JSON commits and the files compaction
replaced.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: How long Delta time travel reaches back on a group log by default (the ``groupLogRetention``
#: option): JSON commits and compacted-away files are kept this long. It is also the shortest
#: retention allowed: a file is vacuumed only this long after the last snapshot that referenced
#: it, far longer than any read.
DEFAULT_LOG_RETENTION_MS = 3_600_000
_RETENTION_KEYS = ("delta.logRetentionDuration", "delta.deletedFileRetentionDuration")
_UNIT_SECONDS = {"days": 86_400, "hours": 3_600, "minutes": 60, "seconds": 1}
_INTERVAL_RE = re.compile(r"^interval (\d+) (days|hours|minutes|seconds)$")
#: Delta's deleted-file retention when a table does not set one.
DELTA_DEFAULT_FILE_RETENTION_MS = 7 * 86_400_000


def retention_properties(retention_ms: int) -> dict[str, str]:
    """The table properties that keep a group log's history for ``retention_ms``: its JSON
    commits (``delta.logRetentionDuration``) and the files compaction replaced
    (``delta.deletedFileRetentionDuration``); both are needed to time travel."""
    seconds = max(1, retention_ms // 1000)
    # In the largest whole unit, so the default reads as logs created before the option did.
    for unit, size in _UNIT_SECONDS.items():
        if seconds % size == 0:
            return dict.fromkeys(_RETENTION_KEYS, f"interval {seconds // size} {unit}")
    raise AssertionError("unreachable: every whole number of seconds is whole in seconds")


def retention_to_apply(configured: Mapping[str, str], wanted: Mapping[str, str]) -> dict[str, str]:
    """The retention properties of ``wanted`` that ``configured`` (the table's) lacks."""
    return {k: wanted[k] for k in _RETENTION_KEYS if k in wanted and configured.get(k) != wanted[k]}


def file_retention_ms(configured: Mapping[str, str]) -> int:
    """How long a table keeps the files compaction replaced (its
    ``delta.deletedFileRetentionDuration``, as :func:`retention_properties` writes it); Delta's
    default of a week when it is unset or written in another form."""
    match = _INTERVAL_RE.match(configured.get(_RETENTION_KEYS[1], "").strip().lower())
    if match is None:
        return DELTA_DEFAULT_FILE_RETENTION_MS
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)] * 1000
