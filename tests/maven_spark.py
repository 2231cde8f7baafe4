"""The Spark line of jvm/pom.xml's delta-spark and spark-sql-kafka jars, for the tests marked
``maven_spark``: scripts/test runs them in ``.venv-maven-spark``, whose pyspark and delta-spark
(scripts/_bootstrap.sh's MAVEN_SPARK_PINS) match the jars that scripts/setup fetched into
``.jvm/delta-spark`` and ``.jvm/spark-kafka``."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from spark_kafka_group.testing.kafka_broker import jvm_parts_dir

#: Delta's SQL extension and catalog: DESCRIBE/time travel in SQL and the ``delta.`<path>```
#: table names need them (Delta's own set-up, also in conf/spark-defaults.conf).
DELTA_SQL_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
#: The tests' tables are small: one task, not 50, to rebuild a Delta snapshot's state. On
#: local[2] the 50 cost seconds per snapshot (a commit of Spark's Delta sink, a read of a group
#: log): the Spark SQL test of the group log took 76 s with them and 27 s without.
SMALL_TABLES_CONF = {"spark.databricks.delta.snapshotPartitions": "1"}
# delta-spark_<spark line>_<scala>-<delta>.jar: the Spark line the jar is built for.
_DELTA_JAR = re.compile(r"^delta-spark_(\d+\.\d+)_2\.13-(\S+)\.jar$")


def delta_spark_line() -> tuple[str, str]:
    """(Spark line, Delta version) of the delta-spark jar in ``.jvm/delta-spark``, e.g.
    ``("4.2", "4.4.0")``; FileNotFoundError (naming the fix) when the jars were not fetched."""
    for jar in sorted(jvm_parts_dir("delta-spark").glob("delta-spark_*.jar")):
        match = _DELTA_JAR.match(jar.name)
        if match:
            return match.group(1), match.group(2)
    raise FileNotFoundError(
        f"No delta-spark_<spark>_2.13-<version>.jar in {jvm_parts_dir('delta-spark')}: run "
        "scripts/setup (it fetches jvm/pom.xml's jars)"
    )


def maven_spark_jars() -> list[str]:
    """Every jar of ``.jvm/delta-spark`` and ``.jvm/spark-kafka``: what goes on ``spark.jars``
    beside the venv's pyspark (both folders leave out what pyspark ships)."""
    return [
        str(jar) for module in ("delta-spark", "spark-kafka")
        for jar in sorted(jvm_parts_dir(module).glob("*.jar"))
    ]  # fmt: skip


def not_maven_spark_reason() -> str | None:
    """Why this interpreter cannot run the maven_spark tests, or None when it can: its pyspark
    must be the Spark line of the fetched delta-spark jar, with the delta-spark package."""
    import pyspark

    installed = ".".join(pyspark.__version__.split(".")[:2])
    try:
        line, delta = delta_spark_line()
    except FileNotFoundError as exc:
        return str(exc)
    if installed != line or importlib.util.find_spec("delta") is None:
        return (
            f"needs pyspark {line}.x with delta-spark {delta} (the Spark line of "
            f"jvm/pom.xml's delta-spark jar), this is pyspark {pyspark.__version__}"
            f"{'' if importlib.util.find_spec('delta') else ' without delta-spark'}: "
            "scripts/test runs the maven_spark tests in .venv-maven-spark "
            f"({Path('.venv-maven-spark/bin/python')} -m pytest -m maven_spark)"
        )
    return None


def maven_spark_conf() -> dict[str, str]:
    """Spark settings that put the fetched jars on the classpath with Delta's SQL set-up (and
    :data:`SMALL_TABLES_CONF`); empty where this interpreter is not the maven-spark venv's
    (:func:`not_maven_spark_reason`)."""
    if not_maven_spark_reason() is not None:
        return {}
    return {"spark.jars": ",".join(maven_spark_jars()), **DELTA_SQL_CONF, **SMALL_TABLES_CONF}
