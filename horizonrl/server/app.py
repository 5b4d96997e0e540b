"""`horizonrl serve FAMILY`: one env family over HTTP (FastAPI + uvicorn).

    horizonrl serve textcraft --port 36005 --max-sessions 512 --idle-ttl 600

v1 routes (ours; bodies and answers are JSON objects):

| route | body | answer |
|---|---|---|
| `POST /v1/sessions` | `{"item_id", "seed"?}` | 201 `{"session_id", "observation", "info"}` |
| `POST /v1/sessions/{sid}/reset` | `{"item_id", "seed"?}` | `{"session_id", "observation", "info"}` |
| `POST /v1/sessions/{sid}/step` | `{"action"}` | `{"observation", "reward", "terminated", "truncated",
  "info"}` |
| `GET /v1/sessions/{sid}` | | item_id, seed, turns, observation, info, reward, done, ... |
| `GET /v1/sessions/{sid}/actions` | | `{"actions": [...] or null}` |
| `DELETE /v1/sessions/{sid}` | | `{"session_id", "closed": true}`; busy: 202 `{..., "closed": false,
  "closing": true}`, closed when its call returns |
| `GET /v1/sessions` | | `{"sessions": [{"session_id", "id", "item_id", "turns", "busy", "closing"}]}` |
| `GET /v1/info` | | family, description, splits with counts, categories, limits |
| `GET /healthz` | | `{"status": "ok", "family", "sessions"}` |
| `GET /metrics` | | Prometheus text |

The AgentGym compatibility routes (`/create`, `/reset`, `/step`, `/observation`,
`/close`) are in `horizonrl.server.agentgym` and share the same sessions. Errors are
real statuses with `{"error": {"code", "message"}}` (codes in `horizonrl.server.schemas`).

Routes are plain Starlette routes on the FastAPI app, parsing JSON themselves: FastAPI's
pydantic request models cost more than a whole TextCraft step. Access logs are off.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import Message

from horizonrl.envs.registry import FamilySpec, get_family
from horizonrl.server.agentgym import AgentGymRoutes
from horizonrl.server.schemas import (
    MAX_ACTION_BYTES,
    MAX_BODY_BYTES,
    ApiError,
    get_action,
    get_int,
    get_str,
    json_response,
    parse_body,
)
from horizonrl.server.sessions import SessionStore

Handler = Callable[[Request], Awaitable[Response]]

DEFAULT_MAX_SESSIONS = 1024
DEFAULT_IDLE_TTL = 3600.0


async def read_body(request: Request) -> bytes:
    """The request body, refused with 413 once it passes `MAX_BODY_BYTES`.

    Reads the ASGI messages directly: a small body arrives in one message, and this
    path is shorter than `Request.body()`'s generator. An oversized body is read to its
    end before the 413 goes out (see `_discard_rest`).
    """
    message = await request.receive()
    body: bytes = message.get("body", b"")
    while message.get("more_body", False) and len(body) <= MAX_BODY_BYTES:
        message = await request.receive()
        body += message.get("body", b"")
    if len(body) > MAX_BODY_BYTES:
        size = len(body) + await _discard_rest(request, message)
        raise ApiError(413, "payload_too_large", f"request body is {size} bytes; limit {MAX_BODY_BYTES}")
    return body


async def _discard_rest(request: Request, message: Message) -> int:
    """Read and drop the rest of a body; returns how many bytes that was.

    Answering before the body is in would reset the connection: when it is not kept
    alive (`Connection: close`, HTTP/1.0) uvicorn closes the socket right after the
    answer, the kernel answers the unread bytes with a TCP reset, and a client still
    sending (a body larger than the socket buffers, 10 MiB here) gets "connection reset"
    instead of the 413. Nothing is kept, so any size costs only the time to read it.
    """
    dropped = 0
    while message.get("more_body", False):
        message = await request.receive()
        dropped += len(message.get("body", b""))
    return dropped


class V1Routes:
    """Handlers of the v1 routes over a `SessionStore`.

    A handler with a body reads it before it looks the session up, so no early answer
    (404) leaves a body unread, and no await falls between finding a session and using it.
    """

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.spec = store.spec

    async def create(self, request: Request) -> Response:
        data = parse_body(await read_body(request))
        item_id = get_str(data, "item_id")
        seed = get_int(data, "seed")
        session = await self.store.create()
        try:
            observation, info = await self.store.reset(session, item_id, seed)
        except ApiError:
            await self.store.delete(session, "unused")
            raise
        return json_response({"session_id": session.sid, "observation": observation, "info": info}, 201)

    async def reset(self, request: Request) -> Response:
        data = parse_body(await read_body(request))
        session = self.store.get(request.path_params["sid"])
        observation, info = await self.store.reset(session, get_str(data, "item_id"), get_int(data, "seed"))
        return json_response({"session_id": session.sid, "observation": observation, "info": info})

    async def step(self, request: Request) -> Response:
        action = get_action(parse_body(await read_body(request)))
        session = self.store.get(request.path_params["sid"])
        result = await self.store.step(session, action)
        return json_response(
            {
                "observation": result.observation,
                "reward": result.reward,
                "terminated": result.terminated,
                "truncated": result.truncated,
                "info": result.info,
            }
        )

    async def state(self, request: Request) -> Response:
        return json_response(self.store.get(request.path_params["sid"]).state())

    async def actions(self, request: Request) -> Response:
        session = self.store.get(request.path_params["sid"])
        if session.item_id is None:
            raise ApiError(409, "no_episode", f"session {session.sid} has no episode yet: reset it first")
        return json_response({"actions": await self.store.available_actions(session)})

    async def delete(self, request: Request) -> Response:
        session = self.store.get(request.path_params["sid"])
        if await self.store.delete(session):
            return json_response({"session_id": session.sid, "closed": True})
        return json_response({"session_id": session.sid, "closed": False, "closing": True}, 202)

    async def list_sessions(self, request: Request) -> Response:
        rows = [
            {
                "session_id": s.sid,
                "id": s.num,
                "item_id": s.item_id,
                "turns": s.turns,
                "busy": s.busy,
                "closing": s.closing is not None,
            }
            for s in self.store.by_sid.values()
        ]
        return json_response({"sessions": rows})

    async def info(self, request: Request) -> Response:
        return json_response(
            {
                "family": self.spec.name,
                "description": self.spec.description,
                "splits": {name: len(ids) for name, ids in self.spec.splits().items()},
                "categories": list(self.spec.categories),
                "isolate": self.spec.isolate,
                "max_sessions": self.store.max_sessions,
                "idle_ttl": self.store.idle_ttl,
                "max_action_bytes": MAX_ACTION_BYTES,
                "protocols": ["v1", "agentgym"],
            }
        )

    async def healthz(self, request: Request) -> Response:
        return json_response({"status": "ok", "family": self.spec.name, "sessions": len(self.store.by_sid)})

    async def metrics(self, request: Request) -> Response:
        sessions = self.store.by_sid.values()
        text = self.store.metrics.render(
            self.spec.name,
            live=len(sessions),
            busy=sum(s.busy for s in sessions),
            closing=sum(s.closing is not None for s in sessions),
            failed=sum(s.failed is not None for s in sessions),
        )
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    def routes(self) -> list[tuple[str, str, Handler]]:
        return [
            ("POST", "/v1/sessions/{sid}/step", self.step),
            ("POST", "/v1/sessions", self.create),
            ("GET", "/v1/sessions", self.list_sessions),
            ("POST", "/v1/sessions/{sid}/reset", self.reset),
            ("GET", "/v1/sessions/{sid}/actions", self.actions),
            ("GET", "/v1/sessions/{sid}", self.state),
            ("DELETE", "/v1/sessions/{sid}", self.delete),
            ("GET", "/v1/info", self.info),
            ("GET", "/healthz", self.healthz),
            ("GET", "/metrics", self.metrics),
        ]


def _counted(store: SessionStore, name: str, handler: Handler) -> Handler:
    """Turn `ApiError` into its response and count every answer by route and status."""
    count = store.metrics.count

    async def endpoint(request: Request) -> Response:
        try:
            response = await handler(request)
        except ApiError as exc:
            response = exc.response()
        count(name, response.status_code)
        return response

    endpoint.__name__ = name
    return endpoint


def create_app(
    spec: FamilySpec | str,
    *,
    env_kwargs: dict[str, Any] | None = None,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    idle_ttl: float = DEFAULT_IDLE_TTL,
    call_timeout: float = 300.0,
) -> FastAPI:
    """The ASGI app serving one family; `app.state.store` is its `SessionStore`."""
    if isinstance(spec, str):
        spec = get_family(spec)
    store = SessionStore(
        spec, env_kwargs=env_kwargs, max_sessions=max_sessions, idle_ttl=idle_ttl, call_timeout=call_timeout
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # the family's shared backends (web: the sites) start before the first session and stop
        # after the last one closed; what they add to the env kwargs reaches every worker
        with contextlib.ExitStack() as services:
            # on the loop's (main) thread, before anything is served: a child the services start
            # may tie its life to this thread (PR_SET_PDEATHSIG)
            store.env_kwargs = services.enter_context(store.spec.services(store.env_kwargs))
            store.start()
            try:
                yield
            finally:
                await store.shutdown()
                services.close()

    app = FastAPI(title=f"horizonrl env server: {spec.name}", lifespan=lifespan, openapi_url=None)
    app.state.store = store
    v1 = V1Routes(store)
    compat = AgentGymRoutes(store, read_body)
    table = [("v1", route) for route in v1.routes()] + [("ag", route) for route in compat.routes()]
    # Starlette tries routes in order; the two step routes carry nearly all the traffic
    table.sort(key=lambda entry: entry[1][1] not in ("/v1/sessions/{sid}/step", "/step"))
    for prefix, (method, path, handler) in table:
        name = f"{prefix}_{handler.__name__}"
        app.add_route(path, _counted(store, name, handler), methods=[method], name=name)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "bad_request")
        store.metrics.count("unrouted", exc.status_code)
        message = f"{request.method} {request.url.path}: {exc.detail}"
        return ApiError(exc.status_code, code, message).response()

    async def server_error(request: Request, exc: Exception) -> Response:
        store.metrics.count("error", 500)
        return ApiError(500, "internal", f"{type(exc).__name__}: {exc}").response()

    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, server_error)
    return app


def uvicorn_options(log_level: str = "warning") -> dict[str, Any]:
    """uvicorn settings shared by the server and the benchmark's echo app."""
    # Keep-alive longer than clients keep idle connections (httpx: 5 s), so a client never
    # reuses a connection the server is closing (a step sent into it could be lost).
    options: dict[str, Any] = {
        "log_level": log_level,
        "access_log": False,
        "backlog": 4096,
        "timeout_keep_alive": 75,
    }
    for key, module in (("loop", "uvloop"), ("http", "httptools")):
        try:
            __import__(module)
            options[key] = module
        except ImportError:
            pass
    return options


def serve_main(args: argparse.Namespace) -> int:
    """Entry point of `horizonrl serve` (arguments parsed in `horizonrl.cli`)."""
    import uvicorn

    spec = get_family(args.family)
    app = create_app(
        spec,
        env_kwargs=args.env_kwargs,
        max_sessions=args.max_sessions or DEFAULT_MAX_SESSIONS,
        idle_ttl=args.idle_ttl or DEFAULT_IDLE_TTL,
    )
    port = spec.default_port if args.port is None else args.port
    config = uvicorn.Config(app, host=args.host, port=port, **uvicorn_options(args.log_level))

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:
                bound = self.servers[0].sockets[0].getsockname()[1] if self.servers else port
                print(f"horizonrl serve {spec.name}: ready on http://{args.host}:{bound}", flush=True)

        async def shutdown(self, sockets: Any = None) -> None:
            await super().shutdown(sockets)  # runs the lifespan's shutdown: every session closed
            closed = app.state.store.metrics.closed.get("shutdown", 0)
            print(f"horizonrl serve {spec.name}: stopped, {closed} open sessions closed", flush=True)

    Server(config).run()
    return 0
