"""`ProcessEnv` on its own: a close while another thread's call is in flight."""

from __future__ import annotations

import threading
import time

import pytest

from horizonrl.envs.core import EnvError, StepResult
from horizonrl.server.workers import ProcessEnv
from tests.server.toyenv import ProcToyEnv


def step_in_thread(env: ProcessEnv, action: str) -> tuple[threading.Thread, list[StepResult | Exception]]:
    """Start `env.step(action)` in a thread; return once the call holds the worker's pipe."""
    replies: list[StepResult | Exception] = []

    def call() -> None:
        try:
            replies.append(env.step(action))
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            replies.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    while not env._lock.locked():  # the step's request is on its way: close now lands mid-call
        time.sleep(0.001)
    return thread, replies


def test_close_waits_for_a_call_in_flight_which_gets_its_own_reply() -> None:
    for _ in range(4):  # without the lock, close read the step's reply (or broke the pipe) most times
        env = ProcessEnv(ProcToyEnv, name="toy")
        env.reset("srvtoyproc_1")
        thread, replies = step_in_thread(env, "sleep 0.2")
        env.close()
        thread.join()
        assert not env.alive
        (reply,) = replies
        assert isinstance(reply, StepResult), reply
        assert reply.observation == "srvtoyproc_1 seed=None turn=1: you said sleep 0.2"


def test_close_cuts_short_a_call_that_outlasts_its_grace() -> None:
    env = ProcessEnv(ProcToyEnv, name="toy")
    env.reset("srvtoyproc_1")
    thread, replies = step_in_thread(env, "sleep 30")
    env.close(grace=0.2)
    thread.join(10)
    assert not thread.is_alive() and not env.alive
    (reply,) = replies
    assert isinstance(reply, EnvError) and "worker process died" in str(reply)
    with pytest.raises(EnvError):
        env.step("look")
