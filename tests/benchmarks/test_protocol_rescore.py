"""Rescoring a protocol run's checkpoints under another eval: the tiny model on real TextCraft envs."""

from __future__ import annotations

import json

import pytest

from benchmarks import protocol, protocol_rescore
from horizonrl.rollout.trajectory import read_jsonl
from tests.benchmarks.test_protocol import TINY  # eval.max_turns=2


def test_rescoring_evaluates_each_final_checkpoint_under_the_new_settings_and_reports_them(tmp_path, capsys):
    run, out = tmp_path / "protocol", tmp_path / "cap1"
    argv = ["--sft-model", "tiny", "--families", "textcraft", "--arms", "sft,grpo", "--seeds", "0"]
    assert (
        protocol.main(
            [*argv, "--steps", "1", "--eval-limit", "2", "--eval-every", "1", "--out", str(run), *TINY]
        )
        == 0
    )
    before = json.loads((run / "grpo" / "seed_0" / "result.json").read_text())
    assert any(r.get("eval/success") is not None and r["step"] == 1 for r in before["metrics"])

    assert protocol_rescore.main([str(run), "--out", str(out), "eval.max_turns=1"]) == 0
    for arm, ckpt in (
        ("sft", "tiny"),
        ("grpo", str(run / "grpo" / "seed_0" / "checkpoints" / "step_1" / "model")),
    ):
        seed = None if arm == "sft" else 0
        evals = out / "evals" / (arm if seed is None else f"{arm}_seed_{seed}")
        new = json.loads((evals / "sft" / "result.json").read_text())
        assert new["overrides"][0] == f"model.path={ckpt}"  # the arm's own final weights
        assert "eval.max_turns=1" in new["overrides"] and "eval.max_tokens=8" in new["overrides"]
        trajs = read_jsonl(evals / "sft" / "eval" / "final" / "trajectories.jsonl")
        assert len(trajs) == 2 and all(t.num_turns == 1 for t in trajs)  # eval.max_turns=2 in the run
        dest = out / arm if seed is None else out / arm / "seed_0"
        result = json.loads((dest / "result.json").read_text())
        assert result["items"] == new["items"] and result["seed"] == seed
        assert result["rescored"]["checkpoint"] == ckpt and result["rescored"]["overrides"] == [
            "eval.max_turns=1"
        ]
    grpo = json.loads((out / "grpo" / "seed_0" / "result.json").read_text())
    assert (
        grpo["step_seconds"] == before["step_seconds"] and grpo["sampled_tokens"] == before["sampled_tokens"]
    )
    evals_rows = [r for r in grpo["metrics"] if "eval/success" in r]  # only the new eval, at the last step
    assert evals_rows == [{"step": 1, "eval/success": sum(grpo["items"].values()) / 2}]
    table = (out / "protocol.md").read_text()
    assert "rescored with eval.max_turns=1" in table and "| grpo (GRPO (base schedule)) | 1 |" in table
    assert "python benchmarks/protocol_rescore.py" in table
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # a rerun reuses the evals made with these settings; other settings in the same --out stop
    mtime = (out / "evals" / "grpo_seed_0" / "sft" / "result.json").stat().st_mtime
    capsys.readouterr()
    assert protocol_rescore.main([str(run), "--out", str(out), "--arms", "grpo", "eval.max_turns=1"]) == 0
    assert (out / "evals" / "grpo_seed_0" / "sft" / "result.json").stat().st_mtime == mtime
    with pytest.raises(SystemExit, match="the eval of grpo seed 0 failed"):
        protocol_rescore.main([str(run), "--out", str(out), "--arms", "grpo", "eval.max_turns=2"])


def test_an_arm_without_its_run_folder_or_an_unknown_arm_is_refused_by_name(tmp_path):
    run = tmp_path / "protocol"
    (run / "grpo" / "seed_0").mkdir(parents=True)
    (run / "commands.txt").write_text("python benchmarks/protocol.py --sft-model tiny --arms grpo --out x\n")
    result = {"arm": "grpo", "label": "GRPO", "kind": "rl", "seed": 0, "items": {"textcraft_5": 1.0}}
    (run / "grpo" / "seed_0" / "result.json").write_text(json.dumps(result))
    with pytest.raises(SystemExit, match="no results of \\['ppo'\\] under .*; it has grpo"):
        protocol_rescore.main([str(run), "--out", str(tmp_path / "o"), "--arms", "ppo", "eval.max_turns=1"])
    with pytest.raises(SystemExit, match="seed_0 has no final checkpoint"):
        protocol_rescore.main([str(run), "--out", str(tmp_path / "o"), "eval.max_turns=1"])
    with pytest.raises(SystemExit, match="commands.txt is missing"):
        protocol_rescore.main([str(tmp_path / "none"), "--out", str(tmp_path / "p"), "eval.max_turns=1"])
