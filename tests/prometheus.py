"""A real Prometheus server for a test, and promtool: Debian's ``prometheus`` package.

:func:`prometheus` starts the server on a free port of 127.0.0.1, in a folder of the test's,
with a configuration of its own: every second it scrapes the one target the test names and
evaluates the shipped alert rules (``monitoring/alerts.yml``). :class:`Prometheus` reads its
HTTP API (``/api/v1/query``, ``/api/v1/alerts``). Without the binaries the tests skip with the
reason; with ``CI=true`` that is a failure (``.ci/run`` installs the package).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.conftest import IN_CI
from tests.replica import free_port

MONITORING = Path(__file__).resolve().parent.parent / "monitoring"
ALERTS = MONITORING / "alerts.yml"
ALERTS_TEST = MONITORING / "alerts_test.yml"
#: How often the server scrapes its target and evaluates the rules.
INTERVAL_S = 1

T = TypeVar("T")


def tool(name: str) -> str:
    """The path of ``promtool`` or ``prometheus``; the test skips without it (fails on CI)."""
    found = shutil.which(name)
    if found is None:
        reason = f"no {name} on PATH (Debian's prometheus package brings it)"
        if IN_CI:
            pytest.fail(f"{reason}: required when CI=true", pytrace=False)
        pytest.skip(reason)
    return found


def promtool(*args: str, stdin: str | None = None, cwd: Path | None = None):
    """``promtool ARGS`` run to its end: the completed process."""
    return subprocess.run(
        [tool("promtool"), *args], input=stdin, capture_output=True, text=True, cwd=cwd, timeout=60
    )


@dataclass
class Prometheus:
    """A running server: its base URL and the reads of its HTTP API a test makes."""

    url: str
    log: Path

    def api(self, path: str, **params: str) -> Any:
        """The ``data`` of an API answer (an error answer fails the test with its words)."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as answer:
            document = json.loads(answer.read())
        assert document["status"] == "success", document
        return document["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` evaluates to now: ``[{"metric": …, "value": [t, v]}]``."""
        data = self.api("/api/v1/query", query=expr)
        assert data["resultType"] == "vector", data
        return data["result"]

    def values(self, expr: str, label: str) -> dict[str, float]:
        """Each series of ``expr`` by its ``label``: its value now."""
        return {r["metric"][label]: float(r["value"][1]) for r in self.query(expr)}

    def alerts(self) -> list[dict[str, Any]]:
        """Every alert pending or firing: ``[{"labels": …, "state": …, …}]``."""
        return self.api("/api/v1/alerts")["alerts"]

    def eventually(
        self, read: Callable[[], T], done: Callable[[T], bool], timeout_s: float = 20
    ) -> T:
        """``read()`` once ``done`` holds of it (scrapes and rule evaluations take a second
        each); its last value fails the test at the deadline."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = read()
            if done(found):
                return found
            assert time.monotonic() < deadline, f"still {found!r} after {timeout_s} s"
            time.sleep(0.2)


@contextmanager
def prometheus(
    target: str, folder: Path, rule_files: tuple[Path, ...] = (ALERTS,)
) -> Iterator[Prometheus]:
    """A Prometheus server scraping ``target`` (``host:port``, path ``/metrics``) every
    second with ``rule_files``, its data and log in ``folder``; stopped afterwards."""
    binary = tool("prometheus")
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "prometheus.yml"
    config.write_text(
        json.dumps(  # YAML reads JSON
            {
                "global": {
                    "scrape_interval": f"{INTERVAL_S}s",
                    "scrape_timeout": f"{INTERVAL_S}s",
                    "evaluation_interval": f"{INTERVAL_S}s",
                },
                "rule_files": [str(path) for path in rule_files],
                "scrape_configs": [
                    {"job_name": "kandev-dq", "static_configs": [{"targets": [target]}]}
                ],
            }
        ),
        encoding="utf-8",
    )
    log = folder / "prometheus.log"
    port = free_port()
    with log.open("w") as out:
        server = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        running = Prometheus(f"http://127.0.0.1:{port}", log)
        _wait_ready(server, running)
        yield running
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _wait_ready(server: subprocess.Popen, running: Prometheus, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"prometheus exited: {running.log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{running.url}/-/ready", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"prometheus not ready in {timeout_s} s: {running.log.read_text()[-2000:]}")
