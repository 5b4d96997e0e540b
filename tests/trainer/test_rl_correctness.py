"""The RL loop's math and failure paths on the real engine (tiny model, TextCraft in-process).

Which distribution each logprob is under is written down in `horizonrl.trainer.learner`.
"""

from __future__ import annotations

import json

import pytest
import torch

from horizonrl.algos import losses
from horizonrl.config import load_config
from horizonrl.trainer.rl import RLTrainer
from horizonrl.trainer.workflows import RunAborted
from tests.ports import dead_url

REAL = [
    "model.path=tiny",
    "data.families=[textcraft]",
    "data.categories=[depth 1]",
    "data.batch_size=2",
    "rollout.n=2",
    "rollout.max_tokens=6",
    "schedule.type=fixed",
    "schedule.rounds=[2]",
    "trainer.total_steps=1",
    "trainer.lr=1e-3",
    "trainer.micro_batch_size=2",
    "trainer.mini_batches=1",
    "eval.at_end=false",
    "logging.tensorboard=false",
    "logging.console=false",
]


def _cfg(tmp_path, *extra):
    return load_config(None, [*REAL, f"trainer.output_dir={tmp_path}", *extra])


def _lines(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("logprob_temperature", ["rollout", "1.0"])
def test_first_pass_ratio_is_one_with_the_rollouts_own_logprobs_at_temperature(tmp_path, logprob_temperature):
    """recompute_old_logprobs=false: old = the rollout's logprobs, so the learner must compute its
    logprobs under the same tempered distribution as the backend that sampled at T=0.8."""
    cfg = _cfg(
        tmp_path,
        "model.bf16=false",
        "rollout.temperature=0.8",
        "algorithm.recompute_old_logprobs=false",
        f"algorithm.logprob_temperature={logprob_temperature}",
    )
    metrics = RLTrainer(cfg).fit()
    assert metrics["sampled_tokens/total"] > 0
    assert metrics["ratio/first_pass_max_dev"] <= 1e-5


def test_default_precision_recomputes_and_gives_ratio_one(tmp_path):
    """The default config (bf16 autocast learner, fp32 rollout) recomputes old logprobs in the
    learner's precision over the same micro-batches as the first pass: the ratio is exactly 1."""
    cfg = _cfg(tmp_path, "rollout.temperature=0.8", "trainer.micro_batch_size=3")
    assert cfg.model.bf16 and cfg.algorithm.recompute_old_logprobs
    metrics = RLTrainer(cfg).fit()
    assert metrics["ratio/first_pass_max_dev"] <= 1e-5


def test_nonfinite_gradients_are_never_applied_and_stop_the_run(tmp_path, scripted_rollout, monkeypatch):
    def nan_loss(logprobs, old_logprobs, advantages, loss_mask, params):
        loss, stats = losses.ppo_policy_loss(logprobs, old_logprobs, advantages, loss_mask, params)
        return loss * float("nan"), stats

    monkeypatch.setitem(losses.POLICY_LOSSES, "nan_test", nan_loss)
    cfg = _cfg(
        tmp_path, "algorithm.policy_loss=nan_test", "trainer.total_steps=5", "trainer.max_nonfinite_steps=2"
    )
    trainer = RLTrainer(cfg, rollout=scripted_rollout)
    before = {k: v.clone() for k, v in trainer.learner.actor.state_dict().items()}
    with pytest.raises(RunAborted, match="non-finite .* in 2 consecutive steps"):
        trainer.fit()
    for key, value in trainer.learner.actor.state_dict().items():
        assert torch.equal(value, before[key]), key
    assert not trainer.learner.optimizer.state  # Adam never stepped: no moments built from NaN
    lines = _lines(tmp_path)
    assert [line["update/nonfinite"] for line in lines] == [1.0, 1.0]
    assert all(p.grad is None for p in trainer.learner.actor.parameters())


def test_failed_zero_survives_an_env_server_that_is_down(tmp_path):
    """Every reset fails, so no trajectory has a token: nothing reaches collate; the step is skipped."""
    cfg = _cfg(tmp_path, "algorithm.failed=zero", "rollout.env_timeout_s=5")
    metrics = RLTrainer(cfg, env_urls={"textcraft": dead_url()}).fit()
    assert metrics["failed/frac"] == 1.0
    assert metrics["update/skipped"] == 1.0


def test_a_run_whose_envs_all_fail_stops_after_max_failed_steps(tmp_path):
    cfg = _cfg(tmp_path, "trainer.total_steps=4", "trainer.max_failed_steps=2", "rollout.env_timeout_s=5")
    with pytest.raises(RunAborted, match="every episode failed in 2 consecutive steps"):
        RLTrainer(cfg, env_urls={"textcraft": dead_url()}).fit()
    assert len(_lines(tmp_path)) == 2


class _Outage:
    """The scripted rollout with every episode of the given steps failed (as an env outage would)."""

    def __init__(self, inner, steps):
        self.inner, self.steps = inner, set(steps)

    def __call__(self, episodes, *, step, greedy=False):
        out = self.inner(episodes, step=step, greedy=greedy)
        if step in self.steps:
            for t in out:
                t.failed, t.fail_reason, t.success, t.reward = True, "env step failed: down", False, 0.0
        return out


def _adaptive(tmp_path, threshold, steps):
    """Caps [2, 4]; advance once a single step's success reaches `threshold` (or plateaus)."""
    adaptive = ["schedule.type=adaptive", "schedule.rounds=[2,4]", "schedule.every=1", "schedule.window=1"]
    return _cfg(tmp_path, *adaptive, f"schedule.threshold={threshold}", f"trainer.total_steps={steps}")


def test_an_outage_does_not_advance_the_adaptive_schedule(tmp_path, scripted_rollout):
    cfg = _adaptive(tmp_path, 0.99, 3)
    trainer = RLTrainer(cfg, rollout=_Outage(scripted_rollout, {0, 1}))
    trainer.fit()
    # two outage steps read as success 0, 0 would be a plateau and advance the cap
    assert trainer.schedule.current == 0
    lines = _lines(tmp_path)
    assert [line["failed/frac"] for line in lines] == [1.0, 1.0, 0.0]
    assert lines[2]["success/mean"] == 0.5  # over played episodes: even samples succeed


def test_the_logged_cap_is_the_one_the_steps_rollout_used(tmp_path, scripted_rollout):
    cfg = _adaptive(tmp_path, 0.4, 2)
    RLTrainer(cfg, rollout=scripted_rollout).fit()  # success 0.5 >= 0.4: advances after step 0
    lines = _lines(tmp_path)
    assert [line["schedule/max_turns"] for line in lines] == [2, 4]
    assert [line["schedule/max_cap_used"] for line in lines] == [2, 4]


def test_ppo_bootstraps_a_capped_episode_from_the_critic_at_the_cut(tmp_path, scripted_rollout):
    """Scripted failures are cut by the cap (truncated, reward 0): their last sampled token's return
    is gamma * V(state after the last token), the critic's own value there, not 0."""
    from horizonrl.trainer.batch import collate
    from horizonrl.trainer.rewards import select_for_update

    cfg = _cfg(tmp_path, "algorithm.name=ppo", "model.bf16=false", "algorithm.gamma=0.9")
    trainer = RLTrainer(cfg, rollout=scripted_rollout)
    kept, _ = select_for_update(scripted_rollout(trainer.plan_episodes(0), step=0), cfg)
    batch, stats = trainer.advantages(trainer.learner.score(collate(kept)), kept)
    assert batch is not None and batch.returns is not None and batch.truncated is not None
    assert stats["truncated/frac"] == 0.5
    for i, traj in enumerate(kept):
        last = max(k for k, m in enumerate(traj.loss_mask) if m)
        if traj.truncated:
            ids = torch.tensor([traj.token_ids])
            with torch.no_grad():
                v_cut = float(trainer.learner.critic(input_ids=ids).logits[0, -1, 0])
            assert float(batch.returns[i, last]) == pytest.approx(0.9 * v_cut, abs=1e-5)
            assert abs(v_cut) > 1e-4  # a real bootstrap, not a zero that would pass either way
        else:
            assert float(batch.returns[i, last]) == pytest.approx(1.0, abs=1e-6)  # terminal success


def test_resume_on_the_real_engine_equals_the_uninterrupted_run(tmp_path):
    """2 steps + resume + 2 steps = 4 straight steps: the same sampled token ids, the same weights."""
    steps = ["trainer.save_every=1", "trainer.keep_last=0", "rollout.temperature=1.0", "model.bf16=false"]
    straight = RLTrainer(_cfg(tmp_path / "a", *steps, "trainer.total_steps=4"))
    straight.fit()
    RLTrainer(_cfg(tmp_path / "b", *steps, "trainer.total_steps=2")).fit()
    resumed = RLTrainer(_cfg(tmp_path / "b", *steps, "trainer.total_steps=4"))
    assert resumed.step == 2
    resumed.fit()

    def sampled(run_dir):
        out = []
        for step in range(1, 5):
            for line in (run_dir / "trajectories" / f"step_{step}.jsonl").read_text().splitlines():
                t = json.loads(line)
                out.append([tok for tok, m in zip(t["token_ids"], t["loss_mask"], strict=True) if m])
        return out

    a, b = sampled(tmp_path / "a"), sampled(tmp_path / "b")
    assert a == b and sum(map(len, a)) > 0
    for key, value in straight.learner.actor.state_dict().items():
        assert torch.equal(value, resumed.learner.actor.state_dict()[key]), key


@pytest.mark.parametrize("eps", [1e-8, 1e-2])
def test_adam_eps_sets_how_far_a_faint_gradient_moves_the_weights(tmp_path, scripted_rollout, eps):
    """`trainer.adam_eps` reaches AdamW, and the first step is the hand-computed one: with m = g and
    v = g^2 after bias correction, each weight moves by lr * g / (|g| + eps). At torch's default eps a
    fresh optimizer moves every weight with a nonzero gradient by ~lr however faint the gradient;
    with an eps above the gradients' size the step shrinks with the gradient."""
    lr = 1e-3
    cfg = _cfg(tmp_path, f"trainer.adam_eps={eps}")
    trainer = RLTrainer(cfg, rollout=scripted_rollout)
    opt = trainer.learner.optimizer
    assert opt.param_groups[0]["eps"] == eps
    named = dict(trainer.learner.actor.named_parameters())
    before = {k: p.detach().clone() for k, p in named.items()}
    trainer.fit()
    beta1 = opt.param_groups[0]["betas"][0]
    faint = []  # how far the tensors whose gradient is everywhere below 1e-3 moved
    for name, p in named.items():
        state = opt.state.get(p)
        if not state:
            continue
        g = state["exp_avg"] / (1 - beta1)  # the (clipped) gradient of the one step
        delta = p.detach() - before[name]
        torch.testing.assert_close(delta, -lr * g / (g.abs() + eps), rtol=1e-3, atol=1e-4 * lr)  # fp32
        if 0 < g.abs().max().item() < 1e-3:
            faint.append(delta.abs().max().item())
    assert faint
    if eps == 1e-8:
        assert all(m > 0.9 * lr for m in faint)  # a full lr-sized step from a faint gradient
    else:
        assert all(m < 0.1 * lr for m in faint)  # at most 1e-3 / (1e-3 + 1e-2) of it
