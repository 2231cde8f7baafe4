"""bench_broker_failover's figures from what its sinks saw: the per-fault percentiles, the
delivery counts and the last line (the run itself needs three Kafka nodes and Spark's own
Kafka source, docs/performance.md has its command)."""

from __future__ import annotations

import math

import pytest

from benchmarks.bench_broker_failover import (
    FAULTS,
    SOURCES,
    Measured,
    Reader,
    delivery,
    fault_figures,
    main,
    report,
    triggers_between,
)


def test_lost_and_duplicated_against_the_acknowledged_offsets() -> None:
    produced = {0: 3, 1: 2}
    read = [(0, 0), (0, 1), (0, 1), (1, 0), (1, 1), (1, 2)]  # (1, 2): never acknowledged
    assert delivery(produced, read) == (1, 1)  # (0, 2) lost, (0, 1) twice
    assert delivery({0: 0}, []) == (0, 0)


def _measured() -> list[Measured]:
    return [
        Measured(
            "hard_bounce",
            "kill1(node2)",
            [0, 3],
            {"kafka-group": 9.0, "kafka": 28.0},
            new_leaders_s=9.4,
            appended_s=9.6,
        ),
        Measured("hard_bounce", "kill2(node1)", [1, 4], {"kafka-group": 11.0, "kafka": None}),
        Measured("rolling", "stop(node1)", [1, 4], {"kafka-group": 2.0, "kafka": 4.0}),
    ]


def test_fault_figures_per_fault_and_source() -> None:
    figures = fault_figures(_measured())
    assert figures["hard_bounce_kafka_group_s_p50"] == 10.0
    assert figures["hard_bounce_kafka_group_s_max"] == 11.0
    assert figures["hard_bounce_new_leaders_s_p50"] == 9.4
    assert figures["hard_bounce_kafka_s_p50"] == 28.0  # the loss without a record is missed
    assert figures["hard_bounce_kafka_missed"] == 1
    assert figures["hard_bounce_kafka_group_missed"] == 0
    assert figures["hard_bounce_vs_spark_kafka_p50"] == pytest.approx(10 / 28)
    assert figures["rolling_kafka_s_max"] == 4.0
    assert math.isnan(figures["rolling_new_leaders_s_p50"])  # not watched here


def test_a_source_that_never_read_again_has_nan_figures() -> None:
    figures = fault_figures([Measured("rolling", "stop(node1)", [0], dict.fromkeys(SOURCES))])
    assert math.isnan(figures["rolling_kafka_group_s_p50"])
    assert figures["rolling_kafka_group_missed"] == 1
    assert "hard_bounce_kafka_s_p50" not in figures  # a fault that did not run


def test_the_report_ends_with_every_key(capsys: pytest.CaptureFixture[str]) -> None:
    dead = Reader("kafka", died="BrokerUnavailableError: ...")
    readers = {
        "kafka-group": Reader("kafka-group", batches=[(0.5, 1.0, [(0, 0), (0, 1)])]),
        "kafka": dead,
    }
    figures = report(_measured(), readers, {0: 2}, 90)
    out = capsys.readouterr().out
    assert "kill2(node1)" in out and "DEAD: BrokerUnavailableError" in out
    assert figures["kafka_group_alive"] == 1 and figures["kafka_alive"] == 0
    assert figures["lost_kafka_group"] == 0 and figures["lost_kafka"] == 2
    assert figures["dup_kafka_group"] == 0
    for fault in FAULTS:
        for key in SOURCES.values():
            assert f"{fault}_{key}_s_p50" in figures


def test_an_unknown_fault_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--faults", "hard_bounce,flood"]) == 2
    assert "unknown ['flood']" in capsys.readouterr().err


def test_the_triggers_from_the_loss_to_the_first_record() -> None:
    start = 1_800_000_000.0  # 2027-01-15T08:00:00Z
    progress = [
        {"timestamp": "2027-01-15T07:59:50.000Z", "numInputRows": 60,
         "durationMs": {"triggerExecution": 300, "latestOffset": 20}},
        {"timestamp": "2027-01-15T08:00:09.500Z", "numInputRows": 12,
         "durationMs": {"triggerExecution": 2400, "latestOffset": 2100}},
        {"timestamp": "2027-01-15T08:01:00.000Z", "numInputRows": 60,
         "durationMs": {"triggerExecution": 300, "latestOffset": 20}},
    ]  # fmt: skip
    shown = triggers_between(progress, start, start + 12)
    assert shown == "+9.5s 2400ms (latestOffset 2100ms) 12 rows"
    assert triggers_between(progress, start + 100, start + 200) == "none"


def test_a_batch_counts_once_it_cannot_have_fetched_before_the_loss() -> None:
    reader = Reader("kafka")
    reader.batches = [
        (99.0, 101.0, [(0, 5)]),  # fetched before the loss at 100, its sink ended after
        (99.5, 112.0, [(0, 6)]),  # in flight, ended after the new leaders (after 111)
        (101.5, 102.0, [(1, 9)]),  # began after the loss
    ]
    assert reader.fetched_after(100.0, 111.0) == [(112.0, [(0, 6)]), (102.0, [(1, 9)])]
    assert reader.fetched_after(100.0, None) == [(102.0, [(1, 9)])]
