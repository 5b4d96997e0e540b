"""DPO with the tiny model: the loss formula, pair building, the margin grows, resume, CLI."""

from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors.torch import load_file

from horizonrl.cli import main
from horizonrl.config import DPOConfig, load_config
from horizonrl.rollout.trajectory import Trajectory, write_jsonl
from horizonrl.trainer.dpo import DPOTrainer, build_pairs, dpo_loss, read_pairs
from tests.trainer.test_sft import TINY, demo_file, metric_rows


def test_dpo_loss_hand_computed():
    loss, chosen, rejected = dpo_loss(
        torch.tensor([-10.0, -5.0]),
        torch.tensor([-12.0, -4.0]),
        torch.tensor([-11.0, -5.0]),
        torch.tensor([-11.0, -5.0]),
        beta=0.5,
    )
    # pair 0: r_w = 0.5 * 1 = 0.5, r_l = 0.5 * -1 = -0.5 -> -log sigmoid(1); pair 1: 0 and 0.5
    assert chosen.tolist() == [0.5, 0.0] and rejected.tolist() == [-0.5, 0.5]
    expected = [math.log1p(math.exp(-1.0)), math.log1p(math.exp(0.5))]
    assert loss.tolist() == pytest.approx(expected)
    smoothed, _, _ = dpo_loss(
        torch.zeros(1), torch.zeros(1), torch.zeros(1), torch.zeros(1), beta=1, label_smoothing=0.2
    )
    assert float(smoothed) == pytest.approx(math.log(2))


def _traj(item, success, score, name):
    return Trajectory(
        item_id=item,
        category="depth 1",
        success=success,
        score=score,
        messages=[{"role": "user", "content": name}],
    )


def test_pairs_by_success_and_by_score():
    trajs = [
        _traj("a", True, 1.0, "a0"),
        _traj("a", False, 0.0, "a1"),
        _traj("a", False, 0.5, "a2"),
        _traj("b", False, 0.0, "b0"),  # no success: no pair by success
        _traj("b", False, 0.3, "b1"),
        _traj("c", True, 1.0, "c0"),
    ]
    names = lambda pairs: [(c.messages[0]["content"], r.messages[0]["content"]) for c, r in pairs]  # noqa: E731
    assert names(build_pairs(trajs, DPOConfig(pairs="success"))) == [("a0", "a1"), ("a0", "a2")]
    by_score = names(build_pairs(trajs, DPOConfig(pairs="score")))
    assert set(by_score) == {("a0", "a2"), ("a0", "a1"), ("a2", "a1"), ("b1", "b0")}
    assert len(build_pairs(trajs, DPOConfig(pairs="score", max_pairs_per_item=1))) == 2
    failed = _traj("a", False, 0.0, "broken")
    failed.failed = True
    assert ("a0", "broken") not in names(build_pairs([*trajs, failed], DPOConfig()))


def _pair_file(tmp_path, n=2):
    """Chosen: the expert's demo; rejected: the same conversation with useless replies."""
    _, demos = demo_file(tmp_path, n=n)
    rows = []
    for demo in demos:
        bad = Trajectory.from_dict(demo.to_dict())
        bad.success, bad.score = False, 0.0
        bad.messages = [
            m if m["role"] != "assistant" else {"role": "assistant", "content": "I will look around first."}
            for m in demo.messages
        ]
        rows.append(json.dumps({"chosen": demo.to_dict(), "rejected": bad.to_dict()}))
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return path, demos


def test_pair_file_and_trajectory_file_give_the_same_pairs(tmp_path):
    path, demos = _pair_file(tmp_path)
    pairs = read_pairs([path], DPOConfig())
    assert [c.item_id for c, _ in pairs] == [d.item_id for d in demos]
    flat = tmp_path / "flat.jsonl"
    write_jsonl(flat, [t for pair in pairs for t in pair])
    again = read_pairs([flat], DPOConfig())
    assert [(c.to_dict(), r.to_dict()) for c, r in again] == [(c.to_dict(), r.to_dict()) for c, r in pairs]


def _cfg(tmp_path, path, run, steps, extra=()):
    return load_config(
        "configs/dpo.yaml",
        [
            *TINY,
            f"data.train_files=[{path}]",
            f"trainer.output_dir={run}",
            f"trainer.total_steps={steps}",
            "data.batch_size=2",
            "trainer.lr=2e-3",
            "trainer.warmup_steps=0",
            "sft.max_length=400",
            "eval.at_end=false",
            "trainer.save_every=2",
            *extra,
        ],
    )


def test_margin_grows_and_reference_stays_frozen(tmp_path):
    path, _ = _pair_file(tmp_path)
    run = tmp_path / "run"
    trainer = DPOTrainer(_cfg(tmp_path, path, run, 5))
    ref_before = {k: v.clone() for k, v in trainer.learner.reference.state_dict().items()}
    trainer.fit()
    rows = [r for r in metric_rows(run) if "rewards/margin" in r]
    margins = [r["rewards/margin"] for r in rows]
    assert margins[0] == pytest.approx(0.0, abs=1e-4)  # the policy starts as the reference
    assert rows[0]["loss/dpo"] == pytest.approx(math.log(2), abs=1e-4)
    assert all(b > a for a, b in zip(margins, margins[1:], strict=False)), margins
    assert rows[-1]["rewards/accuracy"] == 1.0 and rows[-1]["loss/dpo"] < rows[0]["loss/dpo"]
    ref_after = trainer.learner.reference.state_dict()
    assert all(torch.equal(ref_before[k], ref_after[k]) for k in ref_before)


def test_resume_equals_uninterrupted(tmp_path):
    path, _ = _pair_file(tmp_path, n=3)
    DPOTrainer(_cfg(tmp_path, path, tmp_path / "straight", 4)).fit()
    DPOTrainer(_cfg(tmp_path, path, tmp_path / "resumed", 2)).fit()
    DPOTrainer(_cfg(tmp_path, path, tmp_path / "resumed", 4)).fit()
    a = load_file(tmp_path / "straight" / "checkpoints" / "step_4" / "model" / "model.safetensors")
    b = load_file(tmp_path / "resumed" / "checkpoints" / "step_4" / "model" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert [r["rewards/margin"] for r in metric_rows(tmp_path / "straight")] == [
        r["rewards/margin"] for r in metric_rows(tmp_path / "resumed")
    ]


def test_cli_dpo_and_train(tmp_path):
    path, _ = _pair_file(tmp_path, n=1)
    for command in ("dpo", "train"):
        run = tmp_path / command
        args = [
            command,
            "configs/dpo.yaml",
            *TINY,
            f"data.train_files=[{path}]",
            f"trainer.output_dir={run}",
            "trainer.total_steps=1",
            "sft.max_length=400",
            "eval.limit=1",
            "eval.max_turns=1",
            "eval.max_tokens=4",
            "rollout.max_tokens=4",
        ]
        assert main([*args, "algorithm.name=dpo"] if command == "train" else args) == 0
        assert metric_rows(run)[0]["rewards/accuracy"] is not None
        assert (run / "eval" / "final" / "report.json").exists()
    lonely = tmp_path / "lonely.jsonl"
    write_jsonl(lonely, [_traj("a", True, 1.0, "x")])
    with pytest.raises(ValueError, match="no DPO pairs"):
        main(
            [
                "dpo",
                "configs/dpo.yaml",
                *TINY,
                f"data.train_files=[{lonely}]",
                f"trainer.output_dir={tmp_path}/x",
            ]
        )
