"""Available actions over HTTP (v1 route and RemoteEnv) and in the agent's prompt."""

from __future__ import annotations

import sys

import httpx
import pytest

from horizonrl.agent.prompts import FamilyPrompt
from horizonrl.envs.registry import get_family, register
from horizonrl.models import load_tokenizer
from horizonrl.rollout.engine import EngineConfig, RolloutEngine
from horizonrl.rollout.envpool import LocalEnvPool, RemoteEnvPool
from horizonrl.server.client import RemoteEnv
from tests.custom.helpers import ReadyProcess
from tests.envs.toy import TOY_SPEC
from tests.rollout.helpers import ScriptedBackend

PROMPT = FamilyPrompt(family="toy", instruction="Count.")


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("tiny")


@pytest.fixture(scope="module")
def toy_server():
    """The toy family served by a `module:SPEC` reference (it is registered nowhere else)."""
    server = ReadyProcess(
        [sys.executable, "-m", "horizonrl.cli", "serve", "tests.envs.toy:TOY_SPEC", "--port", "0"]
    )
    yield server
    server.stop()


def _first_user_message(backend: ScriptedBackend) -> str:
    return backend.requests[0].messages[1]["content"]


@pytest.mark.parametrize("shown", [True, False])
def test_the_agent_sees_the_available_actions_when_asked(tok, shown):
    try:
        get_family("toy")
    except KeyError:
        register(TOY_SPEC)
    backend = ScriptedBackend(tok, lambda req: "Thought: count.\nAction: inc")
    cfg = EngineConfig(max_turns=2, max_tokens=16, progress=False, show_available_actions=shown)
    engine = RolloutEngine(backend, LocalEnvPool("toy", make_env=TOY_SPEC.make_env), cfg, prompt=PROMPT)
    [traj] = engine.run(["toy_1"])  # target 2: one observation turn after the first step
    assert ("Available actions: inc" in _first_user_message(backend)) is shown
    observations = [m["content"] for m in traj.messages if m["role"] == "user"][1:]
    assert observations and all(("Available actions: inc" in o) is shown for o in observations)


def test_actions_over_http_reach_the_prompt(toy_server, tok):
    with RemoteEnv(toy_server.url, "toy") as env:
        env.reset("toy_1", seed=0)
        assert env.available_actions() == ["inc"]
        sid = env.session_id
        assert httpx.get(f"{toy_server.url}/v1/sessions/{sid}/actions").json() == {"actions": ["inc"]}
    backend = ScriptedBackend(tok, lambda req: "Thought: count.\nAction: inc")
    cfg = EngineConfig(max_turns=2, max_tokens=16, progress=False, show_available_actions=True)
    engine = RolloutEngine(backend, RemoteEnvPool(toy_server.url, "toy"), cfg, prompt=PROMPT)
    [traj] = engine.run(["toy_1"])
    assert not traj.failed and traj.success
    assert "Available actions: inc" in _first_user_message(backend)


def test_an_env_without_a_list_is_shown_as_it_is(tok):
    backend = ScriptedBackend(tok, lambda req: "Thought: look.\nAction: inventory")
    cfg = EngineConfig(max_turns=1, max_tokens=16, progress=False, show_available_actions=True)
    engine = RolloutEngine(backend, LocalEnvPool("textcraft"), cfg)
    [traj] = engine.run(["textcraft_0"])
    assert not traj.failed and "Available actions" not in _first_user_message(backend)
