"""Test doubles for rollout tests: a scripted token-level backend and small envs that misbehave."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from horizonrl.agent.chat import ChatFormat
from horizonrl.envs.core import EnvError, StepResult, make_info
from horizonrl.rollout.backends.base import GenerationRequest, GenerationResult, PolicyBackend, SamplingParams


class ScriptedBackend(PolicyBackend):
    """A token-level backend whose 'model' is a function from the request to reply text.

    The reply is encoded and returned as sampled ids (+ the template's end-of-turn token, as
    a model that stops would emit), cut at `max_tokens` like a real backend; logprob -1 each.
    """

    name = "scripted"

    def __init__(self, tokenizer: Any, reply: Callable[[GenerationRequest], str]) -> None:
        super().__init__()
        self.tokenizer = tokenizer
        self.fmt = ChatFormat(tokenizer)
        self.reply = reply
        self.requests: list[GenerationRequest] = []
        self.released: list[Any] = []

    def generate(
        self, requests: Sequence[GenerationRequest], params: SamplingParams
    ) -> list[GenerationResult]:
        out = []
        for req in requests:
            self.requests.append(req)
            limit = min(params.max_tokens, req.max_tokens or params.max_tokens)
            text = self.reply(req)
            ids = [*self.fmt.encode(text), self.fmt.eot_id]
            finish = "stop"
            if len(ids) > limit:
                ids, finish = ids[:limit], "length"
            body = ids[:-1] if finish == "stop" else ids
            out.append(GenerationResult(ids, [-1.0] * len(ids), self.fmt.decode(body), finish))
        self.stats.decode_tokens += sum(len(r.token_ids) for r in out)
        return out

    def release(self, cache_key: Any) -> None:
        self.released.append(cache_key)


class CountingEnv:
    """Succeeds when it receives `"win"`; any other action is answered with a long-ish observation."""

    def __init__(self, fail_on: str | None = None, hang_on: str | None = None, obs_words: int = 5) -> None:
        self.fail_on, self.hang_on, self.obs_words = fail_on, hang_on, obs_words
        self.item_id = ""
        self.closed = False

    def reset(self, item_id: str, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.item_id = item_id
        return f"Item {item_id}. Say win.", make_info(False, 0.0, "toy")

    def step(self, action: str) -> StepResult:
        if self.fail_on and self.fail_on in self.item_id:
            raise EnvError(f"backend crashed on {self.item_id}")
        if self.hang_on and self.hang_on in self.item_id:
            time.sleep(3)
        if action == "win":
            return StepResult("You win.", 1.0, True, False, make_info(True, 1.0, "toy"))
        return StepResult(
            " ".join(["nothing"] * self.obs_words), 0.0, False, False, make_info(False, 0.0, "toy")
        )

    def available_actions(self) -> list[str] | None:
        return None

    def close(self) -> None:
        self.closed = True


def run_past_response_budget(
    tok: Any, make_engine: Callable[..., Any], budget: int, *, context_limit: int | None = None
) -> tuple[ScriptedBackend, list]:
    """Two toy episodes through `make_engine(backend, **cfg)` whose long replies (and 40-word
    observations) run past `max_response_length=budget` well before the 20-turn cap; with
    `context_limit`, a backend that holds at most that many tokens per sequence (as vllm's
    `max_model_len`), which then binds before `budget`."""
    long_reply = "Thought: " + "very " * 30 + "\nAction: look"
    backend = ScriptedBackend(tok, lambda req: long_reply)
    backend.context_limit = context_limit
    trajs = make_engine(
        backend,
        make_env=lambda: CountingEnv(obs_words=40),
        max_turns=20,
        max_tokens=64,
        max_response_length=budget,
    ).run(["toy_0", "toy_1"])
    return backend, trajs


class ServeProcess:
    """`horizonrl serve FAMILY --port 0` in a subprocess; `url` once it says it is ready."""

    def __init__(self, family: str) -> None:
        import os
        import subprocess
        import sys

        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
        cmd = [sys.executable, "-m", "horizonrl.cli", "serve", family, "--port", "0"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=root)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "ready on " not in line:
            self.proc.kill()
            raise RuntimeError(f"server did not start: {line!r}")
        self.url = line.split("ready on ")[1].strip()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
