"""Ready this environment's pyspark for the tests before they run: the bytecode in its
pyspark.zip (tests/pyspark_bytecode.py) and the class archive of a Spark driver
(tests/class_archive.py). A test run makes both itself when they are missing; scripts/test runs
``python -m tests.prepare_spark`` in the background while earlier phases run, so that a phase
does not start by waiting a minute for them."""

from __future__ import annotations

from tests.class_archive import ensure_archive, set_jvm_options
from tests.pyspark_bytecode import ensure_bytecode

if __name__ == "__main__":
    set_jvm_options()  # as the tests run: the archive is made for their JVM options
    ensure_bytecode()
    ensure_archive()
