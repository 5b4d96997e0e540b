"""AgentEvol with the tiny model: the order of phases, the kept set (the explored successes) and its
per-family counts, resume in the middle of an iteration, the CLI with the real engine and envs of
two families. The scripted rollout stands in where a success is needed: the tiny random model
solves nothing in the few SFT steps a test can afford (20 steps at lr 1e-2 on three one-action
BabyAI demos left it at loss 1.8, 0 of 3 solved)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from horizonrl.cli import main
from horizonrl.config import ConfigError, load_config
from horizonrl.rollout.trajectory import read_jsonl, write_jsonl
from horizonrl.trainer.agentevol import AgentEvolTrainer
from horizonrl.trainer.sft import SFTTrainer
from tests.trainer.conftest import ScriptedRollout
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
            "agentevol.bc_steps=2",
            "agentevol.sft_steps=2",
            "rollout.n=2",
            "data.batch_size=2",
            "sft.max_length=300",
            *extra,
        ],
    )


class Recording(ScriptedRollout):
    """The scripted rollout, also recording (step, greedy) of every call."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[int, bool]] = []

    def __call__(self, episodes, *, step, greedy=False):
        self.log.append((step, greedy))
        return super().__call__(episodes, step=step, greedy=greedy)


def _phases(run):
    """What each metrics line is: sft (a step), eval, iter (an iteration's counts)."""
    kinds = {"loss/sft": "sft", "eval/success": "eval", "agentevol/kept": "iter"}
    return [next(v for k, v in kinds.items() if k in r) for r in metric_rows(run)]


@pytest.mark.parametrize("order", ["imitate_first", "explore_first"])
def test_order_of_phases(tmp_path, order):
    path, _ = demo_file(tmp_path, n=2)
    rollout = Recording()
    run = tmp_path / "run"
    AgentEvolTrainer(_cfg(path, run, 2, [f"agentevol.order={order}"]), rollout=rollout).fit()
    iteration = ["sft", "sft", "iter", "eval"]
    if order == "imitate_first":  # BC on the seed demos, its eval, then explore -> learn -> eval
        assert _phases(run) == ["sft", "sft", "eval", *iteration, *iteration]
        assert rollout.log == [(2, True), (2, False), (4, True), (4, False), (6, True)]
        assert (run / "eval" / "bc" / "report.json").exists()
    else:  # the first exploration samples the model as loaded (step 0)
        assert _phases(run) == [*iteration, *iteration]
        assert rollout.log == [(0, False), (2, True), (2, False), (4, True)]
    rows = [r for r in metric_rows(run) if "agentevol/kept" in r]
    # 2 items x 2 samples per iteration; the scripted rollout's even samples succeed: 2 kept each time
    assert [r["agentevol/set_size"] for r in rows] == [4, 6]
    assert [r["agentevol/kept/textcraft"] for r in rows] == [2, 2]


def test_bad_values_are_refused():
    for key, value in [("order", "bc_first"), ("keep", "all"), ("learn_from", "base")]:
        with pytest.raises(ConfigError, match=f"agentevol.{key}='{value}' is not valid"):
            load_config("configs/agentevol.yaml", [f"agentevol.{key}={value}"])
    with pytest.raises(ConfigError, match="order=explore_first"):
        load_config("configs/agentevol.yaml", ["agentevol.bc_steps=0"])
    timed = load_config("configs/agentevol.yaml", ["trainer.max_seconds=60"])
    with pytest.raises(ValueError, match="trainer.max_seconds and sft.max_seconds do not apply"):
        AgentEvolTrainer(timed)


def test_imitate_first_needs_seed_demos(tmp_path):
    empty = tmp_path / "none.jsonl"
    write_jsonl(empty, [])
    with pytest.raises(ValueError, match="hold no usable demos"):
        AgentEvolTrainer(_cfg(empty, tmp_path / "run", 1), rollout=ScriptedRollout())


class Scored(ScriptedRollout):
    """The scripted rollout with the score of a success rising with its sample index."""

    def __call__(self, episodes, *, step, greedy=False):
        out = super().__call__(episodes, step=step, greedy=greedy)
        for t in out:
            t.score = 0.5 + 0.1 * t.sample_index if t.success else 0.0
        return out


@pytest.mark.parametrize("keep", ["success", "best_per_item"])
def test_kept_are_the_explored_successes_counted_per_family(tmp_path, keep):
    path, _ = demo_file(tmp_path, n=2)
    run = tmp_path / "run"
    families = ["data.families=[textcraft, babyai]", "data.categories=[depth 1, GoTo]", "rollout.n=4"]
    cfg = _cfg(path, run, 1, [*families, f"agentevol.keep={keep}", "eval.at_end=false"])
    AgentEvolTrainer(cfg, rollout=Scored()).fit()
    explored = read_jsonl(run / "agentevol" / "iter_0" / "explored.jsonl")
    kept = read_jsonl(run / "agentevol" / "iter_0" / "kept.jsonl")
    wins = [t for t in explored if t.success]
    if keep == "best_per_item":  # the highest-scoring success of each item
        wins = [t for t in wins if t.score == max(w.score for w in wins if w.item_id == t.item_id)]
    assert [t.token_ids for t in kept] == [t.token_ids for t in wins]
    assert len(kept) == (8 if keep == "success" else 4)  # 2 items of each family x 4 samples
    [row] = [r for r in metric_rows(run) if "agentevol/kept" in r]
    for fam in ("textcraft", "babyai"):
        mine = [t for t in explored if t.item_id.startswith(f"{fam}_")]
        assert len({t.item_id for t in mine}) == 2 and len(mine) == 8
        assert row[f"agentevol/kept/{fam}"] == sum(t.item_id.startswith(f"{fam}_") for t in kept)
        assert row[f"explore/success/{fam}"] == 0.5
    assert row["agentevol/set_size"] == 2 + len(kept)


