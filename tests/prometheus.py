"""A real Prometheus server for the tests (Debian's ``prometheus`` package; scripts/_prometheus.sh
installs it): bound to 127.0.0.1, with a temporary configuration and storage, stopped (and
waited for) when the ``with`` block ends, so no process is left behind. Also what the
exporter's tests share: ``kafka-group exporter`` started as its own process, and a scrape of
its /metrics as samples."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from spark_kafka_group.testing.waiting import wait_until

#: Scraped samples: ``(metric name, sorted labels) -> value``.
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=60) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def named(samples: Samples, name: str, **labels: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of metric ``name`` whose labels include ``labels``."""
    return {
        key: value
        for (n, key), value in samples.items()
        if n == name and set(labels.items()) <= set(key)
    }


def one(samples: Samples, name: str, **labels: str) -> float:
    found = named(samples, name, **labels)
    assert len(found) == 1, (name, labels, found)
    return next(iter(found.values()))


def start_exporter(command: Sequence[str]) -> tuple[subprocess.Popen[str], str]:
    """Start ``command`` (``kafka-group exporter ...``, its own process) and wait for its
    "Serving the lag of ..." line: the process and the URL it serves."""
    process = subprocess.Popen(
        list(command), stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert "Serving the lag of" in line, line
    return process, line.rsplit(" ", 1)[-1].strip()


def tool(name: str) -> str:
    """The path of ``prometheus`` or ``promtool``; a missing one fails the test, saying how to
    install it (never a skip: scripts/test installs it)."""
    found = shutil.which(name)
    assert found, (
        f"{name} is not on PATH: install Debian's prometheus package (scripts/_prometheus.sh, "
        "ensure_prometheus, does it as root: apt-get install prometheus)"
    )
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Prometheus:
    url: str
    log: Path

    def api(self, path: str, **params: str) -> Any:
        """A GET of the HTTP API: its ``data`` (the status must be success)."""
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=30) as r:
            body = json.loads(r.read().decode())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector."""
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", data
        return list(data["result"])

    def firing(self) -> list[dict[str, Any]]:
        return [a for a in self.api("alerts")["alerts"] if a["state"] == "firing"]


@contextmanager
def prometheus_server(
    work: Path, targets: Sequence[str], *, rule_files: Sequence[Path] = ()
) -> Iterator[Prometheus]:
    """Prometheus scraping ``targets`` (``host:port``) every second, evaluating
    ``rule_files`` every second, from ``work`` (its configuration, data and log)."""
    work.mkdir(parents=True, exist_ok=True)
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": [
            {"job_name": "kafka-group", "static_configs": [{"targets": list(targets)}]}
        ],
    }
    config_file = work / "prometheus.yml"
    config_file.write_text(json.dumps(config))  # YAML is a superset of JSON
    port = free_port()
    log = work / "prometheus.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [
                tool("prometheus"),
                f"--config.file={config_file}",
                f"--storage.tsdb.path={work / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--web.enable-lifecycle",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Prometheus(f"http://127.0.0.1:{port}", log)
    try:

        def ready() -> bool:
            assert process.poll() is None, f"prometheus exited: {log.read_text()[-2000:]}"
            try:
                with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False

        wait_until(ready, 60, "Prometheus ready")
        yield server
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)
