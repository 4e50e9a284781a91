"""What operators watch: `/healthz`, `/readyz` and `/metrics`.

`/healthz` says the process answers, and `/readyz` that its ledger does too (it reads and, after writes
failed, writes) and its outbox worker runs: a load balancer or an orchestrator asks them without a
credential, so they say nothing else, but why the process is not ready. `/readyz` answers at once from what
the upkeep's probe and the ledger's writes last found (see `signoff.upkeep`), never waiting on the ledger.
`/metrics` serves the Prometheus text format (`prometheus_client`) to the admin:
`signoff_build_info{version}`, the figures below, and the outbox's own, with no `_created` series and every
bucket's bound spelled as `prometheus_client` spells it (`le="1.0"`).

The figures are a fold of the ledger's audit chain, which every worker shares: each worker serves the same
totals, counted from the first approval the ledger ever opened, so a scrape that reaches any worker, or one
just restarted, reads the same counters and never a reset.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import logging
import socket
from collections.abc import AsyncIterator, Iterator
from importlib.metadata import version

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from signoff.core.approval import State
from signoff.core.audit import AuditEntry
from signoff.ledger.base import Ledger
from signoff.server.auth import signed_in
from signoff.server.http import UNAVAILABLE, Forbidden
from signoff.upkeep import Upkeep

log = logging.getLogger("signoff.server")

PAGE = 1000
SETTLED = frozenset({State.APPROVED, State.DENIED, State.EXPIRED, State.CANCELLED})
VERSION = version("signoff")
DECISION_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 86400.0)
"""Seconds from asking to a decision: a person answers in seconds at a desk, in hours by email."""


class ApprovalFigures(Collector):
    """The approvals' figures, folded from the audit chain as far as it has been read: a collector, as
    for an exporter, since the ledger holds the truth and this process only reads it (so no `_created`
    series says when this process started counting)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.registry = CollectorRegistry(auto_describe=True)
        self.opened = 0
        self.decided: dict[str, int] = dict.fromkeys(sorted(SETTLED), 0)
        self.waits = [0] * (len(DECISION_BUCKETS) + 1)
        """How many decisions came within each bucket's bound (the last: beyond every bound)."""
        self.waited = 0.0
        self._after = 0
        self._opened_at: dict[str, float] = {}
        self._reading = asyncio.Lock()
        self.notices: dict[tuple[str, str], int] = {}
        """Notices by channel and state, pending or failed, as last read."""
        self.registry.register(self)
        self._shown = _Uncreated(self.registry)

    async def catch_up(self) -> None:
        """Fold the audit entries written since the last read, a page at a time, and count the outbox's
        notices that wait or failed, by channel (delivered ones are the delivering workers' to count)."""
        async with self._reading:
            while page := await self.ledger.audit.entries(self._after, PAGE):
                for entry in page:
                    self._fold(entry)
                self._after = page[-1].seq
            notices: dict[tuple[str, str], int] = {}
            for state in ("pending", "failed"):
                for notice in await self.ledger.outbox.query(state=state):
                    notices[notice.channel, state] = notices.get((notice.channel, state), 0) + 1
            self.notices = notices

    def _fold(self, entry: AuditEntry) -> None:
        if not entry.subject.startswith("apr_"):
            return
        if entry.action == "open":
            self.opened += 1
            self._opened_at[entry.subject] = entry.at
        elif entry.before == State.PENDING and entry.after in SETTLED:
            # a deadline that let the call run is no person's approval: it counts as expired
            self.decided[State.EXPIRED if entry.action == "expire" else entry.after] += 1
            if (opened := self._opened_at.pop(entry.subject, None)) is not None:
                waited = max(0.0, entry.at - opened)
                self.waits[bisect.bisect_left(DECISION_BUCKETS, waited)] += 1
                self.waited += waited

    def collect(self) -> Iterator[Metric]:
        yield InfoMetricFamily("signoff_build", "This signoff's version.", value={"version": VERSION})
        yield CounterMetricFamily("signoff_approvals_opened", "Approvals opened.", value=self.opened)
        decided = CounterMetricFamily(
            "signoff_approvals_decided", "Approvals settled, by outcome.", labels=["outcome"]
        )
        for outcome, count in self.decided.items():
            decided.add_metric([outcome], count)
        yield decided
        pending = self.opened - sum(self.decided.values())
        yield GaugeMetricFamily("signoff_approvals_pending", "Approvals pending now.", value=pending)
        bounds = [*map(floatToGoString, DECISION_BUCKETS), "+Inf"]  # as the outbox's `Histogram` says them
        buckets = list(zip(bounds, itertools.accumulate(self.waits), strict=True))
        yield HistogramMetricFamily(
            "signoff_approval_decision_seconds",
            "Seconds from an approval's opening to its outcome.",
            buckets=buckets,
            sum_value=self.waited,
        )
        notices = GaugeMetricFamily(
            "signoff_outbox_notices", "Notices waiting or failed, by channel.", labels=["channel", "state"]
        )
        for (channel, state), count in sorted(self.notices.items()):
            notices.add_metric([channel, state], count)
        yield notices

    async def warm(self) -> None:
        """Fold the chain as it is at startup, so that the first scrape of a long-lived ledger (a second
        per million entries, or so) need not; a ledger that fails here is read again at that scrape."""
        try:
            await self.catch_up()
        except Exception as exc:
            log.warning("the metrics could not read the audit chain yet (%s)", exc)

    async def response(self) -> Response:
        """The figures as they stand now, in the Prometheus text format."""
        await self.catch_up()
        return Response(generate_latest(self._shown), media_type=CONTENT_TYPE_LATEST)


