"""The trainer's rollout phase on the engine `rollout.engine` names (lock-step or async, see
`horizonrl.rollout.engines`) with the `hf` backend.

The backend is `rollout.backend`'s sampler (`horizonrl.trainer.weight_sync`): `hf` samples from
the learner's own `nn.Module` (no weight copy), or with `rollout.dtype: bfloat16` from a bf16 copy
whose parameters are refreshed from the learner's (buffers such as RoPE frequencies stay fp32);
`vllm` from an engine whose weights are pushed from the learner and checked. `sync_weights()`
does that (the trainer calls it once per step, timed as `time/weight_sync`); a call finds the
weights synced since the last training rollout, or syncs them first. Either way each step's
rollout uses the weights of the last update; kept KV caches are dropped at the end of every run.
Items of several families in one batch are played family by family (one engine per family;
they share the backend). Families with a URL in `env_urls` are played through their
env server, the others in-process; a comma-separated list of URLs (env-server replicas, e.g.
placed by Ray) is played through a `ReplicaEnvPool` that balances sessions over them.

Sampling is seeded per step (`trainer.seed`, step), and a fresh engine is built per call, so a
resumed run samples exactly what the uninterrupted run sampled. `engine_config` is the one place
the engine's settings are made: `rollout.*` for training rollouts, `eval.*` (the fields and
defaults `horizonrl eval` has) for the in-run eval.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Any

from horizonrl.config import Config
from horizonrl.distributed.replica_pool import ReplicaEnvPool
from horizonrl.envs.core import parse_item_id
from horizonrl.rollout.engine import EngineConfig
from horizonrl.rollout.engines import make_engine
from horizonrl.rollout.envpool import EnvPool, LocalEnvPool, RemoteEnvPool
from horizonrl.rollout.trajectory import Trajectory
from horizonrl.trainer.episodes import Episode
from horizonrl.trainer.weight_sync import make_sampler


def engine_config(
    cfg: Config, *, greedy: bool, max_turns: int, max_tokens: int | None = None
) -> EngineConfig:
    """The engine settings of one trainer rollout: `cfg.eval`'s for an eval (`greedy`; the settings
    `horizonrl eval` uses too), else `cfg.rollout`'s, with their logprob temperature; `max_tokens`
    (the token schedule's largest cap of the step) replaces `rollout.max_tokens`."""
    agent = {
        "show_available_actions": cfg.agent.show_available_actions,
        "strategy": cfg.agent.strategy,
        "context_max_turns_kept": cfg.agent.context.max_turns_kept,
        "context_max_tokens": cfg.agent.context.max_tokens,
    }
    if greedy:
        return EngineConfig.of(cfg.eval, max_turns=max_turns, progress=cfg.logging.console, **agent)
    settings = cfg.rollout if max_tokens is None else replace(cfg.rollout, max_tokens=max_tokens)
    return EngineConfig.of(
        settings,
        max_turns=max_turns,
        progress=cfg.logging.console,
        logprob_temperature=cfg.logprob_temperature,
        **agent,
    )


class EngineRollout:
    def __init__(self, cfg: Config, model: Any, tokenizer: Any, env_urls: dict[str, str]) -> None:
        self.cfg = cfg
        self.env_urls = env_urls
        self.sampler = make_sampler(cfg, model, tokenizer)
        self.backend = self.sampler.backend
        self.synced = False
        """The backend has the learner's weights of now (set by `sync_weights`, cleared by a
        training rollout, after which the learner updates)."""

    def sync_weights(self) -> dict[str, float]:
        """Make the backend sample from the learner's current weights; metrics to log."""
        stats = self.sampler.sync()
        self.synced = True
        return stats

    def retarget(self, cfg: Config, model: Any, env_urls: dict[str, str]) -> None:
        """Serve another run of this process from now on: `cfg`'s rollout and eval settings, its
        env servers, and `model`'s weights (pushed by the next `sync_weights`;
        `TrainingRun.adopt_engine`)."""
        self.cfg = cfg
        self.env_urls = env_urls
        self.sampler.retarget(model)
        self.backend = self.sampler.backend
        self.synced = False

    def close(self) -> None:
        self.sampler.close()

    def _pool(self, family: str) -> EnvPool:
        if family in self.env_urls and "," in self.env_urls[family]:
            urls = [u.strip() for u in self.env_urls[family].split(",")]
            return ReplicaEnvPool(urls, family, timeout=self.cfg.rollout.env_timeout_s)
        if family in self.env_urls:
            return RemoteEnvPool(self.env_urls[family], family, timeout=self.cfg.rollout.env_timeout_s)
        return LocalEnvPool(family, env_kwargs=dict(self.cfg.env.kwargs.get(family) or {}))

    def __call__(self, episodes: list[Episode], *, step: int, greedy: bool = False) -> list[Trajectory]:
        if not self.synced:
            self.sync_weights()
        # groups in plan order: (item, cap, episodes of the group)
        groups: dict[int, list[Episode]] = defaultdict(list)
        for ep in episodes:
            groups[ep.group_id].append(ep)
        by_family: dict[str, list[list[Episode]]] = defaultdict(list)
        for group in groups.values():
            by_family[parse_item_id(group[0].item_id)[0]].append(group)
        results: dict[tuple[int, int], Trajectory] = {}
        for family, fam_groups in by_family.items():
            n = len(fam_groups[0])
            if any(len(g) != n for g in fam_groups):
                raise ValueError("every item group of one family must have the same number of samples")
            cap = max(g[0].max_turns for g in fam_groups)
            token_caps = [g[0].max_tokens for g in fam_groups]
            scheduled = [t for t in token_caps if t is not None]
            most = max(scheduled) if scheduled and not greedy else None
            engine_cfg = engine_config(self.cfg, greedy=greedy, max_turns=cap, max_tokens=most)
            engine = make_engine(self.cfg.rollout.engine, self.backend, self._pool(family), engine_cfg)
            trajectories = engine.run(
                [g[0].item_id for g in fam_groups],
                n=n,
                seed=[g[0].seed for g in fam_groups],
                max_turns=[g[0].max_turns for g in fam_groups],
                max_tokens=[t if t is not None else engine_cfg.max_tokens for t in token_caps],
            )
            planned = [ep for g in fam_groups for ep in g]
            for ep, traj in zip(planned, trajectories, strict=True):
                traj.group_id, traj.sample_index = ep.group_id, ep.sample_index
                traj.meta["step"] = step
                results[(ep.group_id, ep.sample_index)] = traj
        self.backend.clear()
        if not greedy:  # a training rollout: the update comes next
            self.synced = False
            self.sampler.after_rollout()
        return [results[(ep.group_id, ep.sample_index)] for ep in episodes]
