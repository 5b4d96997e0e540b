"""`RemoteEnv` / `AsyncRemoteEnv`: the `TextEnv` contract over HTTP, in either route set.

    env = RemoteEnv("http://127.0.0.1:36005", family="textcraft")          # our v1 routes
    env = RemoteEnv("http://host:36001", family="textcraft", protocol="agentgym")  # a reference server
    observation, info = env.reset("textcraft_3", seed=0)
    result = env.step("get 1 oak log")
    env.close()                                   # deletes the server-side session

    async with AsyncRemoteEnv(url, family="textcraft") as env:      # for the rollout engine
        observation, info = await env.reset("textcraft_3")
        result = await env.step("inventory")

Transport: each env owns a small pooled `httpx` client (keep-alive, a per-request
`timeout`); all of them share one SSL context, so creating hundreds is cheap. A client
passed as `client=` can be shared by several envs, but not by hundreds of concurrent
ones: httpx's pool scans all its connections on every request, so 200 envs on one
`AsyncClient` stepped several times (~7x, one measurement) slower than 200 with their own.

Retries are bounded (`retries`, exponential `backoff`) and only where replaying is safe:
- a request that never reached the server (connection refused, connect timeout, no free
  pooled connection) is retried, whatever it was;
- reset, state reads and close are idempotent, so they are also retried after a failure
  mid-request (a read timeout, a dropped connection). A creation replayed this way may
  leave an orphan session on the server, which its idle TTL closes;
- a step is NOT replayed once it may have reached the server: replaying "craft 1 stick"
  twice would craft twice. It raises `EnvError` saying the step's fate is unknown, and
  the rollout engine marks that trajectory failed;
- 429 (server at its session cap) is retried with backoff; other statuses are not;
- with `reconnect_s > 0`, a reset (which opens the session) whose connection is refused keeps
  being retried for up to that many seconds, so that an episode starting while its server
  restarts waits for it instead of failing. Other calls are not held up: a session in flight
  died with its server.

A failure's message says what happened to the connection ("cannot connect to the server",
"the connection to the server was lost", "no answer in time") and the httpx error.

Errors: `UnknownItemError` for an item the server does not know (at reset);
`EnvError` for everything else (server down, session gone, backend crashed, timeouts),
with a message naming the server URL and the session. A reset on a session the server
no longer has (restarted server, expired TTL) transparently opens a new session.

In `agentgym` mode `info` is rebuilt from the reference's thinner answers:
`score` from its `score` field (or the reward), `success` as `horizonrl.server.agentgym.
success_of` guesses it, and `category` from the locally registered family (or
"unknown"). `available_actions()` is None there (the reference has no such route).
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import httpx

from horizonrl.envs.core import EnvError, StepResult, UnknownItemError, make_info, parse_item_id
from horizonrl.server.agentgym import (
    ERROR_HINTS_UNKNOWN_ITEM,
    create_body,
    layout_for,
    parse_create,
    parse_reset,
    parse_step,
    reset_body,
    success_of,
)

T = TypeVar("T")
Protocol = Literal["v1", "agentgym"]
STEP_FIELDS = ("observation", "reward", "terminated", "truncated", "info")
"""The fields of a v1 step answer (docs/protocol.md)."""

# never reached the server: safe to resend anything
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
_NO_SERVER = (httpx.ConnectError, httpx.ConnectTimeout)
RECONNECT_POLL_S = 1.0
"""Longest wait between two attempts to reach a server that refuses connections (`reconnect_s`)."""


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One verifying SSL context for every env's client (building one costs milliseconds)."""
    return ssl.create_default_context()


@dataclass(frozen=True)
class _Call:
    method: str
    path: str
    body: Any = None
    params: dict[str, Any] | None = None
    idempotent: bool = True
    what: str = ""
    opens_session: bool = False
    """A reset or a creation: worth waiting for a restarting server (`reconnect_s`)."""


@dataclass(frozen=True)
class _Reply:
    status: int
    payload: Any

    @property
    def error(self) -> tuple[str, str] | None:
        """`(code, message)` for an error answer, including the reference's 200-with-error."""
        payload = self.payload
        err = payload.get("error") if isinstance(payload, dict) else None
        if self.status < 400 and err is None:
            return None
        if isinstance(err, dict):
            return str(err.get("code", "error")), str(err.get("message", err))
        if err is not None:
            return "error", str(err)
        return f"http_{self.status}", str(payload)[:500]


