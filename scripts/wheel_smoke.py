"""Run by scripts/check_wheel inside a fresh virtualenv holding only the built wheel: the package
comes from the wheel (not the repository) and pyspark finds the data source by the wheel's
auto-registration module alone. (check_wheel then runs ``kafka-group quickstart`` from it.)

    python scripts/wheel_smoke.py VENV
"""

from __future__ import annotations

import os
import sys


def fail(message: str) -> None:
    print(f"wheel smoke: error: {message}", file=sys.stderr)
    raise SystemExit(1)


def main() -> int:
    venv = os.path.realpath(sys.argv[1])
    import pyspark_kafka_group
    import spark_kafka_group

    for module in (spark_kafka_group, pyspark_kafka_group):
        where = os.path.realpath(module.__file__ or "")
        if not where.startswith(venv + os.sep):
            fail(f"{module.__name__} comes from {where}, not from the wheel in {venv}")
        print(f"wheel smoke: {module.__name__} from {where}")

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("wheel smoke")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    # No register() call: only pyspark's import of the pyspark_* module can find the source.
    # Without options the source itself refuses (it was found); unfound, Spark says
    # DATA_SOURCE_NOT_FOUND.
    try:
        spark.read.format("kafka-group").load()
    except Exception as exc:
        if "Option 'kafka.bootstrap.servers' is required" not in str(exc):
            fail(f"format('kafka-group') is not registered automatically: {exc}")
        print("wheel smoke: format('kafka-group') found without register()")
    else:
        fail("format('kafka-group').load() without options did not refuse")
    finally:
        spark.stop()

    stop_the_jvm()
    return 0


def stop_the_jvm() -> None:
    """Wait for Spark's JVM to end, so that the caller may delete the virtualenv it runs from
    (it ends when its stdin closes, after this process, and reads its jars until then)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if gateway is None or proc is None:
        return
    gateway.shutdown()
    if proc.stdin is not None:
        proc.stdin.close()
    proc.wait(60)


if __name__ == "__main__":
    raise SystemExit(main())