def test_learn_from_initial_restarts_each_learn_phase_from_the_starting_weights(tmp_path):
    path, _ = demo_file(tmp_path, n=2)
    moved = {}
    for start in ("initial", "continued"):
        extra = [f"agentevol.learn_from={start}", "agentevol.sft_steps=1", "eval.at_end=false"]
        trainer = AgentEvolTrainer(_cfg(path, tmp_path / start, 1, extra), rollout=ScriptedRollout())
        if start == "initial":
            w0 = trainer.initial  # the weights the run started with (both runs: the same seed)
        trainer.fit()
        w = trainer._actor().state_dict()
        moved[start] = sum(float((w[k].float() - w0[k].float()).norm() ** 2) for k in w0) ** 0.5
    # initial: one Adam step (fresh moments) away from the start; continued: 2 BC steps + 1 further
    assert 0 < moved["initial"] < 0.7 * moved["continued"]


class Interrupted(Exception):
    pass


class StopsAfterSaving(AgentEvolTrainer):
    """Stops (as a killed process would) right after writing the checkpoint of state `at`
    (phase, step, SFT steps done in the phase)."""

    at = ("", 0, 0)

    def save(self):
        path = super().save()
        if (self.phase, self.step, self.phase_steps) == self.at:
            raise Interrupted
        return path


# iteration 2: right after its exploration (before learning); after 1 of its 2 SFT steps
@pytest.mark.parametrize("at", [("learn", 4, 0), ("learn", 5, 1)])
def test_resume_in_the_middle_of_an_iteration_equals_uninterrupted(tmp_path, at):
    path, _ = demo_file(tmp_path, n=2)
    extra = ["trainer.save_every=1", "eval.limit=1"]
    AgentEvolTrainer(_cfg(path, tmp_path / "straight", 3, extra), rollout=ScriptedRollout()).fit()
    StopsAfterSaving.at = at
    with pytest.raises(Interrupted):
        StopsAfterSaving(_cfg(path, tmp_path / "resumed", 3, extra), rollout=ScriptedRollout()).fit()
    rollout = Recording()
    resumed = AgentEvolTrainer(_cfg(path, tmp_path / "resumed", 3, extra), rollout=rollout)
    assert (resumed.iteration, resumed.phase, resumed.phase_steps) == (1, *at[:1], at[2])
    assert len(resumed.set) == 6  # seed + the successes of iterations 1 and 2, not explored again
    resumed.fit()
    assert rollout.log[0] == (6, True)  # iteration 2's eval, then iteration 3
    a = load_file(tmp_path / "straight" / "checkpoints" / "step_8" / "model" / "model.safetensors")
    b = load_file(tmp_path / "resumed" / "checkpoints" / "step_8" / "model" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    untimed = lambda run: [
        {k: v for k, v in r.items() if not k.startswith(("time/", "memory/"))} for r in metric_rows(run)
    ]  # noqa: E731
    assert untimed(tmp_path / "straight") == untimed(tmp_path / "resumed")
    for k in range(3):
        same = [
            read_jsonl(tmp_path / r / "agentevol" / f"iter_{k}" / "kept.jsonl")
            for r in ("straight", "resumed")
        ]
        assert [t.token_ids for t in same[0]] == [t.token_ids for t in same[1]]


def test_the_imitation_phase_is_sft_on_the_seed_set(tmp_path):
    """BC = `horizonrl sft` on the same files for `bc_steps` steps (same batches, same weights), so
    an SFT-alone baseline of the same steps is the run's own `eval/bc` point."""
    path, _ = demo_file(tmp_path, n=4)
    StopsAfterSaving.at = ("explore", 2, 0)  # the checkpoint after BC
    evol = _cfg(path, tmp_path / "evol", 1, ["eval.at_end=false"])
    with pytest.raises(Interrupted):
        StopsAfterSaving(evol, rollout=ScriptedRollout()).fit()
    sft = [*TINY, f"data.train_files=[{path}]", f"trainer.output_dir={tmp_path / 'sft'}"]
    sft += ["algorithm.name=sft", "trainer.total_steps=2", "data.batch_size=2", "sft.max_length=300"]
    SFTTrainer(load_config("configs/agentevol.yaml", [*sft, "eval.at_end=false"])).fit()
    a, b = (load_file(tmp_path / r / "checkpoints/step_2/model/model.safetensors") for r in ("evol", "sft"))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_cli_with_the_real_engine_on_two_families(tmp_path):
    path, _ = demo_file(tmp_path, n=2)
    for command in ("agentevol", "train"):
        out = tmp_path / command
        args = [
            command,
            "configs/agentevol.yaml",
            *TINY,
            f"data.train_files=[{path}]",
            "data.families=[textcraft, babyai]",
            "data.categories=[depth 1, GoTo]",
            f"trainer.output_dir={out}",
            "agentevol.iterations=1",
            "agentevol.bc_steps=1",
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
        assert len(explored) == 4 and all(t.token_ids and t.num_turns == 1 for t in explored)
        assert sorted(t.item_id.split("_")[0] for t in explored) == ["babyai"] * 2 + ["textcraft"] * 2
        kept = read_jsonl(out / "agentevol" / "iter_0" / "kept.jsonl")
        assert [t.token_ids for t in kept] == [t.token_ids for t in explored if t.success]
        for name in ("bc", "iter_1"):
            report = json.loads((out / "eval" / name / "report.json").read_text())
            assert set(report["families"]) == {"textcraft", "babyai"} and report["n_items"] == 2
        rows = [r for r in metric_rows(out) if "eval/success" in r]
        assert len(rows) == 2 and all("eval/success/babyai" in r for r in rows)
