"""The dashboard's web app: pages (Jinja2) and the JSON/SSE API they use, read-only.

Every route is GET: nothing here changes a run. Runs come from `RunsSource` (a page at
a time, from every backend through the SDK's listing), the runs page's live updates from
`updates`, curves from `ChartData`, logs from `logstream`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, overload
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from launcher.backends.base import RunStatus
from launcher.errors import InputError, LauncherError, NotFoundError, internal_error_line
from launcher.sdk.records import run_record
from launcher.ui import views
from launcher.ui.auth import TokenGate
from launcher.ui.charts import DEFAULT_POINTS, MAX_POINTS, ChartData, parse_smoothing
from launcher.ui.guards import MAX_STREAMS, MAX_STREAMS_PER_CLIENT, SecurityHeaders, StreamCap
from launcher.ui.logstream import Cursor, log_events, tail_cursor
from launcher.ui.runs import Page, PageAt, RunFilter, RunsSource, summary
from launcher.ui.updates import Rendering, Views, run_updates, view_of

HERE = Path(__file__).parent
DEFAULT_PER_PAGE = 50
MAX_PER_PAGE = 500
LOOPBACK_HOSTS = ["127.0.0.1", "localhost"]


@overload
def _int(request: Request, key: str, default: int, lo: int, hi: int | None = None) -> int: ...
@overload
def _int(request: Request, key: str, default: None, lo: int, hi: int | None = None) -> int | None: ...
def _int(request: Request, key: str, default: int | None, lo: int, hi: int | None = None) -> int | None:
    raw = request.query_params.get(key)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InputError(f"{key} must be a whole number, not {raw!r}") from None
    if value < lo or (hi is not None and value > hi):
        raise InputError(f"{key} must be from {lo}" + (f" to {hi}" if hi is not None else " up") + f", not {value}")
    return value


def _run_filter(request: Request) -> RunFilter:
    statuses = set()
    for raw in request.query_params.getlist("status"):
        for part in raw.split(","):
            if part.strip():
                try:
                    statuses.add(RunStatus(part.strip().upper()))
                except ValueError:
                    raise InputError(
                        f"{part!r} is not a status; use one of " + ", ".join(s.value for s in RunStatus)
                    ) from None
    return RunFilter(
        frozenset(statuses), request.query_params.get("cluster") or None, request.query_params.get("name") or None
    )


def _page_at(request: Request) -> PageAt:
    return PageAt.parse(
        _int(request, "page", 1, 1), request.query_params.get("before"), request.query_params.get("shown")
    )


NOT_THE_PAGE = ("partial", "since", "token")
"""Query parameters that do not say which runs a page shows."""


def create_app(
    source: RunsSource | None = None,
    *,
    token: str | None = None,
    allowed_hosts: list[str] | None = None,
    max_streams: int = MAX_STREAMS,
    max_streams_per_client: int = MAX_STREAMS_PER_CLIENT,
) -> Starlette:
    """The dashboard app. `token`: required on every request. `allowed_hosts`: the Host
    headers accepted (a loopback-only dashboard refuses others, so a web page cannot
    reach it through DNS rebinding). `max_streams`, `max_streams_per_client`: the log
    streams served at once, to all and to one client address (StreamCap)."""
    source = source or RunsSource()
    shown_views = Views()
    charts = ChartData()
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    templates.env.globals.update(views.GLOBALS)

    def page(request: Request, name: str, context: dict[str, Any], status_code: int = 200) -> Response:
        return templates.TemplateResponse(request, name, context, status_code=status_code)

    def listing(request: Request) -> tuple[Page, RunFilter, dict[str, str]]:
        """The page the request asks for, its filter, and its query (for the page's links)."""
        where = _run_filter(request)
        per_page = _int(request, "per_page", DEFAULT_PER_PAGE, 1, MAX_PER_PAGE)
        chosen = source.page(where, _page_at(request), per_page)
        query = {k: v for k, v in request.query_params.items() if k not in NOT_THE_PAGE}
        return chosen, where, query

    def drawing(where: RunFilter, query: dict[str, str]) -> Rendering:
        row = templates.env.get_template("_row.html")
        nav = templates.env.get_template("_nav.html")
        rows = templates.env.get_template("_rows.html")
        return Rendering(
            row=lambda r: row.render(r=r),
            nav=lambda p: nav.render(page=p, query=query),
            rows=lambda p: rows.render(page=p, query=query, where=where),
        )

    # --- pages -----------------------------------------------------------------------------

    def runs_page(request: Request) -> Response:
        chosen, where, query = listing(request)
        template = "_rows.html" if request.query_params.get("partial") == "rows" else "runs.html"
        return page(
            request,
            template,
            {
                "page": chosen,
                "where": where,
                "query": query,
                "statuses": list(RunStatus),
                "view": shown_views.add(view_of(chosen, drawing(where, query))),
            },
        )

    def run_page(request: Request) -> Response:
        name = request.path_params["name"]
        try:
            backend, run = source.find(name)
        except NotFoundError as e:
            return page(request, "missing.html", {"message": e.message}, 404)
        if run.name != name:
            # A spec's name (its latest run) or the start of a run name, as `describe` takes
            # it: the page moves to the run's own address, so that it stays on that run.
            query = f"?{request.url.query}" if request.url.query else ""
            return RedirectResponse(f"/runs/{quote(run.name, safe='')}{query}", 307)
        template = "_details.html" if request.query_params.get("partial") == "details" else "run.html"
        return page(request, template, {"run": charts.with_throughput(backend, run)})

    def compare_page(request: Request) -> Response:
        names = [n for raw in request.query_params.getlist("runs") for n in raw.split(",") if n.strip()]
        return page(request, "compare.html", {"names": names, "metric": request.query_params.get("metric", "")})

    # --- API -------------------------------------------------------------------------------

    def api_runs(request: Request) -> Response:
        chosen, where, query = listing(request)
        older = chosen.older()
        return JSONResponse(
            {
                "runs": [summary(r) for r in chosen.runs],
                "page": chosen.page,
                "per_page": chosen.per_page,
                "first": chosen.first,
                "more": chosen.more,
                "total": chosen.total,
                "older": older.params() if older is not None else None,
                "clusters": list(chosen.clusters),
                "errors": list(chosen.errors),
                "as_of": chosen.taken_at,
                "view": shown_views.add(view_of(chosen, drawing(where, query))),
            }
        )

    async def api_runs_events(request: Request) -> Response:
        """The runs page's updates (launcher.ui.updates): what changed on the page since the
        view `since` (the page's data-view) or the Last-Event-ID."""
        from sse_starlette.sse import EventSourceResponse

        where = _run_filter(request)
        per_page = _int(request, "per_page", DEFAULT_PER_PAGE, 1, MAX_PER_PAGE)
        at = _page_at(request)
        query = {k: v for k, v in request.query_params.items() if k not in NOT_THE_PAGE}
        since = shown_views.get(request.headers.get("last-event-id") or request.query_params.get("since"))
        return EventSourceResponse(
            run_updates(source, where, at, per_page, since, shown_views, drawing(where, query)),
            ping=10,
            headers={"Cache-Control": "no-store"},
        )

    def api_run(request: Request) -> Response:
        backend, run = source.find(request.path_params["name"])
        return JSONResponse(run_record(charts.with_throughput(backend, run)))

    def api_metrics(request: Request) -> Response:
        backend, run = source.find(request.path_params["name"])
        try:
            smoothing = parse_smoothing(request.query_params.get("smoothing"))
        except ValueError as e:
            raise InputError(str(e)) from None
        points = _int(request, "points", DEFAULT_POINTS, 3, MAX_POINTS)
        wanted = [m for raw in request.query_params.getlist("metric") for m in raw.split(",") if m.strip()]
        return JSONResponse(charts.payload(backend, run, wanted, points=points, smoothing=smoothing))

    async def api_logs(request: Request) -> Response:
        from sse_starlette.sse import EventSourceResponse

        backend, run = await run_in_threadpool(source.find, request.path_params["name"])
        name = run.name  # the path may name its spec (its latest run)
        rank = _int(request, "rank", None, 0, run.nodes - 1)
        follow = request.query_params.get("follow", "1") not in ("0", "false", "no")
        raw = request.query_params.get("raw", "0") not in ("0", "false", "no")  # the metric records too
        resume = request.headers.get("last-event-id") or request.query_params.get("cursor")
        if resume:
            try:
                cursor = Cursor.parse(resume)
            except ValueError as e:
                raise InputError(str(e)) from None
        else:
            attempt = _int(request, "attempt", run.current_attempt, 1, run.current_attempt)
            tail = _int(request, "tail", None, 0)
            cursor = (
                await run_in_threadpool(tail_cursor, backend, name, attempt, rank, tail, raw=raw)
                if tail is not None
                else Cursor(attempt)
            )
        return EventSourceResponse(
            log_events(backend, run, cursor, rank, follow, raw=raw), ping=10, headers={"Cache-Control": "no-store"}
        )

    # --- errors: JSON for the API, a page otherwise ------------------------------------------

    async def launcher_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, LauncherError)
        status = 404 if isinstance(exc, NotFoundError) else 400 if isinstance(exc, InputError) else 502
        body = {"error": exc.message, **({"hint": exc.hint} if exc.hint else {})}
        if request.url.path.startswith("/api/"):
            return JSONResponse(body, status)
        return page(request, "missing.html", {"message": exc.message}, status)

    async def unexpected_error(request: Request, exc: Exception) -> Response:
        # A bug: the client gets one line; Starlette re-raises, so uvicorn logs the traceback.
        message = internal_error_line(exc)
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, 500)
        return page(request, "missing.html", {"message": message}, 500)

    routes = [
        Route("/", runs_page),
        Route("/runs/{name}", run_page),
        Route("/compare", compare_page),
        Route("/api/runs", api_runs),
        Route("/api/events/runs", api_runs_events),
        Route("/api/runs/{name}", api_run),
        Route("/api/runs/{name}/metrics", api_metrics),
        Route("/api/runs/{name}/logs", api_logs),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    middleware = [Middleware(SecurityHeaders)]
    if allowed_hosts:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts))
    if token:
        middleware.append(Middleware(TokenGate, token=token))
    # Inside the token check: a client without the token takes no stream's slot.
    middleware.append(Middleware(StreamCap, total=max_streams, per_client=max_streams_per_client))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # List the first page now, so that the first visit need not wait for the backends to open.
        threading.Thread(target=source.warm_quietly, args=(DEFAULT_PER_PAGE,), daemon=True, name="runs-warm").start()
        yield
        await asyncio.to_thread(charts.close)  # saves the metric indexes read, for the next start
        await asyncio.to_thread(source.close)

    app = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={LauncherError: launcher_error, Exception: unexpected_error},
    )
    app.state.source = source
    app.state.charts = charts
    return app
