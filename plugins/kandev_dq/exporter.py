"""``kandev-dq serve``: one process that keeps GX and the project loaded, checks each store
again and again, and serves the results as Prometheus metrics.

Each store gets ``live`` every ``live_every`` seconds and the full checkpoint every
``full_every``; a cycle is one :func:`kandev_dq.run.check.run_check`, the code ``check`` runs
(the same records database, results, data docs, changes and notifications), on a GX context
loaded once per store and kept; a live cycle rebuilds the data docs only when its verdict
moved. Stores are checked one at a time, each cycle in a worker
thread the loop waits on for at most the time limit: a store that is slow or down counts as
down for that cycle and never holds the others longer. ``/metrics`` serves
:class:`kandev_dq.report.metrics.CheckMetrics` through ``prometheus_client`` (text or
OpenMetrics, by ``Accept``); ``/healthz`` answers 200 while the loop is alive.

SIGTERM and SIGINT stop the loop: a cycle under way gets until :data:`STOP_GRACE_S` to finish,
else the process leaves it (its records transaction rolls back, pages are written by rename),
and the process exits 0 within 10 s. SIGHUP vets the project again and, when it passes, loads
it afresh for the next cycles; when it does not, the loaded project stays and the refusal is
logged.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from ipaddress import ip_address
from pathlib import Path
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from kandev_dq.errors import KandevDqError
from kandev_dq.text import one_line

if TYPE_CHECKING:
    from kandev_dq.report.metrics import CheckMetrics
    from kandev_dq.run.check import CheckReport
    from kandev_dq.store.reference import StoreRef

#: Each setting's environment variable, read when its option is not given.
STORES_VARIABLE = "KANDEV_DQ_SERVE_STORES"
LISTEN_VARIABLE = "KANDEV_DQ_SERVE_LISTEN"
LIVE_EVERY_VARIABLE = "KANDEV_DQ_SERVE_LIVE_EVERY"
FULL_EVERY_VARIABLE = "KANDEV_DQ_SERVE_FULL_EVERY"
FULL_CHECKPOINT_VARIABLE = "KANDEV_DQ_SERVE_FULL_CHECKPOINT"
TIME_LIMIT_VARIABLE = "KANDEV_DQ_SERVE_TIME_LIMIT"
PROJECT_VARIABLE = "KANDEV_DQ_PROJECT"

DEFAULT_LISTEN = "127.0.0.1:9108"
LIVE = "live"
#: A cycle under way when the process is told to stop gets this long to finish: the process
#: exits within 10 s of SIGTERM.
STOP_GRACE_S = 6.0
#: An unexpected error of a cycle is logged cut to this many characters (a driver's error
#: can quote a whole statement and its parameters).
ERROR_SHOWN_CHARS = 300

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d)?\s*$")
_UNIT_S = {None: 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str, name: str) -> float:
    """Seconds from ``90``, ``30s``, ``5m``, ``24h`` or ``1d``; a one-line error naming the
    setting otherwise."""
    match = _DURATION.match(text)
    seconds = float(match.group(1)) * _UNIT_S[match.group(2)] if match else 0.0
    if seconds <= 0:
        raise KandevDqError(
            f"{name}: {one_line(text)!r} is not a duration (a positive number of seconds, "
            "or one ending in s, m, h or d: 90, 5m, 24h)"
        )
    return seconds


def listen_address(text: str, name: str = "--listen") -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) as a host and a port. The host is always named:
    listening beyond this machine takes an address written out (``0.0.0.0:9108``), never an
    empty host."""
    host, _, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    try:
        number = int(port)
        if not host or not 0 < number < 65536:
            raise ValueError
        ip_address(host) if host != "localhost" else None
    except ValueError:
        raise KandevDqError(
            f"{name}: {one_line(text)!r} is not HOST:PORT with an IP address or localhost "
            f"(default {DEFAULT_LISTEN})"
        ) from None
    return host, number


