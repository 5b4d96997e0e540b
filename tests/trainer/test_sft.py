"""SFT on expert demos with the tiny model: token layout, loss goes down, resume, CLI, warm start."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
import torch
from safetensors.torch import load_file

from horizonrl.agent.chat import ChatFormat, render
from horizonrl.cli import main
from horizonrl.config import load_config
from horizonrl.envs.registry import get_family
from horizonrl.eval.solve import play_expert, solve_items
from horizonrl.models import load_tokenizer
from horizonrl.rollout.trajectory import Trajectory, write_jsonl
from horizonrl.trainer.sft import SFTTrainer, reply_lengths, sft_examples, tokenize_trajectory

TINY = [
    "model.path=tiny",
    "model.gradient_checkpointing=false",
    "data.families=[textcraft]",
    "data.categories=[depth 1]",
    "trainer.num_threads=2",
    "trainer.lr=1e-3",
    "logging.tensorboard=false",
    "logging.console=false",
]


def demo_file(tmp_path, n=4, category="depth 1"):
    """Expert demos of the first `n` train items of `category`, as `horizonrl solve` writes them."""
    spec = get_family("textcraft")
    items = [i for i in spec.split("train") if spec.category_of(i) == category][:n]
    trajs = solve_items(spec.make_env, spec, items)
    path = tmp_path / "demos.jsonl"
    write_jsonl(path, trajs)
    return path, trajs


def short_sft(demos, run, *overrides):
    """A tiny SFT config on `demos` into `run`: 2 demos a step, no checkpoints but the last, no
    eval, the console on."""
    fixed = ["data.batch_size=2", "sft.max_length=300", "eval.at_end=false", "trainer.save_every=0"]
    where = [f"data.train_files=[{demos}]", f"trainer.output_dir={run}", "logging.console=true"]
    return load_config("configs/sft.yaml", [*TINY, *fixed, *where, *overrides])


def metric_rows(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_demo_tokens_are_the_chat_template_and_mask_covers_assistant_turns(tmp_path):
    _, [demo, *_] = demo_file(tmp_path, n=1, category="depth 2")
    tok = load_tokenizer("tiny")
    fmt = ChatFormat(tok)
    ex = tokenize_trajectory(demo, fmt)
    assert fmt.decode(ex.token_ids) == render(tok, demo.messages, add_generation_prompt=False)
    masked = [i for i, m in zip(ex.token_ids, ex.loss_mask, strict=True) if m]
    replies = [m["content"] for m in demo.messages if m["role"] == "assistant"]
    assert len(replies) == len(ex.turn_ends) >= 2
    assert fmt.decode(masked) == "".join(r + fmt.decode([fmt.eot_id]) for r in replies)
    assert ex.prompt_length == len(fmt.prompt_ids(demo.messages[:2]))
    assert all(ex.loss_mask[e] == 1 and ex.token_ids[e] == fmt.eot_id for e in ex.turn_ends)


def test_a_weight_0_reply_is_context_without_loss():
    spec = get_family("textcraft")
    item = next(i for i in spec.split("train") if spec.category_of(i) == "depth 2")
    demo = play_expert(spec.make_env(), spec, item, detours=1.0)
    fmt = ChatFormat(load_tokenizer("tiny"))
    ex = tokenize_trajectory(demo, fmt)
    assert fmt.decode(ex.token_ids) == render(fmt.tokenizer, demo.messages, add_generation_prompt=False)
    replies = [m for m in demo.messages if m["role"] == "assistant"]
    assert len(ex.turn_ends) == len(replies) and [m.get("weight", 1) for m in replies] == [0, 1] * (
        len(replies) // 2
    )
    trained = fmt.decode([i for i, m in zip(ex.token_ids, ex.loss_mask, strict=True) if m])
    assert trained == "".join(m["content"] + fmt.decode([fmt.eot_id]) for m in replies[1::2])
    demo.messages[2]["weight"] = 0.5
    with pytest.raises(ValueError, match="a reply's weight is 0 or 1, not 0.5"):
        tokenize_trajectory(demo, fmt)


def test_filters_failed_unsuccessful_and_other_categories(tmp_path):
    _, demos = demo_file(tmp_path, n=3)
    demos[0].success = False
    demos[1].category = "depth 2"
    fmt = ChatFormat(load_tokenizer("tiny"))
    kept = sft_examples(demos, fmt, categories=["depth 1"])
    assert [t.item_id for t in kept] == [demos[2].item_id]
    assert len(sft_examples(demos, fmt, success_only=False, categories=["depth 1"])) == 2
    full = tokenize_trajectory(demos[2], fmt)
    cut = sft_examples(demos[2:], fmt, max_length=full.prompt_length + 5)[0]
    assert len(cut.token_ids) == full.prompt_length + 5 and sum(cut.loss_mask) == 5
    assert sft_examples(demos[2:], fmt, max_length=full.prompt_length) == []  # nothing left to learn


def test_loss_decreases_on_fixed_set_and_checkpoint_changes(tmp_path):
    path, _ = demo_file(tmp_path, n=4)
    run = tmp_path / "run"
    cfg = load_config(
        "configs/sft.yaml",
        [
            *TINY,
            f"data.train_files=[{path}]",
            f"trainer.output_dir={run}",
            "data.batch_size=4",
            "trainer.total_steps=6",
            "trainer.warmup_steps=0",
            "trainer.lr=5e-3",
            "sft.max_length=320",
            "eval.at_end=false",
        ],
    )
    SFTTrainer(cfg).fit()
    losses = [r["loss/sft"] for r in metric_rows(run) if "loss/sft" in r]
    assert len(losses) == 6  # every step sees the same 4 demos (batch = set)
    assert all(b < a for a, b in zip(losses, losses[1:], strict=False)), losses
    assert losses[-1] < 0.9 * losses[0]
    assert (run / "checkpoints" / "step_6" / "model" / "model.safetensors").exists()


def test_resume_equals_uninterrupted(tmp_path):
    path, _ = demo_file(tmp_path, n=3)
    base = [
        *TINY,
        f"data.train_files=[{path}]",
        "data.batch_size=2",
        "sft.max_length=300",
        "eval.at_end=false",
        "trainer.save_every=2",
    ]

    def train(run, steps):
        SFTTrainer(
            load_config(
                "configs/sft.yaml", [*base, f"trainer.output_dir={run}", f"trainer.total_steps={steps}"]
            )
        ).fit()

    train(tmp_path / "straight", 4)
    train(tmp_path / "resumed", 2)
    train(tmp_path / "resumed", 4)
    a = load_file(tmp_path / "straight" / "checkpoints" / "step_4" / "model" / "model.safetensors")
    b = load_file(tmp_path / "resumed" / "checkpoints" / "step_4" / "model" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert [r["step"] for r in metric_rows(tmp_path / "resumed")] == [1, 2, 3, 4]
    straight = [r["loss/sft"] for r in metric_rows(tmp_path / "straight")]
    assert straight == [r["loss/sft"] for r in metric_rows(tmp_path / "resumed")]


@pytest.mark.parametrize("command", ["sft", "train"])
def test_cli_runs_and_evaluates(tmp_path, command):
    path, _ = demo_file(tmp_path, n=2)
    run = tmp_path / "run"
    args = [
        command,
        "configs/sft.yaml",
        *TINY,
        f"data.train_files=[{path}]",
        f"trainer.output_dir={run}",
        "trainer.total_steps=1",
        "sft.max_length=300",
        "eval.limit=1",
        "eval.max_turns=1",
        "eval.max_tokens=4",
        "rollout.max_tokens=4",
    ]
    if command == "train":
        args.append("algorithm.name=sft")
    assert main(args) == 0
    report = json.loads((run / "eval" / "final" / "report.json").read_text())
    assert report["n_items"] == 1 and report["step"] == 1
    assert metric_rows(run)[0]["loss/sft"] > 0


def test_cli_without_train_files_says_what_to_set(tmp_path):
    with pytest.raises(SystemExit, match="data.train_files"):
        main(["sft", "configs/sft.yaml", *TINY, "data.train_files=[]", f"trainer.output_dir={tmp_path}"])


def warm_start(demos, run):
    """Overrides of a tiny warm start on `configs/quickstart.yaml`: 1 SFT step, 1 RL step, evals of 1 item."""
    return [
        *TINY,
        f"data.train_files=[{demos}]",
        f"trainer.output_dir={run}",
        "sft.warmup_steps=1",
        "sft.batch_size=2",
        "sft.max_length=300",
        "trainer.total_steps=1",
        "data.batch_size=1",
        "rollout.n=2",
        "rollout.max_tokens=4",
        "eval.limit=1",
        "eval.max_turns=1",
        "eval.max_tokens=4",
    ]


def test_warm_started_rl_runs_both_phases_and_prints_the_table(tmp_path, capsys):
    path, _ = demo_file(tmp_path, n=2)
    run = tmp_path / "qs"
    args = [
        "train",
        "configs/quickstart.yaml",
        *warm_start(path, run),
        "sft.eval_before=true",  # off in the quickstart; the table shows the zero-shot row when on
        "schedule.rounds=[1,1,2]",
    ]
    assert main(args) == 0
    for report in ("sft/eval/initial", "sft/eval/final", "rl/eval/final"):
        assert (run / report / "report.json").exists(), report
    rl_cfg = (run / "rl" / "config.yaml").read_text()
    assert str(run / "sft" / "checkpoints" / "step_1" / "model") in rl_cfg
    out = capsys.readouterr().out
    assert "| zero-shot |" in out and "| after SFT (1 steps) |" in out and "after SFT + grpo" in out
    assert (run / "summary.md").read_text().strip() in out


def test_a_time_boxed_warm_start_boxes_the_rl_phase_only_and_the_table_says_its_steps(tmp_path, capsys):
    """`trainer.max_seconds` is the RL phase's budget: the SFT phase runs its `sft.warmup_steps`, the RL
    phase stops after its first step, and the table names the steps RL made, not `total_steps`."""
    path, _ = demo_file(tmp_path, n=2)
    run = tmp_path / "qs"
    args = ["train", "configs/quickstart.yaml", *warm_start(path, run), "sft.warmup_steps=2"]
    assert main([*args, "trainer.total_steps=3", "trainer.max_seconds=1e-6"]) == 0
    assert [r["step"] for r in metric_rows(run / "sft") if "time/step" in r] == [1, 2]
    assert [r["step"] for r in metric_rows(run / "rl") if "time/step" in r] == [1]
    assert "| after SFT + grpo (1 steps) |" in capsys.readouterr().out


def test_the_rl_phase_takes_over_the_engine_of_the_sft_phase(tmp_path, monkeypatch):
    """One rollout engine for both phases of a warm start (one vLLM start instead of two), sampling
    from the RL learner's weights once handed over; an engine of other rollout settings is refused."""
    from horizonrl.trainer.engine_rollout import EngineRollout
    from horizonrl.trainer.main import load_config_with, rl_phase_overrides, sft_phase
    from horizonrl.trainer.rl import RLTrainer

    built = []
    init = EngineRollout.__init__

    def counting_init(self, *args, **kwargs):
        built.append(self)
        init(self, *args, **kwargs)

    monkeypatch.setattr(EngineRollout, "__init__", counting_init)
    path, _ = demo_file(tmp_path, n=2)
    run = tmp_path / "qs"
    overrides = warm_start(path, run)
    assert main(["train", "configs/quickstart.yaml", *overrides]) == 0
    assert len(built) == 1  # the SFT phase's eval built it; the RL phase's rollouts and eval used it
    assert (run / "rl" / "eval" / "final" / "report.json").exists()

    cfg = load_config("configs/quickstart.yaml", [*overrides, f"trainer.output_dir={tmp_path / 'again'}"])
    model_dir, engine = sft_phase(cfg, {})
    assert engine is built[-1] and len(built) == 2
    rl_cfg = load_config_with(cfg, rl_phase_overrides(cfg, model_dir))
    with RLTrainer(rl_cfg) as other:
        n3 = replace(rl_cfg, rollout=replace(rl_cfg.rollout, n=3))
        mismatched = EngineRollout(n3, other.learner.sampling_model(), other.learner.tokenizer, {})
        with pytest.raises(ValueError, match="other `rollout` settings"):
            other.adopt_engine(mismatched)
        mismatched.close()
    with RLTrainer(rl_cfg) as trainer:
        trainer.adopt_engine(engine)
        assert trainer.rollout() is engine
        assert engine.sampler.source is trainer.learner.sampling_model()
        assert engine.backend.model is trainer.learner.sampling_model()


