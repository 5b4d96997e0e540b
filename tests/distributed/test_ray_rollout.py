"""Rollout workers on a real local Ray cluster (2 CPUs, loopback address, no dashboard): two `hf`
workers of the tiny model, 0.25 CPU each, behind `RayRolloutBackend`, against the same model in
process.

- Greedy turns through the workers give the in-process backend's token ids (logprobs within
  1e-4: the batches are split differently, so padding differs), turn 2 reusing each episode's
  KV cache on the worker that made it.
- A sync pushes new weights: the workers then sample what the in-process model with those
  weights samples, the post-sync check logs a small diff, and a worker given other weights
  behind the sampler's back stops the run (`WeightDesync`, naming it).
- SIGKILLing worker 0 mid-rollout (real engine, real textcraft envs) fails only its episodes;
  Ray restarts it, the next sync gives it the weights and the next rollout uses both workers.
- `horizonrl train` with `resources.rollout_workers=ray` trains 2 GRPO steps end to end.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest
import torch

from horizonrl.cli import main
from horizonrl.config import ConfigError, load_config
from horizonrl.models import load_model
from horizonrl.rollout.backends.base import GenerationRequest, SamplingParams
from horizonrl.rollout.backends.hf import HFBackend
from horizonrl.rollout.engine import EngineConfig, RolloutEngine
from horizonrl.rollout.envpool import LocalEnvPool

ray = pytest.importorskip("ray")

from horizonrl.distributed.ray_rollout import export_state  # noqa: E402 (after the skip)
from horizonrl.trainer.weight_sync import RaySampler, WeightDesync, make_sampler  # noqa: E402
from tests.ports import free_port  # noqa: E402

GREEDY = SamplingParams(max_tokens=8, temperature=0.0, logprob_temperature=1.0)
LOGPROB_TOL = 1e-4
RAY_OVERRIDES = [
    "resources.ray=auto",
    "resources.rollout_workers=ray",
    "resources.rollout_engines=2",
    "resources.rollout_worker_cpus=0.25",
]


def _config(*extra):
    return load_config(None, ["model.path=tiny", "data.families=[textcraft]", *RAY_OVERRIDES, *extra])


@pytest.fixture(scope="module")
def cluster():
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def learner(cluster):
    """The learner's model and its sampler over 2 Ray workers (built once: each worker loads torch)."""
    model, tokenizer = load_model("tiny")
    sampler = make_sampler(_config(), model, tokenizer)
    assert isinstance(sampler, RaySampler)
    yield model, tokenizer, sampler
    sampler.close()


def _prompts(tokenizer, n=4):
    out = []
    for i in range(n):
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": f"Craft item number {i}: what first?"}],
            add_generation_prompt=True,
            tokenize=True,
            return_dict=False,
        )
        out.append([int(t) for t in ids])
    return out


def _two_turns(backend, prompts, tag):
    """Turn 1 for every prompt, then turn 2 on context + sampled ids + an observation, same keys."""
    first = backend.generate(
        [GenerationRequest(p, cache_key=f"{tag}{i}") for i, p in enumerate(prompts)], GREEDY
    )
    contexts = [p + r.token_ids + [28, 411, 29] for p, r in zip(prompts, first, strict=True)]
    second = backend.generate(
        [GenerationRequest(c, cache_key=f"{tag}{i}") for i, c in enumerate(contexts)], GREEDY
    )
    return first + second


def _assert_same(ray_results, local_results):
    for got, want in zip(ray_results, local_results, strict=True):
        assert got.error is None
        assert got.token_ids == want.token_ids and got.finish_reason == want.finish_reason
        assert max(abs(a - b) for a, b in zip(got.logprobs, want.logprobs, strict=True)) < LOGPROB_TOL


def test_greedy_turns_through_ray_workers_match_the_in_process_backend(learner):
    model, tokenizer, sampler = learner
    stats = sampler.sync()
    assert stats["weight_sync/max_logprob_diff"] < LOGPROB_TOL
    backend = sampler.backend
    local = HFBackend(model=model, tokenizer=tokenizer)
    prompts = _prompts(tokenizer)
    reused_before = sum(w["reused_tokens"] for w in backend.worker_stats())
    served_before = list(backend.served)
    _assert_same(_two_turns(backend, prompts, "a"), _two_turns(local, prompts, "a"))
    # each episode's turn 2 reused the KV cache kept on the worker of its turn 1
    assert local.stats.reused_tokens > 0
    assert (
        sum(w["reused_tokens"] for w in backend.worker_stats()) - reused_before == local.stats.reused_tokens
    )
    assert all(after - before == 4 for after, before in zip(backend.served, served_before, strict=True))

    async def one_each():  # the async engine's path: one coalescer per worker
        calls = [
            backend.agenerate(GenerationRequest(p, cache_key=f"b{i}"), GREEDY) for i, p in enumerate(prompts)
        ]
        return await asyncio.gather(*calls)

    _assert_same(asyncio.run(one_each()), local.generate([GenerationRequest(p) for p in prompts], GREEDY))
    backend.clear()


