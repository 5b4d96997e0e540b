"""Live sessions of one env family: creation under a cap, per-session lock, idle TTL, metrics.

A session wraps one `TextEnv` from `spec.make_env(**env_kwargs)` and is known by two
ids: `sid`, a random string for the v1 routes (a stale id from before a server restart
can never name someone else's session), and `num`, a small integer for the AgentGym
compatibility routes (the reference protocol's `id` / `env_idx` are integers).

How calls run:
- Cheap families (TextCraft steps take microseconds) are stepped inline in the event
  loop: no thread hop, no lock contention, nothing can interleave inside a step.
- Families with `spec.isolate=True` get a `ProcessEnv` per session; its blocking calls
  are awaited in a thread pool, so the loop keeps serving other sessions meanwhile.
- The per-session lock is a busy flag set while a call on that session is awaited. The
  event loop is single-threaded, so test-and-set is atomic: a second call arriving on a
  busy session is refused with 409 `session_busy`, never interleaved with the first.
- A session whose backend died (`EnvError`) is marked failed: every later step on it
  answers 503 with the same message; a reset gives it a fresh worker (and a new
  episode); other sessions are unaffected.
- Closing a busy session (its client gave up on a slow call: the client's timeout is
  shorter than `call_timeout`) is accepted, and the session closes as soon as that call
  returns; until then it still counts against `max_sessions`, since it still holds its
  worker. Refusing it with 409 left it open until the idle TTL, as the client moved on.
- The reaper task closes sessions idle for longer than `idle_ttl`, never a busy one;
  later calls with their id get 404 saying they expired.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from horizonrl.envs.core import EnvError, StepResult, TextEnv, UnknownItemError
from horizonrl.envs.registry import FamilySpec
from horizonrl.server.schemas import ApiError
from horizonrl.server.workers import ProcessEnv

T = TypeVar("T")

STEP_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0)
"""Upper bounds (seconds) of the env-step latency histogram in `/metrics`."""


@dataclass(eq=False)
class Session:
    """One live env and what the server remembers about its episode."""

    num: int
    sid: str
    env: TextEnv
    item_id: str | None = None
    seed: int | None = None
    turns: int = 0
    observation: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    busy: bool = False
    closing: str | None = None
    """Why a close was asked for while a call was in progress; the session closes when it returns."""
    failed: str | None = None
    created: float = field(default_factory=time.monotonic)
    last_used: float = field(default_factory=time.monotonic)

    def state(self) -> dict[str, Any]:
        """The JSON of `GET /v1/sessions/{sid}`."""
        return {
            "session_id": self.sid,
            "id": self.num,
            "item_id": self.item_id,
            "seed": self.seed,
            "turns": self.turns,
            "observation": self.observation,
            "info": self.info,
            "reward": self.reward,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "done": self.terminated or self.truncated,
            "busy": self.busy,
            "closing": self.closing is not None,
            "failed": self.failed,
            "idle_s": round(time.monotonic() - self.last_used, 3),
            "worker_pid": self.env.pid if isinstance(self.env, ProcessEnv) else None,
        }


class Metrics:
    """Counters and a step-latency histogram, rendered in Prometheus text format."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], int] = {}
        self.closed: dict[str, int] = {}
        self.created = 0
        self.rejected = 0
        self.revived = 0
        self.step_counts = [0] * (len(STEP_BUCKETS) + 1)
        self.step_sum = 0.0

    def count(self, route: str, status: int) -> None:
        key = (route, status)
        self.requests[key] = self.requests.get(key, 0) + 1

    def observe_step(self, seconds: float) -> None:
        self.step_sum += seconds
        for i, bound in enumerate(STEP_BUCKETS):
            if seconds <= bound:
                self.step_counts[i] += 1
                return
        self.step_counts[-1] += 1

    def render(self, family: str, live: int, busy: int, closing: int, failed: int) -> str:
        fam = f'family="{family}"'
        lines = [
            "# HELP horizonrl_sessions_live Sessions currently open.",
            "# TYPE horizonrl_sessions_live gauge",
            f"horizonrl_sessions_live{{{fam}}} {live}",
            "# HELP horizonrl_sessions_busy Sessions with a call in progress.",
            "# TYPE horizonrl_sessions_busy gauge",
            f"horizonrl_sessions_busy{{{fam}}} {busy}",
            "# HELP horizonrl_sessions_closing Busy sessions already closed by their client; they close when "
            "their call returns.",
            "# TYPE horizonrl_sessions_closing gauge",
            f"horizonrl_sessions_closing{{{fam}}} {closing}",
            "# HELP horizonrl_sessions_failed Open sessions whose backend died.",
            "# TYPE horizonrl_sessions_failed gauge",
            f"horizonrl_sessions_failed{{{fam}}} {failed}",
            "# HELP horizonrl_sessions_created_total Sessions created.",
            "# TYPE horizonrl_sessions_created_total counter",
            f"horizonrl_sessions_created_total{{{fam}}} {self.created}",
            "# HELP horizonrl_sessions_rejected_total Session creations refused at the cap (429).",
            "# TYPE horizonrl_sessions_rejected_total counter",
            f"horizonrl_sessions_rejected_total{{{fam}}} {self.rejected}",
            "# HELP horizonrl_sessions_revived_total Failed sessions given a new worker at reset.",
            "# TYPE horizonrl_sessions_revived_total counter",
            f"horizonrl_sessions_revived_total{{{fam}}} {self.revived}",
            "# HELP horizonrl_sessions_closed_total Sessions closed, by reason.",
            "# TYPE horizonrl_sessions_closed_total counter",
        ]
        lines += [
            f'horizonrl_sessions_closed_total{{{fam},reason="{r}"}} {n}' for r, n in self.closed.items()
        ]
        lines += [
            "# HELP horizonrl_requests_total HTTP requests, by route and status.",
            "# TYPE horizonrl_requests_total counter",
        ]
        lines += [
            f'horizonrl_requests_total{{{fam},route="{route}",status="{status}"}} {n}'
            for (route, status), n in sorted(self.requests.items())
        ]
        lines += [
            "# HELP horizonrl_step_seconds Time spent in env.step (excluding HTTP).",
            "# TYPE horizonrl_step_seconds histogram",
        ]
        cumulative = 0
        for bound, n in zip((*STEP_BUCKETS, float("inf")), self.step_counts, strict=True):
            cumulative += n
            le = "+Inf" if bound == float("inf") else repr(bound)
            lines.append(f'horizonrl_step_seconds_bucket{{{fam},le="{le}"}} {cumulative}')
        lines.append(f"horizonrl_step_seconds_sum{{{fam}}} {self.step_sum:.6f}")
        lines.append(f"horizonrl_step_seconds_count{{{fam}}} {cumulative}")
        return "\n".join(lines) + "\n"


