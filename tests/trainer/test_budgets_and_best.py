"""Token-budget schedule, validation split and best checkpoint: the pieces, on the tiny model."""

from __future__ import annotations

import json

import pytest

from horizonrl.config import ConfigError, TokenScheduleConfig, load_config
from horizonrl.models import load_model, model_of_run
from horizonrl.rollout.backends.hf import HFBackend
from horizonrl.rollout.engine import EngineConfig, RolloutEngine
from horizonrl.rollout.envpool import LocalEnvPool
from horizonrl.trainer.data import held_out, make_item_sampler, validation_items
from horizonrl.trainer.rl import RLTrainer
from horizonrl.trainer.schedule import make_schedule
from tests.trainer.conftest import scripted_rl_config


def test_a_token_schedule_is_a_schedule_of_token_caps():
    s = make_schedule(
        TokenScheduleConfig(type="mixed", rounds=[64, 256], every=2, mixed_fraction=0.5), seed=1
    )
    assert [s.value(step) for step in range(4)] == [64, 64, 256, 256]
    assert sorted(s.group_values(0, 4)) == [64, 64, 256, 256]
    with pytest.raises(ConfigError, match=r"rollout\.max_tokens_schedule\.rounds: values >= 1"):
        load_config(None, ["rollout.max_tokens_schedule={type: fixed, rounds: [0]}"])


def test_engine_caps_each_items_turns_at_its_own_max_tokens():
    model, tokenizer = load_model("tiny", seed=0)
    backend = HFBackend(model, tokenizer)
    config = EngineConfig(max_turns=2, max_tokens=8, temperature=1.0, progress=False)
    engine = RolloutEngine(backend, LocalEnvPool("textcraft"), config)
    a, b = engine.run(["textcraft_0", "textcraft_1"], seed=0, max_tokens=[2, 5])
    for traj, cap in ((a, 2), (b, 5)):
        sampled = [traj.token_ids[i] for i, m in enumerate(traj.loss_mask) if m]
        assert 0 < len(sampled) <= 2 * cap and traj.num_turns >= 1
    assert sum(a.loss_mask) <= 4 < sum(b.loss_mask)  # the random model runs to the cap


def test_token_schedule_state_survives_a_resume(tmp_path, scripted_rollout):
    tokens = (
        "rollout.max_tokens_schedule={type: adaptive, rounds: [4, 8], every: 1, window: 1, threshold: 0.5}"
    )
    extra = [tokens, "trainer.save_every=1"]
    trainer = RLTrainer(scripted_rl_config(tmp_path, *extra), rollout=scripted_rollout)
    assert {e.max_tokens for e in trainer.plan_episodes(0)} == {4}
    trainer.fit()  # scripted success 0.5 reaches the threshold: the next step gets 8
    resumed = RLTrainer(
        scripted_rl_config(tmp_path, *extra, "trainer.total_steps=2"), rollout=scripted_rollout
    )
    assert resumed.token_schedule is not None and resumed.token_schedule.value(1) == 8
    RLTrainer(scripted_rl_config(tmp_path / "x", "trainer.save_every=1"), rollout=scripted_rollout).fit()
    with pytest.raises(ValueError, match="without rollout.max_tokens_schedule"):
        RLTrainer(scripted_rl_config(tmp_path / "x", *extra), rollout=scripted_rollout)


def test_validation_slice_is_fixed_by_item_id_and_never_drawn():
    ids = [f"textcraft_{i}" for i in range(100)]
    assert held_out(ids, 0.1) == held_out(list(reversed(ids)), 0.1)[::-1] and len(held_out(ids, 0.1)) == 10
    assert held_out(ids, 0.001) and not held_out(ids, 0.0)
    data = load_config(
        None, ["data.val_fraction=0.1", "data.curriculum.stages=[{categories: [depth 1]}]"]
    ).data
    val = set(validation_items(data))
    assert len(val) == 44  # of textcraft's 444 train items
    for cfg in (data, load_config(None, ["data.val_fraction=0.1"]).data):
        sampler = make_item_sampler(cfg, seed=0)
        drawn = {i for step in range(60) for i in sampler.next_batch(8, step)}
        assert drawn and not drawn & val


def test_best_checkpoint_keeps_the_earliest_of_the_highest(tmp_path, scripted_rollout, capsys):
    cfg = scripted_rl_config(tmp_path, "data.val_fraction=0.1", "logging.console=true")
    trainer = RLTrainer(cfg, rollout=scripted_rollout)
    for step, success, best in ((1, 0.25, 1), (2, 0.25, 1), (3, 0.5, 3), (4, 0.1, 3)):
        trainer.step = step
        assert trainer.keep_best(f"eval/step_{step}", success)["eval/best_step"] == best
        assert record_of(tmp_path)["step"] == best
    assert "best checkpoint stays step 3 (validation success 0.500)" in capsys.readouterr().err
    trainer.save()  # checkpoint step_4: a resume keeps the best of step 3, drops one of a later step
    resumed = RLTrainer(scripted_rl_config(tmp_path, "data.val_fraction=0.1"), rollout=scripted_rollout)
    assert resumed.step == 4 and record_of(tmp_path)["step"] == 3
    (tmp_path / "checkpoints" / "best" / "best.json").write_text(
        json.dumps({**record_of(tmp_path), "step": 7})
    )
    RLTrainer(scripted_rl_config(tmp_path, "data.val_fraction=0.1"), rollout=scripted_rollout)
    assert not (tmp_path / "checkpoints" / "best").exists()