@dataclass(frozen=True)
class ServeSettings:
    """What ``serve`` runs, from its options, else the environment, else the defaults."""

    stores: tuple[StoreRef, ...]
    project: Path
    records: StoreRef
    listen: tuple[str, int]
    live_every: float
    full_every: float
    full_checkpoint: str
    time_limit: float
    allow_project_code: bool = False
    #: Where a cycle's refusals and the loop's events are logged, one line each.
    #: Store names in them are escaped as every output escapes them.
    log: Callable[[str], None] = field(default=lambda line: print(one_line(line), file=sys.stderr))


def serve_settings(
    stores: list[str] | None = None,
    *,
    store_names: list[str] | None = None,
    project: Path | None = None,
    records: str | None = None,
    listen: str | None = None,
    live_every: str | None = None,
    full_every: str | None = None,
    full_checkpoint: str | None = None,
    time_limit: str | None = None,
    allow_project_code: bool = False,
    environ: Mapping[str, str] = os.environ,
) -> ServeSettings:
    """The settings, each vetted before GX loads: bad input is a one-line error. The project
    is vetted as ``check`` vets it, for both checkpoints; a store need not be reachable (it
    reads as down until it is), but its URL must read. ``store_names`` name the stores in the
    records database, one per store in order (``$KANDEV_DQ_STORE_NAME`` names one store
    alone: several stores under one name would share one key ledger)."""
    from kandev_dq.project.settings import (
        STORE_NAME_VARIABLE,
        chosen_store,
        project_code_allowed_by_environment,
    )
    from kandev_dq.records import records_ref
    from kandev_dq.run import inputs

    given = list(stores or []) or environ.get(STORES_VARIABLE, "").split()
    if not given and environ.get("KANDEV_STORE_URL"):
        given = [environ["KANDEV_STORE_URL"]]
    if not given:
        raise KandevDqError(f"no store to serve: pass --store URL, or set {STORES_VARIABLE}")
    allow = allow_project_code or project_code_allowed_by_environment()
    folder = project or (Path(environ[PROJECT_VARIABLE]) if environ.get(PROJECT_VARIABLE) else None)
    folder = inputs.project_as_data(inputs.project_folder(folder), allow, own_run_only=True)
    full = full_checkpoint or environ.get(FULL_CHECKPOINT_VARIABLE) or "nightly"
    for checkpoint in (LIVE, full):
        inputs.checkpoint_name(folder, checkpoint)
    names = list(store_names or [])
    if names and len(names) != len(given):
        raise KandevDqError(
            f"--store-name is given {len(names)} time(s) for {len(given)} store(s): "
            "give one per --store, in the same order"
        )
    if not names and len(given) > 1 and environ.get(STORE_NAME_VARIABLE):
        raise KandevDqError(
            f"${STORE_NAME_VARIABLE} names one store, and {len(given)} are served: "
            "give --store-name once per --store instead"
        )
    if len(set(names)) != len(names):
        raise KandevDqError(f"a store name is given twice: {', '.join(sorted(names))}")
    named = names or [environ.get(STORE_NAME_VARIABLE) or None] * len(given)
    refs = tuple(chosen_store(store, name) for store, name in zip(given, named, strict=True))
    shown = [ref.shown for ref in refs]
    if len(set(shown)) != len(shown):
        raise KandevDqError(f"a store is named twice: {', '.join(sorted(shown))}")

    def setting(value: str | None, variable: str, default: str) -> str:
        return value or environ.get(variable) or default

    return ServeSettings(
        stores=refs,
        project=folder,
        records=records_ref(folder, records, allow_project_code=allow),
        listen=listen_address(setting(listen, LISTEN_VARIABLE, DEFAULT_LISTEN)),
        live_every=duration(setting(live_every, LIVE_EVERY_VARIABLE, "5m"), "--live-every"),
        full_every=duration(setting(full_every, FULL_EVERY_VARIABLE, "24h"), "--full-every"),
        full_checkpoint=full,
        time_limit=duration(setting(time_limit, TIME_LIMIT_VARIABLE, "10m"), "--time-limit"),
        allow_project_code=allow,
    )