def test_plain_rl_with_trajectory_files_says_what_to_do(tmp_path):
    path, _ = demo_file(tmp_path, n=1)
    args = ["train", "configs/quickstart.yaml", *TINY, f"data.train_files=[{path}]", "sft.warmup_steps=0"]
    with pytest.raises(SystemExit, match="trajectory files"):
        main([*args, f"trainer.output_dir={tmp_path / 'run'}"])


def test_max_seconds_stops_the_steps_and_a_resume_gets_no_fresh_budget(tmp_path, capsys):
    path, _ = demo_file(tmp_path, n=2)
    run = tmp_path / "timed"
    cfg = short_sft(path, run, "trainer.total_steps=50", "sft.max_seconds=1e-6")  # step 1 uses it up
    SFTTrainer(cfg).fit()
    assert [r["step"] for r in metric_rows(run)] == [1]
    said = capsys.readouterr().err  # the progress counts the budget's seconds, not up to step 50
    assert "to step 50 or 1e-06 s of steps, whichever comes first" in said
    assert re.search(r"step 1 \| .* s used \| [\d.]+ GB", said) and "step 1/50" not in said
    assert metric_rows(run)[0]["memory/rss_gb"] > 0
    assert (run / "checkpoints" / "step_1" / "model" / "model.safetensors").exists()
    state = json.loads((run / "checkpoints" / "step_1" / "trainer_state.json").read_text())
    assert state["seconds"] == pytest.approx(metric_rows(run)[0]["time/step"])
    SFTTrainer(cfg).fit()  # resumed: the budget is spent, so no further step
    assert [r["step"] for r in metric_rows(run)] == [1]
    both = replace(
        cfg, sft=replace(cfg.sft, max_seconds=100.0), trainer=replace(cfg.trainer, max_seconds=1e-6)
    )
    assert SFTTrainer(both).time_budget() == 1e-6  # the smaller of sft.max_seconds and trainer.max_seconds
    with pytest.raises(ValueError, match="sft.max_seconds must be > 0"):
        load_config("configs/sft.yaml", ["sft.max_seconds=0"])


