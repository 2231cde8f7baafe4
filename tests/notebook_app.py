"""Runs jobs/databricks_notebook.py as Databricks' "Run all" would: through Spark Connect
(``SparkSession.builder.remote("local[2]")``, in this fresh process), every cell in order, with
the notebook globals ``spark``, ``dbutils`` (widgets from the test's values) and ``display``.
Started by tests/integration/test_databricks_notebook.py; one JSON argument:
``{"notebook": path, "widgets": {...}, "warehouse": dir, "compute": "classic"|"serverless"}``.

``display`` of a streaming DataFrame does what Databricks does: on classic compute it starts a
query with a processing-time trigger that keeps running (a member of the group, taking
partitions from the cells after it); on serverless it is refused, which stops "Run all".

Cells marked ``# needs: Delta Lake in Spark`` (Spark SQL over the group log's Delta table) are
not run: there are no Delta jars for Spark here. Emits ``done`` with what each cell did.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from tests.spark_apps import emit

CELL = "# COMMAND ----------"
NEEDS_DELTA_IN_SPARK = "# needs: Delta Lake in Spark"


class Widgets:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def text(self, name: str, default: str, label: str | None = None) -> None:
        self.values.setdefault(name, default)

    def get(self, name: str) -> str:
        return self.values[name]


class Library:
    def restartPython(self) -> None:  # Databricks' name
        pass  # the package is already installed in this interpreter


class Dbutils:
    def __init__(self, widgets: dict[str, str]) -> None:
        self.widgets = Widgets(widgets)
        self.library = Library()


def main(config: dict[str, Any]) -> int:
    spark = (
        SparkSession.builder.remote("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.warehouse.dir", config["warehouse"])
        .getOrCreate()
    )
    assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
    displayed: list[dict[str, Any]] = []
    compute = config["compute"]

    def display(frame: DataFrame) -> None:
        if frame.isStreaming:
            if compute == "serverless":
                raise RuntimeError(
                    "display() of a streaming DataFrame uses a processing-time trigger, which "
                    "serverless compute refuses"
                )
            # Classic compute: a query that runs until someone stops it.
            frame.writeStream.format("memory").queryName(f"display_{len(displayed)}").trigger(
                processingTime="1 second"
            ).start()
            displayed.append({"streaming": True, "columns": frame.columns})
        else:
            displayed.append({"rows": [r.asDict() for r in frame.collect()]})

    names = {"spark": spark, "dbutils": Dbutils(dict(config["widgets"])), "display": display}
    path = config["notebook"]
    with open(path, encoding="utf-8") as f:
        cells = f.read().split(CELL)
    ran, skipped = [], []
    for index, cell in enumerate(cells):
        if NEEDS_DELTA_IN_SPARK in cell:
            skipped.append(index)
            continue
        exec(compile(cell, f"{path} (cell {index})", "exec"), names)
        ran.append(index)
    table = config["widgets"]["table"]
    rows = [
        [r.partition, r.offset] for r in spark.table(table).select("partition", "offset").collect()
    ]
    # Streaming queries still running after "Run all" (a displayed stream on classic compute).
    active = [q.name for q in spark.streams.active]
    for query in spark.streams.active:
        query.stop()
    emit("done", ran=ran, skipped=skipped, displayed=displayed, table_rows=rows, active=active)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