class ProjectContexts:
    """The project's GX context for each store, loaded on first use and kept: a cycle then
    costs the run alone, not GX's import and the project's loading."""

    def __init__(self, settings: ServeSettings) -> None:
        self._settings = settings
        self._loaded: dict[str, Any] = {}

    def __call__(self, store_url: str) -> Any:
        from kandev_dq.gx.context import load_context

        context = self._loaded.get(store_url)
        if context is None:
            context = load_context(
                self._settings.project,
                store_url=store_url,
                allow_project_code=self._settings.allow_project_code,
                own_run_only=True,
            )
            self._loaded[store_url] = context
        return context


@dataclass
class Job:
    """One checkpoint on one store, due at ``due`` (monotonic seconds)."""

    store: StoreRef
    checkpoint: str
    every: float
    due: float = 0.0


class Exporter:
    """The loop: runs each due job, one at a time, and records its outcome in ``metrics``."""

    def __init__(self, settings: ServeSettings, metrics: CheckMetrics | None = None) -> None:
        from kandev_dq.report.metrics import CheckMetrics

        self.settings = settings
        self.metrics = metrics or CheckMetrics()
        self.stopping = threading.Event()
        self._reload = threading.Event()
        self._contexts = ProjectContexts(settings)
        self._heartbeat = time.monotonic()
        #: Worker threads of cycles that outran the time limit, by store: not started again
        #: on that store until they end, so no store ever has two cycles at once.
        self._overrun: dict[str, threading.Thread] = {}
        now = time.monotonic()
        self.jobs = [
            Job(store, checkpoint, every, due=now)
            for store in settings.stores
            for checkpoint, every in (
                (settings.full_checkpoint, settings.full_every),
                (LIVE, settings.live_every),
            )
        ]
        for job in self.jobs:
            self.metrics.every(job.store.shown, job.checkpoint, job.every)

    def alive(self, within: float) -> bool:
        """Whether the loop has moved within ``within`` seconds (it beats while it waits)."""
        return time.monotonic() - self._heartbeat <= within

    def abandoned(self) -> bool:
        """Whether a cycle is still running (one past its time limit, or the stop's grace)."""
        return any(worker.is_alive() for worker in self._overrun.values())

    def reload(self) -> None:
        """Ask for the project to be vetted and loaded again before the next cycle."""
        self._reload.set()

    def run_forever(self) -> None:
        while not self.stopping.is_set():
            self._heartbeat = time.monotonic()
            if self._reload.is_set():
                self._reload.clear()
                self._reload_project()
            job = min(self.jobs, key=lambda j: j.due)
            wait = job.due - time.monotonic()
            if wait > 0:
                self.stopping.wait(min(wait, 1.0))
                continue
            job.due = time.monotonic() + job.every
            self.cycle(job)

    def cycle(self, job: Job) -> CheckReport | None:
        """Run ``job`` once, waiting at most the time limit; its report, or None when it could
        not run (refused, unreachable, too slow, or the process is stopping)."""
        shown = job.store.shown
        running = self._overrun.get(shown)
        if running is not None and running.is_alive():
            self.settings.log(f"serve: {shown}: {job.checkpoint} skipped: its last cycle runs")
            self.metrics.could_not_run(shown)
            return None
        self._overrun.pop(shown, None)
        outcome: dict[str, Any] = {}
        worker = threading.Thread(
            target=self._run, args=(job, outcome), name=f"cycle {shown}", daemon=True
        )
        worker.start()
        deadline = time.monotonic() + self.settings.time_limit
        while worker.is_alive() and time.monotonic() < deadline:
            self._heartbeat = time.monotonic()
            worker.join(timeout=min(1.0, max(deadline - time.monotonic(), 0.0)))
            if self.stopping.is_set():
                worker.join(timeout=STOP_GRACE_S)
                break
        if worker.is_alive():
            self._overrun[shown] = worker
            if not self.stopping.is_set():
                self.settings.log(
                    f"serve: {shown}: {job.checkpoint} ran past the time limit "
                    f"({self.settings.time_limit:g} s); the store counts as down"
                )
                self.metrics.could_not_run(shown)
            return None
        report = outcome.get("report")
        if report is None:
            self.settings.log(f"serve: {shown}: {job.checkpoint}: {outcome.get('error')}")
            self.metrics.could_not_run(shown)
            return None
        self.metrics.finished(report)
        return report

    def _run(self, job: Job, outcome: dict[str, Any]) -> None:
        from kandev_dq.run.check import run_check

        try:
            outcome["report"] = run_check(
                self.settings.project,
                job.store,
                job.checkpoint,
                allow_project_code=self.settings.allow_project_code,
                records=self.settings.records,
                context_for=self._contexts,
                # A live run every few minutes rebuilds the docs only when its verdict moved.
                pages_on_change=job.checkpoint == LIVE,
            )
        except KandevDqError as exc:
            outcome["error"] = one_line(str(exc))
        except Exception as exc:  # noqa: BLE001 - one cycle's fault must not end the loop
            said = one_line(str(exc).splitlines()[0] if str(exc) else "")[:ERROR_SHOWN_CHARS]
            outcome["error"] = f"failed: {type(exc).__name__}: {said}"

    def _reload_project(self) -> None:
        from kandev_dq.run import inputs

        try:
            inputs.project_as_data(
                self.settings.project, self.settings.allow_project_code, own_run_only=True
            )
            for checkpoint in {job.checkpoint for job in self.jobs}:
                inputs.checkpoint_name(self.settings.project, checkpoint)
        except KandevDqError as exc:
            self.settings.log(f"serve: reload refused, the loaded project stays: {exc}")
            return
        self._contexts = ProjectContexts(self.settings)
        self.settings.log("serve: project reloaded")


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        """No access log: a scrape every few seconds would bury the loop's own lines."""


