"""What every site shares: the tenant's database per request, the admin routes, errors.

`make_app(title, routes, store, admin_token)` returns a Starlette app with the site's routes
plus `/__horizonrl__/...` (health, and with the admin header: reset, query, drop a tenant).
Handlers are plain functions (Starlette runs them in its thread pool) that call
`database(request)` for the request's tenant (`X-Horizonrl-Tenant`, default `default`).
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from horizonrl.envs.web.sites.html import PER_PAGE, esc
from horizonrl.envs.web.sites.tenants import (
    ADMIN_HEADER,
    DEFAULT_TENANT,
    TENANT_HEADER,
    BadTenantError,
    TenantStore,
    check_token,
)


def tenant_of(request: Request) -> str:
    token = request.headers.get(TENANT_HEADER, DEFAULT_TENANT)
    try:
        return check_token(token)
    except BadTenantError as exc:
        raise HTTPException(400, str(exc)) from exc


@contextmanager
def database(request: Request) -> Iterator[sqlite3.Connection]:
    """The request tenant's database; committed when the block ends without an error."""
    store: TenantStore = request.app.state.store
    db = store.connect(tenant_of(request))
    try:
        yield db
        db.commit()
    except sqlite3.IntegrityError as exc:  # e.g. an email that another customer has
        raise HTTPException(400, f"not saved: {exc}") from exc
    finally:
        db.close()


def one(db: sqlite3.Connection, sql: str, *args: Any) -> sqlite3.Row:
    """The single row of `sql`, or a 404 page when there is none."""
    row = db.execute(sql, args).fetchone()
    if row is None:
        raise HTTPException(404, "Not found")
    return row


def page_of(
    db: sqlite3.Connection, count_sql: str, rows_sql: str, args: Sequence[Any], page_no: int
) -> tuple[int, list[sqlite3.Row]]:
    """How many rows `count_sql` counts, and page `page_no` (PER_PAGE rows) of `rows_sql`;
    both take `args`, and `rows_sql` gets ` LIMIT ? OFFSET ?` appended."""
    total = db.execute(count_sql, tuple(args)).fetchone()[0]
    rows = db.execute(f"{rows_sql} LIMIT ? OFFSET ?", (*args, PER_PAGE, (page_no - 1) * PER_PAGE)).fetchall()
    return total, rows


def html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status)


def redirect(location: str) -> RedirectResponse:
    """A 303 after a form POST, so reloading the next page never re-submits the form."""
    return RedirectResponse(location, status_code=303)


async def form_data(request: Request) -> dict[str, str]:
    """The fields of a urlencoded form POST (the sites' forms upload no files); the last value wins."""
    return dict(parse_qsl((await request.body()).decode("utf-8", "replace"), keep_blank_values=True))


def _check_admin(request: Request) -> None:
    given = request.headers.get(ADMIN_HEADER, "")
    if not secrets.compare_digest(given.encode(), request.app.state.admin_token.encode()):
        raise HTTPException(403, f"admin routes need the {ADMIN_HEADER} header with the sites' admin token")


def _admin_token(request: Request) -> str:
    _check_admin(request)
    try:
        return check_token(request.path_params["token"])
    except BadTenantError as exc:
        raise HTTPException(400, str(exc)) from exc


def health(request: Request) -> JSONResponse:
    return JSONResponse({"site": request.app.state.site})


def reset_tenant(request: Request) -> JSONResponse:
    token = _admin_token(request)
    request.app.state.store.reset(token)
    return JSONResponse({"tenant": token, "reset": True})


async def query_tenant(request: Request) -> JSONResponse:
    token = _admin_token(request)
    try:
        sql = (await request.json())["sql"]
    except (ValueError, KeyError, TypeError) as exc:
        raise HTTPException(400, 'body must be JSON {"sql": "..."}') from exc
    if not isinstance(sql, str):
        raise HTTPException(400, '"sql" must be a string')
    try:
        rows = request.app.state.store.query(token, sql)
    except sqlite3.Error as exc:
        raise HTTPException(400, f"query failed: {exc}") from exc
    return JSONResponse({"rows": rows})


def drop_tenant(request: Request) -> JSONResponse:
    token = _admin_token(request)
    return JSONResponse({"tenant": token, "dropped": request.app.state.store.drop(token)})


ADMIN_ROUTES: list[BaseRoute] = [
    Route("/__horizonrl__/health", health),
    Route("/__horizonrl__/tenants/{token}/reset", reset_tenant, methods=["POST"]),
    Route("/__horizonrl__/tenants/{token}/query", query_tenant, methods=["POST"]),
    Route("/__horizonrl__/tenants/{token}", drop_tenant, methods=["DELETE"]),
]


def _error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if request.url.path.startswith("/__horizonrl__/"):
        return JSONResponse({"error": {"code": exc.status_code, "message": exc.detail}}, exc.status_code)
    title = {404: "Page not found", 403: "Forbidden", 400: "Bad request"}.get(exc.status_code, "Error")
    body = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title></head><body>'
        f'<h1>{title}</h1><p>{esc(exc.detail)}</p><p><a href="/">Home</a></p></body></html>'
    )
    return HTMLResponse(body, status_code=exc.status_code)


def make_app(site: str, routes: Sequence[BaseRoute], store: TenantStore, admin_token: str) -> Starlette:
    """The Starlette app of one site: its pages plus the admin routes, over `store`."""
    app = Starlette(routes=[*ADMIN_ROUTES, *routes], exception_handlers={HTTPException: _error})
    app.state.site = site
    app.state.store = store
    app.state.admin_token = admin_token
    return app
