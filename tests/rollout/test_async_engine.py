"""AsyncRolloutEngine: the lock-step engine's trajectories without its round barrier; the default
`PolicyBackend.agenerate` coalesces concurrent requests into batches, one `generate` at a time."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass

import pytest

from horizonrl.agent.parsing import ParsedAction
from horizonrl.agent.prompts import FamilyPrompt, get_prompt
from horizonrl.envs.registry import get_family
from horizonrl.models import load_model, load_tokenizer
from horizonrl.rollout.async_engine import AsyncRolloutEngine
from horizonrl.rollout.backends.base import GenerationRequest, GenerationResult, SamplingParams
from horizonrl.rollout.backends.hf import HFBackend
from horizonrl.rollout.engine import EngineConfig, RolloutEngine
from horizonrl.rollout.engines import make_engine
from horizonrl.rollout.envpool import LocalEnvPool
from tests.rollout.helpers import CountingEnv, ScriptedBackend, run_past_response_budget
from tests.rollout.test_engine import TOY_PROMPT, _win_on_second_turn, check_trajectory


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("tiny")


@dataclass(frozen=True)
class WholeReplyPrompt(FamilyPrompt):
    """TextCraft's prompt, but the whole reply is the action (the tiny model never writes an
    `Action:` line; this way its turns reach the env and its observations come back)."""

    def parse_action(self, text: str) -> ParsedAction:
        return ParsedAction(text.strip() or "inventory")


class JitteryTextCraft:
    """A real TextCraft env whose steps sleep 0-40 ms, differently per item and turn, so the async
    engine's batches differ from the lock-step rounds."""

    def __init__(self) -> None:
        self.env = get_family("textcraft").make_env()
        self.turn, self.item = 0, ""

    def reset(self, item_id, *, seed=None):
        self.turn, self.item = 0, item_id
        return self.env.reset(item_id, seed=seed)

    def step(self, action):
        self.turn += 1
        time.sleep(0.01 * ((int(self.item.rsplit("_", 1)[1]) + self.turn) % 5))
        return self.env.step(action)

    def close(self):
        self.env.close()


def test_greedy_async_plays_the_lockstep_trajectories():
    model, tok = load_model("tiny")
    prompt = WholeReplyPrompt(family="textcraft", instruction=get_prompt("textcraft").instruction)
    items = get_family("textcraft").split("test")[:3]
    cfg = EngineConfig(
        max_turns=3, max_tokens=10, temperature=0.0, batch_size=3, max_response_length=500, progress=False
    )
    runs, backends = {}, {}
    for name in ("lockstep", "async"):
        backends[name] = HFBackend(model, tok)
        engine = make_engine(
            name, backends[name], LocalEnvPool("textcraft", make_env=JitteryTextCraft), cfg, prompt=prompt
        )
        runs[name] = engine.run(items, n=2, seed=[1, 2, 3])
    assert isinstance(engine, AsyncRolloutEngine)
    batches = backends["async"]._coalescer.batch_sizes  # type: ignore[union-attr]
    assert batches != engine.stats.round_sizes and max(batches) <= 3  # other batches, same bound
    for a, b in zip(runs["lockstep"], runs["async"], strict=True):
        assert (b.item_id, b.group_id, b.sample_index, b.seed) == (
            a.item_id,
            a.group_id,
            a.sample_index,
            a.seed,
        )
        assert b.token_ids == a.token_ids and b.loss_mask == a.loss_mask and b.messages == a.messages
        assert b.turn_rewards == a.turn_rewards and b.reward == a.reward and b.num_turns == a.num_turns
        assert b.meta["stop_reason"] == a.meta["stop_reason"]
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True) if x is not None) < 1e-4
        check_trajectory(b, tok, max_response_length=500)
    assert any(m["content"].startswith("Could not") or "Inventory" in m["content"] for m in b.messages)
    assert backends["async"].stats.reused_tokens > 0  # KV caches are reused per episode through agenerate
    assert backends["async"].kept_tokens() == 0


