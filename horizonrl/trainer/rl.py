"""`horizonrl train`: multi-turn RL with PPO / GRPO / RLOO / REINFORCE++ and ScalingInter-RL.

One step, as the named phases of `RLTrainer.fit()`:

0. sync        the rollout backend gets the learner's current weights (vllm: pushed and checked,
               `horizonrl.trainer.weight_sync`; hf: shared module, or a bf16 copy refreshed)
1. rollout     take `data.batch_size` items, `rollout.n` samples each, under the schedule's turn
               cap(s); play them in the envs with the current policy -> `Trajectory` objects
               (with `rollout.max_staleness: k`, played up to k steps ahead on a copy of the
               weights: `horizonrl.trainer.producer`)
2. score       pad them into tensors; old logprobs (learner), reference logprobs, critic values
3. advantages  place rewards on sampled tokens (outcome on the last sampled token), optional KL
               penalty, then the configured estimator (one signature for all of them)
4. update      `algorithm.ppo_epochs` passes of clipped policy loss (+ KL, entropy, value loss)
5. log / save  metrics.jsonl + TensorBoard, trajectories/step_N.jsonl (+ per-token update data with
               `logging.save_token_stats`, see `horizonrl.trainer.token_stats`), checkpoints, eval

Simplifications, stated up front: one learner process; the learner and the `hf` rollout backend
share one `nn.Module` (or a bf16 copy synced before each rollout). Failure and truncation:

- a trajectory whose env broke is dropped from the update (or scored 0 with `algorithm.failed:
  zero`); one without any sampled token (the env failed at reset) is always left out;
- success for the schedule and the logs is over the episodes that did not fail, and the run stops
  after `trainer.max_failed_steps` consecutive steps in which every episode failed;
- an episode cut by a cap is bootstrapped from the critic's value at the cut (gae, default
  `algorithm.bootstrap_truncated`); the critic-free estimators score it by its rewards so far;
- a step whose gradients are non-finite is not applied; `trainer.max_nonfinite_steps` in a row
  stop the run.
"""

from __future__ import annotations

from typing import Any

from horizonrl.algos.advantages import EstimatorParams, bootstrap_truncated
from horizonrl.algos.kl import kl_estimate
from horizonrl.algos.losses import kl_reward_penalty
from horizonrl.config import Config
from horizonrl.rollout.trajectory import Trajectory, context_tokens, training_rows, write_jsonl
from horizonrl.trainer.batch import Batch, collate, episode_advantages, is_segmented, turn_steps
from horizonrl.trainer.data import make_item_sampler
from horizonrl.trainer.engine_rollout import EngineRollout
from horizonrl.trainer.episodes import Episode, Rollout
from horizonrl.trainer.memory import release_memory
from horizonrl.trainer.monitor import PhaseTimer
from horizonrl.trainer.producer import RolloutProducer
from horizonrl.trainer.rewards import (
    informative_groups,
    select_for_update,
    step_groups,
    trainable,
    turn_rewards_batch,
)
from horizonrl.trainer.run import TrainingRun
from horizonrl.trainer.schedule import make_schedule
from horizonrl.trainer.token_stats import token_stats_path, write_token_stats
from horizonrl.trainer.workflows import RunAborted

EXTRA_BATCH_STRIDE = 10_000_019
"""Group-id (and seed) offset of a step's further dynamic-sampling batches: batch b of step s starts
at `seed * 1_000_003 + s * batch_size + b * EXTRA_BATCH_STRIDE`, clear of every first batch's ids
while `total_steps * batch_size` stays below it."""


