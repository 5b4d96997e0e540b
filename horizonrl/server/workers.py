"""`ProcessEnv`: a `TextEnv` whose real env lives in a child process of its own.

Heavy backends (a ScienceWorld JVM, a browser) can crash, hang or leak; running each
session's env in its own process keeps one failure to one session. The parent talks to
the child over a `multiprocessing.Pipe` with `(method, args)` requests and
`("ok", result)` / `("err", kind, message)` replies.

    env = ProcessEnv(spec.make_env, {"jvm_mem": "1g"}, name="sciworld session 3")
    obs, info = env.reset("sciworld_0", seed=0)
    env.step("look around")
    env.close()                           # the child exits; it is killed if it does not

- If the child dies (or a call outlives `timeout`), the call raises
  `horizonrl.envs.core.EnvError` naming the session and the exit code, the child is
  reaped, and every later call raises the same error at once.
- `UnknownItemError` raised in the child is raised again in the parent (so the server
  answers 404 and `check_env` passes), and so is an `EnvError` (the backend inside the
  worker failed, e.g. its JVM died; the server answers 503); other exceptions raised by the env come back as
  `RuntimeError` with the child's traceback text.
- Children start from a `forkserver`, which forks from a clean process that has not
  started threads, JVMs or event loops. The factory must therefore be picklable (a
  module-level function or class); its module is imported in the child, which is how a
  user family registered at import time is found there. When the parent dies the pipe
  closes and the child exits on its own.
- Calls block: the server awaits them in a thread pool, never in its event loop.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import threading
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, NoReturn

from horizonrl.envs.core import EnvError, StepResult, TextEnv, UnknownItemError

DEFAULT_TIMEOUT = 300.0
"""Seconds one call may take before the child is considered hung and killed."""

_context_lock = threading.Lock()
_context: Any = None


def _mp_context() -> Any:
    global _context
    with _context_lock:
        if _context is None:
            try:
                ctx: Any = mp.get_context("forkserver")
                # Preloading makes the fork server carry the parent's sys.path, so factories defined
                # in modules found through it (tests, user scripts) unpickle in the child.
                ctx.set_forkserver_preload(["horizonrl.server.workers"])
            except ValueError:  # pragma: no cover - platforms without forkserver
                ctx = mp.get_context("spawn")
            _context = ctx
        return _context


def _child_main(conn: Connection, factory: Callable[..., TextEnv], kwargs: dict[str, Any]) -> None:
    """Run in the child: build the env, then answer requests until told to close."""
    try:
        env = factory(**kwargs)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, then exit
        conn.send(("err", "init", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
        return
    conn.send(("ok", None))
    while True:
        try:
            method, args = conn.recv()
        except (EOFError, OSError):  # parent gone
            break
        try:
            if method == "reset":
                result: Any = env.reset(args[0], seed=args[1])
            elif method == "step":
                result = env.step(args[0]).to_dict()
            elif method == "available_actions":
                result = env.available_actions()
            elif method == "close":
                env.close()
                conn.send(("ok", None))
                break
            else:
                raise ValueError(f"unknown method {method!r}")
        except UnknownItemError as exc:
            conn.send(("err", "unknown_item", str(exc)))
        except EnvError as exc:  # the backend failed (e.g. its JVM died); the worker lives on
            conn.send(("err", "backend", str(exc)))
        except Exception as exc:  # noqa: BLE001 - the env's bug, reported to the parent
            conn.send(("err", "env", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}"))
        else:
            conn.send(("ok", result))
    conn.close()


class ProcessEnv:
    """A `TextEnv` proxy to an env built by `factory(**kwargs)` in a child process."""

    def __init__(
        self,
        factory: Callable[..., TextEnv],
        kwargs: dict[str, Any] | None = None,
        *,
        name: str = "env",
        timeout: float = DEFAULT_TIMEOUT,
        start_timeout: float = 120.0,
    ) -> None:
        self.name = name
        self.timeout = timeout
        self._error: str | None = None
        self._lock = threading.Lock()
        ctx = _mp_context()
        self._conn, child_conn = ctx.Pipe()
        self._process = ctx.Process(
            target=_child_main, args=(child_conn, factory, dict(kwargs or {})), name=f"horizonrl-{name}"
        )
        self._process.daemon = True
        self._process.start()
        child_conn.close()
        self._call_raw(None, None, start_timeout)

    @property
    def pid(self) -> int | None:
        return self._process.pid

    @property
    def alive(self) -> bool:
        return self._error is None and self._process.is_alive()

    def reset(self, item_id: str, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        observation, info = self._call("reset", (item_id, seed))
        return observation, info

    def step(self, action: str) -> StepResult:
        return StepResult.from_dict(self._call("step", (action,)))

    def available_actions(self) -> list[str] | None:
        result: list[str] | None = self._call("available_actions", ())
        return result

    def close(self, grace: float = 5.0) -> None:
        """Ask the child to close its env and exit; kill it if it does not within 5 s.

        Takes the call lock, so the close request never lands on the pipe between another
        thread's request and its reply (that thread would read the close's answer, or a
        closed pipe). A call still running after `grace` seconds (a server shutting down
        mid-call) is cut short by killing the child: the call raises `EnvError` and lets go.
        """
        if not self._lock.acquire(timeout=grace):
            self._process.kill()
            self._lock.acquire()
        try:
            if self._error is None and self._process.is_alive():
                with contextlib.suppress(EnvError):
                    self._call_raw("close", (), 5.0)
            self._error = self._error or f"{self.name}: env is closed"
            self._reap(wait=5.0)
        finally:
            self._lock.release()

    def _call(self, method: str, args: tuple[Any, ...]) -> Any:
        with self._lock:  # one request in flight per pipe
            return self._call_raw(method, args, self.timeout)

    def _call_raw(self, method: str | None, args: tuple[Any, ...] | None, timeout: float) -> Any:
        if self._error is not None:
            raise EnvError(self._error)
        try:
            if method is not None:
                self._conn.send((method, args))
            if not self._conn.poll(timeout):
                self._fail(f"did not answer {method or 'start'} within {timeout:g} s; worker killed")
            reply = self._conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            self._reap(wait=1.0)
            self._fail(f"worker process died (exit code {self._process.exitcode}) during {method or 'start'}")
        if reply[0] == "ok":
            return reply[1]
        _, kind, message = reply
        if kind == "unknown_item":
            raise UnknownItemError(message)
        if kind == "backend":
            raise EnvError(f"{self.name}: {message}")
        if kind == "init":
            self._reap(wait=5.0)
            self._fail(f"env factory failed in the worker: {message}")
        raise RuntimeError(f"{self.name}: env raised in worker: {message}")

    def _fail(self, why: str) -> NoReturn:
        self._error = f"{self.name} (pid {self._process.pid}): {why}"
        self._reap(wait=0.0)
        raise EnvError(self._error)

    def _reap(self, wait: float) -> None:
        """Join the child, escalating to SIGTERM then SIGKILL; close our end of the pipe."""
        proc = self._process
        if wait > 0:
            proc.join(wait)
        if proc.is_alive():
            proc.terminate()
            proc.join(2.0)
        if proc.is_alive():
            proc.kill()
            proc.join(2.0)
        self._conn.close()

    def __del__(self) -> None:  # last resort; the server closes sessions explicitly
        try:
            if self._process.is_alive():
                self._process.kill()
        except Exception:  # noqa: BLE001
            pass
