"""What an executor fetches: a range of one partition, with everything the fetch needs (the
cluster, the client options, what to do on data loss). Built on the driver and pickled into a
Spark task (:class:`~spark_kafka_group.source.input_partition.KafkaInputPartition`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from spark_kafka_group.group.metadata import partition_name

#: Default rows per RecordBatch (and per ``consume()`` call).
DEFAULT_MAX_BATCH_ROWS = 20_000


@dataclass(frozen=True)
class FetchSpec:
    """One range of one partition to fetch; picklable, built on the driver.

    ``client_conf`` holds the user's ``kafka.*`` options (prefix stripped) as sorted pairs,
    see :meth:`conf`. ``poll_timeout_s`` bounds one ``consume()`` call; ``fetch_timeout_s``
    is how long the fetch may make no progress before it fails.
    """

    topic: str
    partition: int
    from_offset: int
    until_offset: int
    bootstrap_servers: str
    client_conf: tuple[tuple[str, str], ...] = ()
    include_headers: bool = False
    fail_on_data_loss: bool = True
    poll_timeout_s: float = 0.1
    fetch_timeout_s: float = 120.0
    max_batch_rows: int = DEFAULT_MAX_BATCH_ROWS

    @staticmethod
    def conf(options: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
        """Normalise a ``kafka.*`` mapping for :attr:`client_conf` (and the pool key)."""
        return tuple(sorted((str(k), str(v)) for k, v in options.items()))

    @property
    def partition_name(self) -> str:
        return partition_name(self.topic, self.partition)

    def describe(self) -> str:
        return f"{self.partition_name} [{self.from_offset}, {self.until_offset})"


#: Ranges named in full in a message about several; the rest are counted.
DESCRIBED_RANGES = 4


def describe_ranges(specs: Sequence[FetchSpec]) -> str:
    """``specs`` for a message: each range up to :data:`DESCRIBED_RANGES`, then a count."""
    named = ", ".join(s.describe() for s in specs[:DESCRIBED_RANGES])
    more = len(specs) - DESCRIBED_RANGES
    return named + (f" and {more} more range(s)" if more > 0 else "")