class _Uncreated(Collector):
    """A registry's metrics without their `_created` series: the approvals' figures have none (the ledger,
    not this process, started counting them), so the outbox's counter and histogram drop theirs too.
    `prometheus_client.disable_created_metrics()` would do it for the whole process, an app that mounts
    signoff included, whose own metrics are not signoff's to change."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        for metric in self.registry.collect():
            kept = Metric(metric.name, metric.documentation, metric.type, metric.unit)
            kept.samples = [s for s in metric.samples if s.name != f"{metric.name}_created"]
            yield kept


def metrics_listener(host: str, port: int) -> socket.socket:
    """A listening socket for `--metrics-port` that every worker can bind too; an `OSError` naming the port
    when another program holds it (`signoff serve` checks before it starts a worker)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        listener.bind((host, port))
    except OSError as exc:
        listener.close()
        raise OSError(f"--metrics-port {port}: cannot listen on {host}: {exc.strerror or exc}") from None
    listener.listen(64)
    return listener


@contextlib.asynccontextmanager
async def metrics_port(figures: ApprovalFigures, host: str, port: int) -> AsyncIterator[None]:
    """`GET /metrics` on a port of its own, with no credential (`--metrics-port`): for a Prometheus that
    reaches the process on an internal address. Each worker of a `--workers` server binds it (SO_REUSEPORT),
    and any of them answers: the approvals' and the outbox's figures are the ledger's, the same in each."""

    async def metrics(request: Request) -> Response:
        return await figures.response()

    listener = metrics_listener(host, port)
    app = Starlette(routes=[Route("/metrics", metrics, methods=["GET"])])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    serving = asyncio.get_running_loop().create_task(server.serve(sockets=[listener]))
    try:
        yield
    finally:
        server.should_exit = True
        await asyncio.gather(serving, return_exceptions=True)
        listener.close()


def watch_routes(figures: ApprovalFigures, upkeep: Upkeep) -> list[Route]:
    async def alive(request: Request) -> Response:
        return PlainTextResponse("ok\n")

    async def ready(request: Request) -> Response:
        if (why := upkeep.unready()) is not None:  # said in the log once, as it began
            return PlainTextResponse(f"not ready: {why}\n", status_code=UNAVAILABLE)
        return PlainTextResponse("ready\n")

    async def metrics(request: Request) -> Response:
        if not signed_in(request).is_admin:
            raise Forbidden("only the admin reads the metrics")
        return await figures.response()

    return [
        Route("/healthz", alive, methods=["GET"]),
        Route("/readyz", ready, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
