"""What the update saw, per sampled token: `trajectories/token_stats/step_N.jsonl` (opt-in).

With `logging.save_token_stats: true` the RL trainer writes, after each step's advantages,
one line per trajectory that went into the update (the rows of the `Batch`):

    {"index": 5, "item_id": "textcraft_3", "group_id": 12, "sample_index": 1,
     "spans": [[41, 58], [63, 80]],              # sampled tokens: positions 41..57, 63..79
     "advantages": [...], "old_logprobs": [...], "token_rewards": [...],
     "ref_logprobs": [...], "kl": [...],         # with a reference policy (kl_coef > 0)
     "values": [...], "returns": [...]}          # with a critic (gae)

`index` is the trajectory's line in `trajectories/step_N.jsonl` (the file of every trajectory
of the step; trajectories left out of the update have no line here). Each array holds one value
per sampled token, in the order of `spans` (half-open `[start, end)` ranges of positions with
`loss_mask == 1`), rounded to 5 decimals. Under which distribution each logprob is: see
`horizonrl.trainer.learner` (`old_logprobs` is the learner's pi_old at the rollout's
temperature; the rollout's own logprobs are the trajectory's `logprobs`). `kl` is the
configured estimator of KL(pi_old || pi_ref), the value the `kl/mean` metric averages.

The viewer's token view colours by these and flags tokens whose `old_logprobs` and rollout
`logprobs` differ (a behaviour/learner mismatch silently breaks the PPO ratio).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from horizonrl.algos.kl import kl_estimate
from horizonrl.rollout.trajectory import Trajectory, mask_spans
from horizonrl.trainer.batch import Batch

DECIMALS = 5


def token_stats_path(run_dir: Path, step: int) -> Path:
    return run_dir / "trajectories" / "token_stats" / f"step_{step}.jsonl"


def _rounded(values: torch.Tensor) -> list[float]:
    scale = 10.0**DECIMALS
    return [float(v) for v in (values.double() * scale).round().div(scale).tolist()]


def token_stats_rows(
    batch: Batch, kept: list[Trajectory], saved: list[Trajectory], kl_estimator: str
) -> list[dict[str, object]]:
    """One row per batch row (`kept[i]` is row i); `index` is its position in `saved`."""
    position = {(t.group_id, t.sample_index): i for i, t in enumerate(saved)}  # rows of one episode
    fields: dict[str, torch.Tensor | None] = {
        "advantages": batch.advantages,
        "old_logprobs": batch.old_logprobs,
        "token_rewards": batch.token_rewards,
        "ref_logprobs": batch.ref_logprobs,
        "values": batch.values,
        "returns": batch.returns,
    }
    if batch.ref_logprobs is not None and batch.old_logprobs is not None:
        fields["kl"] = kl_estimate(batch.old_logprobs, batch.ref_logprobs, kl_estimator)
    rows: list[dict[str, object]] = []
    for i, traj in enumerate(kept):
        length = len(traj.token_ids)
        mask = batch.loss_mask[i, :length].bool()  # (L,)
        row: dict[str, object] = {
            "index": position[(traj.group_id, traj.sample_index)],
            "item_id": traj.item_id,
            "group_id": traj.group_id,
            "sample_index": traj.sample_index,
            "spans": mask_spans(mask.long().tolist()),
        }
        if "window" in traj.meta:  # bounded context: which context window of the episode
            row["window"] = traj.meta["window"]
        for name, tensor in fields.items():
            if tensor is not None:
                row[name] = _rounded(tensor[i, :length][mask])
        rows.append(row)
    return rows


def write_token_stats(
    path: Path, batch: Batch, kept: list[Trajectory], saved: list[Trajectory], kl_estimator: str
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for row in token_stats_rows(batch, kept, saved, kl_estimator):
            f.write(json.dumps(row) + "\n")
