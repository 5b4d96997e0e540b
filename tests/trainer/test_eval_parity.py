"""One checkpoint, one score: the trainer's in-run eval and `horizonrl eval` on the checkpoint it
saved give the same report and the same trajectories (tiny model, real TextCraft items)."""

from __future__ import annotations

import json

from horizonrl.cli import main
from horizonrl.config import load_config
from horizonrl.rollout.trajectory import read_jsonl
from horizonrl.trainer.rl import RLTrainer

FIGURES = ("env", "split", "k", "n_items", "n_trajectories", "n_failed", "success_rate", "mean_score")
FIGURES += ("avg_at_k", "pass_at_k", "mean_turns", "by_category", "families")


def test_in_run_eval_and_horizonrl_eval_give_the_same_report(tmp_path):
    run = tmp_path / "run"
    # the schedule's cap (2) is not the eval's: both evals use TextCraft's eval cap (30)
    eval_settings = {"limit": 3, "max_tokens": 3, "n": 2, "temperature": 1.0, "seed": 5}
    cfg = load_config(
        None,
        [
            "model.path=tiny",
            "data.batch_size=1",
            "rollout.n=2",
            "rollout.max_tokens=3",
            "schedule.type=fixed",
            "schedule.rounds=[2]",
            "trainer.total_steps=1",
            f"trainer.output_dir={run}",
            "logging.console=false",
            "logging.tensorboard=false",
            *(f"eval.{k}={v}" for k, v in eval_settings.items()),
        ],
    )
    RLTrainer(cfg).fit()
    in_run = json.loads((run / "eval/final/report.json").read_text())

    out = tmp_path / "eval"
    model = str(run / "checkpoints/step_1/model")
    flags = ["eval", "--model", model, "--env", "textcraft", "--out", str(out), "progress=false"]
    assert main([*flags, *(f"{k}={v}" for k, v in eval_settings.items())]) == 0
    standalone = json.loads((out / "report.json").read_text())

    assert in_run["n_trajectories"] == 6 and in_run["step"] == 1
    assert {k: in_run[k] for k in FIGURES} == {k: standalone[k] for k in FIGURES}
    assert in_run["mean_turns"] > 2  # not the schedule's cap
    a, b = read_jsonl(run / "eval/final/trajectories.jsonl"), read_jsonl(out / "trajectories.jsonl")
    assert [t.item_id for t in a] == [t.item_id for t in b] and len({t.item_id for t in a}) == 3
    for x, y in zip(a, b, strict=True):
        assert (x.max_turns, x.seed) == (y.max_turns, y.seed) == (30, 5)
        assert (x.num_turns, x.meta["stop_reason"]) == (y.num_turns, y.meta["stop_reason"])
        assert x.token_ids == y.token_ids and x.loss_mask == y.loss_mask
        assert x.messages == y.messages
    assert a[0].token_ids != a[1].token_ids  # sampled at temperature 1 with the same seeds in both
