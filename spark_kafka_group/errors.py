"""The exceptions users see. Each names the thing, the value and the fix.

One class per kind of failure a caller may want to handle differently; all derive from
:class:`KafkaGroupError` so ``except KafkaGroupError`` catches everything of ours.
"""

from __future__ import annotations


class KafkaGroupError(Exception):
    """Base class of every error raised by spark-kafka-group."""


class OptionError(KafkaGroupError, ValueError):
    """A source option is missing, unknown, malformed or not allowed."""


class BrokerUnavailableError(KafkaGroupError):
    """The Kafka bootstrap servers did not answer in time."""


class TopicNotFoundError(KafkaGroupError):
    """A subscribed or assigned topic does not exist on the cluster."""


class NoOffsetForPartitionError(KafkaGroupError):
    """A partition has no committed offset and ``startingOffsets`` is ``none``."""


class OffsetOutOfRangeError(KafkaGroupError):
    """A position lies outside [log start offset, high watermark] and failOnDataLoss is true."""


class GroupStoreError(KafkaGroupError):
    """The group log could not be read or written."""


class IncompatibleGroupStoreError(GroupStoreError):
    """The group store path holds something that is not a group log this version can read."""


class GroupJoinTimeoutError(KafkaGroupError):
    """A member that must have an assignment before it reads (Trigger.AvailableNow) could not
    complete its join within the bound."""


class MemberFencedError(KafkaGroupError):
    """This member was fenced (expired, duplicate instance id or stale generation)."""


class CommitRejectedError(KafkaGroupError):
    """The group refused a commit from a query that is not one of its members (``assign``):
    as Kafka, it accepts those only while the group has no members."""


class AssignorLookupError(KafkaGroupError, ValueError):
    """An ``assignmentStrategy`` entry names nothing usable; the message says why and what to
    do."""


class InvalidGroupIdError(GroupStoreError, OptionError):
    """A group id that cannot name a directory under the group store."""


class GroupLogNotFoundError(GroupStoreError):
    """There is no group log at the path (and the caller asked not to create one)."""


class UnsafeGroupStoreError(GroupStoreError):
    """The group store cannot commit with an atomic put-if-absent; nothing was written."""


class GroupNotEmptyError(KafkaGroupError):
    """The operation needs a group without live members (as Kafka's offset reset does)."""


class KafkaGroupOffsetsError(KafkaGroupError):
    """Reading or writing a Kafka consumer group's committed offsets failed."""


class GroupProtocolBug(KafkaGroupError, RuntimeError):
    """A record cannot be applied to the group: the code that wrote it is wrong."""


class IllegalStateTransitionError(GroupProtocolBug):
    """A group state change that Kafka's ``ClassicGroupState`` does not allow."""


class DeltaSinkError(KafkaGroupError, ValueError):
    """ExactlyOnceDeltaWriter cannot write a batch: rows without the source's columns, a table
    with rows it did not write for the group, or commits that kept losing races."""


class PartitionMovedError(KafkaGroupError):
    """ExactlyOnceDeltaWriter found that another member wrote partitions this query wrote last:
    they were reassigned while the query was paused; nothing of the batch was written."""
