"""The group store's errors, and how a library error is shown inside ours."""

from __future__ import annotations

from spark_kafka_group.errors import GroupLogNotFoundError, GroupStoreError, InvalidGroupIdError

__all__ = ["AppendConflict", "GroupLogNotFoundError", "InvalidGroupIdError", "describe_error"]


class AppendConflict(GroupStoreError):
    """Another member committed version ``expected_version + 1`` first.

    Read what was written after ``expected_version``, fold it, decide again and retry.
    """

    def __init__(self, uri: str, expected_version: int, latest_version: int | None) -> None:
        self.uri = uri
        self.expected_version = expected_version
        self.latest_version = latest_version
        seen = "" if latest_version is None else f" (log is now at version {latest_version})"
        super().__init__(
            f"group log {uri}: version {expected_version + 1} was written by another member "
            f"first{seen}; read the records after version {expected_version}, fold them and "
            "retry the append"
        )


def describe_error(exc: BaseException) -> str:
    """The library error's type and first line, for our messages. They are raised ``from
    None``: users see one message naming the path, the cause and the fix, not delta-rs's
    traceback."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:500]
