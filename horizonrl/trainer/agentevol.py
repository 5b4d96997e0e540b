"""`horizonrl agentevol CONFIG` (or `train` with `algorithm.name: agentevol`): explore, keep, imitate.

    horizonrl agentevol configs/agentevol.yaml

AgentEvol (Xi et al., 2024, "AgentGym", arXiv:2406.04151) alternates, for `agentevol.iterations`
rounds:

1. explore   roll out the current policy on `agentevol.explore_items` train items (`data.families`,
             `data.split`, `data.categories`; a seeded order over epochs), `rollout.n` samples
             each at `rollout.temperature`, turn cap `agentevol.max_turns`
2. keep      the successful trajectories (token-exact, as sampled), written to
             `<run>/agentevol/iter_K/kept.jsonl`
3. grow      add them to the set; the seed set is the trajectories of `data.train_files` (expert
             demos), filtered like SFT's (`sft.success_only`, `data.categories`)
4. imitate   `agentevol.sft_steps` SFT steps on the whole set (`sft.batch_size` or
             `data.batch_size` trajectories per step, masked NLL on sampled tokens)
5. eval      greedy eval on `eval.split` -> `<run>/eval/iter_K/report.json`

Per iteration `agentevol/set_size`, `agentevol/kept`, `explore/success` and `eval/success` are
logged to `metrics.jsonl` (with the SFT steps' `loss/sft`). A checkpoint is written after each
iteration (weights, optimizer, iteration, data cursors); the set is rebuilt from the seed files and
the `kept.jsonl` files of the finished iterations, so a resumed run continues exactly.

Simplifications: the policy keeps training across iterations (the paper restarts each
iteration's SFT from the base model on the merged set); exploration does not de-duplicate
successes beyond identical token streams.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from horizonrl.config import Config
from horizonrl.rollout.trajectory import Trajectory, read_jsonl, write_jsonl
from horizonrl.trainer.batch import collate
from horizonrl.trainer.data import ItemSampler, load_items
from horizonrl.trainer.episodes import Episode, Rollout
from horizonrl.trainer.monitor import PhaseTimer
from horizonrl.trainer.sft import SupervisedRun, load_trajectories, sft_examples, sft_step


class AgentEvolTrainer(SupervisedRun):
    kind = "agentevol"

    def __init__(
        self, cfg: Config, *, rollout: Rollout | None = None, env_urls: dict[str, str] | None = None
    ) -> None:
        super().__init__(cfg, rollout=rollout, env_urls=env_urls)
        d = cfg.data
        self.items = load_items(d.families, d.split, categories=d.categories, limit=d.max_items)
        self.item_sampler = ItemSampler(self.items, seed=cfg.trainer.seed, shuffle=d.shuffle)
        self.seed_set = sft_examples(
            load_trajectories(d.train_files) if d.train_files else [],
            self.fmt,
            success_only=cfg.sft.success_only,
            categories=d.categories,
            max_length=cfg.sft.max_length,
        )
        self.iteration = 0
        """Iterations completed."""
        self.resume()
        self.set: list[Trajectory] = list(self.seed_set)
        self._seen: set[tuple[int, ...]] = {tuple(t.token_ids) for t in self.set}
        for k in range(self.iteration):
            self.grow(read_jsonl(self.iter_dir(k) / "kept.jsonl"))

    def iter_dir(self, iteration: int) -> Path:
        return self.run_dir / "agentevol" / f"iter_{iteration}"

    def trainer_state(self) -> dict[str, Any]:
        return {"iteration": self.iteration, "items": self.item_sampler.state_dict()}

    def load_trainer_state(self, state: dict[str, Any]) -> None:
        self.iteration = int(state["iteration"])
        self.item_sampler.load_state_dict(state["items"])

    def grow(self, kept: list[Trajectory]) -> int:
        """Add the new token streams of `kept` to the set; returns how many were new."""
        added = 0
        for t in kept:
            key = tuple(t.token_ids)
            if key not in self._seen:
                self._seen.add(key)
                self.set.append(t)
                added += 1
        return added

    def explore(self) -> list[Trajectory]:
        """Roll out the current policy on the next `explore_items` train items (sampled)."""
        a, r = self.cfg.agentevol, self.cfg.rollout
        items = self.item_sampler.next_batch(a.explore_items)
        cap = a.max_turns or max(self.cfg.schedule.rounds)
        base = self.cfg.trainer.seed * 1_000_003 + self.iteration * 10_007
        episodes = [
            Episode(item, group_id=base + g, sample_index=k, seed=base + g, max_turns=cap)
            for g, item in enumerate(items)
            for k in range(r.n)
        ]
        self.say(f"iteration {self.iteration + 1}: exploring {len(items)} items x {r.n} samples (cap {cap})")
        trajectories: list[Trajectory] = self.rollout()(episodes, step=self.step)
        return trajectories

    def imitate(self) -> dict[str, float]:
        """`agentevol.sft_steps` SFT steps on the whole set (a fresh seeded order per iteration)."""
        cfg = self.cfg
        size = cfg.sft.batch_size or cfg.data.batch_size
        sampler = ItemSampler(
            [str(i) for i in range(len(self.set))], seed=cfg.trainer.seed * 31 + self.iteration, shuffle=True
        )
        metrics: dict[str, float] = {}
        for k in range(cfg.agentevol.sft_steps):
            timer = PhaseTimer()
            with timer("step"):
                metrics = sft_step(
                    self.learner, collate([self.set[int(i)] for i in sampler.next_batch(size)])
                )
            self.step += 1
            metrics["time/step"] = timer.seconds["step"]
            self.monitor.log(self.step, metrics)
            self.say(
                f"iteration {self.iteration + 1} sft {k + 1}/{cfg.agentevol.sft_steps} | loss "
                f"{metrics['loss/sft']:.4f} | {metrics['time/step']:.1f} s"
            )
        return metrics

    def fit(self) -> dict[str, float]:
        a = self.cfg.agentevol
        metrics: dict[str, float] = {}
        if self.iteration == 0 and self.cfg.sft.eval_before:
            metrics |= self.evaluate("eval/initial")
        while self.iteration < a.iterations:
            timer = PhaseTimer()
            with timer("explore"):
                explored = self.explore()
            kept = [t for t in explored if t.success and not t.failed and t.token_ids]
            write_jsonl(self.iter_dir(self.iteration) / "kept.jsonl", kept)
            write_jsonl(self.iter_dir(self.iteration) / "explored.jsonl", explored)
            added = self.grow(kept)
            self.say(
                f"iteration {self.iteration + 1}: {len(kept)}/{len(explored)} successful, {added} new; "
                f"set {len(self.set)} ({len(self.seed_set)} seed)"
            )
            if not self.set:
                raise RuntimeError("AgentEvol has nothing to imitate: no seed demos and no successes yet")
            with timer("imitate"):
                metrics = self.imitate()
            self.iteration += 1
            summary = {
                "agentevol/iteration": float(self.iteration),
                "agentevol/set_size": float(len(self.set)),
                "agentevol/kept": float(len(kept)),
                "agentevol/added": float(added),
                "explore/success": sum(t.success for t in explored) / max(1, len(explored)),
                **{f"time/{k}": v for k, v in timer.seconds.items()},
            }
            self.monitor.log(self.step, summary)
            metrics |= summary
            if self.cfg.eval.at_end:
                metrics |= self.evaluate(f"eval/iter_{self.iteration}")
            self.save()
        self.monitor.close()
        return metrics
