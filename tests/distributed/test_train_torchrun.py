"""`horizonrl train CONFIG resources.learner_world_size=2`: the command relaunches itself under
torchrun (2 gloo ranks, FSDP2), plays real textcraft episodes split over the ranks with the tiny
model, trains 2 GRPO steps, checkpoints, and evaluates, with rank 0 writing the run directory (and
deciding for both ranks, each step, whether `trainer.max_seconds` is used up: a real broadcast)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import torch

from horizonrl.models import load_model
from horizonrl.trainer.checkpoint import load_model_weights
from tests.distributed.common import ROOT

CONFIG = """\
model: {path: tiny, bf16: false}
data: {families: [textcraft], batch_size: 2}
rollout: {n: 2, max_tokens: 8, max_response_length: 256}
schedule: {type: fixed, rounds: [2]}
trainer: {total_steps: 2, max_seconds: 1.0e+6, save_every: 1, lr: 1.0e-3, micro_batch_size: 2, num_threads: 2}
eval: {at_end: true, limit: 2, max_turns: 2, max_tokens: 8}
logging: {tensorboard: false}
"""


def test_two_process_grpo_run_trains_end_to_end(tmp_path):
    config = tmp_path / "tiny.yaml"
    config.write_text(CONFIG)
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": "PASSIVE"}
    cmd = [sys.executable, "-m", "horizonrl.cli", "train", str(config), "resources.learner_world_size=2"]
    proc = subprocess.run(
        [*cmd, f"trainer.output_dir={run}"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "--nproc_per_node=2" in proc.stdout
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines if "loss/objective" in x] == [1, 2]  # rank 0 alone writes
    assert all(torch.isfinite(torch.tensor(x["loss/objective"])) for x in lines if "loss/objective" in x)
    for step in (1, 2):  # every rank's episodes, gathered: 2 items x 2 samples
        assert len((run / "trajectories" / f"step_{step}.jsonl").read_text().splitlines()) == 4
    final = run / "checkpoints" / "step_2"
    assert json.loads((final / "trainer_state.json").read_text())["world_size"] == 2
    trained, _ = load_model(str(final / "model"))
    initial, _ = load_model("tiny", seed=0)
    changed = [k for k, v in initial.state_dict().items() if not torch.equal(v, trained.state_dict()[k])]
    assert changed, "two steps changed no weight"
    load_model_weights(initial, final / "model")  # the export is a complete HF folder
    assert json.loads((run / "eval" / "final" / "report.json").read_text())["n_items"] == 2
