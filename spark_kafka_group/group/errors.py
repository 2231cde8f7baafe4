"""Protocol outcomes and internal failures of the group protocol.

Handlers never raise for a request the protocol can refuse: they answer with one of Kafka's
error names (:class:`GroupError`), exactly as a broker's group coordinator would. Only a bug
raises: a record that cannot legally be applied (:class:`GroupProtocolBug`).
"""

from __future__ import annotations

from enum import Enum

# The bug errors are defined with every other error class users can see (errors.py).
from spark_kafka_group.errors import GroupProtocolBug, IllegalStateTransitionError


class GroupError(str, Enum):
    """Kafka's error names, as used in the responses of the group APIs."""

    NONE = "NONE"
    UNKNOWN_MEMBER_ID = "UNKNOWN_MEMBER_ID"
    ILLEGAL_GENERATION = "ILLEGAL_GENERATION"
    REBALANCE_IN_PROGRESS = "REBALANCE_IN_PROGRESS"
    INCONSISTENT_GROUP_PROTOCOL = "INCONSISTENT_GROUP_PROTOCOL"
    FENCED_INSTANCE_ID = "FENCED_INSTANCE_ID"
    INVALID_SESSION_TIMEOUT = "INVALID_SESSION_TIMEOUT"
    COORDINATOR_NOT_AVAILABLE = "COORDINATOR_NOT_AVAILABLE"
    GROUP_MAX_SIZE_REACHED = "GROUP_MAX_SIZE_REACHED"
    NON_EMPTY_GROUP = "NON_EMPTY_GROUP"
    INVALID_REQUEST = "INVALID_REQUEST"
    OFFSET_METADATA_TOO_LARGE = "OFFSET_METADATA_TOO_LARGE"
    GROUP_ID_NOT_FOUND = "GROUP_ID_NOT_FOUND"
    GROUP_SUBSCRIBED_TO_TOPIC = "GROUP_SUBSCRIBED_TO_TOPIC"

    def __str__(self) -> str:
        return self.value


__all__ = ["GroupError", "GroupProtocolBug", "IllegalStateTransitionError"]