Op = Generator[_Call, _Reply, T]


class _Session:
    """Protocol logic without I/O: each operation yields the calls it needs and returns a result."""

    def __init__(self, base_url: str, family: str | None, protocol: Protocol) -> None:
        if protocol not in ("v1", "agentgym"):
            raise ValueError(f"protocol must be 'v1' or 'agentgym', got {protocol!r}")
        if protocol == "agentgym" and family is None:
            raise ValueError("protocol='agentgym' needs family= (each family speaks its own dialect)")
        self.base_url = base_url.rstrip("/")
        self.family = family
        self.protocol = protocol
        self.layout = layout_for(family or "")
        self.sid: str | None = None  # v1 session id
        self.num: int | None = None  # agentgym session id
        self.category = "unknown"

    @property
    def label(self) -> str:
        ident = self.sid if self.protocol == "v1" else self.num
        return f"env server {self.base_url} session {ident if ident is not None else '(none)'}"

    def fail(self, call: _Call, reply: _Reply) -> EnvError:
        code, message = reply.error or ("error", "")
        return EnvError(f"{self.label}: {call.what} -> HTTP {reply.status} {code}: {message}")

    def _category(self, item_id: str) -> str:
        if self.family is None:
            return "unknown"
        from horizonrl.envs.registry import get_family

        try:
            return get_family(self.family).category_of(item_id)
        except (KeyError, ValueError):
            return "unknown"

    # ---- operations ----------------------------------------------------------------------

    def reset(self, item_id: str, seed: int | None) -> Op[tuple[str, dict[str, Any]]]:
        if self.protocol == "agentgym":
            return (yield from self._reset_agentgym(item_id, seed))
        body = {"item_id": item_id, "seed": seed}
        if self.sid is not None:
            call = _Call(
                "POST", f"/v1/sessions/{self.sid}/reset", body, what=f"reset to {item_id}", opens_session=True
            )
            reply = yield call
            if not (reply.error and reply.error[0] == "unknown_session"):
                return self._reset_result(call, reply)
            self.sid = None  # the server lost it (restart, TTL): open a new one
        call = _Call("POST", "/v1/sessions", body, what=f"create session for {item_id}", opens_session=True)
        reply = yield call
        result = self._reset_result(call, reply)
        self.sid = str(reply.payload["session_id"])
        return result

    def _reset_result(self, call: _Call, reply: _Reply) -> tuple[str, dict[str, Any]]:
        if reply.error:
            if reply.error[0] == "unknown_item":
                raise UnknownItemError(f"{self.label}: {reply.error[1]}")
            raise self.fail(call, reply)
        return str(reply.payload["observation"]), dict(reply.payload["info"])

    def _reset_agentgym(self, item_id: str, seed: int | None) -> Op[tuple[str, dict[str, Any]]]:
        family, index = parse_item_id(item_id)
        if family != self.family:
            raise UnknownItemError(f"item {item_id!r} does not belong to family {self.family!r}")
        for _ in range(2):
            if self.num is None:
                call = _Call("POST", "/create", create_body(self.layout), what="create", opens_session=True)
                reply = yield call
                if reply.error:
                    raise self.fail(call, reply)
                self.num = parse_create(self.layout, reply.payload)
            call = _Call(
                "POST",
                "/reset",
                reset_body(self.layout, self.num, index, seed),
                what=f"reset to {item_id}",
                opens_session=True,
            )
            reply = yield call
            if reply.error and reply.error[0] == "unknown_session":
                self.num = None
                continue
            break
        if reply.error:
            code, message = reply.error
            if (
                code == "unknown_item"
                or reply.status in (400, 404)
                or (code == "error" and any(h in message.lower() for h in ERROR_HINTS_UNKNOWN_ITEM))
            ):
                raise UnknownItemError(f"{self.label}: reset to {item_id}: {message}")
            raise self.fail(call, reply)
        self.category = self._category(item_id)
        return parse_reset(self.layout, reply.payload), make_info(False, 0.0, self.category)

    def step(self, action: str) -> Op[StepResult]:
        if self.protocol == "v1":
            if self.sid is None:
                raise EnvError(f"{self.label}: step before reset")
            call = _Call(
                "POST", f"/v1/sessions/{self.sid}/step", {"action": action}, idempotent=False, what="step"
            )
            reply = yield call
            if reply.error:
                raise self.fail(call, reply)
            payload = reply.payload
            missing = [k for k in STEP_FIELDS if not isinstance(payload, dict) or k not in payload]
            if missing:
                has = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
                raise EnvError(f"{self.label}: step answer lacks {missing} (has {has}); see docs/protocol.md")
            return StepResult.from_dict(payload)
        if self.num is None:
            raise EnvError(f"{self.label}: step before reset")
        body = {self.layout.id_field: self.num, "action": action}
        call = _Call("POST", "/step", body, idempotent=False, what="step")
        reply = yield call
        if reply.error:
            raise self.fail(call, reply)
        observation, reward, terminated, truncated, score, extra = parse_step(self.layout, reply.payload)
        success = success_of(self.layout, reward, score, terminated or truncated, extra)
        info = {**extra, "success": success, "score": score, "category": self.category}
        return StepResult(observation, reward, terminated, truncated, info)

    def available_actions(self) -> Op[list[str] | None]:
        if self.protocol == "agentgym" or self.sid is None:
            return None
        call = _Call("GET", f"/v1/sessions/{self.sid}/actions", what="available actions")
        reply = yield call
        if reply.error:
            raise self.fail(call, reply)
        actions = reply.payload["actions"]
        return None if actions is None else [str(a) for a in actions]

    def close(self) -> Op[None]:
        if self.protocol == "v1" and self.sid is not None:
            call = _Call("DELETE", f"/v1/sessions/{self.sid}", what="close")
        elif self.protocol == "agentgym" and self.num is not None:
            call = _Call("POST", "/close", {self.layout.id_field: self.num}, what="close")
        else:
            return None
        self.sid = self.num = None
        yield call  # errors ignored: a session the server no longer has is closed anyway
        return None


