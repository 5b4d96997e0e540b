"""Training configuration: one frozen dataclass per component, YAML files map onto them 1:1.

    cfg = load_config("configs/quickstart.yaml", ["trainer.total_steps=4", "schedule.rounds=[2,4,6]"])
    cfg.schedule.rounds          # [2, 4, 6]

`load_config` merges the YAML file and dotted `key=value` overrides (values in YAML syntax)
onto the dataclasses with OmegaConf's structured mode, so types are checked and unknown keys
are rejected with the valid ones named. Each dataclass validates itself in `__post_init__`.

The reference's turn-schedule keys are accepted as aliases:
`algorithm.rounds_ctrl.type` (`fixed` / `scaling_inter_stepwise`) -> `schedule.type`,
`algorithm.rounds_ctrl.rounds` -> `schedule.rounds`,
`algorithm.rounds_ctrl.steps_scaling_inter` -> `schedule.every`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException, ValidationError

from horizonrl.agent.strategies import STRATEGIES as AGENT_STRATEGIES
from horizonrl.rollout.engines import ENGINES
from horizonrl.rollout.settings import EvalRolloutSettings, RolloutSettings


class ConfigError(ValueError):
    """A config file or override is wrong; the message says which key and what is valid."""


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def _positive_float(text: str) -> bool:
    try:
        return float(text) > 0
    except ValueError:
        return False


def _settings_checked(check: Any) -> None:
    """Run a `horizonrl.rollout.settings` validation, its ValueError as a ConfigError."""
    try:
        check()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _one_of(key: str, value: str, valid: Sequence[str]) -> None:
    _check(value in valid, f"{key}={value!r} is not valid; choose one of: {', '.join(valid)}")


@dataclass(frozen=True)
class LoraConfig:
    enabled: bool = False
    """Train LoRA adapters (peft) instead of all weights; the reference policy is then the base
    weights with adapters disabled, so no second model copy is kept."""
    r: int = 16
    """Adapter rank."""
    alpha: int = 32
    """LoRA scaling numerator (scale = alpha / r)."""
    dropout: float = 0.0
    target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    """Names of the linear layers that get adapters."""


@dataclass(frozen=True)
class ModelConfig:
    path: str = "default"
    """HF id, local path, `default` (SmolLM2-135M-Instruct) or `tiny` (random 2-layer test model)."""
    bf16: bool = True
    """bf16 autocast for forward/backward on CPU/GPU where supported; master weights stay fp32."""
    gradient_checkpointing: bool = True
    """Recompute activations in backward: less memory, and on CPU not slower with bf16."""
    lora: LoraConfig = field(default_factory=LoraConfig)


@dataclass(frozen=True)
class DataConfig:
    families: list[str] = field(default_factory=lambda: ["textcraft"])
    """Environment families whose `split` items are trained on; several families mix in a batch."""
    split: str = "train"
    """Split of each family to draw training items from."""
    train_files: list[str] = field(default_factory=list)
    """RL: Data-ID JSON files (`[{"item_id": ...}]`, the reference's `<task>_train.json`) to use
    instead of the families' splits. SFT / DPO / AgentEvol (seed set) / an RL warm start: trajectory
    JSONL files (`horizonrl solve ... --out`, rollout or eval trajectories)."""
    expert_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Family -> keyword arguments of its scripted expert (`horizonrl solve --expert-kwargs`), e.g.
    `{textcraft: {worked: true}}`: the variant that writes a missing `train_files` demo file of that
    family, and that an existing one must have been written by (its trajectories' `meta`)."""
    categories: list[str] = field(default_factory=list)
    """Keep only items of these categories (e.g. `["depth 1", "depth 2"]`); empty keeps all."""
    max_items: int | None = None
    """Use at most this many items (after filtering, in the seeded order)."""
    batch_size: int = 4
    """Items per training step; each is rolled out `rollout.n` times."""
    shuffle: bool = True
    """Reshuffle the items every epoch (seeded by `trainer.seed` and the epoch number)."""
    curriculum: CurriculumConfig = field(default_factory=lambda: CurriculumConfig())
    """RL: stages of training items, easy to hard (`CurriculumConfig`; no stages: off)."""
    val_fraction: float = 0.0
    """RL: hold out this share of the training items (a fixed slice by item id, not drawn for
    training) as the validation split of the periodic eval (`eval.every`), which then keeps the
    best checkpoint (`checkpoints/best`); 0: the periodic eval plays `eval.split`."""

    def __post_init__(self) -> None:
        _check(self.batch_size >= 1, f"data.batch_size must be >= 1, got {self.batch_size}")
        _check(
            0.0 <= self.val_fraction < 1.0, f"data.val_fraction must be in [0, 1), got {self.val_fraction}"
        )
        _check(
            not (self.curriculum.stages and self.categories),
            "data.categories and data.curriculum.stages both pick categories: give each stage its "
            "categories and leave data.categories empty",
        )
        _check(bool(self.families or self.train_files), "data.families or data.train_files must be set")
        _check(self.max_items is None or self.max_items >= 1, "data.max_items must be >= 1 when set")
        _check(
            all(isinstance(v, dict) for v in self.expert_kwargs.values()),
            f"data.expert_kwargs maps a family to its expert's kwargs (a mapping), got {self.expert_kwargs}",
        )


VLLM_WEIGHT_SYNC = ("file",)


@dataclass(frozen=True)
class VLLMConfig:
    """The `vllm` backend (`rollout.backend: vllm`): a vLLM engine in a worker process of its own
    virtualenv, its weights pushed from the learner before every rollout (docs/rollout.md)."""

    python: str = ""
    """Python of the environment vLLM is installed in; empty: `.venv-vllm/bin/python` at the
    repository root (`scripts/install.sh` makes it), else this python when it can import vllm."""
    max_model_len: int | None = None
    """Longest context + turn in tokens (None: the model's own limit); KV memory is sized by it."""
    gpu_memory_utilization: float = 0.5
    """Share of each GPU vLLM may take (weights + KV cache); the rest is the colocated learner's."""
    tensor_parallel_size: int = 1
    """GPUs one engine shards the model over."""
    devices: str = ""
    """GPUs the engine may use (`CUDA_VISIBLE_DEVICES` of its process, e.g. `"4,5,6,7"`): separate
    from the learner's; empty: the same GPUs as the learner (colocated)."""
    kv_cache_gb: float = 1.0
    """CPU only: KV cache size in GiB (`VLLM_CPU_KVCACHE_SPACE`)."""
    enforce_eager: bool = True
    """No CUDA graphs / torch.compile: faster start-up; set false on GPUs for faster decoding."""
    weight_sync: str = "file"
    """How the learner's weights reach the engine after each update: `file` writes safetensors
    (under /dev/shm: shared memory) that the engine loads in place (CPU and GPU)."""
    sleep_during_update: bool = False
    """Colocated GPUs: put the engine to sleep (KV cache freed, weights offloaded) while the
    learner updates, wake it before the next rollout (a no-op on CPU)."""
    check_tolerance: float = 2e-4
    """After each sync the engine's and the learner's logprobs of a fixed sequence must agree to
    this (max abs difference, fp32 on both sides: 2e-5 to 7e-5 measured on CPU; bf16 engines need
    ~0.1); 0 turns the check off."""
    start_timeout_s: float = 900.0
    """Seconds the engine may take to start (model load, KV cache, warm-up)."""

    def __post_init__(self) -> None:
        _one_of("rollout.vllm.weight_sync", self.weight_sync, VLLM_WEIGHT_SYNC)
        _check(
            0 < self.gpu_memory_utilization <= 1,
            f"rollout.vllm.gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}",
        )
        _check(self.tensor_parallel_size >= 1, "rollout.vllm.tensor_parallel_size must be >= 1")
        _check(self.kv_cache_gb > 0, f"rollout.vllm.kv_cache_gb must be > 0, got {self.kv_cache_gb}")
        _check(self.check_tolerance >= 0, "rollout.vllm.check_tolerance must be >= 0")
        _check(
            self.max_model_len is None or self.max_model_len >= 16,
            "rollout.vllm.max_model_len must be >= 16 when set",
        )


@dataclass(frozen=True)
class RolloutConfig(RolloutSettings):
    """Training rollouts: `RolloutSettings` (max_tokens, max_response_length, temperature, top_p,
    top_k, batch_size, env_timeout_s; their defaults live there) plus these."""

    key_prefix: ClassVar[str] = "rollout."
    backend: str = "hf"
    """Policy backend for generation: `hf` (transformers, default) or `vllm` (see `vllm`)."""
    n: int = 4
    """Samples per item (group size for GRPO / RLOO); samples of an item share a seed base."""
    dtype: str = "float32"
    """Weights the hf backend samples with: `float32` samples from the learner's own module;
    `bfloat16` from a bf16 copy refreshed from the learner's fp32 weights before every rollout
    (~1.7x the tokens/s on CPUs with bf16 units; the update's old logprobs are recomputed by the
    learner either way). The vllm backend's engine runs in this dtype too."""
    vllm: VLLMConfig = field(default_factory=VLLMConfig)
    engine: str = "lockstep"
    """`lockstep` (rounds of one batched generation, then the round's env steps) or `async` (each
    episode advances as soon as its own env step returns); the trainer's evals use it too."""
    max_tokens_schedule: TokenScheduleConfig | None = None
    """The per-turn token cap by training step (`TokenScheduleConfig`: a schedule like `schedule:`,
    its `rounds` token caps, e.g. `{type: stepwise, rounds: [64, 256], every: 10}`); None: `max_tokens`."""
    max_staleness: int = 0
    """k: the rollouts of steps s+1..s+k may run (in a background thread, on a copy of the weights)
    while step s trains, so a trajectory may come from weights up to k updates old; the update then
    corrects with decoupled PPO (`algorithm.behaviour_is_cap`). 0: the synchronous loop, each step's
    rollout with the weights of the last update (docs/rollout.md, "Staleness")."""

    def __post_init__(self) -> None:
        _settings_checked(super().__post_init__)
        _check(self.max_staleness >= 0, f"rollout.max_staleness must be >= 0, got {self.max_staleness}")
        _one_of("rollout.dtype", self.dtype, ("float32", "bfloat16"))
        _one_of("rollout.backend", self.backend, ("hf", "vllm"))
        _one_of("rollout.engine", self.engine, tuple(ENGINES))
        _check(self.n >= 1, f"rollout.n must be >= 1, got {self.n}")


ALGORITHM_NAMES = ("ppo", "grpo", "rloo", "reinforce_pp", "sft", "dpo", "agentevol")
LOSS_AGGREGATIONS = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean")
KL_KINDS = ("k1", "k2", "k3", "kl", "mse", "low_var_kl")
REWARD_KINDS = ("outcome", "turn", "success", "shaped")


@dataclass(frozen=True)
class AlgorithmConfig:
    name: str = "grpo"
    """Workflow: an RL algorithm (ppo, grpo, rloo, reinforce_pp: all `horizonrl train`) or sft, dpo,
    agentevol. RL variants differ only by `adv_estimator` and the settings below."""
    adv_estimator: str | None = None
    """Advantage estimator: gae (with critic), grpo, rloo, reinforce_pp, gigpo (GRPO + turn-level
    credit over turns that start from the same env state). None follows `name` (ppo -> gae,
    grpo -> grpo, rloo -> rloo, reinforce_pp -> reinforce_pp; otherwise grpo)."""
    gamma: float = 1.0
    """Discount per sampled token (gae, reinforce_pp)."""
    lam: float = 1.0
    """GAE lambda."""
    norm_eps: float = 1e-6
    """Epsilon added to standard deviations when normalizing advantages."""
    grpo_norm_by_std: bool = True
    """GRPO divides by the group's std (False: only subtract the group mean, as Dr. GRPO)."""
    whiten_advantages: bool = True
    """GAE: whiten advantages over the batch's sampled tokens."""
    step_adv_weight: float = 1.0
    """gigpo: weight w of the step-level advantage added to the episode-level one (the paper's 1)."""
    step_gamma: float = 0.95
    """gigpo: discount per turn of the return-from-a-turn that step groups compare (the paper's 0.95)."""
    reward: str = "outcome"
    """`outcome`: the trajectory's total env reward on its last sampled token; `turn`: each turn's
    env reward on that turn's last sampled token; `success`: 1/0 success on the last token;
    `shaped`: `outcome` plus `shaped_weight` x each turn's sub-goal progress (`info["progress"]`)
    on that turn's last sampled token (docs/training.md, "Rewards")."""
    shaped_weight: float = 0.5
    """`reward: shaped`: weight of the progress rewards, in [0, 1]. A family's progress sums to at
    most 1 per episode (clipped so), so the shaping totals at most this, never more than the
    largest outcome reward (1)."""
    invalid_action_penalty: float = 0.0
    """Subtracted on a turn's last sampled token when its response had no parsable action or the
    env rejected the action (`info["invalid_action"]`), whatever `reward` is; 0 disables."""
    policy_loss: str = "ppo"
    clip_ratio_low: float = 0.2
    clip_ratio_high: float = 0.2
    """Upper clip of the PPO ratio (raise it for clip-higher)."""
    dual_clip: float | None = None
    """Dual-clip constant c > 1 for negative advantages; None disables."""
    loss_agg: str = "token-mean"
    """How per-token losses are reduced: token-mean, seq-mean-token-sum, seq-mean-token-mean."""
    entropy_coef: float = 0.001
    """Weight of the entropy bonus (subtracted from the loss); with 0 the entropy is only logged
    (`entropy/mean`), computed outside the graph, so the update skips its backward."""
    kl_coef: float = 0.001
    """Weight of the KL to the reference policy; 0 skips the reference model entirely."""
    kl_estimator: str = "k3"
    """k1, k2, k3 (aliases kl, mse, low_var_kl)."""
    kl_in_reward: bool = False
    """False: KL is a loss term (the reference's setting); True: a per-token reward penalty."""
    vf_coef: float = 0.5
    """Weight of the value loss (critic estimators only)."""
    value_clip: float | None = 0.2
    ppo_epochs: int = 1
    """Passes over each rollout batch."""
    recompute_old_logprobs: bool = True
    """Recompute `old_logprobs` with the learner before the update (exact ratio 1 on the first
    pass); False uses the rollout's logprobs (saves a forward pass; only allowed when the rollout
    computes exactly what the learner does: fp32 sampling and `model.bf16=false`)."""
    behaviour_is_cap: float = 5.0
    """With `rollout.max_staleness > 0` (decoupled PPO): each sampled token's advantage is weighted
    by `min(pi_old / pi_behaviour, behaviour_is_cap)`, the recomputed (proximal) policy over the
    stale one that sampled it; the PPO ratio is clipped against `pi_old` as usual."""
    logprob_temperature: str = "rollout"
    """T of the distribution `softmax(logits / T)` that every logprob of the update is under
    (rollout, old, reference; also the entropy): `rollout` = `rollout.temperature`, the policy
    that sampled (as verl), or a number such as `1.0` for the raw model. Top-k / top-p are
    never applied to training logprobs (see docs/training.md)."""
    bootstrap_truncated: bool | None = None
    """An episode cut by a turn/length cap (not ended by the env) is bootstrapped from the critic's
    value at the cut instead of scored as terminal. None: on for critic estimators (gae), off for
    the others (they have no value to bootstrap from)."""
    failed: str = "drop"
    """Trajectories whose env broke: `drop` them from the update or score them `zero`."""
    filter_groups: bool = False
    """Group estimators (grpo, rloo, gigpo): leave out of the update every group whose samples all
    got the same reward (their advantages are all 0; DAPO's filter; gigpo keeps such a group when
    its step groups' returns differ). Saves their score and update passes, and token-mean losses
    then average over informative tokens only. A step with no informative group skips the
    optimizer step (the LR schedule still advances)."""
    dynamic_sampling_groups: int = 0
    """DAPO's dynamic sampling, with `filter_groups`: while a step's rollout holds fewer informative
    groups than this, play another batch of `data.batch_size` fresh items (the same turn cap), up
    to `dynamic_sampling_max_batches` batches; the update trains on the first this-many informative
    groups in the order played. 0: one batch per step. Logged as `rollout/batches`."""
    dynamic_sampling_max_batches: int = 4
    """The most batches one step plays with `dynamic_sampling_groups` (the first included)."""

    def __post_init__(self) -> None:
        from horizonrl.algos.advantages import ESTIMATORS
        from horizonrl.algos.losses import POLICY_LOSSES

        _one_of("algorithm.name", self.name, ALGORITHM_NAMES)
        _one_of("algorithm.adv_estimator", self.estimator, list(ESTIMATORS))
        _one_of("algorithm.policy_loss", self.policy_loss, list(POLICY_LOSSES))
        _one_of("algorithm.loss_agg", self.loss_agg, LOSS_AGGREGATIONS)
        _one_of("algorithm.kl_estimator", self.kl_estimator, KL_KINDS)
        _one_of("algorithm.reward", self.reward, REWARD_KINDS)
        _check(
            0 <= self.shaped_weight <= 1,
            f"algorithm.shaped_weight must be in [0, 1], got {self.shaped_weight}",
        )
        _check(
            self.invalid_action_penalty >= 0,
            "algorithm.invalid_action_penalty must be >= 0 (it is subtracted), "
            f"got {self.invalid_action_penalty}",
        )
        _check(0 <= self.step_gamma <= 1, f"algorithm.step_gamma must be in [0, 1], got {self.step_gamma}")
        _check(
            self.step_adv_weight >= 0, f"algorithm.step_adv_weight must be >= 0, got {self.step_adv_weight}"
        )
        _one_of("algorithm.failed", self.failed, ("drop", "zero"))
        _check(self.ppo_epochs >= 1, "algorithm.ppo_epochs must be >= 1")
        _check(0 <= self.gamma <= 1 and 0 <= self.lam <= 1, "algorithm.gamma and .lam must be in [0, 1]")
        _check(self.dual_clip is None or self.dual_clip > 1, "algorithm.dual_clip must be > 1 when set")
        _check(
            not self.filter_groups or ESTIMATORS[self.estimator].group_relative,
            f"algorithm.filter_groups needs a group estimator (grpo, rloo, gigpo), not {self.estimator!r}",
        )
        _check(
            self.dynamic_sampling_groups >= 0 and self.dynamic_sampling_max_batches >= 1,
            "algorithm.dynamic_sampling_groups must be >= 0 and algorithm.dynamic_sampling_max_batches "
            f">= 1, got {self.dynamic_sampling_groups} and {self.dynamic_sampling_max_batches}",
        )
        _check(
            not self.dynamic_sampling_groups or self.filter_groups,
            "algorithm.dynamic_sampling_groups counts the groups that algorithm.filter_groups keeps; "
            "set algorithm.filter_groups=true",
        )
        _check(
            self.logprob_temperature == "rollout" or _positive_float(self.logprob_temperature),
            f"algorithm.logprob_temperature={self.logprob_temperature!r}: use rollout or a number > 0",
        )
        _check(
            not self.bootstrap_truncated or ESTIMATORS[self.estimator].needs_critic,
            f"algorithm.bootstrap_truncated needs a critic estimator (gae), not {self.estimator!r}",
        )

    @property
    def bootstraps_truncated(self) -> bool:
        """Whether truncated episodes are bootstrapped (`bootstrap_truncated`, or its default)."""
        from horizonrl.algos.advantages import ESTIMATORS

        if self.bootstrap_truncated is None:
            return ESTIMATORS[self.estimator].needs_critic
        return self.bootstrap_truncated

    @property
    def estimator(self) -> str:
        """The advantage estimator in effect (`adv_estimator`, or the one `name` implies)."""
        if self.adv_estimator is not None:
            return self.adv_estimator
        return {"ppo": "gae", "rloo": "rloo", "reinforce_pp": "reinforce_pp"}.get(self.name, "grpo")


SCHEDULE_TYPES = ("fixed", "stepwise", "adaptive", "mixed")


@dataclass(frozen=True)
class StageAdvanceConfig:
    """How a staged schedule moves to its next stage: the fields `schedule:`, its token-cap twin
    and `data.curriculum` share (horizonrl.trainer.schedule)."""

    type: str = "stepwise"
    """fixed, stepwise (the paper's ScalingInter-RL), adaptive, mixed (see horizonrl.trainer.schedule)."""
    every: int = 100
    """stepwise / mixed: steps per stage. adaptive: the fewest steps spent in a stage."""
    threshold: float = 0.8
    """adaptive: advance when the moving success rate reaches this."""
    window: int = 5
    """adaptive: steps in the moving success-rate window."""
    plateau_tol: float = 0.02
    """adaptive: advance when the windowed success rate moved less than this over one window."""
    mixed_fraction: float = 0.25
    """mixed: share of groups that get the next stage's cap (the curriculum: the next stage's items)."""


@dataclass(frozen=True)
class ScheduleConfig(StageAdvanceConfig):
    """A schedule of one int per training step: the turn cap (`schedule:`), the per-turn token cap
    (`rollout.max_tokens_schedule`, `TokenScheduleConfig`), the curriculum stage (built from
    `data.curriculum`). The same types and resume behaviour for all (horizonrl.trainer.schedule)."""

    key_prefix: ClassVar[str] = "schedule."
    """How validation errors name the fields."""
    rounds: list[int] = field(default_factory=lambda: [10, 20, 30])
    """Turn caps per stage; `fixed` takes exactly one."""

    def __post_init__(self) -> None:
        p = self.key_prefix
        kind = {"scaling_inter_stepwise": "stepwise"}.get(self.type, self.type)
        object.__setattr__(self, "type", kind)  # the reference's name, normalized
        _one_of(f"{p}type", kind, SCHEDULE_TYPES)
        _check(len(self.rounds) >= 1 and all(r >= 1 for r in self.rounds), f"{p}rounds: values >= 1")
        _check(
            kind != "fixed" or len(self.rounds) == 1,
            f"{p}type=fixed takes one cap, e.g. {p}rounds=[{self.rounds[-1]}]; got {self.rounds}",
        )
        _check(self.every >= 1, f"{p}every must be >= 1, got {self.every}")
        _check(self.window >= 1, f"{p}window must be >= 1")
        _check(0.0 <= self.mixed_fraction <= 1.0, f"{p}mixed_fraction must be in [0, 1]")


@dataclass(frozen=True)
class TokenScheduleConfig(ScheduleConfig):
    """`rollout.max_tokens_schedule`: the per-turn token cap of each step, e.g. `{type: stepwise,
    rounds: [64, 256], every: 10}`; `rounds` are token caps (None / unset: `rollout.max_tokens`)."""

    key_prefix: ClassVar[str] = "rollout.max_tokens_schedule."


@dataclass(frozen=True)
class CurriculumStageConfig:
    """One curriculum stage: the training items it draws from (the union of what is given)."""

    categories: list[str] = field(default_factory=list)
    """Categories of `data.split` (or `data.train_files`) items, e.g. `[depth 1, depth 2]`."""
    items: list[str] = field(default_factory=list)
    """Item ids, e.g. `[textcraft_0, textcraft_7]`."""


@dataclass(frozen=True)
class CurriculumConfig(StageAdvanceConfig):
    """`data.curriculum`: stages of training items (easy to hard); the stage advances like a
    schedule (`type` stepwise: every `every` steps; adaptive: on the success `threshold` or a
    plateau; mixed: stepwise, with a `mixed_fraction` of the groups drawn from the next stage;
    `fixed` is refused). No stages: no curriculum."""

    key_prefix: ClassVar[str] = "data.curriculum."
    stages: list[CurriculumStageConfig] = field(default_factory=list)
    """The stages, easy to hard."""

    def __post_init__(self) -> None:
        p = self.key_prefix
        _one_of(f"{p}type", self.type, CURRICULUM_TYPES)
        for i, stage in enumerate(self.stages):
            _check(
                bool(stage.categories or stage.items),
                f"{p}stages[{i}] is empty: give it categories (e.g. [depth 1]) or items (item ids)",
            )
        if self.stages:
            self.schedule()  # its checks, named data.curriculum.*

    def schedule(self) -> ScheduleConfig:
        """The stage schedule: a schedule whose values are the stage numbers 1..len(stages)."""
        advance = {f.name: getattr(self, f.name) for f in fields(StageAdvanceConfig)}
        return CurriculumScheduleConfig(rounds=list(range(1, len(self.stages) + 1)), **advance)


@dataclass(frozen=True)
class CurriculumScheduleConfig(ScheduleConfig):
    """The schedule `CurriculumConfig.schedule()` builds (its errors name `data.curriculum.*`)."""

    key_prefix: ClassVar[str] = "data.curriculum."


CURRICULUM_TYPES = ("stepwise", "adaptive", "mixed")


@dataclass(frozen=True)
class TrainerConfig:
    total_steps: int = 100
    """Training steps (one rollout batch and its update each)."""
    max_seconds: float | None = None
    """Stop once the training steps took this many seconds in all (their own time, as `time/step`
    logs it: no model load, checkpoint or eval; counted across resumes), or at `total_steps`,
    whichever comes first; the run then saves and runs its final eval as at `total_steps`. None:
    steps only. In a warm start (`sft.warmup_steps > 0`) it is the RL phase's budget. A time-boxed
    run (`benchmarks/gpu_protocol_short.sh`: RL for a share of a lease)."""
    output_dir: str = "runs/default"
    """Run directory: config.yaml, metrics.jsonl, TensorBoard events, trajectories, checkpoints."""
    resume: str = "auto"
    """`auto`: continue from the latest checkpoint in output_dir if any; `never`; or a checkpoint path."""
    seed: int = 0
    lr: float = 1e-6
    critic_lr: float = 1e-5
    weight_decay: float = 0.0
    adam_eps: float = 1e-8
    """AdamW's epsilon (torch's default). Adam divides each gradient by its running RMS, so a
    step of a fresh optimizer moves every weight by about `lr` however small the gradient is; an
    eps above the gradients' per-weight size makes small gradients take proportionally small
    steps (an update from a group with a faint signal then moves the policy little)."""
    warmup_steps: int = 0
    lr_schedule: str = "constant"
    """constant or cosine (after warmup)."""
    max_grad_norm: float = 1.0
    micro_batch_size: int = 4
    """Trajectories per forward/backward; gradients accumulate over the mini-batch."""
    logprob_block: int = 256
    """Positions per block when the learner turns logits into the sampled tokens' logprobs and the
    policy's entropy, forward and backward (`horizonrl.algos.losses.logprobs_from_logits`,
    `entropy_from_logits`): the float32 log-softmax over the vocabulary and its gradient then exist
    a block at a time (for 4 x 1000 tokens of a 49k vocabulary, 0.1 GB instead of 1.6 GB for the
    logprobs, 0.2 GB instead of 3.9 GB with the entropy trained on) for one more log-softmax each
    in the backward (per 4,000 such tokens on 2 CPU cores ~1.1 s more with the entropy only logged,
    ~2.3 s with it trained on; BENCHMARKS.md); the values and gradients are the same bit for bit.
    0: the whole micro-batch at once."""
    mini_batches: int = 1
    """Optimizer steps per PPO epoch (the rollout batch is split into this many mini-batches)."""
    save_every: int = 50
    """Save a checkpoint every N steps (and at the end); 0 saves only at the end."""
    keep_last: int = 2
    """Checkpoints kept on disk (older ones are deleted)."""
    device: str = "auto"
    """auto (cuda if available), cpu, cuda."""
    num_threads: int = 2
    """torch CPU threads."""
    deterministic: bool = True
    """torch deterministic algorithms (bit-exact resume on CPU)."""
    max_nonfinite_steps: int = 3
    """Stop the run after this many consecutive steps whose gradients were all non-finite (each
    such optimizer step is skipped and logged as `update/nonfinite`)."""
    max_failed_steps: int = 3
    """Stop the run after this many consecutive steps in which every episode failed (the env
    servers are down: `failed/frac == 1`)."""
    release_memory_above: float = 0.5
    """Supervised steps (SFT, DPO, AgentEvol's SFT phases) hand the heap's freed pages back to the system
    (`horizonrl.trainer.memory.keep_under`) once the process holds more than this share of the
    machine's memory (or its container's limit) after a step; the step row then logs
    `memory/released_gb`. A CPU step's freed memory otherwise stays in the process and creeps up
    over a long run (150 steps of the default model: 6.9 -> 16.2 GB); a trim costs the next step
    ~2.6 s (BENCHMARKS.md "Host memory of long runs"). 0: after every step; 1: never. RL steps
    trim after every step regardless (the rollout engine needs the room)."""

    def __post_init__(self) -> None:
        _check(self.total_steps >= 1, "trainer.total_steps must be >= 1")
        _check(
            self.max_seconds is None or self.max_seconds > 0,
            f"trainer.max_seconds must be > 0 when set, got {self.max_seconds}",
        )
        _check(self.micro_batch_size >= 1 and self.mini_batches >= 1, "micro_batch_size/mini_batches >= 1")
        _check(self.logprob_block >= 0, f"trainer.logprob_block must be >= 0, got {self.logprob_block}")
        _one_of("trainer.lr_schedule", self.lr_schedule, ("constant", "cosine"))
        _check(self.resume in ("auto", "never") or bool(self.resume), "trainer.resume: auto, never or a path")
        _check(self.max_nonfinite_steps >= 1, "trainer.max_nonfinite_steps must be >= 1")
        _check(self.max_failed_steps >= 1, "trainer.max_failed_steps must be >= 1")
        _check(self.adam_eps > 0, "trainer.adam_eps must be > 0")
        _check(
            0 <= self.release_memory_above <= 1,
            "trainer.release_memory_above is a share of the machine's memory in [0, 1], "
            f"got {self.release_memory_above}",
        )


@dataclass(frozen=True)
class EnvConfig:
    launch: bool = False
    """Start a `horizonrl serve` process per family (and stop it at the end); otherwise use
    `servers` URLs, or in-process envs for families without a URL."""
    servers: dict[str, str] = field(default_factory=dict)
    """Family -> env server URL (e.g. `{textcraft: "http://127.0.0.1:36001"}`)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Family -> keyword arguments of its env factory."""
    host: str = "127.0.0.1"
    base_port: int = 36100
    """Launched servers bind base_port, base_port + 1, ... in `data.families` order."""
    plugins: list[str] = field(default_factory=list)
    """Modules to import before the families are looked up (each registers families or defines
    `SPEC`); installed packages with a `horizonrl.envs` entry point need no entry here."""
    external: list[dict[str, Any]] = field(default_factory=list)
    """Families served by a server of their own, in any language: `{name, url, items, protocol,
    prompt}` each (see `horizonrl.server.external`); then name them in `data.families`."""


@dataclass(frozen=True)
class ContextConfig:
    """Bounded context (docs/rollout.md): what the model sees of a long episode. Off by default."""

    max_turns_kept: int | None = None
    """Keep the task (system + first user turn) and only the last k turns (None: all)."""
    max_tokens: int | None = None
    """Drop the oldest turns until the context is at most this many tokens (None: no bound);
    the last turn is always kept."""

    def __post_init__(self) -> None:
        for name in ("max_turns_kept", "max_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"agent.context.{name} must be >= 1 when set, got {value}")


@dataclass(frozen=True)
class AgentConfig:
    show_available_actions: bool = False
    """Append the env's available actions to each observation the agent sees (envs that list
    them, e.g. sciworld; families with free-form actions are unaffected). Rollouts and evals."""
    strategy: str = "react"
    """How the agent plays (`horizonrl.agent.strategies`): `react` (Thought/Action each turn),
    `plan` (a numbered plan first, revisable), `reflect` (a reflection after a failed turn)."""
    context: ContextConfig = field(default_factory=ContextConfig)

    def __post_init__(self) -> None:
        if self.strategy not in AGENT_STRATEGIES:
            known = sorted(AGENT_STRATEGIES)
            raise ValueError(f"agent.strategy must be one of {known}, got {self.strategy!r}")


@dataclass(frozen=True)
class EvalConfig(EvalRolloutSettings):
    """The in-run eval: `EvalRolloutSettings` (split, limit, categories, max_turns, n, seed and the
    rollout settings, greedy; the same fields and defaults as `horizonrl eval`, so its report of a
    checkpoint is the one `horizonrl eval` gives) plus when to run it and on which families."""

    key_prefix: ClassVar[str] = "eval."
    every: int = 0
    """Evaluate on `split` every N training steps (0: never during training)."""
    at_end: bool = True
    """Evaluate once after the last step (the run's eval report); an RL run whose last step was
    just evaluated (`every`) takes that report instead of playing the same weights again."""
    families: list[str] = field(default_factory=list)
    """Families to evaluate; empty means `data.families`."""

    def __post_init__(self) -> None:
        _settings_checked(super().__post_init__)


@dataclass(frozen=True)
class LoggingConfig:
    tensorboard: bool = True
    wandb_project: str | None = None
    """Log to Weights & Biases under this project when set (needs `wandb` installed)."""
    save_trajectories: bool = True
    """Write trajectories/step_N.jsonl every step."""
    save_token_stats: bool = False
    """Also write trajectories/token_stats/step_N.jsonl: per sampled token of every trajectory in the
    update, the advantage, the learner's old logprob, the reference logprob and KL, the token reward
    (and value / return with a critic), for the viewer's token view. About 5 floats per sampled token."""
    console: bool = True
    """Print one progress line per step."""


@dataclass(frozen=True)
class SFTConfig:
    """Supervised fine-tuning on trajectory files (`algorithm.name: sft`, AgentEvol, warm starts)."""

    warmup_steps: int = 0
    """RL algorithms: SFT steps on `data.train_files` before RL (the warm-started recipe); the run
    then writes `<output_dir>/sft` and `<output_dir>/rl`. 0: plain RL."""
    lr: float | None = None
    """Learning rate of the warm-start SFT phase (None: `trainer.lr`)."""
    batch_size: int | None = None
    """Trajectories per SFT step (None: `data.batch_size`)."""
    success_only: bool = True
    """Train only on successful trajectories of the files (expert demos all are)."""
    max_length: int = 4096
    """Longer tokenized conversations are cut to this many tokens."""
    eval_before: bool = False
    """Evaluate the initial model before the first step (`<run>/eval/initial`)."""
    max_seconds: float | None = None
    """SFT / DPO runs: stop once the training steps took this many seconds in all, as
    `trainer.max_seconds` (the smaller of the two counts when both are set). None: steps only. The
    equal-compute baseline of `benchmarks/protocol.py` (SFT for the wall time of an RL phase)."""

    def __post_init__(self) -> None:
        _check(self.warmup_steps >= 0, "sft.warmup_steps must be >= 0")
        _check(
            self.max_seconds is None or self.max_seconds > 0,
            f"sft.max_seconds must be > 0 when set, got {self.max_seconds}",
        )
        _check(self.batch_size is None or self.batch_size >= 1, "sft.batch_size must be >= 1 when set")
        _check(self.max_length >= 2, "sft.max_length must be >= 2")


@dataclass(frozen=True)
class DPOConfig:
    beta: float = 0.1
    """Strength of the implicit KL to the reference: loss = -log sigmoid(beta * (chosen - rejected)),
    each a policy-minus-reference sequence logprob."""
    pairs: str = "success"
    """How pairs are built from trajectory files, per item: `success` (a success vs a failure) or
    `score` (a higher vs a lower score). Files of `{"chosen", "rejected"}` lines are used as given."""
    max_pairs_per_item: int = 4
    label_smoothing: float = 0.0
    """Conservative DPO: the share of the loss that assumes the label is flipped."""

    def __post_init__(self) -> None:
        _check(self.beta > 0, "dpo.beta must be > 0")
        _one_of("dpo.pairs", self.pairs, ("success", "score"))
        _check(self.max_pairs_per_item >= 1, "dpo.max_pairs_per_item must be >= 1")
        _check(0 <= self.label_smoothing < 0.5, "dpo.label_smoothing must be in [0, 0.5)")


@dataclass(frozen=True)
class AgentEvolConfig:
    order: str = "imitate_first"
    """`imitate_first` (the paper's): `bc_steps` SFT steps on the seed set, then the iterations;
    `explore_first`: the iterations only, the first exploring with the model as loaded."""
    bc_steps: int = 10
    """Behavioural-cloning SFT steps on the seed set before iteration 1 (`imitate_first`)."""
    iterations: int = 3
    """Explore -> keep -> learn rounds."""
    explore_items: int = 16
    """Train items of EACH family rolled out per iteration (`rollout.n` samples each, at
    `rollout.temperature`)."""
    max_turns: int | None = None
    """Turn cap while exploring (None: the schedule's last cap)."""
    keep: str = "success"
    """`success`: every successful sample; `best_per_item`: the highest-scoring success of each item."""
    sft_steps: int = 10
    """SFT steps on seed set + kept per iteration (`sft.batch_size` or `data.batch_size` each)."""
    learn_from: str = "continued"
    """`continued`: each learn phase goes on from the current weights; `initial`: from the weights
    the run started with (the paper's choice; optimizer moments cleared too)."""

    def __post_init__(self) -> None:
        _one_of("agentevol.order", self.order, AGENTEVOL_ORDERS)
        _one_of("agentevol.keep", self.keep, AGENTEVOL_KEEP)
        _one_of("agentevol.learn_from", self.learn_from, AGENTEVOL_LEARN_FROM)
        _check(self.iterations >= 1, "agentevol.iterations must be >= 1")
        _check(self.explore_items >= 1 and self.sft_steps >= 1, "agentevol.explore_items/sft_steps >= 1")
        _check(
            self.bc_steps >= 1 or self.order != "imitate_first",
            f"agentevol.bc_steps must be >= 1 with order imitate_first, got {self.bc_steps} "
            "(to explore with the model as loaded, set agentevol.order=explore_first)",
        )


AGENTEVOL_ORDERS = ("imitate_first", "explore_first")
AGENTEVOL_KEEP = ("success", "best_per_item")
AGENTEVOL_LEARN_FROM = ("continued", "initial")


RAY_MODES = ("auto",)
ROLLOUT_WORKERS = ("local", "ray")
STRATEGIES = ("ddp", "fsdp")


@dataclass(frozen=True)
class ResourcesConfig:
    """Where the run's parts go: the one section that changes from a laptop to a cluster
    (docs/scale.md). `horizonrl train CONFIG --dry-run` prints the placement it implies."""

    nodes: int = 1
    """Machines the learner spans (`torchrun --nnodes`); one torchrun per node starts its ranks."""
    gpus_per_node: int = 0
    """GPUs on each node (0: train on CPUs)."""
    learner_world_size: int = 1
    """Learner processes in all (torchrun ranks; one per GPU on GPUs). Above 1 the learner is
    data-parallel (`strategy`) and `horizonrl train` relaunches itself under torchrun."""
    strategy: str = "fsdp"
    """At world size > 1: `ddp` (every rank holds all weights; gradients all-reduced) or `fsdp`
    (FSDP2 `fully_shard` per decoder layer: parameters, gradients, optimizer state sharded)."""
    rollout_engines: int | None = None
    """Generation engines. None: one per learner rank, which is what the `hf` backend does (each
    rank plays its share of the step's groups with its own copy of the weights)."""
    rollout_tensor_parallel: int = 1
    """GPUs per generation engine (tensor parallel; the `hf` backend has none: 1)."""
    rollout_colocated: bool = True
    """Generation shares the learner's GPUs (time-sliced, as verl's hybrid engine); False gives
    the engines GPUs of their own, after the learner's."""
    env_replicas: dict[str, int] = field(default_factory=dict)
    """Family -> env-server replicas that Ray places on CPU nodes (needs `ray`); a family not
    named gets 1. The client pool balances sessions over a family's replicas."""
    env_replica_cpus: float = 1.0
    """CPUs Ray reserves per env-server replica (fractions allowed: 0.25)."""
    ray: str | None = None
    """None: no Ray (env servers are `env.launch` subprocesses or `env.servers` URLs); `auto`:
    start or join a Ray cluster on this machine; `HOST:PORT` / `ray://HOST:PORT`: join that cluster."""
    rollout_workers: str = "local"
    """`local`: generation runs in the learner's process(es); `ray`: `rollout_engines` worker actors
    placed by Ray (needs `ray`; one-process learner), each with its own copy of the weights, pushed
    at every sync (`horizonrl.distributed.ray_rollout`)."""
    rollout_worker_cpus: float = 1.0
    """CPUs Ray reserves per rollout worker (fractions allowed); on GPU nodes each worker also
    reserves `rollout_tensor_parallel` GPUs."""
    rollout_worker_check_tolerance: float = 2e-4
    """`hf` workers on Ray: max abs difference of each worker's probe logprobs from the learner's
    after a sync (0: no check; the `vllm` backend uses `rollout.vllm.check_tolerance`)."""

    def __post_init__(self) -> None:
        _check(self.nodes >= 1, f"resources.nodes must be >= 1, got {self.nodes}")
        _check(self.gpus_per_node >= 0, f"resources.gpus_per_node must be >= 0, got {self.gpus_per_node}")
        _check(self.learner_world_size >= 1, "resources.learner_world_size must be >= 1")
        _one_of("resources.strategy", self.strategy, STRATEGIES)
        _check(
            self.learner_world_size % self.nodes == 0,
            f"resources.learner_world_size={self.learner_world_size} must be a multiple of "
            f"resources.nodes={self.nodes} (torchrun starts the same number of ranks on each node)",
        )
        gpus = self.nodes * self.gpus_per_node
        _check(
            gpus == 0 or self.learner_world_size <= gpus,
            f"resources.learner_world_size={self.learner_world_size} needs one GPU per rank, but "
            f"nodes x gpus_per_node = {gpus}",
        )
        _check(self.rollout_engines is None or self.rollout_engines >= 1, "resources.rollout_engines >= 1")
        _check(self.rollout_tensor_parallel >= 1, "resources.rollout_tensor_parallel must be >= 1")
        engines = self.rollout_engines or self.learner_world_size
        if gpus:
            _check(
                self.rollout_tensor_parallel <= self.gpus_per_node,
                f"resources.rollout_tensor_parallel={self.rollout_tensor_parallel} spans more GPUs "
                f"than one node has (gpus_per_node={self.gpus_per_node})",
            )
            need = engines * self.rollout_tensor_parallel + (
                0 if self.rollout_colocated else self.learner_world_size
            )
            _check(
                need <= gpus,
                f"{engines} rollout engine(s) x rollout_tensor_parallel={self.rollout_tensor_parallel}"
                + ("" if self.rollout_colocated else f" + {self.learner_world_size} learner GPUs")
                + f" = {need} GPUs, but nodes x gpus_per_node = {gpus}",
            )
        for family, count in self.env_replicas.items():
            _check(int(count) >= 1, f"resources.env_replicas.{family} must be >= 1, got {count}")
        _check(
            self.ray is not None or all(int(c) == 1 for c in self.env_replicas.values()),
            "resources.env_replicas > 1 needs Ray to place them: set resources.ray=auto (this machine) "
            "or resources.ray=HOST:PORT",
        )
        _check(self.env_replica_cpus > 0, "resources.env_replica_cpus must be > 0")
        _check(
            self.ray is None or self.ray in RAY_MODES or ":" in self.ray,
            f"resources.ray={self.ray!r}: use null, auto, HOST:PORT or ray://HOST:PORT",
        )
        _one_of("resources.rollout_workers", self.rollout_workers, ROLLOUT_WORKERS)
        if self.rollout_workers == "ray":
            _check(
                self.ray is not None,
                "resources.rollout_workers=ray needs Ray to place them: set resources.ray=auto (this "
                "machine) or resources.ray=HOST:PORT",
            )
            _check(
                self.learner_world_size == 1,
                "resources.rollout_workers=ray serves a one-process learner for now; set "
                "resources.learner_world_size=1 (or resources.rollout_workers=local)",
            )
        _check(self.rollout_worker_cpus > 0, "resources.rollout_worker_cpus must be > 0")
        _check(
            self.rollout_worker_check_tolerance >= 0, "resources.rollout_worker_check_tolerance must be >= 0"
        )

    @property
    def engines(self) -> int:
        """Generation engines in effect (`rollout_engines`, or one per learner rank)."""
        return self.rollout_engines or self.learner_world_size

    @property
    def nproc_per_node(self) -> int:
        return self.learner_world_size // self.nodes


@dataclass(frozen=True)
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    dpo: DPOConfig = field(default_factory=DPOConfig)
    agentevol: AgentEvolConfig = field(default_factory=AgentEvolConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)

    def __post_init__(self) -> None:
        _check(
            self.rollout.backend != "vllm"
            or self.rollout.dtype == "float32"
            or not 0 < self.rollout.vllm.check_tolerance < 1e-2,
            f"rollout.dtype={self.rollout.dtype} with rollout.backend=vllm: the engine's logprobs differ "
            f"from the fp32 learner's by ~0.1 from precision alone, so rollout.vllm.check_tolerance="
            f"{self.rollout.vllm.check_tolerance:g} would stop the run at the first sync; set it to ~0.1",
        )
        _check(
            self.resources.learner_world_size == 1 or not self.model.lora.enabled,
            "model.lora.enabled=true trains in one process; set resources.learner_world_size=1",
        )
        on_ray = self.resources.rollout_workers == "ray"
        _check(
            self.rollout.backend != "hf"
            or (
                (on_ray or self.resources.engines == self.resources.learner_world_size)
                and self.resources.rollout_tensor_parallel == 1
            ),
            "rollout.backend=hf generates on the learner's own ranks: leave resources.rollout_engines "
            "unset (one per rank) and resources.rollout_tensor_parallel=1, or place that many hf "
            "workers on Ray with resources.rollout_workers=ray (tensor parallel still 1)",
        )
        _check(
            not on_ray
            or self.rollout.backend != "hf"
            or self.rollout.dtype == "float32"
            or not 0 < self.resources.rollout_worker_check_tolerance < 1e-2,
            f"rollout.dtype={self.rollout.dtype} on Ray hf workers: their logprobs differ from the fp32 "
            "learner's by ~0.1 from precision alone, so resources.rollout_worker_check_tolerance="
            f"{self.resources.rollout_worker_check_tolerance:g} would stop the run at the first sync; "
            "set it to ~0.1",
        )
        _check(
            self.rollout.backend != "vllm" or self.resources.learner_world_size == 1,
            "rollout.backend=vllm runs one local engine beside a one-process learner for now; set "
            "resources.learner_world_size=1 (a distributed learner generates with rollout.backend=hf)",
        )
        _check(
            self.rollout.max_staleness == 0
            or (
                self.rollout.backend == "hf"
                and self.resources.learner_world_size == 1
                and self.algorithm.recompute_old_logprobs
                and not on_ray
            ),
            "rollout.max_staleness > 0 runs the rollouts ahead on a copy of the weights with "
            "rollout.backend=hf in a one-process learner (resources.learner_world_size=1, "
            "resources.rollout_workers=local), and needs "
            "algorithm.recompute_old_logprobs=true (the proximal policy of decoupled PPO)",
        )
        _check(
            self.rollout.max_staleness == 0 or not self.algorithm.dynamic_sampling_groups,
            "algorithm.dynamic_sampling_groups plays a step's further batches after its first one "
            "returns, with the weights of that step; it does not run with rollout.max_staleness > 0",
        )
        ctx = self.agent.context
        if ctx.max_turns_kept is not None or ctx.max_tokens is not None:
            from horizonrl.algos.advantages import ESTIMATORS

            est = ESTIMATORS[self.algorithm.estimator]
            _check(
                est.group_relative and not est.step_level,
                f"agent.context bounds the context, so an episode trains as several rows that share its "
                f"episode-level advantage; that needs an episode-level group estimator (grpo, rloo), not "
                f"algorithm.adv_estimator={self.algorithm.estimator!r}",
            )
        _check(
            self.algorithm.behaviour_is_cap >= 1,
            f"algorithm.behaviour_is_cap must be >= 1, got {self.algorithm.behaviour_is_cap}",
        )
        _check(
            self.rollout.dtype == "float32" or self.algorithm.recompute_old_logprobs,
            f"rollout.dtype={self.rollout.dtype} samples with a copy of the weights in another dtype, "
            "so its sampling logprobs are not the learner's; keep algorithm.recompute_old_logprobs=true",
        )
        _check(
            not self.model.bf16 or self.algorithm.recompute_old_logprobs,
            "model.bf16=true runs the learner under bf16 autocast while the rollout's logprobs are fp32, "
            "so the first PPO ratio would differ from 1 by precision alone; keep "
            "algorithm.recompute_old_logprobs=true (or set model.bf16=false)",
        )

    @property
    def logprob_temperature(self) -> float:
        """T of `softmax(logits / T)`, the distribution of every RL logprob (rollout, old, reference)."""
        a = self.algorithm
        if a.logprob_temperature != "rollout":
            return float(a.logprob_temperature)
        return self.rollout.temperature if self.rollout.temperature > 0 else 1.0


_ALIASES = {"type": "type", "rounds": "rounds", "steps_scaling_inter": "every"}


def _apply_aliases(raw: DictConfig) -> None:
    """Move `algorithm.rounds_ctrl.*` (the reference's keys) onto `schedule.*`, in place."""
    algorithm = raw.get("algorithm")
    if not isinstance(algorithm, DictConfig) or "rounds_ctrl" not in algorithm:
        return
    ctrl = algorithm.pop("rounds_ctrl")
    if not isinstance(ctrl, DictConfig):
        raise ConfigError("algorithm.rounds_ctrl must be a mapping with type / rounds / steps_scaling_inter")
    for raw_key, value in ctrl.items():
        key = str(raw_key)
        if key not in _ALIASES:
            raise ConfigError(
                f"unknown key algorithm.rounds_ctrl.{key}; valid: {', '.join(_ALIASES)} "
                "(aliases of schedule.type / schedule.rounds / schedule.every)"
            )
        if key == "type":
            value = {"scaling_inter_stepwise": "stepwise"}.get(str(value), value)
        OmegaConf.update(raw, f"schedule.{_ALIASES[key]}", value, force_add=True)


def _valid_keys(full_key: str) -> str:
    node: Any = OmegaConf.structured(Config)
    for part in full_key.split(".")[:-1]:
        if not isinstance(node, DictConfig) or part not in node:
            break
        node = node[part]
    return ", ".join(str(k) for k in node) if isinstance(node, DictConfig) else ""


def load_config(path: str | Path | None = None, overrides: Sequence[str] = ()) -> Config:
    """Build a `Config` from a YAML file and dotted overrides (`a.b=value`, YAML-typed values)."""
    raw: Any
    try:
        raw = OmegaConf.create({}) if path is None else OmegaConf.load(path)
        bad = [o for o in overrides if "=" not in o]
        if bad:
            raise ConfigError(f"overrides must look like key=value, got {bad[0]!r}")
        raw = OmegaConf.merge(raw, OmegaConf.from_dotlist(list(overrides)))
    except (OmegaConfBaseException, OSError) as exc:
        raise ConfigError(f"cannot read config {path}: {exc}") from exc
    if not isinstance(raw, DictConfig):
        raise ConfigError(f"{path}: a config must be a mapping of sections")
    _apply_aliases(raw)
    try:
        merged = OmegaConf.merge(OmegaConf.structured(Config), raw)
        config = OmegaConf.to_object(merged)
    except ConfigKeyError as exc:
        key = exc.full_key or str(exc)
        raise ConfigError(f"unknown config key {key!r}; valid keys here: {_valid_keys(key)}") from None
    except ValidationError as exc:
        msg = str(exc).splitlines()[0]
        where = f"bad value for {exc.full_key!r}" if exc.full_key else "bad config structure"
        raise ConfigError(f"{where}: {msg}") from None
    assert isinstance(config, Config)
    return config


def to_yaml(config: Config) -> str:
    """The resolved config as YAML (what the run directory's config.yaml holds)."""
    return OmegaConf.to_yaml(OmegaConf.structured(config))
