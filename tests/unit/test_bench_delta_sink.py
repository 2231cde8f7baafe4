"""bench_delta_sink's figures from query progress: the steady state leaves out the first batch
with rows; a takeover lands when a batch reads one of the victim's partitions."""

from __future__ import annotations

import json

import pytest

from benchmarks.bench_delta_sink import (
    batch_planned,
    comparisons,
    first_batch,
    first_landing,
    partitions_read,
    source_options,
    steady_rate,
)

FIVE_UTC = 1_795_928_400.0  # 2026-11-29T05:00:00Z


def _progress(rows: int, trigger_ms: int, *, at: str = "2026-11-29T05:00:00.000Z") -> dict:
    return {"numInputRows": rows, "durationMs": {"triggerExecution": trigger_ms}, "timestamp": at}


def test_the_first_batch_with_rows_is_start_up() -> None:
    rate = steady_rate(
        [_progress(0, 2000), _progress(50_000, 4000), _progress(50_000, 1000),
         _progress(30_000, 500), _progress(0, 10)]
    )  # fmt: skip
    assert rate["startup_s"] == pytest.approx(6.0)
    assert rate["rows"] == 80_000
    assert rate["seconds"] == pytest.approx(1.5)
    assert rate["rps"] == pytest.approx(80_000 / 1.5)


def test_one_batch_has_no_steady_state() -> None:
    assert steady_rate([_progress(50_000, 4000)])["rps"] == 0.0


def _batch(start: dict | None, end: dict, *, rows: int = 10, at: str, took_ms: int = 500) -> dict:
    progress = _progress(rows, took_ms, at=at)
    progress["sources"] = [
        {"startOffset": None if start is None else json.dumps(start), "endOffset": json.dumps(end)}
    ]
    return progress


def test_a_batch_reads_the_partitions_whose_end_moved_or_that_it_began() -> None:
    start = {"offsets": {"t": {"0": 5, "1": 7}}}
    end = {"offsets": {"t": {"0": 9, "1": 7, "2": 4, "3": 3}}, "starts": {"t": {"2": 1, "3": 3}}}
    # 0 moved on, 1 did not, 2 is new and read from 1, 3 is new with nothing read
    assert partitions_read(_batch(start, end, at="2026-11-29T05:00:00.000Z")) == {0, 2}


def test_the_takeover_lands_at_the_end_of_the_first_batch_with_a_victims_partition() -> None:
    before = _batch({"offsets": {"t": {"0": 1}}}, {"offsets": {"t": {"0": 2}}},
                    at="2026-11-29T05:00:00.000Z")  # fmt: skip
    survivors_only = _batch({"offsets": {"t": {"0": 2}}}, {"offsets": {"t": {"0": 3}}},
                            at="2026-11-29T05:00:10.000Z")  # fmt: skip
    taken = _batch(
        {"offsets": {"t": {"0": 3}}},
        {"offsets": {"t": {"0": 4, "1": 20}}, "starts": {"t": {"1": 12}}},
        at="2026-11-29T05:00:11.000Z",
        took_ms=750,
    )
    killed = FIVE_UTC + 0.6  # after the first batch ended (05:00:00.5)
    assert first_landing([before, survivors_only], {1}, killed) is None
    landed = first_landing([before, survivors_only, taken], {1}, killed)
    assert landed == pytest.approx(FIVE_UTC + 11.75)
    # planned once the source's latestOffset returned, before the sink's write
    taken["durationMs"]["latestOffset"] = 120
    assert first_batch([before, survivors_only, taken], {1}, killed) is taken
    assert batch_planned(taken) == pytest.approx(FIVE_UTC + 11.12)


def test_each_sink_is_compared_with_spark_s_delta_sink_where_both_were_measured() -> None:
    figures = {
        "writer_rps": "80000", "delta_rps": "10000", "delta_table_rps": "9500",
        "writer_takeover_s": "6.80", "delta_takeover_s": "15.81",
        "delta_table_takeover_planned_s": "7.10", "delta_takeover_planned_s": "7.00",
    }  # fmt: skip
    assert comparisons(figures) == {
        "writer_vs_delta": "8.000",
        "delta_table_vs_delta": "0.950",
        "takeover_writer_minus_delta_s": "-9.01",
        "planned_delta_table_minus_delta_s": "0.10",
    }
    assert comparisons({"writer_rps": "1"}) == {}


def test_only_the_delta_table_sink_names_its_table_to_the_source() -> None:
    for sink in ("writer", "delta", "append"):
        assert "deltaSinkTable" not in source_options(
            "k:9092", "t", "g", "/s", sink=sink, table="/t"
        )
    options = source_options("k:9092", "t", "g", "/s", sink="delta-table", table="/t")
    assert options["deltaSinkTable"] == "/t"
