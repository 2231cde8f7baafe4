"""The pure decisions of the exactly-once Delta writer (spark_kafka_group/sink/landed.py): which
rows of a batch to keep given what the table holds, which transactions to write, and when a
partition has moved to another writer."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from spark_kafka_group.group.metadata import TopicPartition
from spark_kafka_group.sink.landed import Span, app_id, decide, group_marker, moved_away

P0 = TopicPartition("events", 0)
P1 = TopicPartition("events", 1)


def test_a_partition_the_table_has_not_seen_is_written_whole() -> None:
    decision = decide({P0: Span(3, 10)}, {})
    assert decision.keep_from == {P0: 3}
    assert decision.versions == {P0: 10}
    assert decision.dropped == {}


def test_rows_below_the_landed_end_are_dropped_and_the_rest_kept() -> None:
    decision = decide({P0: Span(0, 10), P1: Span(0, 5)}, {P0: 4, P1: 0})
    assert decision.keep_from == {P0: 4, P1: 0}
    assert decision.versions == {P0: 10, P1: 5}
    assert decision.dropped == {P0: Span(0, 4)}


def test_a_partition_whose_rows_all_landed_gets_no_transaction() -> None:
    decision = decide({P0: Span(0, 10), P1: Span(2, 3)}, {P0: 10, P1: 7})
    assert decision.keep_from == {}
    assert decision.versions == {}
    assert decision.dropped == {P0: Span(0, 10), P1: Span(2, 3)}


def test_a_batch_starting_past_the_landed_end_is_kept_whole() -> None:
    """Kafka has no records between (compaction, transaction markers): nothing is dropped."""
    decision = decide({P0: Span(12, 20)}, {P0: 10})
    assert decision.keep_from == {P0: 12} and decision.versions == {P0: 20}
    assert decision.dropped == {}


def test_app_ids_name_the_group_topic_and_partition() -> None:
    assert app_id("ingest", P1) == "kafka-group/ingest/events/1"
    assert group_marker("ingest") == "kafka-group/ingest"
    assert app_id("a", P0) != app_id("b", P0)


def test_a_partition_is_moved_away_when_the_table_holds_another_end() -> None:
    assert moved_away({P0: 10, P1: 5}, {P0: 10, P1: 5}) == {}
    assert moved_away({P0: 10, P1: 5}, {P0: 10, P1: 9}) == {P1: (5, 9)}
    assert moved_away({P0: 10}, {}) == {P0: (10, None)}


# Several writers, each reading a partition from any offset at or below what the table holds
# (a new owner starts at the group's committed offset, an old one at its own position), land
# batches in any order: the table holds every offset once, in one contiguous range.
batches = st.lists(
    st.tuples(st.integers(0, 60), st.integers(1, 15)),  # (how far below the landed end, size)
    min_size=1,
    max_size=30,
)


@given(batches)
def test_any_interleaving_of_writers_lands_every_offset_once(plan: list[tuple[int, int]]) -> None:
    table: list[int] = []
    landed: dict[TopicPartition, int] = {}
    for behind, size in plan:
        end = landed.get(P0, 0)
        first = max(0, end - behind)
        decision = decide({P0: Span(first, first + size)}, landed)
        kept = range(decision.keep_from.get(P0, first + size), first + size)
        if P0 in decision.versions:
            assert decision.versions[P0] == first + size > end
            landed = {P0: decision.versions[P0]}
        else:
            assert len(kept) == 0
        dropped = decision.dropped.get(P0)
        assert len(kept) + (dropped.end - dropped.first if dropped else 0) == size
        table.extend(kept)
    assert sorted(table) == list(range(landed.get(P0, 0)))
    assert landed[P0] >= plan[0][1]  # the first batch starts at 0 and lands whole


@given(
    st.dictionaries(st.integers(0, 5), st.tuples(st.integers(0, 100), st.integers(1, 20))),
    st.dictionaries(st.integers(0, 5), st.integers(0, 150)),
)
def test_kept_and_dropped_cover_the_batch_and_versions_only_grow(
    raw_spans: dict[int, tuple[int, int]], raw_landed: dict[int, int]
) -> None:
    spans = {TopicPartition("t", p): Span(first, first + n) for p, (first, n) in raw_spans.items()}
    landed = {TopicPartition("t", p): end for p, end in raw_landed.items()}
    decision = decide(spans, landed)
    for tp, span in spans.items():
        keep_from = decision.keep_from.get(tp, span.end)
        dropped = decision.dropped.get(tp)
        assert (dropped.first if dropped else keep_from) == span.first
        assert (dropped.end if dropped else keep_from) == keep_from
        if tp in decision.versions:
            assert decision.versions[tp] == span.end > landed.get(tp, -1)
        else:
            assert keep_from == span.end  # nothing kept, nothing recorded
    assert set(decision.versions) == set(decision.keep_from)
