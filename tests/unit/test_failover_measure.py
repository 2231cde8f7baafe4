"""The failure scenarios' and the failover benchmark's figure: seconds from a node's loss to the
first batch that read, past what had been read before, a partition the node led."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from spark_kafka_group.testing.failover import Loss, first_record_after, highest_read, loss


def test_the_loss_notes_how_far_each_led_partition_was_read() -> None:
    lost = loss("kill1(node2)", 100.0, [0, 3], [(0, 4), (0, 7), (1, 9), (3, 2)])
    assert lost.partitions == {0: 7, 3: 2}
    assert loss("stop(node1)", 100.0, [5], []).partitions == {5: -1}  # not read yet


def test_the_first_batch_past_the_loss_point_of_a_led_partition() -> None:
    lost = Loss("kill1(node2)", 100.0, {0: 7, 3: 2})
    batches = [
        (99.0, [(0, 8)]),  # before the loss
        (101.0, [(1, 50)]),  # a partition the node did not lead
        (102.0, [(0, 7), (3, 1)]),  # read again, not past the loss point
        (108.5, [(3, 3)]),
        (109.0, [(0, 8)]),
    ]
    assert first_record_after(lost, batches) == 8.5


def test_no_batch_or_no_led_partition_is_none() -> None:
    assert first_record_after(Loss("x", 100.0, {0: 1}), [(101.0, [(1, 5)])]) is None
    assert first_record_after(Loss("x", 100.0, {}), [(101.0, [(0, 5)])]) is None


records = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 50)), max_size=8)
batch_lists = st.lists(st.tuples(st.floats(0, 200), records), max_size=12)


@given(batch_lists, st.lists(st.integers(0, 5), unique=True), batch_lists, st.floats(0, 200))
def test_batches_before_the_loss_and_their_order_do_not_count(
    before: list, led: list[int], after: list, at: float
) -> None:
    read_before = [r for _, rows in before for r in rows]
    lost = loss("x", at, led, read_before)
    later = [(t, rows) for t, rows in after if t > at]
    earlier = [(t, rows) for t, rows in before if t <= at]
    figure = first_record_after(lost, later)
    assert first_record_after(lost, list(reversed(later)) + earlier) == figure
    if figure is not None:
        assert figure > 0
        highest = highest_read(read_before)
        assert any(
            t - at == figure and any(p in led and o > highest.get(p, -1) for p, o in rows)
            for t, rows in later
        )