def _async(backend, make_env=CountingEnv, **cfg):
    cfg.setdefault("progress", False)
    pool = LocalEnvPool("toy", make_env=make_env)
    return AsyncRolloutEngine(backend, pool, EngineConfig(**cfg), prompt=TOY_PROMPT)


def test_a_slow_env_does_not_hold_up_the_other_episodes(tok):
    """toy_0's env takes 1 s per step: the other episodes play all their turns meanwhile (the
    lock-step engine would hold each of their turns until toy_0's step returned)."""
    finished: list[tuple[str, int]] = []
    slow_steps: list[int] = []

    class SlowOnZero(CountingEnv):
        def step(self, action):
            if self.item_id == "toy_0":
                time.sleep(1)
                slow_steps.append(1)
            return super().step(action)

    backend = ScriptedBackend(tok, lambda req: "Thought: hm.\nAction: look")
    engine = _async(backend, make_env=SlowOnZero, max_turns=2, env_timeout_s=10)
    engine.run(["toy_0", "toy_1", "toy_2"], on_finish=lambda t: finished.append((t.item_id, len(slow_steps))))
    assert [item for item, _ in finished[:2]] == ["toy_1", "toy_2"]
    assert [steps for _, steps in finished[:2]] == [0, 0]  # done before toy_0's first step returned


def test_env_error_and_timeout_fail_only_their_episode(tok):
    backend = ScriptedBackend(tok, _win_on_second_turn)
    engine = _async(
        backend,
        make_env=lambda: CountingEnv(fail_on="toy_1", hang_on="toy_2"),
        max_turns=4,
        env_timeout_s=1.0,
    )
    ok, crashed, hung = engine.run(["toy_0", "toy_1", "toy_2"])
    assert ok.success and not ok.failed and ok.meta["stop_reason"] == "terminated"
    assert crashed.failed and "backend crashed on toy_1" in (crashed.fail_reason or "")
    assert hung.failed and "timed out after 1s" in (hung.fail_reason or "")
    for t in (ok, crashed, hung):
        check_trajectory(t, tok)
    assert sorted(backend.released) == [0, 1, 2]


def test_budgets_caps_groups_and_batch_size_hold(tok):
    budget = 150
    backend, trajs = run_past_response_budget(tok, _async, budget)
    for t in trajs:
        assert t.truncated and t.meta["stop_reason"] == "max_response_length" and t.num_turns < 20
        check_trajectory(t, tok, max_response_length=budget)
    assert min(r.max_tokens or 64 for r in backend.requests) < 64
    # the backend's context limit binds the same way (vllm's max_model_len)
    backend, trajs = run_past_response_budget(tok, _async, 10_000, context_limit=260)
    for t in trajs:
        assert not t.failed and t.meta["stop_reason"] == "context_limit" and len(t.token_ids) <= 260
    assert all(len(r.token_ids) + r.max_tokens <= 260 for r in backend.requests)

    live, most = set(), [0]

    class Tracking(CountingEnv):
        def reset(self, item_id, *, seed=None):
            live.add(item_id)
            most[0] = max(most[0], len(live))
            return super().reset(item_id, seed=seed)

    backend = ScriptedBackend(tok, lambda req: "Thought: hm.\nAction: look")
    engine = _async(backend, make_env=Tracking, max_turns=4, batch_size=2)
    trajs = engine.run(
        ["toy_0", "toy_1", "toy_2"],
        n=2,
        seed=[7, 8, 9],
        max_turns=[1, 2, 3],
        on_finish=lambda t: live.discard(t.item_id),
    )
    assert [(t.group_id, t.sample_index, t.seed, t.num_turns) for t in trajs] == [
        (g, k, 7 + g, g + 1) for g in range(3) for k in range(2)
    ]
    assert all(t.meta["stop_reason"] == "max_turns" for t in trajs)
    assert most[0] <= 2 and engine.stats.rounds == 0 and engine.stats.turns == 12
    assert _async(backend, temperature=1.0).run([]) == []


