"""A fake run folder as the trainer and `horizonrl eval` write it, for the viewer tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from horizonrl.agent.prompts import get_prompt
from horizonrl.rollout.trajectory import Trajectory, write_jsonl

PROMPT = get_prompt("textcraft")


def make_trajectory(i: int, *, success: bool, category: str, turns: int = 2) -> Trajectory:
    """A TextCraft-style episode: `turns` actions, the last one solving it when `success`."""
    messages = [
        {"role": "system", "content": PROMPT.system},
        {"role": "user", "content": PROMPT.first_user_message(f"Goal: craft item {i}.")},
    ]
    rewards = []
    for k in range(turns):
        messages.append(
            {"role": "assistant", "content": f"Thought: step {k} of item {i}\nAction: get {k + 1} log"}
        )
        rewards.append(1.0 if success and k == turns - 1 else 0.0)
        if k < turns - 1:
            messages.append({"role": "user", "content": f"Got {k + 1} log (turn {k})"})
    # prompt 4 tokens, then per turn: 3 sampled tokens + 2 observation tokens
    ids, mask, logprobs, ends = [1, 2, 3, 4], [0, 0, 0, 0], [None] * 4, []
    for k in range(turns):
        ids += [10 + k, 11 + k, 12 + k]
        mask += [1, 1, 1]
        logprobs += [-0.1, -0.5, -3.0]
        ends.append(len(ids) - 1)
        if k < turns - 1:
            ids += [5, 6]
            mask += [0, 0]
            logprobs += [None, None]
    return Trajectory(
        item_id=f"textcraft_{i}",
        category=category,
        messages=messages,
        success=success,
        score=1.0 if success else 0.0,
        reward=sum(rewards),
        num_turns=turns,
        terminated=success,
        truncated=not success,
        turn_rewards=rewards,
        token_ids=ids,
        loss_mask=mask,
        logprobs=logprobs,
        prompt_length=4,
        turn_ends=ends,
        max_turns=turns,
        meta={"final_observation": "Crafted 1 target" if success else "Got 2 log", "stop_reason": "x"},
    )


def write_run(run: Path, steps: int = 3, per_step: int = 8) -> Path:
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.yaml").write_text("model:\n  path: tiny\nschedule:\n  rounds: [2, 3]\n")
    with (run / "metrics.jsonl").open("w") as f:
        for step in range(1, steps + 1):
            row = {
                "step": step,
                "reward/mean": 0.1 * step,
                "success/mean": 0.2 * step,
                "kl/mean": 0.01,
                "turns/mean": 2.0,
                "schedule/max_turns": 2.0 + step // 2,
                "turns/hist": {"2": 4},
            }
            f.write(json.dumps(row) + "\n")
        f.write(json.dumps({"step": steps, "eval/success": 0.5}) + "\n")  # eval logs a second line
    for step in range(1, steps + 1):
        trajs = [
            make_trajectory(
                i, success=i % 2 == 0, category="depth 1" if i < per_step // 2 else "depth 2", turns=1 + i % 3
            )
            for i in range(per_step)
        ]
        write_jsonl(run / "trajectories" / f"step_{step}.jsonl", trajs)
    evald = run / "eval" / "final"
    write_jsonl(
        evald / "trajectories.jsonl",
        [make_trajectory(i, success=i < 3, category="depth 1") for i in range(4)],
    )
    report = {
        "step": steps,
        "split": "test",
        "n": 4,
        "success_rate": 0.75,
        "mean_score": 0.75,
        "by_category": {"depth 1": {"n": 4, "success_rate": 0.75, "mean_score": 0.75}},
    }
    (evald / "report.json").write_text(json.dumps(report))
    return run


@pytest.fixture
def runs_root(tmp_path: Path) -> Path:
    """`root/` holding a training run, an eval folder and a loose trajectory file."""
    root = tmp_path / "runs"
    write_run(root / "ppo")
    evald = root / "evals" / "smollm"
    write_jsonl(
        evald / "trajectories.jsonl", [make_trajectory(i, success=True, category="depth 1") for i in range(3)]
    )
    (evald / "report.json").write_text(
        json.dumps(
            {
                "env": "textcraft",
                "model": "default",
                "split": "test",
                "k": 1,
                "n_items": 3,
                "success_rate": 1.0,
                "by_category": {},
            }
        )
    )
    (evald / "report.md").write_text("# Eval\n")
    write_jsonl(
        root / "expert.jsonl", [make_trajectory(i, success=True, category="depth 2") for i in range(2)]
    )
    (root / "corpus.jsonl").write_text('{"id": "1", "title": "t", "text": "not trajectories"}\n')
    return root
