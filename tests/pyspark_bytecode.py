"""Bytecode in the pyspark.zip that Spark puts first on its Python processes' path.

Spark starts its Python processes (the streaming source's runner, the workers' daemon) with
``$SPARK_HOME/python/lib/pyspark.zip`` ahead of site-packages, so they import pyspark from that
archive. pip ships it with sources only, and Python cannot cache bytecode inside a zip: every
such process compiles the pyspark modules it imports, about 1.4 s of CPU for the streaming
source's runner against 0.4 s from site-packages. Spark waits 10 s (a constant) for that
process to connect back; on two loaded cores a restarted query failed with "Python worker
failed to connect back" four times in a row.

So the test virtualenv's archive gets bytecode beside each module (``module.pyc``, where
zipimport looks), compiled as unchecked hash-based ``.pyc`` (nothing to compare with the
source's time stamp) from the very sources in the archive: the same code, compiled once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import py_compile
import tempfile
import warnings
import zipfile
from pathlib import Path


def _archive() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "python" / "lib" / "pyspark.zip"


def ensure_bytecode() -> None:
    """Add the bytecode to this interpreter's pyspark.zip unless it has some already."""
    archive = _archive()
    if not archive.is_file():
        return
    # One lock per archive: another virtualenv's pyspark.zip is written apart.
    digest = hashlib.sha256(str(archive).encode()).hexdigest()[:16]
    lock_path = Path(tempfile.gettempdir()) / f"spark-kafka-group-pyspark-zip-{digest}.lock"
    with open(lock_path, "w") as lock, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pyspark's own tests in the archive warn on compile
        fcntl.flock(lock, fcntl.LOCK_EX)  # pytest-xdist workers: one writes it
        with zipfile.ZipFile(archive) as old:
            names = old.namelist()
            if any(n.endswith(".pyc") for n in names):
                return
            with tempfile.TemporaryDirectory(dir=archive.parent) as scratch:
                work = Path(scratch)
                partial = work / "pyspark.zip"
                with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as new:
                    for info in old.infolist():
                        data = old.read(info)
                        new.writestr(info, data)
                        if info.filename.endswith(".py"):
                            source = work / "src.py"
                            source.write_bytes(data)
                            compiled = work / "src.pyc"
                            py_compile.compile(
                                str(source),
                                cfile=str(compiled),
                                dfile=f"{archive}/{info.filename}",
                                doraise=True,
                                invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
                            )
                            new.write(compiled, info.filename + "c")
                os.replace(partial, archive)