def test_a_sync_changes_the_workers_outputs_and_a_desynced_worker_is_caught(learner):
    model, tokenizer, sampler = learner
    sampler.sync()
    backend = sampler.backend
    prompts = _prompts(tokenizer)
    before = backend.generate([GenerationRequest(p) for p in prompts], GREEDY)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=generator) * 0.05)
    served = list(backend.served)
    stats = sampler.sync()
    assert stats["weight_sync/version"] == backend.version and stats["weight_sync/push_s"] > 0
    assert stats["weight_sync/max_logprob_diff"] < LOGPROB_TOL and stats["weight_sync/seconds"] > 0
    after = backend.generate([GenerationRequest(p) for p in prompts], GREEDY)
    # requests without a cache key go to the workers in turn
    assert [now - then for now, then in zip(backend.served, served, strict=True)] == [2, 2]
    local = HFBackend(model=model, tokenizer=tokenizer).generate(
        [GenerationRequest(p) for p in prompts], GREEDY
    )
    _assert_same(after, local)
    pairs = zip(after, before, strict=True)
    moved = max(abs(a - b) for x, y in pairs for a, b in zip(x.logprobs, y.logprobs, strict=True))
    assert moved > 100 * LOGPROB_TOL  # the tiny model's greedy ids may not change; their logprobs do

    other, _ = load_model("tiny", seed=3)  # worker 1 gets other weights behind the sampler's back
    ray.get(backend.workers[1].actor.load_state.remote(export_state(other), backend.version))
    with pytest.raises(WeightDesync, match="rollout worker 1's logprobs"):
        sampler.check_workers()
    assert sampler.sync()["weight_sync/max_logprob_diff"] < LOGPROB_TOL  # the next push fixes it


def test_killing_a_worker_mid_rollout_fails_only_its_episodes_and_the_next_sync_brings_it_back(learner):
    _, _, sampler = learner
    sampler.sync()
    backend = sampler.backend
    before = backend.pids()
    items = ["textcraft_0", "textcraft_1", "textcraft_2", "textcraft_3"]
    config = EngineConfig(max_turns=3, progress=False, max_tokens=8, temperature=0.0)

    def kill_worker_0(round_index, live):
        if round_index == 1:
            os.kill(before[0], signal.SIGKILL)

    served = list(backend.served)
    trajectories = RolloutEngine(backend, LocalEnvPool("textcraft"), config).run(
        items, n=2, seed=0, on_round=kill_worker_0
    )
    failed = [t for t in trajectories if t.failed]
    assert len(failed) == 4, [t.fail_reason for t in trajectories]  # worker 0's share of 8 episodes
    assert all("rollout worker 0" in (t.fail_reason or "") for t in failed)
    assert all(t.num_turns == 3 for t in trajectories if not t.failed)
    assert 0 in backend.down and 1 not in backend.down

    stats = sampler.sync()  # waits for Ray's restart of worker 0, gives it the weights
    assert stats["weight_sync/max_logprob_diff"] < LOGPROB_TOL and not backend.down
    after = backend.pids()
    assert after[0] != before[0] and after[1] == before[1]
    served = list(backend.served)
    trajectories = RolloutEngine(backend, LocalEnvPool("textcraft"), config).run(items, n=2, seed=0)
    assert not any(t.failed for t in trajectories), [t.fail_reason for t in trajectories]
    assert all(now > then for now, then in zip(backend.served, served, strict=True))


def _vllm_python() -> str | None:
    from horizonrl.rollout.backends.vllm import default_python

    try:
        return default_python()
    except FileNotFoundError:
        return None


