"""AgentEvol with the tiny model: the set grows by the successes, resume, real engine via the CLI."""

from __future__ import annotations

import json

import torch
from safetensors.torch import load_file

from horizonrl.cli import main
from horizonrl.config import load_config
from horizonrl.rollout.trajectory import read_jsonl
from horizonrl.trainer.agentevol import AgentEvolTrainer
from tests.trainer.test_sft import TINY, demo_file, metric_rows


def _cfg(path, run, iterations, extra=()):
    return load_config(
        "configs/agentevol.yaml",
        [
            *TINY,
            f"data.train_files=[{path}]",
            f"trainer.output_dir={run}",
            f"agentevol.iterations={iterations}",
            "agentevol.explore_items=2",
            "agentevol.sft_steps=2",
            "rollout.n=2",
            "data.batch_size=2",
            "sft.max_length=300",
            *extra,
        ],
    )


def test_set_grows_by_the_successes_of_each_iteration(tmp_path, scripted_rollout):
    path, demos = demo_file(tmp_path, n=2)
    run = tmp_path / "run"
    trainer = AgentEvolTrainer(_cfg(path, run, 3, ["eval.at_end=false"]), rollout=scripted_rollout)
    assert len(trainer.set) == 2  # the seed set: the expert demos
    trainer.fit()
    rows = [r for r in metric_rows(run) if "agentevol/set_size" in r]
    # 2 items x 2 samples per iteration; the scripted rollout's even samples succeed: 2 kept each time
    assert [r["agentevol/set_size"] for r in rows] == [4, 6, 8]
    assert [r["agentevol/kept"] for r in rows] == [2, 2, 2]
    assert [r["explore/success"] for r in rows] == [0.5, 0.5, 0.5]
    assert [r["step"] for r in rows] == [2, 4, 6]  # sft_steps per iteration
    for k in range(3):
        kept = read_jsonl(run / "agentevol" / f"iter_{k}" / "kept.jsonl")
        assert len(kept) == 2 and all(t.success for t in kept)
        assert len(read_jsonl(run / "agentevol" / f"iter_{k}" / "explored.jsonl")) == 4
    explored_items = [c for c in scripted_rollout.calls]
    assert len(explored_items) == 3 and all(caps == [5, 5, 5, 5] for caps in explored_items)
    assert sum("loss/sft" in r for r in metric_rows(run)) == 6


def test_resume_equals_uninterrupted(tmp_path, scripted_rollout):
    from tests.trainer.conftest import ScriptedRollout

    path, _ = demo_file(tmp_path, n=2)
    extra = ["eval.at_end=false"]
    AgentEvolTrainer(_cfg(path, tmp_path / "straight", 2, extra), rollout=ScriptedRollout()).fit()
    AgentEvolTrainer(_cfg(path, tmp_path / "resumed", 1, extra), rollout=ScriptedRollout()).fit()
    resumed = AgentEvolTrainer(_cfg(path, tmp_path / "resumed", 2, extra), rollout=ScriptedRollout())
    assert resumed.iteration == 1 and len(resumed.set) == 4  # seed + iteration 1's successes
    resumed.fit()
    a = load_file(tmp_path / "straight" / "checkpoints" / "step_4" / "model" / "model.safetensors")
    b = load_file(tmp_path / "resumed" / "checkpoints" / "step_4" / "model" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    untimed = lambda run: [
        {k: v for k, v in r.items() if not k.startswith("time/")} for r in metric_rows(run)
    ]  # noqa: E731
    assert untimed(tmp_path / "straight") == untimed(tmp_path / "resumed")


def test_cli_with_the_real_engine_and_per_iteration_eval(tmp_path):
    path, _ = demo_file(tmp_path, n=2)
    run = tmp_path / "run"
    for command in ("agentevol", "train"):
        out = run / command
        args = [
            command,
            "configs/agentevol.yaml",
            *TINY,
            f"data.train_files=[{path}]",
            f"trainer.output_dir={out}",
            "agentevol.iterations=1",
            "agentevol.explore_items=1",
            "agentevol.sft_steps=1",
            "agentevol.max_turns=1",
            "rollout.n=2",
            "rollout.max_tokens=4",
            "data.batch_size=2",
            "sft.max_length=300",
            "eval.limit=1",
            "eval.max_turns=1",
            "eval.max_tokens=4",
        ]
        assert main([*args, "algorithm.name=agentevol"] if command == "train" else args) == 0
        explored = read_jsonl(out / "agentevol" / "iter_0" / "explored.jsonl")
        assert len(explored) == 2 and all(t.token_ids and t.num_turns == 1 for t in explored)
        report = json.loads((out / "eval" / "iter_1" / "report.json").read_text())
        assert report["n_items"] == 1
        [row] = [r for r in metric_rows(out) if "agentevol/set_size" in r]
        assert row["agentevol/set_size"] >= 2