def _describe(exc: httpx.TransportError) -> str:
    """What happened to the connection, then the httpx error."""
    if isinstance(exc, _NO_SERVER):
        cause = "cannot connect to the server"
    elif isinstance(exc, httpx.PoolTimeout):
        cause = "no free connection in the client's pool"
    elif isinstance(exc, httpx.TimeoutException):
        cause = "no answer in time"
    elif isinstance(exc, httpx.NetworkError | httpx.RemoteProtocolError):
        cause = "the connection to the server was lost"  # reset, or closed without an answer
    else:
        cause = "transport error"
    return f"{cause} ({type(exc).__name__}: {exc})"


def _payload(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


class _Base:
    def __init__(self, base_url: str, family: str | None, protocol: Protocol, timeout: float,
                 connect_timeout: float, retries: int, backoff: float,
                 reconnect_s: float) -> None:  # fmt: skip
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        if reconnect_s < 0:
            raise ValueError(f"reconnect_s must be >= 0, got {reconnect_s}")
        self._session = _Session(base_url, family, protocol)
        self.base_url = self._session.base_url
        self.family = family
        self.protocol = protocol
        self.retries = retries
        self.backoff = backoff
        self.reconnect_s = reconnect_s
        self._timeout = httpx.Timeout(timeout, connect=connect_timeout)

    @property
    def session_id(self) -> str | int | None:
        """The server-side session id (str for v1, int for agentgym), None before the first reset."""
        return self._session.sid if self.protocol == "v1" else self._session.num

    def _retry_or_raise(self, call: _Call, exc: httpx.TransportError, attempt: int, started: float) -> float:
        """Seconds to wait before the next attempt, or raise when this failure must not be retried."""
        label = self._session.label
        if not isinstance(exc, _NOT_SENT) and not call.idempotent:
            raise EnvError(
                f"{label}: {call.what} failed mid-request: {_describe(exc)}; it may or may not "
                "have been applied, so it is not replayed"
            ) from exc
        delay = self.backoff * 2**attempt
        elapsed = time.monotonic() - started
        if call.opens_session and isinstance(exc, _NO_SERVER):
            poll = min(delay, RECONNECT_POLL_S)
            if elapsed + poll <= self.reconnect_s:
                return poll  # the server may be restarting
        if attempt >= self.retries:
            raise EnvError(
                f"{label}: {call.what} failed after {attempt + 1} attempts in {elapsed:.1f} s: "
                f"{_describe(exc)}"
            ) from exc
        return delay


class RemoteEnv(_Base):
    """A `TextEnv` served by `horizonrl serve` (v1) or a reference AgentGym server (agentgym)."""

    def __init__(self, base_url: str, family: str | None = None, *, protocol: Protocol = "v1",
                 timeout: float = 120.0, connect_timeout: float = 10.0, retries: int = 3,
                 backoff: float = 0.25, reconnect_s: float = 0.0,
                 client: httpx.Client | None = None) -> None:  # fmt: skip
        super().__init__(base_url, family, protocol, timeout, connect_timeout, retries, backoff, reconnect_s)
        self._owns_client = client is None
        self._client = client or httpx.Client(timeout=self._timeout, verify=_ssl_context(), trust_env=False)

    def _send(self, call: _Call) -> _Reply:
        url = self.base_url + call.path
        attempt, started = 0, time.monotonic()
        while True:
            try:
                response = self._client.request(call.method, url, json=call.body, params=call.params)
            except httpx.TransportError as exc:
                time.sleep(self._retry_or_raise(call, exc, attempt, started))
            else:
                if response.status_code != 429 or attempt >= self.retries:
                    return _Reply(response.status_code, _payload(response))
                time.sleep(self.backoff * 2**attempt)
            attempt += 1

    def _run(self, op: Op[T]) -> T:
        try:
            call = next(op)
            while True:
                call = op.send(self._send(call))
        except StopIteration as stop:
            result: T = stop.value
            return result

    def reset(self, item_id: str, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        return self._run(self._session.reset(item_id, seed))

    def step(self, action: str) -> StepResult:
        return self._run(self._session.step(action))

    def available_actions(self) -> list[str] | None:
        return self._run(self._session.available_actions())

    def close(self) -> None:
        try:
            self._run(self._session.close())
        except EnvError:
            pass
        finally:
            if self._owns_client:
                self._client.close()

    def __enter__(self) -> RemoteEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncRemoteEnv(_Base):
    """`RemoteEnv` with `async` methods over `httpx.AsyncClient`, for the rollout engine."""

    def __init__(self, base_url: str, family: str | None = None, *, protocol: Protocol = "v1",
                 timeout: float = 120.0, connect_timeout: float = 10.0, retries: int = 3,
                 backoff: float = 0.25, reconnect_s: float = 0.0,
                 client: httpx.AsyncClient | None = None) -> None:  # fmt: skip
        super().__init__(base_url, family, protocol, timeout, connect_timeout, retries, backoff, reconnect_s)
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(
            timeout=self._timeout, verify=_ssl_context(), trust_env=False
        )

    async def _send(self, call: _Call) -> _Reply:
        url = self.base_url + call.path
        attempt, started = 0, time.monotonic()
        while True:
            try:
                response = await self._client.request(call.method, url, json=call.body, params=call.params)
            except httpx.TransportError as exc:
                await asyncio.sleep(self._retry_or_raise(call, exc, attempt, started))
            else:
                if response.status_code != 429 or attempt >= self.retries:
                    return _Reply(response.status_code, _payload(response))
                await asyncio.sleep(self.backoff * 2**attempt)
            attempt += 1

    async def _run(self, op: Op[T]) -> T:
        try:
            call = next(op)
            while True:
                call = op.send(await self._send(call))
        except StopIteration as stop:
            result: T = stop.value
            return result

    async def reset(self, item_id: str, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        return await self._run(self._session.reset(item_id, seed))

    async def step(self, action: str) -> StepResult:
        return await self._run(self._session.step(action))

    async def available_actions(self) -> list[str] | None:
        return await self._run(self._session.available_actions())

    async def close(self) -> None:
        try:
            await self._run(self._session.close())
        except EnvError:
            pass
        finally:
            if self._owns_client:
                await self._client.aclose()

    async def __aenter__(self) -> AsyncRemoteEnv:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