@pytest.mark.skipif(_vllm_python() is None, reason="no vLLM environment (scripts/install.sh)")
def test_a_vllm_worker_on_ray_samples_the_learners_greedy_tokens(cluster):
    """SmolLM2-135M in fp32 on CPU: vLLM's kernels sum in another order, so logprobs match to
    1e-4 and the post-sync check to its 2e-4 default (measured 1.5e-5 and 3.8e-5)."""
    model, tokenizer = load_model("default")
    one_worker = [*RAY_OVERRIDES[:2], "resources.rollout_worker_cpus=0.5", "rollout.vllm.max_model_len=1024"]
    cfg = load_config(None, ["model.path=default", "rollout.backend=vllm", *one_worker])
    sampler = make_sampler(cfg, model, tokenizer)
    try:
        assert sampler.sync()["weight_sync/max_logprob_diff"] < 2e-4
        prompts = _prompts(tokenizer, n=2)
        requests = [GenerationRequest(p, cache_key=i) for i, p in enumerate(prompts)]
        want = HFBackend(model=model, tokenizer=tokenizer).generate(requests, GREEDY)
        _assert_same(sampler.backend.generate(requests, GREEDY), want)
    finally:
        sampler.close()


def test_workers_ray_cannot_place_stop_with_the_resources_they_asked_for(cluster, monkeypatch):
    from horizonrl.distributed import ray_rollout

    monkeypatch.setattr(ray_rollout, "STARTUP_TIMEOUT_S", 3.0)
    with pytest.raises(RuntimeError, match="2 rollout worker.s. of 4 CPU and 0 GPU.s. each within 3 s"):
        ray_rollout.start_rollout_workers(_config("resources.rollout_worker_cpus=4"))


CONFIG = """\
model: {path: tiny, bf16: false}
data: {families: [textcraft], batch_size: 2}
rollout: {n: 2, max_tokens: 8, max_response_length: 256}
schedule: {type: fixed, rounds: [2]}
trainer: {total_steps: 2, save_every: 2, lr: 1.0e-3, micro_batch_size: 2, num_threads: 1}
eval: {at_end: false}
logging: {tensorboard: false, console: false}
resources: {ray: auto, rollout_workers: ray, rollout_engines: 2, rollout_worker_cpus: 0.25,
            env_replica_cpus: 0.25}
"""


def test_train_with_ray_rollout_workers_runs_grpo_end_to_end(cluster, tmp_path):
    """In this process, so `ray=auto` joins the test's loopback cluster (a second driver process
    would join whatever Ray cluster runs on the machine)."""
    config = tmp_path / "tiny.yaml"
    config.write_text(CONFIG)
    run = tmp_path / "run"
    assert main(["train", str(config), f"trainer.output_dir={run}", f"env.base_port={free_port()}"]) == 0
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [x for x in lines if "loss/objective" in x]
    assert [x["step"] for x in steps] == [1, 2]
    synced = [x for x in lines if "weight_sync/max_logprob_diff" in x]
    assert len(synced) >= 2 and all(x["weight_sync/max_logprob_diff"] < 2e-4 for x in synced)
    assert all(x["weight_sync/push_s"] > 0 for x in synced)
    for step in (1, 2):
        rows = [json.loads(x) for x in (run / "trajectories" / f"step_{step}.jsonl").read_text().splitlines()]
        assert len(rows) == 4 and not any(r.get("failed") for r in rows)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["resources.rollout_workers=ray"], "rollout_workers=ray needs Ray"),
        ([*RAY_OVERRIDES, "resources.learner_world_size=2"], "one-process learner"),
        (["resources.rollout_workers=remote"], "choose one of: local, ray"),
        (["resources.rollout_engines=2"], "resources.rollout_workers=ray"),
        ([*RAY_OVERRIDES, "resources.rollout_worker_cpus=0"], "rollout_worker_cpus must be > 0"),
        ([*RAY_OVERRIDES, "rollout.dtype=bfloat16"], "would stop the run at the first sync"),
        ([*RAY_OVERRIDES, "rollout.max_staleness=1"], "resources.rollout_workers=local"),
    ],
)
def test_bad_rollout_worker_settings_are_refused_with_the_reason(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config("configs/quickstart.yaml", overrides)


def test_dry_run_lists_the_ray_rollout_workers(capsys):
    argv = ["train", "configs/textcraft.yaml", "--dry-run", *RAY_OVERRIDES, "resources.learner_world_size=1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    workers = [line for line in out.splitlines() if "rollout  worker" in line]
    assert len(workers) == 2 and all("Ray actor, 0.25 CPU, 1 GPU(s), a GPU node" in w for w in workers)
    assert load_config("configs/quickstart.yaml", RAY_OVERRIDES).resources.engines == 2  # hf + engines: ok
