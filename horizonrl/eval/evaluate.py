"""`horizonrl eval`: play a split of one or more families with a model and report the figures.

    horizonrl eval --model default --env textcraft --split test --limit 20 --out runs/eval
    horizonrl eval --model default --env textcraft --server http://127.0.0.1:36001 --out runs/eval
    horizonrl eval --backend openai --model gpt-4o-mini --env textcraft,babyai --out runs/api \\
        base_url=https://api.openai.com/v1
    horizonrl eval configs/eval_textcraft.yaml limit=5       # the same settings from YAML
    horizonrl eval --model runs/quickstart/rl --env textcraft  # a run: its best (else last) checkpoint

Writes `OUT/report.json`, `OUT/report.md` and `OUT/trajectories.jsonl` (see
`horizonrl.eval.report`). While it runs, each finished episode is appended to
`OUT/trajectories.partial.jsonl` (removed at the end), so a long eval that is stopped
keeps what it played. Greedy (temperature 0) by default; `--n K` samples K times per
item (same env seed) for avg@K / pass@K. Episodes whose env broke are reported as failed
(they count as unsolved) and the eval carries on; the command exits 1 only when every
episode failed.

Settings: the fields of `EvalSettings` below, from the YAML file, then the flags, then
`key=value` overrides (unknown keys are rejected with the valid ones named). The turn cap is
the family's eval cap (`EVAL_MAX_TURNS`: textcraft 30, babyai 20, ...) unless `max_turns` is
given. The trainer's in-run eval (`eval:` in a training config) has the same settings with
the same defaults, so both give the same report of one checkpoint.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from horizonrl.envs.registry import get_family
from horizonrl.eval.metrics import eval_summary
from horizonrl.eval.report import combine, write_report
from horizonrl.models import model_of_run
from horizonrl.rollout.backends.base import PolicyBackend, make_backend
from horizonrl.rollout.engine import EngineConfig, RolloutEngine
from horizonrl.rollout.envpool import EnvPool, LocalEnvPool, RemoteEnvPool
from horizonrl.rollout.settings import EvalRolloutSettings
from horizonrl.rollout.trajectory import Trajectory, write_jsonl


@dataclass(frozen=True)
class EvalSettings(EvalRolloutSettings):
    """`horizonrl eval`'s settings: `EvalRolloutSettings` (split, limit, categories, max_turns, n,
    seed, temperature, top_p, top_k, max_tokens, max_response_length, batch_size, env_timeout_s:
    the fields and defaults the trainer's `eval:` section has too) plus these."""

    model: str = "default"
    """HF id, local path or alias (`default`, `tiny`) for hf (vllm: not `tiny`); the API model name
    for openai. A training run directory stands for its best checkpoint's model
    (`checkpoints/best`), else its last one's (`horizonrl.models.model_of_run`)."""
    backend: str = "hf"
    """hf (in this process), vllm (a vLLM engine in its own process, `rollout.vllm`'s defaults; the
    same greedy tokens as hf in fp32, ~2.4x faster evals on a 2-core CPU) or openai (an API)."""
    env: list[str] = field(default_factory=lambda: ["textcraft"])
    """Families to evaluate (the flag takes a comma-separated list)."""
    server: str | None = None
    """Env server URL (one family); `servers` maps several."""
    servers: dict[str, str] = field(default_factory=dict)
    dtype: str = "float32"
    """hf, vllm: weights dtype (float32 or bfloat16)."""
    max_model_len: int | None = None
    """vllm: longest context + turn in tokens (None: the model's own limit; sizes the KV cache)."""
    device: str | None = None
    base_url: str | None = None
    """openai: endpoint base URL ending in /v1 (default $OPENAI_BASE_URL or api.openai.com)."""
    api_key_env: str = "OPENAI_API_KEY"
    out: str = "runs/eval"
    progress: bool = True
    show_available_actions: bool = False
    """Append the env's available actions to each observation (`agent.show_available_actions`)."""
    strategy: str = "react"
    """The agent strategy (`agent.strategy`: react, plan, reflect); named in the report."""
    context_max_turns_kept: int | None = None
    """Bounded context (`agent.context.max_turns_kept`): the task and the last k turns."""
    context_max_tokens: int | None = None
    """Bounded context (`agent.context.max_tokens`): drop the oldest turns until the context fits."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.server and len(self.env) > 1:
            raise ValueError("--server serves one family; give servers={family: url} for several")
        EngineConfig.of(self, strategy=self.strategy)  # the agent settings are checked now

    def engine_config(self, family: str) -> EngineConfig:
        return EngineConfig.of(
            self,
            max_turns=self.turn_cap(family),
            progress=self.progress,
            show_available_actions=self.show_available_actions,
            strategy=self.strategy,
            context_max_turns_kept=self.context_max_turns_kept,
            context_max_tokens=self.context_max_tokens,
        )


_FLAGS = (
    "model",
    "backend",
    "env",
    "split",
    "limit",
    "max_turns",
    "n",
    "temperature",
    "seed",
    "server",
    "dtype",
    "out",
)


def load_settings(args: argparse.Namespace) -> EvalSettings:
    """YAML file (optional), then the flags that were given, then dotted overrides."""
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

    layers: list[Any] = [OmegaConf.structured(EvalSettings)]
    config = getattr(args, "config", None)
    overrides = list(getattr(args, "overrides", None) or [])
    if config and "=" in config and not Path(config).exists():  # argparse took an override for the file
        config, overrides = None, [config, *overrides]
    if config:
        layers.append(OmegaConf.load(config))
    flags: dict[str, Any] = {}
    for name in _FLAGS:
        value = getattr(args, name, None)
        if value is not None:
            flags[name] = value.split(",") if name == "env" else value
    layers.append(OmegaConf.create(flags))
    if overrides:
        layers.append(OmegaConf.from_dotlist(overrides))
    try:
        merged = OmegaConf.merge(*layers)
        settings = OmegaConf.to_object(merged)
    except ConfigKeyError as exc:
        valid = ", ".join(f.name for f in fields(EvalSettings))
        raise SystemExit(f"horizonrl eval: unknown setting {exc.full_key!r}; valid: {valid}") from None
    except OmegaConfBaseException as exc:
        raise SystemExit(f"horizonrl eval: bad setting: {str(exc).splitlines()[0]}") from None
    except ValueError as exc:
        raise SystemExit(f"horizonrl eval: {exc}") from None
    assert isinstance(settings, EvalSettings)
    try:
        run = model_of_run(settings.model) if settings.backend != "openai" else None
    except FileNotFoundError as exc:
        raise SystemExit(f"horizonrl eval: {exc}") from None
    if run is not None:
        print(f"horizonrl eval: {run[1]}: {run[0]}", file=sys.stderr)
        settings = replace(settings, model=str(run[0]))
    return settings


def build_backend(settings: EvalSettings) -> PolicyBackend:
    if settings.backend == "hf":
        return make_backend("hf", model=settings.model, dtype=settings.dtype, device=settings.device)
    if settings.backend == "openai":
        return make_backend(
            "openai", model=settings.model, base_url=settings.base_url, api_key_env=settings.api_key_env
        )
    if settings.backend == "vllm":
        return make_backend(
            "vllm", model=settings.model, dtype=settings.dtype, max_model_len=settings.max_model_len
        )
    return make_backend(settings.backend, model=settings.model)


def make_pool(settings: EvalSettings, family: str) -> EnvPool:
    url = settings.servers.get(family) or settings.server
    if url:
        return RemoteEnvPool(url, family, timeout=settings.env_timeout_s)
    return LocalEnvPool(family)


def evaluate_family(
    backend: PolicyBackend, settings: EvalSettings, family: str, **run_kwargs: Any
) -> tuple[list[Trajectory], dict[str, Any], RolloutEngine]:
    """Play `settings.split` of one family; returns trajectories, `eval_summary`, the engine."""
    spec = get_family(family)
    items = spec.split(settings.split)
    if settings.categories:
        unknown = set(settings.categories) - set(spec.categories)
        if unknown:
            valid = ", ".join(spec.categories)
            raise SystemExit(f"horizonrl eval: {family} has no categories {sorted(unknown)}; valid: {valid}")
        items = [i for i in items if spec.category_of(i) in settings.categories]
    if settings.limit:
        items = items[: settings.limit]
    engine = RolloutEngine(backend, make_pool(settings, family), settings.engine_config(family))
    trajectories = engine.run(items, n=settings.n, seed=settings.seed, **run_kwargs)
    return trajectories, eval_summary(trajectories, spec.categories), engine


def run_eval(
    settings: EvalSettings, backend: PolicyBackend | None = None, **run_kwargs: Any
) -> dict[str, Any]:
    """Evaluate every family in `settings.env`, write the three outputs, return the report."""
    if backend is None:
        backend = build_backend(settings)
        try:
            return run_eval(settings, backend, **run_kwargs)
        finally:
            backend.close()
    out = Path(settings.out)
    out.mkdir(parents=True, exist_ok=True)
    traj_path, partial = out / "trajectories.jsonl", out / "trajectories.partial.jsonl"
    traj_path.write_text("")
    partial.write_text("")
    blocks: dict[str, dict[str, Any]] = {}
    timing: dict[str, Any] = {}
    start = time.perf_counter()
    tokens = 0
    for family in settings.env:
        run_kwargs.setdefault("on_finish", lambda traj: write_jsonl(partial, [traj], append=True))
        trajectories, summary, engine = evaluate_family(backend, settings, family, **run_kwargs)
        write_jsonl(traj_path, trajectories, append=True)
        blocks[family] = summary
        tokens += engine.stats.sampled_tokens
    wall = time.perf_counter() - start
    timing = {"wall_s": round(wall, 1), "sampled_tokens": tokens, "tokens_per_s": round(tokens / wall, 1)}
    settings_dict = {k: v for k, v in asdict(settings).items() if k not in ("progress", "api_key_env")}
    report = combine(blocks, model=settings.model, split=settings.split, k=settings.n, settings=settings_dict)
    report["timing"] = timing
    write_report(report, out)
    partial.unlink()
    return report


def eval_main(args: argparse.Namespace) -> int:
    settings = load_settings(args)
    report = run_eval(settings)
    out = Path(settings.out)
    print((out / "report.md").read_text())
    print(f"wrote {out / 'report.json'}, {out / 'report.md'}, {out / 'trajectories.jsonl'}", file=sys.stderr)
    summary = {k: report[k] for k in ("env", "model", "n_items", "success_rate", "mean_score", "n_failed")}
    print(json.dumps(summary))
    if report["n_trajectories"] and report["n_failed"] == report["n_trajectories"]:
        print("horizonrl eval: every episode failed (is the env server up?)", file=sys.stderr)
        return 1
    return 0