def record_of(run):
    return json.loads((run / "checkpoints" / "best" / "best.json").read_text())


def test_model_of_run_falls_back_to_the_last_checkpoint(tmp_path):
    assert model_of_run(tmp_path) is None and model_of_run("default") is None
    (tmp_path / "checkpoints").mkdir()
    with pytest.raises(FileNotFoundError, match="without a complete checkpoint"):
        model_of_run(tmp_path)
    for step in (2, 10):
        (tmp_path / "checkpoints" / f"step_{step}" / "model").mkdir(parents=True)
        (tmp_path / "checkpoints" / f"step_{step}" / "trainer_state.json").write_text("{}")
    path, note = model_of_run(tmp_path)
    assert path == tmp_path / "checkpoints" / "step_10" / "model"
    assert "no best checkpoint" in note and "step 10" in note


def test_max_seconds_ends_an_rl_run_early_saved_and_a_resume_gets_no_fresh_budget(tmp_path, scripted_rollout):
    run = tmp_path / "timed"
    timed = ["trainer.total_steps=5", "trainer.save_every=0", "trainer.max_seconds=1e-6"]
    RLTrainer(scripted_rl_config(run, *timed), rollout=scripted_rollout).fit()  # step 1 uses it up
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "time/step" in r] == [1]
    assert rows[0]["memory/rss_gb"] > 0 and rows[0]["memory/peak_rss_gb"] > 0  # what the step holds
    state = json.loads((run / "checkpoints" / "step_1" / "trainer_state.json").read_text())
    assert state["seconds"] == pytest.approx(rows[0]["time/step"])  # saved although not due
    resumed = RLTrainer(scripted_rl_config(run, *timed), rollout=scripted_rollout)
    assert resumed.step == 1 and resumed.trained_seconds == pytest.approx(state["seconds"])
    resumed.fit()  # the budget is spent: no further step
    assert len((run / "metrics.jsonl").read_text().splitlines()) == len(rows)
    untimed = RLTrainer(
        scripted_rl_config(tmp_path / "untimed", "trainer.total_steps=2"), rollout=scripted_rollout
    )
    untimed.fit()
    assert untimed.step == 2
    with pytest.raises(ConfigError, match="trainer.max_seconds must be > 0"):
        load_config(None, ["trainer.max_seconds=0"])


class _RankZeroSays:
    """A stand-in for the learner group's `broadcast_object`: every rank gets rank 0's `value`."""

    def __init__(self, value):
        self.value, self.calls = value, 0

    def broadcast_object(self, obj):
        self.calls += 1
        return self.value


def test_under_several_ranks_rank_zero_decides_when_the_time_is_up(tmp_path, scripted_rollout):
    """Each rank times its own steps; one that stopped alone would hang the others in the next
    collective, so every rank takes rank 0's decision."""
    trainer = RLTrainer(scripted_rl_config(tmp_path, "trainer.max_seconds=100"), rollout=scripted_rollout)
    trainer.step, trainer.trained_seconds = 1, 1.0  # this rank: far from its budget
    trainer.parallel = _RankZeroSays(True)  # rank 0: out of time
    assert trainer.out_of_time() is True and trainer.parallel.calls == 1
    trainer.parallel = _RankZeroSays(False)
    trainer.trained_seconds = 500.0  # this rank: past it; rank 0: not yet
    assert trainer.out_of_time() is False
    untimed = RLTrainer(scripted_rl_config(tmp_path / "u"), rollout=scripted_rollout)
    untimed.step, untimed.parallel = 1, _RankZeroSays(True)
    assert untimed.out_of_time() is False and untimed.parallel.calls == 0  # no budget: no collective


@pytest.mark.parametrize(("steps", "plays"), [(2, 1), (3, 2)])
def test_the_final_eval_right_after_the_last_steps_is_not_played_twice(
    tmp_path, scripted_rollout, steps, plays
):
    """eval.every=2: a run that ends on step 2 has just evaluated these weights on these items, so
    `eval/final` is that report (written again, trajectories too) without playing the items again;
    a run that ends on step 3 has trained since and plays them."""
    evals = ["eval.every=2", "eval.at_end=true", "eval.limit=2", "eval.max_turns=3"]
    cfg = scripted_rl_config(tmp_path, f"trainer.total_steps={steps}", *evals)
    metrics = RLTrainer(cfg, rollout=scripted_rollout).fit()
    eval_calls = [c for c in scripted_rollout.calls if len(c) == 2]  # a training call: 2 items x 2 samples
    assert len(eval_calls) == plays
    final = json.loads((tmp_path / "eval" / "final" / "report.json").read_text())
    step_2 = json.loads((tmp_path / "eval" / "step_2" / "report.json").read_text())
    assert final["step"] == steps and metrics["eval/success"] == final["success_rate"]
    assert (final == step_2) == (steps == 2)
    assert (tmp_path / "eval" / "final" / "trajectories.jsonl").read_text()
    logged = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert sum("eval/success" in row for row in logged) == 2  # step 2's and the final one
