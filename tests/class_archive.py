"""A class-data-sharing archive of what a Spark driver of this environment loads, for the JVMs the
tests start.

Most of the suite's time is Spark applications starting in processes of their own, and most of
a Spark driver's start is loading, parsing and verifying some ten thousand classes. The JDK can
map them from an archive instead (AppCDS, ``-XX:SharedArchiveFile``): on two cores a small
Spark application took 7.5 s with the archive against 12.5 s without.

The archive is made once per Java and pyspark installation, by a small Spark application run
with ``-XX:ArchiveClassesAtExit``, and kept in the temporary directory under a key of both. A
JVM whose class path does not start with the archive's (the Kafka broker, spark-submit's
launcher) cannot use it and runs as it would without, on the JDK's own archive; the JDK's
warning that says so is switched off, since it would go to the JVM's standard output.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# What the archive's application does: the classes of a session, SQL, Arrow, a Python data
# source, a streaming query with foreachBatch, parquet. Classes it does not load are loaded from
# their jars as usual. (delta-spark's classes, loaded from its jars in the maven-spark
# virtualenv, were tried too: a small Delta application started no faster with them.)
_WORKLOAD = """
import sys
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader

class Numbers(DataSource):
    @classmethod
    def name(cls):
        return "archive_numbers"
    def schema(self):
        return "n long"
    def reader(self, schema):
        return NumbersReader()

class NumbersReader(DataSourceReader):
    def read(self, partition):
        yield from ((i,) for i in range(10))

spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.driver.extraJavaOptions", "-XX:ArchiveClassesAtExit=" + sys.argv[1])
    .config("spark.ui.enabled", "false")
    .getOrCreate()
)
spark.dataSource.register(Numbers)
spark.read.format("archive_numbers").load().groupBy("n").count().collect()
spark.range(100).selectExpr("id % 7 AS k").groupBy("k").count().toArrow()
spark.createDataFrame([(1, "a")], "k int, v string").write.mode("overwrite").parquet(sys.argv[2])
spark.read.parquet(sys.argv[2]).collect()
query = (
    spark.readStream.format("rate").option("rowsPerSecond", 10).load()
    .writeStream.foreachBatch(lambda df, batch_id: df.count())
    .option("checkpointLocation", sys.argv[2] + "-checkpoint")
    .trigger(availableNow=True)
    .start()
)
query.awaitTermination(60)
driver = spark.sparkContext._gateway.proc  # spark-submit execs the driver's JVM
spark.stop()
driver.stdin.close()  # the JVM exits at the end of its standard input ...
driver.wait(300)  # ... and writes the archive before it does
"""

# A JVM that cannot use the archive says so on its standard output, which some tests read.
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


#: What every JVM of the tests runs with (:func:`set_jvm_options`) before an archive is added.
BASE_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def set_jvm_options() -> None:
    """Every JVM the tests start (Spark drivers and their member processes, spark-submit jobs,
    the Spark Connect server, Kafka) lives seconds to minutes: the client compiler alone and the
    serial collector start it with less CPU. On two cores that made two member-process tests 8%
    faster and the machine 10 points less busy. The java launcher reads JDK_JAVA_OPTIONS (and
    notes on stderr that it did); a value set by the caller wins. Set before the archive is
    made, since the archive is made for these options."""
    os.environ.setdefault("JDK_JAVA_OPTIONS", BASE_JVM_OPTIONS)


def _jvm_options() -> str:
    """JDK_JAVA_OPTIONS without an archive :func:`use_archive` added."""
    options = os.environ.get("JDK_JAVA_OPTIONS", "")
    return options.split(" -XX:SharedArchiveFile=")[0]


def _jars(python: str) -> Path:
    """The jars directory of the pyspark that ``python`` imports."""
    if python == sys.executable:
        import pyspark

        return Path(pyspark.__file__).parent / "jars"
    found = subprocess.run(
        [python, "-c", "import pyspark; print(pyspark.__file__)"],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    return Path(found.stdout.strip()).parent / "jars"


def _key(python: str) -> str:
    """What the archive depends on: the java that runs it and the jars of this pyspark."""
    java = shutil.which("java") or ""
    jars = _jars(python)
    listing = sorted(f"{p.name}:{p.stat().st_size}" for p in jars.glob("*.jar"))
    parts = [os.path.realpath(java), str(jars), _jvm_options(), *listing]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def ensure_archive(
    python: str = sys.executable, env: dict[str, str] | None = None, home: Path | None = None
) -> Path | None:
    """The archive of the pyspark that ``python`` imports (this interpreter's by default), made
    first if it is not there yet, by ``python`` in ``env`` (this process's by default), kept in
    ``home`` (by default a directory of the temporary directory, for every run of this
    installation); None if it could not be made (the JVMs then start as they would without
    it)."""
    home = home or Path(tempfile.gettempdir()) / "spark-kafka-group-class-archives"
    home.mkdir(exist_ok=True)
    key = _key(python)
    archive = home / f"{key}.jsa"
    with open(home / f".{key}.lock", "w") as lock:
        # pytest-xdist workers (or scripts/test ahead of them): one makes it, the others wait;
        # another pyspark's archive, made meanwhile, does not hold them up.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if archive.exists():
            return archive
        with tempfile.TemporaryDirectory() as scratch:
            partial = Path(scratch) / "archive.jsa"
            done = subprocess.run(
                [python, "-c", _WORKLOAD, str(partial), str(Path(scratch) / "t")],
                env={
                    "PYSPARK_PYTHON": python,
                    **(os.environ if env is None else env),
                    "JDK_JAVA_OPTIONS": _jvm_options(),
                },
                capture_output=True,
                text=True,
                timeout=600,
            )
            if done.returncode != 0 or not partial.exists():
                print(
                    "The JVMs of this run start without a class archive: making it failed "
                    f"(exit {done.returncode}):\n{done.stderr[-2000:]}",
                    file=sys.stderr,
                )
                return None
            os.replace(partial, archive)
    return archive


def archive_options(archive: Path | None) -> str:
    """JDK_JAVA_OPTIONS of a JVM that maps ``archive`` (none: the options without one)."""
    if archive is None:
        return _jvm_options()
    return f"{_jvm_options()} -XX:SharedArchiveFile={archive} {_QUIET}"


def use_archive() -> None:
    """Every JVM the tests start from here on maps the archive (through JDK_JAVA_OPTIONS)."""
    os.environ["JDK_JAVA_OPTIONS"] = archive_options(ensure_archive())