class RLTrainer(TrainingRun):
    kind = "rl"

    def __init__(
        self, cfg: Config, *, rollout: Rollout | None = None, env_urls: dict[str, str] | None = None
    ) -> None:
        super().__init__(cfg, rollout=rollout, env_urls=env_urls)
        self.schedule = make_schedule(cfg.schedule, seed=cfg.trainer.seed)
        self.sampler = make_item_sampler(cfg.data, cfg.trainer.seed)
        tokens = cfg.rollout.max_tokens_schedule
        self.token_schedule = None if tokens is None else make_schedule(tokens, seed=cfg.trainer.seed)
        """`rollout.max_tokens_schedule`: the per-turn token cap by step (None: `rollout.max_tokens`)."""
        self.plan_stats: dict[int, dict[str, float]] = {}
        """What `plan_episodes` drew per step (`curriculum/stage`, `schedule/max_tokens`), logged with
        that step; keyed by step since, with `rollout.max_staleness`, steps are planned k steps early."""
        self.failed_streak = 0
        """Consecutive steps in which every episode failed (env outage)."""
        self.nonfinite_streak = 0
        """Consecutive steps whose every optimizer step had non-finite gradients (and was skipped)."""
        self.resume()

    # --- the loop ------------------------------------------------------------------------
    def fit(self) -> dict[str, float]:
        """Train until `trainer.total_steps` or until the steps used up `trainer.max_seconds`;
        returns the last step's metrics."""
        cfg, metrics = self.cfg, {}
        producer = self.producer()
        while self.step < cfg.trainer.total_steps and not self.out_of_time():
            timer = PhaseTimer()
            with timer("step"):
                with timer("weight_sync"):
                    sync_stats = self.sync_rollout()
                with timer("rollout"):  # the producer plans the step (and, with staleness, later ones)
                    cap, episodes, trajectories, rollout_stats = self.play(producer)
                with timer("score"):
                    kept, select_stats = select_for_update(trajectories, cfg)
                    kept = [row for t in kept for row in training_rows(t)]  # bounded context: per window
                    batch = self.learner.score(collate(kept)) if kept else None
                with timer("advantages"):
                    batch, adv_stats = self.advantages(batch, kept)
                with timer("update"):
                    update_stats = self.learner.update(batch, self.step) if batch is not None else {}
                    if batch is None:
                        self.learner.skip_update()
                # the next step's rollout (vLLM beside us, or generation in this process) gets the
                # room the update freed; inside the step's seconds, what it costs is the step's
                memory = release_memory()
            self.step += 1
            self.trained_seconds += timer.seconds["step"]
            plan_stats = self.plan_stats.pop(self.step - 1, {})
            stats = {
                **plan_stats,
                **sync_stats,
                **rollout_stats,
                **select_stats,
                **adv_stats,
                **update_stats,
                **memory,
            }
            stats["update/skipped"] = float(batch is None)
            metrics = self.log(episodes, trajectories, batch, stats, timer, cap)
            if cfg.logging.save_token_stats and batch is not None:
                path = token_stats_path(self.run_dir, self.step)
                write_token_stats(path, batch, kept, trajectories, cfg.algorithm.kl_estimator)
            if metrics["failed/frac"] < 1:  # an env outage says nothing about the policy
                self.update_schedules(self.step - 1, metrics["success/mean"])  # over played episodes
            self.check_health(trajectories, update_stats)
            last = self.step == cfg.trainer.total_steps or self.out_of_time()
            if self.due(cfg.trainer.save_every) or last:
                self.save()
            if self.due(cfg.eval.every):  # on the validation items with data.val_fraction: keeps the best
                metrics |= self.evaluate(f"eval/step_{self.step}", validation=cfg.data.val_fraction > 0)
        producer.close()
        self.say_out_of_time()
        if cfg.eval.at_end:  # right after the last step's eval of the same items, that eval is the final one
            just_made = self.last_eval is not None and self.last_eval[0] == f"eval/step_{self.step}"
            metrics |= self.repeat_eval("eval/final") if just_made else self.evaluate("eval/final")
        self.monitor.close()
        return metrics

    # --- phases --------------------------------------------------------------------------
    def producer(self) -> RolloutProducer:
        """The rollout phase (`horizonrl.trainer.producer`): synchronous, or `rollout.max_staleness`
        steps ahead on a copy of the weights."""
        rollout = self.rollout()
        if self.cfg.rollout.max_staleness > 0 and not isinstance(rollout, EngineRollout):
            raise ValueError(
                "rollout.max_staleness > 0 plays on a copy of the weights with the trainer's own "
                "engine rollout; a rollout given to the trainer keeps its own weights"
            )

        def plan(step: int) -> tuple[int, list[Episode]]:
            return self.schedule.max_turns(step), self.plan_episodes(step)  # cap: before `update`

        learner = self.learner
        return RolloutProducer(
            self.cfg, rollout, plan, learner.sampling_model(), learner.tokenizer, self.env_urls
        )

    def play(
        self, producer: RolloutProducer
    ) -> tuple[int, list[Episode], list[Trajectory], dict[str, float]]:
        """The step's turn cap, episodes, trajectories and rollout metrics: one batch, or with
        `algorithm.dynamic_sampling_groups` K further batches of fresh items (played with the same
        weights) while fewer than K groups are informative, up to `dynamic_sampling_max_batches`."""
        a = self.cfg.algorithm
        cap, episodes, trajectories, stats = producer.take(self.step)
        if not a.dynamic_sampling_groups:
            return cap, episodes, trajectories, stats
        batches = 1
        while (
            batches < a.dynamic_sampling_max_batches
            and len(informative_groups(trainable(trajectories, self.cfg), self.cfg))
            < a.dynamic_sampling_groups
        ):
            more = self.plan_episodes(self.step, batch=batches)
            episodes, trajectories = episodes + more, trajectories + producer.play(self.step, more)
            batches += 1
        return cap, episodes, trajectories, {**stats, "rollout/batches": float(batches)}

    def plan_episodes(self, step: int, *, batch: int = 0) -> list[Episode]:
        """The step's items (seeded order, resumable cursor; the curriculum's stage), `rollout.n`
        samples each, capped in turns and (with `rollout.max_tokens_schedule`) tokens per turn.
        `batch` > 0: a further batch of the step (dynamic sampling), with group ids and seeds of
        its own (`EXTRA_BATCH_STRIDE` apart, so that batch 0 keeps the ids of a run without it)."""
        items = self.sampler.next_batch(self.cfg.data.batch_size, step)
        caps = self.schedule.group_caps(step, len(items))
        tokens: list[int | None] = [None] * len(items)
        self.plan_stats[step] = self.sampler.stats(step)
        if self.token_schedule is not None:
            tokens = list(self.token_schedule.group_values(step, len(items)))
            self.plan_stats[step]["schedule/max_tokens"] = float(self.token_schedule.value(step))
        base = self.cfg.trainer.seed * 1_000_003 + step * len(items) + batch * EXTRA_BATCH_STRIDE
        return [
            Episode(
                item,
                group_id=base + g,
                sample_index=k,
                seed=base + g,
                max_turns=caps[g],
                max_tokens=tokens[g],
            )
            for g, item in enumerate(items)
            for k in range(self.cfg.rollout.n)
        ]

    def update_schedules(self, step: int, success_rate: float) -> None:
        """After `step`: the turn and token schedules and the curriculum see its success rate."""
        self.schedule.update(step, success_rate)
        if self.token_schedule is not None:
            self.token_schedule.update(step, success_rate)
        self.sampler.update(step, success_rate)

    def advantages(
        self, batch: Batch | None, trajectories: list[Trajectory]
    ) -> tuple[Batch | None, dict[str, float]]:
        """Rewards on sampled tokens (+ KL penalty), then the configured estimator."""
        if batch is None:
            return None, {}
        a = self.cfg.algorithm
        rewards = turn_rewards_batch(batch, trajectories, self.cfg)
        stats: dict[str, float] = {}
        if a.bootstraps_truncated:
            assert batch.bootstrap_values is not None and batch.truncated is not None
            rewards = bootstrap_truncated(
                rewards, batch.loss_mask, batch.truncated, batch.bootstrap_values, gamma=a.gamma
            )
            stats["truncated/frac"] = float(batch.truncated.float().mean())
        mask = batch.loss_mask.float()
        if batch.ref_logprobs is not None:
            assert batch.old_logprobs is not None
            kl = kl_estimate(batch.old_logprobs, batch.ref_logprobs, a.kl_estimator) * mask
            stats["kl/mean"] = float(kl.sum() / mask.sum().clamp(min=1))
            if a.kl_in_reward:
                rewards, _ = kl_reward_penalty(
                    rewards,
                    batch.old_logprobs,
                    batch.ref_logprobs,
                    batch.loss_mask,
                    coef=a.kl_coef,
                    kind=a.kl_estimator,
                )
        estimator = self.learner.estimator
        turns = turn_steps(batch.loss_mask, trajectories) if estimator.step_level else None
        if estimator.step_level:
            members = [len(m) for m in step_groups(trajectories).values()]
            all_turns = sum(len(t.turn_rewards) for t in trajectories)
            stats["adv/step_groups_frac"] = sum(n for n in members if n > 1) / max(1, all_turns)
        params = EstimatorParams.of(a, turns)
        if is_segmented(batch):  # bounded context: the episode's advantage on each of its rows
            advantages, returns = episode_advantages(estimator, rewards, batch, params)
        else:
            advantages, returns = estimator(rewards, batch.loss_mask, batch.values, batch.group_ids, params)
        valid = advantages[batch.loss_mask.bool()]
        stats["advantages/mean"] = float(valid.mean()) if valid.numel() else 0.0
        stats["advantages/abs_mean"] = float(valid.abs().mean()) if valid.numel() else 0.0
        return batch.with_(token_rewards=rewards, advantages=advantages, returns=returns), stats

    def log(
        self,
        episodes: list[Episode],
        trajectories: list[Trajectory],
        batch: Batch | None,
        stats: dict[str, float],
        timer: PhaseTimer,
        cap: int,
    ) -> dict[str, float]:
        """One metrics line; success, reward and score are over the episodes that did not fail."""
        n = max(1, len(trajectories))
        played = [t for t in trajectories if not t.failed]
        p = max(1, len(played))
        turns = [t.num_turns for t in trajectories]
        contexts = [c for t in trajectories for c in context_tokens(t)]  # per turn (bounded context)
        rows = [row for t in trajectories for row in training_rows(t)]  # one per context window
        trained_tokens = (
            0 if batch is None else int(batch.attention_mask.sum()) * self.cfg.algorithm.ppo_epochs
        )
        metrics: dict[str, float] = {
            "reward/mean": sum(t.reward for t in played) / p,
            "success/mean": sum(t.success for t in played) / p,
            "score/mean": sum(t.score for t in played) / p,
            "failed/frac": sum(t.failed for t in trajectories) / n,
            "turns/mean": sum(turns) / n,
            "turns/max": float(max(turns, default=0)),
            "schedule/max_turns": float(cap),
            "schedule/max_cap_used": float(max((e.max_turns for e in episodes), default=0)),
            "response_length/mean": sum(t.response_length for t in trajectories) / n,
            "context/tokens_mean": sum(contexts) / max(1, len(contexts)),
            "context/tokens_max": float(max(contexts, default=0)),
            "sampled_tokens/total": float(sum(sum(r.loss_mask) for r in rows)),
            "throughput/tokens_per_s": trained_tokens / max(timer.seconds.get("update", 0.0), 1e-9),
            **stats,
            **{f"time/{name}": seconds for name, seconds in timer.seconds.items()},
        }
        self.monitor.log(self.step, metrics, histograms={"turns": turns})
        self.monitor.console(self.step, self.cfg.trainer.total_steps, metrics)
        if self.cfg.logging.save_trajectories:
            write_jsonl(self.run_dir / "trajectories" / f"step_{self.step}.jsonl", trajectories)
        return metrics

    def check_health(self, trajectories: list[Trajectory], update_stats: dict[str, float]) -> None:
        """Stop the run (`RunAborted`) after `trainer.max_failed_steps` consecutive steps in which
        every episode failed, or `trainer.max_nonfinite_steps` whose gradients were all non-finite."""
        t = self.cfg.trainer
        all_failed = bool(trajectories) and all(x.failed for x in trajectories)
        self.failed_streak = self.failed_streak + 1 if all_failed else 0
        self.nonfinite_streak = (
            self.nonfinite_streak + 1 if update_stats.get("update/nonfinite_frac", 0.0) == 1.0 else 0
        )
        if self.failed_streak >= t.max_failed_steps:
            reasons = sorted({x.fail_reason or "?" for x in trajectories})
            self.monitor.close()
            raise RunAborted(
                f"every episode failed in {self.failed_streak} consecutive steps (trainer.max_failed_steps="
                f"{t.max_failed_steps}); the envs are not answering: {'; '.join(reasons[:3])}. The last "
                f"checkpoint is kept; fix the env servers and rerun to resume."
            )
        if self.nonfinite_streak >= t.max_nonfinite_steps:
            self.monitor.close()
            raise RunAborted(
                f"the gradients were non-finite (NaN/inf) in {self.nonfinite_streak} consecutive steps "
                f"(trainer.max_nonfinite_steps={t.max_nonfinite_steps}); no such step was applied. Lower "
                "trainer.lr, check model.bf16 and the rewards, then resume from the last checkpoint."
            )

    # --- checkpoints ---------------------------------------------------------------------
    def trainer_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "schedule": self.schedule.state_dict(),
            "data": self.sampler.state_dict(),
            "seconds": self.trained_seconds,
        }
        if self.token_schedule is not None:
            state["token_schedule"] = self.token_schedule.state_dict()
        return state

    def load_trainer_state(self, state: dict[str, Any]) -> None:
        self.schedule.load_state_dict(state["schedule"])
        self.sampler.load_state_dict(state["data"])
        # checkpoints made before trainer.max_seconds existed have no seconds
        self.trained_seconds = float(state.get("seconds", 0.0))
        if self.token_schedule is not None:
            if "token_schedule" not in state:
                raise ValueError(
                    "the checkpoint was trained without rollout.max_tokens_schedule; this config has one"
                )
            self.token_schedule.load_state_dict(state["token_schedule"])
