"""Bounded context on three chat templates: every sampled turn's context is the chat template's
rendering of the kept conversation, each context window trains on the logprobs the rollout
sampled, and a segmented episode's rows share the episode's advantage."""

from __future__ import annotations

import json

import pytest
import torch

from horizonrl.agent.chat import ChatFormat, render
from horizonrl.agent.prompts import FamilyPrompt
from horizonrl.algos.advantages import get_estimator
from horizonrl.config import AlgorithmConfig
from horizonrl.models import tiny_model_config
from horizonrl.rollout.backends.hf import HFBackend
from horizonrl.rollout.engine import EngineConfig, RolloutEngine
from horizonrl.rollout.envpool import LocalEnvPool
from horizonrl.rollout.trajectory import Trajectory, context_tokens, training_rows
from horizonrl.trainer.batch import collate, episode_advantages, is_segmented
from tests.agent.test_chat import _tokenizer
from tests.rollout.helpers import CountingEnv

TOY = FamilyPrompt(family="toy", instruction="Say win.")


class RecordingBackend(HFBackend):
    """The HF backend, keeping every request it was sent."""

    def generate(self, requests, params):
        self.seen = [*getattr(self, "seen", []), *requests]
        return super().generate(requests, params)


@pytest.fixture(scope="module", params=["smollm2", "llama3", "qwen2"])
def setup(request):
    from transformers import AutoModelForCausalLM

    tok = _tokenizer(request.param)
    torch.manual_seed(0)
    config = tiny_model_config(len(tok), eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    return request.param, tok, RecordingBackend(AutoModelForCausalLM.from_config(config), tok)


def _play(backend, **cfg):
    backend.seen = []
    cfg = {"max_turns": 5, "max_tokens": 8, "temperature": 1.0, "progress": False, **cfg}
    engine = RolloutEngine(
        backend, LocalEnvPool("toy", make_env=CountingEnv), EngineConfig(**cfg), prompt=TOY
    )
    return engine.run(["toy_0", "toy_1"])


def _same_text(kind: str, a: str, b: str) -> bool:
    if kind == "llama3":  # the template trims each content (tests/agent/test_chat.py)
        return a.replace(" ", "").replace("\n", "") == b.replace(" ", "").replace("\n", "")
    return a == b


def test_each_turn_sees_the_template_rendering_of_the_kept_conversation(setup):
    kind, tok, backend = setup
    fmt = ChatFormat(tok)
    trajs = _play(backend, context_max_turns_kept=2)
    for req in backend.seen:
        turns = (len(req.messages) - 2) // 2
        assert turns <= 2 and req.messages[1]["content"].startswith("Say win.")  # the task is kept
        rendered = render(tok, req.messages, add_generation_prompt=True)
        assert _same_text(kind, fmt.decode(req.token_ids), rendered), kind
    for t in trajs:
        assert t.num_turns == 5 and len(t.segments) == 2  # windows: turns 1-3, 4, 5
        assert len(t.turn_ends) + sum(len(s["turn_ends"]) for s in t.segments) == 5
        assert context_tokens(t) == t.meta["context_tokens"] and max(context_tokens(t)) > 0
        # the last window is the task, turns 3 and 4 with their observations (context), then turn 5
        kept = [*t.messages[:2], *t.messages[6:]]
        rendered = render(tok, kept, add_generation_prompt=False)
        assert _same_text(kind, fmt.decode(t.segments[-1]["token_ids"]), rendered), kind
        assert sum(t.segments[-1]["loss_mask"]) > 0


def test_the_learner_scores_each_window_with_the_rollout_logprobs(setup):
    kind, tok, backend = setup
    trajs = _play(backend, context_max_turns_kept=1)
    rows = [row for t in trajs for row in training_rows(t)]
    assert len(rows) == sum(1 + len(t.segments) for t in trajs) > len(trajs)
    batch = collate(rows)
    assert is_segmented(batch)
    lps = backend.compute_logprobs([row.token_ids for row in rows])
    for row, own in zip(rows, lps, strict=True):
        sampled = [i for i, m in enumerate(row.loss_mask) if m]
        assert sampled and row.loss_mask[: row.prompt_length] == [0] * row.prompt_length
        for i in sampled:
            assert abs(own[i] - row.logprobs[i]) < 1e-4, kind
        assert all(row.loss_mask[e] == 1 for e in row.turn_ends)


def test_max_tokens_drops_the_oldest_turns_until_the_context_fits(setup):
    _, tok, backend = setup
    trajs = _play(backend, context_max_tokens=120, max_turns=6)
    assert all(t.segments for t in trajs)
    for req in backend.seen:  # over the bound only when the task and the last turn alone are
        assert len(req.token_ids) <= 120 or (len(req.messages) - 2) // 2 <= 1


def test_defaults_leave_trajectories_as_they_were(setup):
    _, _, backend = setup
    torch.manual_seed(1)
    plain = _play(backend)
    torch.manual_seed(1)
    roomy = _play(backend, context_max_turns_kept=50)  # bounded, but nothing to drop
    for a, b in zip(plain, roomy, strict=True):
        record = a.to_dict()
        assert "segments" not in record and "context_tokens" not in record["meta"]
        assert (a.token_ids, a.loss_mask, a.turn_ends) == (b.token_ids, b.loss_mask, b.turn_ends)
        assert Trajectory.from_dict(json.loads(json.dumps(record))).to_dict() == record


def _segmented(reward: float) -> Trajectory:
    window = {"token_ids": [1, 2, 3, 4], "loss_mask": [0, 0, 1, 1], "logprobs": [None, None, -1.0, -1.0]}
    return Trajectory(
        item_id="toy_0",
        category="toy",
        success=reward > 0,
        reward=reward,
        num_turns=3,
        turn_rewards=[0.0, 0.0, reward],
        token_ids=[1, 2, 3, 5, 6],
        loss_mask=[0, 0, 1, 0, 1],
        logprobs=[None, None, -1.0, None, -1.0],
        prompt_length=2,
        turn_ends=[2, 4],
        segments=[{**window, "prompt_length": 2, "turn_ends": [3]}],
        sample_index=0 if reward > 0 else 1,
    )


def test_segmented_episodes_share_their_advantage_and_keep_the_outcome_last():
    won, lost = _segmented(1.0), _segmented(0.0)
    rows = training_rows(won)
    assert [r.turn_rewards for r in rows] == [[0.0, 0.0], [1.0]]
    assert [r.reward for r in rows] == [0.0, 1.0] and [r.success for r in rows] == [False, True]
    single = Trajectory(
        item_id="toy_0",
        category="toy",
        token_ids=[1, 2, 3],
        loss_mask=[0, 0, 1],
        logprobs=[None, None, -1.0],
        prompt_length=2,
        turn_ends=[2],
        num_turns=1,
        turn_rewards=[0.5],
        reward=0.5,
        sample_index=2,
    )
    all_rows = [*rows, *training_rows(lost), single]
    batch = collate(all_rows)
    assert batch.episode_ids.tolist() == [0, 0, 1, 1, 2]
    rewards = torch.zeros_like(batch.loss_mask, dtype=torch.float32)
    for i, row in enumerate(all_rows):  # the outcome on each row's last sampled token
        rewards[i, row.turn_ends[-1]] = row.reward
    adv, _ = episode_advantages(get_estimator("rloo"), rewards, batch, AlgorithmConfig(adv_estimator="rloo"))
    # RLOO over episode scores (1, 0, 0.5): 1 - 0.25, 0 - 0.75, 0.5 - 0.5, on every sampled token
    expected = [0.75, 0.75, -0.75, -0.75, 0.0]
    for i, value in enumerate(expected):
        sampled = batch.loss_mask[i].bool()
        assert torch.allclose(adv[i][sampled], torch.full((int(sampled.sum()),), value))
        assert adv[i][~sampled].abs().sum() == 0
    with pytest.raises(ValueError, match="group-relative"):
        episode_advantages(get_estimator("gae"), rewards, batch, AlgorithmConfig())
    with pytest.raises(ValueError, match="per-turn states"):  # gigpo's step groups would be lost
        episode_advantages(get_estimator("gigpo"), rewards, batch, AlgorithmConfig(adv_estimator="gigpo"))


def test_bounded_context_with_a_step_level_estimator_is_refused_at_load():
    from horizonrl.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="episode-level group estimator"):
        load_config(None, ["agent.context.max_turns_kept=2", "algorithm.adv_estimator=gigpo"])
    load_config(None, ["agent.context.max_turns_kept=2", "algorithm.adv_estimator=rloo"])


def test_async_engine_bounds_the_context_as_the_lockstep_one():
    from horizonrl.models import load_tokenizer
    from horizonrl.rollout.async_engine import AsyncRolloutEngine
    from tests.rollout.helpers import ScriptedBackend

    tok = load_tokenizer("tiny")

    def reply(req):
        return f"Thought: turn {len(req.messages)}\nAction: look"

    runs = []
    for cls in (RolloutEngine, AsyncRolloutEngine):
        cfg = EngineConfig(max_turns=4, progress=False, context_max_turns_kept=1, strategy="plan")
        engine = cls(ScriptedBackend(tok, reply), LocalEnvPool("toy", make_env=CountingEnv), cfg, prompt=TOY)
        runs.append([t.to_dict() for t in engine.run(["toy_0", "toy_1"])])
    assert runs[0] == runs[1]
    assert all(len(r["segments"]) == 3 and r["num_turns"] == 5 for r in runs[0])  # plan + 4 acting turns