def endpoints(exporter: Exporter) -> Callable:
    """The WSGI application: ``/metrics`` (``prometheus_client``'s own, which answers text or
    OpenMetrics by ``Accept``), ``/healthz`` and nothing else."""
    from prometheus_client import make_wsgi_app

    metrics_app = make_wsgi_app(exporter.metrics.registry())
    # The loop beats at least every second while it waits, and while a cycle runs.
    healthy_within = 30.0

    def application(environ: dict, start_response: Callable) -> Iterator[bytes] | list[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            return metrics_app(environ, start_response)
        if path == "/healthz":
            if exporter.alive(healthy_within) and not exporter.stopping.is_set():
                start_response("200 OK", [("Content-Type", "text/plain")])
                return [b"ok\n"]
            start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
            return [b"the check loop is not running\n"]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found: /metrics and /healthz only\n"]

    return application


def serve(settings: ServeSettings) -> None:
    """Listen, run the loop until SIGTERM or SIGINT, and return (the caller exits 0)."""
    from prometheus_client.exposition import ThreadingWSGIServer

    exporter = Exporter(settings)
    host, port = settings.listen
    try:
        server = make_server(
            host,
            port,
            endpoints(exporter),
            server_class=_server_class(ThreadingWSGIServer, host),
            handler_class=_QuietHandler,
        )
    except OSError as exc:
        raise KandevDqError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    server.daemon_threads = True
    listening = threading.Thread(target=server.serve_forever, name="metrics", daemon=True)
    listening.start()

    def stop(signum: int, _frame: Any) -> None:
        exporter.stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGHUP, lambda _signum, _frame: exporter.reload())
    stores = ", ".join(store.shown for store in settings.stores)
    settings.log(f"serve: listening on {host}:{server.server_port}; checking {stores}")
    try:
        exporter.run_forever()
    finally:
        server.shutdown()
        server.server_close()
    if exporter.abandoned():
        # A thread blocked in a driver call cannot be interrupted, and the interpreter's exit
        # would wait on GX's worker threads behind it: leave now, its transaction rolls back.
        settings.log("serve: stopped, the cycle under way left unfinished")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    settings.log("serve: stopped")


def _server_class(base: type, host: str) -> type:
    """``base`` for the address family ``host`` needs (IPv6 for an IPv6 address)."""
    import socket

    if ":" not in host:
        return base
    return type("IPv6Server", (base,), {"address_family": socket.AF_INET6})