class SessionStore:
    """All sessions of one server; every method is called from the event loop."""

    def __init__(
        self,
        spec: FamilySpec,
        *,
        env_kwargs: dict[str, Any] | None = None,
        max_sessions: int = 1024,
        idle_ttl: float = 3600.0,
        call_timeout: float = 300.0,
        executor_threads: int = 64,
    ) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be >= 1, got {max_sessions}")
        if idle_ttl <= 0:
            raise ValueError(f"idle_ttl must be > 0 seconds, got {idle_ttl}")
        self.spec = spec
        self.env_kwargs = dict(env_kwargs or {})
        self.max_sessions = max_sessions
        self.idle_ttl = idle_ttl
        self.call_timeout = call_timeout
        self.isolate = spec.isolate
        self.metrics = Metrics()
        self.by_sid: dict[str, Session] = {}
        self.by_num: dict[int, Session] = {}
        self._gone: OrderedDict[str, str] = OrderedDict()  # recently closed ids -> why, for 404 messages
        self._next_num = 0
        self._pending = 0  # creations in progress, counted against the cap
        self._executor = ThreadPoolExecutor(executor_threads, thread_name_prefix="horizonrl-env")
        self._reaper: asyncio.Task[None] | None = None

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self._reaper = asyncio.get_running_loop().create_task(self._reap_idle())

    async def shutdown(self) -> None:
        """Close every session and so every worker, then the thread pool.

        A worker still in a call is given 5 s to finish it, then killed.
        """
        if self._reaper is not None:
            self._reaper.cancel()
        await asyncio.gather(*(self._close(s, "shutdown") for s in list(self.by_sid.values())))
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def _reap_idle(self) -> None:
        period = min(max(self.idle_ttl / 4, 0.05), 5.0)
        while True:
            await asyncio.sleep(period)
            cutoff = time.monotonic() - self.idle_ttl
            for session in [s for s in self.by_sid.values() if self._idle(s, cutoff)]:
                # asked again: closing the one before awaited its worker; a call may have started since
                if self._idle(session, cutoff):
                    await self._close(session, "idle")

    @staticmethod
    def _idle(session: Session, cutoff: float) -> bool:
        return not session.busy and session.last_used < cutoff

    # ---- lookup ----------------------------------------------------------------------------

    def get(self, sid: str) -> Session:
        session = self.by_sid.get(sid)
        if session is None:
            raise self._unknown(sid, f"session {sid!r}")
        session.last_used = time.monotonic()
        return session

    def get_num(self, num: int) -> Session:
        session = self.by_num.get(num)
        if session is None:
            raise self._unknown(f"#{num}", f"session id {num}")
        session.last_used = time.monotonic()
        return session

    def _unknown(self, key: str, what: str) -> ApiError:
        why = self._gone.get(key)
        detail = f" ({why})" if why else ""
        return ApiError(404, "unknown_session", f"no {what} on this {self.spec.name} server{detail}")

    # ---- operations ------------------------------------------------------------------------

    async def create(self) -> Session:
        if len(self.by_sid) + self._pending >= self.max_sessions:
            self.metrics.rejected += 1
            raise ApiError(
                429,
                "over_capacity",
                f"{self.max_sessions} sessions are open (the server's --max-sessions); "
                "close one or retry later",
            )
        num = self._next_num
        self._next_num += 1
        if self.isolate:
            self._pending += 1
            try:
                env: TextEnv = await self._offload(self._make_process_env, num)
            except Exception as exc:
                raise ApiError(
                    503, "backend_failed", f"could not start a worker for session {num}: {exc}"
                ) from None
            finally:
                self._pending -= 1
        else:
            try:
                env = self.spec.make_env(**self.env_kwargs)
            except Exception as exc:
                raise ApiError(
                    500, "env_failed", f"env factory failed: {type(exc).__name__}: {exc}"
                ) from None
        session = Session(num=num, sid=secrets.token_hex(8), env=env)
        self.by_sid[session.sid] = session
        self.by_num[num] = session
        self.metrics.created += 1
        return session

    def _make_process_env(self, num: int) -> ProcessEnv:
        return ProcessEnv(
            self.spec.make_env,
            self.env_kwargs,
            name=f"{self.spec.name} session {num}",
            timeout=self.call_timeout,
        )

    async def reset(self, session: Session, item_id: str, seed: int | None) -> tuple[str, dict[str, Any]]:
        try:
            self.spec.check_item(item_id)
        except UnknownItemError as exc:
            raise self._unknown_item(exc) from None
        if session.failed is not None and self.isolate and not session.busy:
            await self._revive(session)
        observation, info = await self._call(session, "reset", session.env.reset, item_id, seed=seed)
        session.item_id, session.seed, session.turns = item_id, seed, 0
        session.observation, session.info = observation, info
        session.reward, session.terminated, session.truncated = 0.0, False, False
        return observation, info

    async def _revive(self, session: Session) -> None:
        """Give a session whose worker died a fresh worker (a reset starts a new episode anyway)."""
        session.busy = True
        try:
            await self._offload(session.env.close)
            session.env = await self._offload(self._make_process_env, session.num)
            session.failed = None
        except Exception as exc:
            session.failed = f"session {session.sid}: could not restart its worker: {exc}"
            raise ApiError(503, "backend_failed", session.failed) from None
        finally:
            await self._release(session)
        self.metrics.revived += 1

    async def step(self, session: Session, action: str) -> StepResult:
        if session.item_id is None:
            raise ApiError(409, "no_episode", f"session {session.sid} has no episode yet: reset it first")
        result: StepResult
        if self.isolate:
            result = await self._call(session, "step", session.env.step, action)
        else:
            self._check_usable(session)
            start = time.perf_counter()
            try:
                result = session.env.step(action)
            except Exception as exc:
                raise self._env_error(session, "step", exc) from None
            self.metrics.observe_step(time.perf_counter() - start)
        session.turns += 1
        session.observation, session.info = result.observation, result.info
        session.reward += result.reward
        session.terminated, session.truncated = result.terminated, result.truncated
        return result

    async def available_actions(self, session: Session) -> list[str] | None:
        result: list[str] | None = await self._call(session, "actions", session.env.available_actions)
        return result

    async def delete(self, session: Session, reason: str = "client") -> bool:
        """Close a session on request (`reason` "client"), or after its first reset failed ("unused").

        Returns False when the session is busy: it closes when its call returns. A client
        that timed out on that call is not waiting for it, and would ignore a refusal.
        """
        if session.busy:
            session.closing = reason
            return False
        await self._close(session, reason)
        return True

    async def _close(self, session: Session, reason: str) -> None:
        if self.by_sid.pop(session.sid, None) is None:
            return
        self.by_num.pop(session.num, None)
        why = {"client": "closed by the client", "idle": f"expired after {self.idle_ttl:g} s idle"}
        for key in (session.sid, f"#{session.num}"):
            self._gone[key] = why.get(reason, reason)
        while len(self._gone) > 20_000:
            self._gone.popitem(last=False)
        self.metrics.closed[reason] = self.metrics.closed.get(reason, 0) + 1
        try:
            if isinstance(session.env, ProcessEnv):
                await self._offload(session.env.close)
            else:
                session.env.close()
        except Exception:  # noqa: BLE001 - a failing close must not stop the others
            pass

    # ---- plumbing --------------------------------------------------------------------------

    async def _call(self, session: Session, what: str, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        """Run one env call under the session's busy flag (inline, or in the pool when isolated)."""
        if session.busy:
            raise ApiError(
                409, "session_busy", f"session {session.sid} is busy with another call; one call at a time"
            )
        self._check_usable(session)
        session.busy = True
        start = time.perf_counter()
        try:
            result = await self._offload(fn, *args, **kw) if self.isolate else fn(*args, **kw)
        except UnknownItemError as exc:
            raise self._unknown_item(exc) from None
        except Exception as exc:
            raise self._env_error(session, what, exc) from None
        finally:
            await self._release(session)
        if what == "step":
            self.metrics.observe_step(time.perf_counter() - start)
        return result

    async def _release(self, session: Session) -> None:
        """End a call on `session`: clear its busy flag, and close it if a close was asked for meanwhile."""
        session.busy = False
        session.last_used = time.monotonic()
        if session.closing is not None:
            await self._close(session, session.closing)

    async def _offload(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(*args, **kw))

    def _check_usable(self, session: Session) -> None:
        """404 for a session closed since it was looked up, 503 for one whose backend died."""
        if self.by_sid.get(session.sid) is not session:
            raise self._unknown(session.sid, f"session {session.sid!r}")
        if session.failed is not None:
            raise ApiError(503, "backend_failed", session.failed)

    def _unknown_item(self, exc: Exception) -> ApiError:
        splits = ", ".join(f"{k}: {len(v)}" for k, v in self.spec.splits().items())
        return ApiError(
            404, "unknown_item", f"{exc}; item ids look like '{self.spec.name}_<index>' (splits: {splits})"
        )

    def _env_error(self, session: Session, what: str, exc: Exception) -> ApiError:
        if isinstance(exc, EnvError):
            session.failed = f"session {session.sid} backend failed during {what}: {exc}"
            return ApiError(503, "backend_failed", session.failed)
        return ApiError(500, "env_failed", f"{what} raised {type(exc).__name__}: {exc}")