def test_a_backend_error_ends_the_rollout_as_in_lockstep(tok):
    def broken(req):
        raise RuntimeError("out of memory")

    for engine in (
        _async(ScriptedBackend(tok, broken)),
        RolloutEngine(
            ScriptedBackend(tok, broken),
            LocalEnvPool("toy", make_env=CountingEnv),
            EngineConfig(progress=False),
            prompt=TOY_PROMPT,
        ),
    ):
        with pytest.raises(RuntimeError, match="out of memory"):
            engine.run(["toy_0", "toy_1"])


class RecordingBackend(ScriptedBackend):
    """Records each `generate` batch and fails the test if two ever run at once."""

    def __init__(self, tokenizer, delay: float = 0.0) -> None:
        super().__init__(tokenizer, lambda req: "Thought: ok.\nAction: look")
        self.batches: list[tuple[list[int], SamplingParams]] = []
        self.delay = delay
        self.running = threading.Event()

    def generate(self, requests, params):
        assert not self.running.is_set(), "two generate calls ran at once"
        self.running.set()
        try:
            time.sleep(self.delay)
            self.batches.append(([len(r.token_ids) for r in requests], params))
            return super().generate(requests, params)
        finally:
            self.running.clear()


def test_agenerate_coalesces_waiting_requests_by_params(tok):
    backend = RecordingBackend(tok, delay=0.2)
    greedy, sampled = SamplingParams(max_tokens=32), SamplingParams(max_tokens=32, temperature=1.0, seed=5)

    async def main() -> list[GenerationResult]:
        first = asyncio.create_task(backend.agenerate(GenerationRequest(token_ids=[1]), greedy))
        await asyncio.sleep(0.05)  # the first batch is running: these wait for it, then go together
        rest = [backend.agenerate(GenerationRequest(token_ids=[1] * n), greedy) for n in (2, 3)]
        other = [backend.agenerate(GenerationRequest(token_ids=[9] * 4), sampled)]
        return [await first, *await asyncio.gather(*rest, *other)]

    results = asyncio.run(main())
    assert len(results) == 4 and all(r.finish_reason == "stop" for r in results)
    assert [(lengths, p.seed) for lengths, p in backend.batches] == [
        ([1], None),
        ([2, 3], None),
        ([4], 5 + 2),
    ]
    # a new event loop (the next `engine.run`) gets its own coalescer; seeds advance per batch there
    asyncio.run(backend.agenerate(GenerationRequest(token_ids=[9]), sampled))
    assert backend.batches[-1][1].seed == 5


def test_agenerate_errors_reach_every_caller_of_the_batch(tok):
    backend = RecordingBackend(tok)
    backend.reply = lambda req: (_ for _ in ()).throw(ValueError("bad request"))

    async def main() -> list[object]:
        calls = [backend.agenerate(GenerationRequest(token_ids=[1]), SamplingParams()) for _ in range(3)]
        return await asyncio.gather(*calls, return_exceptions=True)

    errors = asyncio.run(main())
    assert [str(e) for e in errors] == ["bad request"] * 3


def test_the_trainer_runs_a_step_with_the_async_engine(tmp_path):
    from horizonrl.config import ConfigError, load_config
    from horizonrl.trainer.rl import RLTrainer
    from tests.trainer.test_rl_correctness import REAL

    with pytest.raises(
        ConfigError, match="rollout.engine='rounds' is not valid; choose one of: lockstep, async"
    ):
        load_config(None, [*REAL, "rollout.engine=rounds"])
    cfg = load_config(None, [*REAL, f"trainer.output_dir={tmp_path}", "rollout.engine=async"])
    metrics = RLTrainer(cfg).fit()
    assert metrics["sampled_tokens/total"] > 0 and metrics["failed/frac"] == 0
    assert metrics["update/skipped"] == 0.0 and metrics["turns/mean"] == 2
