"""Kafka's reset scenarios that are pure text: ``--by-duration`` (Java's Duration.parse form)
and the CSV reset plan of ``--export`` / ``--from-file``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_kafka_group.errors import OptionError
from spark_kafka_group.group import TopicPartition
from spark_kafka_group.ops.reset import export_reset_plan, parse_duration_ms, parse_reset_plan


def test_durations() -> None:
    assert parse_duration_ms("PT30M") == 1_800_000
    assert parse_duration_ms("PT1H30M") == 5_400_000
    assert parse_duration_ms("P1D") == 86_400_000
    assert parse_duration_ms("P1DT2H3M4.5S") == 93_784_500
    assert parse_duration_ms("pt0.25s") == 250
    for bad in ("", "P", "PT", "1h", "30m", "P1H", "PT-5M", "P1DT"):
        with pytest.raises(OptionError, match="ISO 8601 duration"):
            parse_duration_ms(bad)


names = st.text(st.characters(whitelist_categories=("Ll", "Nd"), whitelist_characters="._-"),
                min_size=1, max_size=12)  # fmt: skip
plans = st.dictionaries(
    names,
    st.dictionaries(
        st.builds(TopicPartition, names, st.integers(0, 50)), st.integers(0, 10**12), min_size=1
    ),
    min_size=1,
    max_size=4,
)


@given(plans)
def test_an_exported_plan_reads_back_as_it_was(plan: dict[str, dict[TopicPartition, int]]) -> None:
    text = export_reset_plan(plan)
    single = len(plan) == 1
    # One group: topic,partition,offset (Kafka's); several: the group first.
    assert all(line.count(",") == (2 if single else 3) for line in text.splitlines())
    assert parse_reset_plan(text, groups=list(plan)) == plan


def test_a_malformed_plan_line_names_the_file_and_line() -> None:
    with pytest.raises(OptionError, match=r"plan.csv line 2: 'orders,x,5'"):
        parse_reset_plan("orders,0,5\norders,x,5\n", groups=["g"], path="plan.csv")
    with pytest.raises(OptionError, match="line 1"):  # three cells, but two groups asked
        parse_reset_plan("orders,0,5\n", groups=["g", "h"], path="plan.csv")
