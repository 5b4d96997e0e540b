"""`horizonrl agentevol CONFIG` (or `train` with `algorithm.name: agentevol`): imitate, explore, keep, learn.

    horizonrl solve textcraft --split train --out runs/demos/textcraft_train.jsonl
    horizonrl solve babyai --split train --limit 80 --out runs/demos/babyai_train.jsonl
    horizonrl agentevol configs/agentevol.yaml

AgentEvol (Xi et al., 2024, "AgentGym", arXiv:2406.04151). The seed set is the trajectories of
`data.train_files` (expert demos of any of `data.families`), filtered like SFT's
(`sft.success_only`, `data.categories`). With `agentevol.order: imitate_first` (the paper's order,
the default) the run starts with

0. imitate   `agentevol.bc_steps` SFT steps on the seed set (behavioural cloning; the batches
             `horizonrl sft` draws from the same files), then a greedy eval -> `eval/bc`

and then, for `agentevol.iterations` rounds (`explore_first` starts here, with the model as loaded):

1. explore   roll out the current policy on `agentevol.explore_items` train items of EVERY family
             of `data.families` (`data.split`, `data.categories`; a seeded order per family over
             epochs), `rollout.n` samples each at `rollout.temperature`, turn cap
             `agentevol.max_turns` -> `<run>/agentevol/iter_K/explored.jsonl`
2. keep      the successes (token-exact, as sampled): all of them (`agentevol.keep: success`) or
             the highest-scoring success of each item (`best_per_item`) -> `iter_K/kept.jsonl`
3. learn     `agentevol.sft_steps` SFT steps on seed set ∪ everything kept so far (`sft.batch_size`
             or `data.batch_size` trajectories per step, masked NLL on sampled tokens), from the
             current weights (`agentevol.learn_from: continued`) or from the weights the run
             started with, optimizer moments cleared (`initial`, the paper's choice)
4. eval      greedy eval on `eval.split` of every family -> `<run>/eval/iter_K/report.json`

`metrics.jsonl` gets `loss/sft` per step; per iteration (at its last SFT step) `agentevol/set_size`,
`agentevol/kept`, `agentevol/added`, `explore/success`, and per family `agentevol/kept/<family>`,
`explore/success/<family>`; per eval `eval/success`, `eval/score` (means over families, as the
report's) and `eval/success/<family>`. The viewer draws the per-family lines in one chart.

Resume: a checkpoint is written after the imitation phase, after each exploration, every
`trainer.save_every` SFT steps and after each iteration; its state holds the iteration, the
phase, the SFT steps done in it, the data cursors and the kept set (item and sample of every
kept trajectory, checked against the `kept.jsonl` files the set is rebuilt from), so a run
resumed in the middle of an iteration continues with the set and counts of the uninterrupted one.

Simplifications: exploration de-duplicates successes only by identical token streams; under
`learn_from: initial` the LR schedule still runs over the run's global step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from horizonrl.config import Config
from horizonrl.envs.core import parse_item_id
from horizonrl.rollout.trajectory import Trajectory, read_jsonl, write_jsonl
from horizonrl.trainer.batch import collate
from horizonrl.trainer.data import ItemSampler, load_items
from horizonrl.trainer.episodes import Episode, Rollout
from horizonrl.trainer.memory import keep_under, release_memory
from horizonrl.trainer.monitor import PhaseTimer
from horizonrl.trainer.sft import SupervisedRun, load_trajectories, sft_examples, sft_step


def family(traj: Trajectory) -> str:
    return parse_item_id(traj.item_id)[0]


def keep_successes(explored: list[Trajectory], rule: str) -> list[Trajectory]:
    """The successes of `explored` to keep: all (`success`) or each item's best by score
    (`best_per_item`; ties go to the earlier sample), in exploration order."""
    wins = [t for t in explored if t.success and not t.failed and t.token_ids]
    if rule == "success":
        return wins
    best: dict[str, Trajectory] = {}
    for t in wins:
        if t.item_id not in best or t.score > best[t.item_id].score:
            best[t.item_id] = t
    chosen = {id(t) for t in best.values()}
    return [t for t in wins if id(t) in chosen]


def kept_keys(kept: list[Trajectory]) -> list[list[Any]]:
    """What the checkpoint records of a kept set: (item, group, sample) of each trajectory."""
    return [[t.item_id, t.group_id, t.sample_index] for t in kept]


class AgentEvolTrainer(SupervisedRun):
    kind = "agentevol"
    sampler: ItemSampler
    """The SFT batch order of the current phase (bc: the seed set; learn: the set of this iteration)."""

    def __init__(
        self, cfg: Config, *, rollout: Rollout | None = None, env_urls: dict[str, str] | None = None
    ) -> None:
        if cfg.trainer.max_seconds is not None or cfg.sft.max_seconds is not None:
            raise ValueError(
                "AgentEvol runs by iterations (agentevol.iterations x its phases' steps): "
                "trainer.max_seconds and sft.max_seconds do not apply to it; unset them"
            )
        super().__init__(cfg, rollout=rollout, env_urls=env_urls)
        d, a = cfg.data, cfg.agentevol
        self.families = list(d.families)
        self.samplers = {
            f: ItemSampler(
                load_items([f], d.split, categories=d.categories, limit=d.max_items),
                seed=cfg.trainer.seed,
                shuffle=d.shuffle,
            )
            for f in self.families
        }
        """Each family's explored items (a seeded order per epoch, resumable cursor)."""
        self.seed_set = sft_examples(
            load_trajectories(d.train_files) if d.train_files else [],
            self.fmt,
            success_only=cfg.sft.success_only,
            categories=d.categories,
            max_length=cfg.sft.max_length,
        )
        if a.order == "imitate_first" and not self.seed_set:
            raise ValueError(
                f"agentevol.order=imitate_first imitates the seed set, but data.train_files "
                f"{list(d.train_files)} hold no usable demos (make them: horizonrl solve FAMILY "
                "--split train --out FILE)"
            )
        self.batch_size = cfg.sft.batch_size or d.batch_size
        self.iteration = 0
        """Iterations completed."""
        self.phase = "bc" if a.order == "imitate_first" else "explore"
        """The next (or unfinished) phase: bc (before iteration 1), explore, learn."""
        self.phase_steps = 0
        """SFT steps done in the current bc / learn phase."""
        self.sampler = ItemSampler([str(i) for i in range(len(self.seed_set))], seed=cfg.trainer.seed,
                                   shuffle=d.shuffle)  # fmt: skip
        self.kept: dict[int, list[list[Any]]] = {}
        """Iteration -> (item, group, sample) of each trajectory it kept."""
        self._data_state: dict[str, Any] | None = None
        self.initial: dict[str, torch.Tensor] | None = None
        if a.learn_from == "initial":
            self.initial = {k: v.detach().clone() for k, v in self._actor().state_dict().items()}
        self.resume()
        self.set: list[Trajectory] = list(self.seed_set)
        self._seen: set[tuple[int, ...]] = {tuple(t.token_ids) for t in self.set}
        self.added: dict[int, int] = {}
        for k, keys in sorted(self.kept.items()):
            kept = read_jsonl(self.iter_dir(k) / "kept.jsonl")
            if kept_keys(kept) != keys:
                raise ValueError(f"{self.iter_dir(k)}/kept.jsonl is not the kept set the checkpoint holds")
            self.added[k] = self.grow(kept)
        if self.phase == "learn":
            self.sampler = self.learn_sampler(len(self.set))
        if self._data_state is not None:
            self.sampler.load_state_dict(self._data_state)
        counts = {f: sum(family(t) == f for t in self.seed_set) for f in self.families}
        self.say(f"seed set: {len(self.seed_set)} demos ({', '.join(f'{f} {n}' for f, n in counts.items())})")

    def _actor(self) -> torch.nn.Module:
        module: torch.nn.Module = self.parallel.unwrap(self.learner.actor)
        return module

    def iter_dir(self, iteration: int) -> Path:
        return self.run_dir / "agentevol" / f"iter_{iteration}"

    # --- checkpoint state ----------------------------------------------------------------
    def trainer_state(self) -> dict[str, Any]:
        return {
            "iteration": self.iteration,
            "phase": self.phase,
            "phase_steps": self.phase_steps,
            "data": self.sampler.state_dict(),
            "items": {f: s.state_dict() for f, s in self.samplers.items()},
            "kept": {str(k): v for k, v in self.kept.items()},
        }

    def load_trainer_state(self, state: dict[str, Any]) -> None:
        self.iteration = int(state["iteration"])
        self.phase = str(state["phase"])
        self.phase_steps = int(state["phase_steps"])
        for f, s in self.samplers.items():
            if f not in state["items"]:
                raise ValueError(f"checkpoint explored families {sorted(state['items'])}, not {f!r}")
            s.load_state_dict(state["items"][f])
        self.kept = {int(k): v for k, v in state["kept"].items()}
        self._data_state = state["data"]  # loaded once the set is rebuilt (its size sets the order)

    # --- the phases ----------------------------------------------------------------------
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

    def learn_sampler(self, size: int) -> ItemSampler:
        """The batch order of iteration `self.iteration`'s learn phase over a set of `size`."""
        seed = self.cfg.trainer.seed * 31 + self.iteration
        return ItemSampler([str(i) for i in range(size)], seed=seed, shuffle=True)

    def explore(self) -> list[Trajectory]:
        """Roll out the current policy on the next `explore_items` train items of every family."""
        a, r = self.cfg.agentevol, self.cfg.rollout
        items = [i for f in self.families for i in self.samplers[f].next_batch(a.explore_items)]
        cap = a.max_turns or max(self.cfg.schedule.rounds)
        base = self.cfg.trainer.seed * 1_000_003 + self.iteration * 10_007
        episodes = [
            Episode(item, group_id=base + g, sample_index=k, seed=base + g, max_turns=cap)
            for g, item in enumerate(items)
            for k in range(r.n)
        ]
        self.say(
            f"iteration {self.iteration + 1}: exploring {a.explore_items} items of each of "
            f"{self.families} x {r.n} samples (cap {cap})"
        )
        self.sync_rollout()
        trajectories: list[Trajectory] = self.rollout()(episodes, step=self.step)
        return trajectories

    def sft_steps(self, total: int, label: str) -> None:
        """SFT steps on `self.set` from `self.sampler` until the phase has `total`; checkpoints
        every `trainer.save_every` steps."""
        while self.phase_steps < total:
            timer = PhaseTimer()
            with timer("step"):
                rows = [self.set[int(i)] for i in self.sampler.next_batch(self.batch_size)]
                metrics = sft_step(self.learner, collate(rows))
            metrics |= keep_under(self.cfg.trainer.release_memory_above)
            self.step += 1
            self.phase_steps += 1
            metrics["time/step"] = timer.seconds["step"]
            self.monitor.log(self.step, metrics)
            self.say(
                f"{label} sft {self.phase_steps}/{total} | loss {metrics['loss/sft']:.4f} | "
                f"{metrics['time/step']:.1f} s"
            )
            if self.due(self.cfg.trainer.save_every) and self.phase_steps < total:
                self.save()

    def start_learning(self) -> None:
        """Enter the learn phase: the set's batch order of this iteration (`learn_from: initial`:
        the starting weights back, optimizer moments cleared)."""
        if self.initial is not None:
            self._actor().load_state_dict(self.initial)
            self.learner.optimizer.state.clear()
        self.phase, self.phase_steps = "learn", 0
        self.sampler = self.learn_sampler(len(self.set))

    def summary(self, k: int) -> dict[str, float]:
        """Iteration `k`'s counts, from its files (so a resumed run logs what the straight one did)."""
        explored = read_jsonl(self.iter_dir(k) / "explored.jsonl")
        kept = read_jsonl(self.iter_dir(k) / "kept.jsonl")
        out = {
            "agentevol/iteration": float(k + 1),
            "agentevol/set_size": float(len(self.set)),
            "agentevol/kept": float(len(kept)),
            "agentevol/added": float(self.added[k]),
            "explore/success": sum(t.success for t in explored) / max(1, len(explored)),
        }
        for f in self.families:
            mine = [t for t in explored if family(t) == f]
            out[f"agentevol/kept/{f}"] = float(sum(family(t) == f for t in kept))
            out[f"explore/success/{f}"] = sum(t.success for t in mine) / max(1, len(mine))
        return out

    # --- the loop ------------------------------------------------------------------------
    def fit(self) -> dict[str, float]:
        a, e = self.cfg.agentevol, self.cfg.eval
        metrics: dict[str, float] = {}
        if self.phase == "bc":
            if self.phase_steps == 0 and self.cfg.sft.eval_before:
                metrics |= self.evaluate("eval/initial")
            self.sft_steps(a.bc_steps, "imitate")
            if e.at_end:
                metrics |= self.evaluate("eval/bc")
            self.phase, self.phase_steps = "explore", 0
            self.save()
        elif self.iteration == 0 and self.phase == "explore" and self.cfg.sft.eval_before:
            metrics |= self.evaluate("eval/initial")
        while self.iteration < a.iterations:
            k = self.iteration
            label = f"iteration {k + 1}"
            if self.phase == "explore":
                timer = PhaseTimer()
                with timer("explore"):
                    release_memory()  # the SFT phase's freed heap goes to the rollout engine
                    explored = self.explore()
                kept = keep_successes(explored, a.keep)
                write_jsonl(self.iter_dir(k) / "explored.jsonl", explored)
                write_jsonl(self.iter_dir(k) / "kept.jsonl", kept)
                self.kept[k] = kept_keys(kept)
                self.added[k] = self.grow(kept)
                self.say(
                    f"{label}: kept {len(kept)} of {len(explored)} "
                    f"({', '.join(f'{f} {sum(family(t) == f for t in kept)}' for f in self.families)}), "
                    f"{self.added[k]} new; set {len(self.set)} ({len(self.seed_set)} seed); "
                    f"{timer.seconds['explore']:.0f} s"
                )
                self.start_learning()
                self.save()
            self.sft_steps(a.sft_steps, label)
            summary = self.summary(k)
            self.monitor.log(self.step, summary)
            metrics |= summary
            self.iteration += 1
            if e.at_end:
                metrics |= self.evaluate(f"eval/iter_{self.iteration}")
            self.phase, self.phase_steps = "explore", 0
            self.save()
        self.monitor.close()
        return metrics