@pytest.mark.parametrize(("share", "trims"), [(0.0, True), (1.0, False)])
def test_supervised_steps_hand_freed_memory_back_only_above_the_share(tmp_path, capsys, share, trims):
    # A long SFT run's held heap creeps up between untrimmed steps (16 GB after 150 steps of the
    # default model): above `trainer.release_memory_above` of the machine a step hands it back.
    path, _ = demo_file(tmp_path, n=2)
    run = tmp_path / "run"
    cfg = short_sft(path, run, "trainer.total_steps=2", f"trainer.release_memory_above={share}")
    SFTTrainer(cfg).fit()
    rows = metric_rows(run)
    assert [r["step"] for r in rows] == [1, 2] and all(r["memory/rss_gb"] > 0 for r in rows)
    assert all(("memory/released_gb" in r) == trims for r in rows)
    said = capsys.readouterr().err
    assert bool(re.search(r"step 2/2 \| .* [\d.]+ GB \(-?[\d.]+ GB handed back\)", said)) == trims


def test_demo_replies_longer_than_the_sampling_budget_are_named(tmp_path, capsys):
    # Worked-thought demos reach 68 tokens a reply while the protocol sampled 48: the model learned
    # replies that sampling then cut before their action (64.3% vs 70.0% on the 70 items).
    path, _ = demo_file(tmp_path, n=2)
    run = tmp_path / "r"
    trainer = SFTTrainer(short_sft(path, run, "rollout.max_tokens=8", "eval.max_tokens=500"))
    lengths = [n for e in trainer.examples for n in reply_lengths(e)]
    said = capsys.readouterr().err
    cut = sum(n > 8 for n in lengths)
    assert f"{cut} of {len(lengths)} demo replies are longer than rollout.max_tokens=8 (the longest: " in said
    assert "eval.max_tokens" not in said and f"at least {max(lengths)}" in said
    SFTTrainer(short_sft(path, run, "rollout.max_tokens=500", "eval.max_tokens=500"))
    assert "demo replies" not in capsys.readouterr().err


def test_reply_lengths_are_the_runs_of_the_loss_mask():
    traj = Trajectory(item_id="x", category="c", loss_mask=[0, 0, 1, 1, 1, 0, 0, 1, 1])
    assert reply_lengths(traj) == [3, 2]
