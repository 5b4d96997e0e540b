"""`horizonrl eval` end to end: local envs, a running env server, a server killed mid-eval, YAML."""

from __future__ import annotations

import json

import pytest

from horizonrl.cli import main
from horizonrl.eval.evaluate import EvalSettings, run_eval
from horizonrl.models import load_tokenizer
from horizonrl.rollout.trajectory import read_jsonl
from tests.rollout.helpers import ScriptedBackend, ServeProcess
from tests.rollout.test_engine import check_trajectory

REPORT_FIELDS = (
    "env",
    "model",
    "n_items",
    "success_rate",
    "mean_score",
    "avg_at_k",
    "pass_at_k",
    "mean_turns",
)
JSONL_FIELDS = (
    "item_id", "category", "success", "score", "reward", "num_turns", "terminated", "truncated", "failed",
    "messages", "token_ids", "loss_mask", "logprobs", "turn_rewards",
)  # fmt: skip


def _check_outputs(out, n_items: int, k: int = 1) -> dict:
    report = json.loads((out / "report.json").read_text())
    for key in REPORT_FIELDS:
        assert key in report
    assert report["n_items"] == n_items and report["k"] == k
    for block in report["by_category"].values():
        assert set(REPORT_FIELDS[2:]) <= set(block)
    md = (out / "report.md").read_text()
    assert "| category |" in md and "| depth 1 |" in md
    assert not (out / "trajectories.partial.jsonl").exists()  # only kept when an eval is stopped
    lines = (out / "trajectories.jsonl").read_text().splitlines()
    assert len(lines) == n_items * k
    for line in lines:
        record = json.loads(line)
        assert set(JSONL_FIELDS) <= set(record)
    return report


def test_cli_eval_with_local_envs_and_the_tiny_model(tmp_path, capsys):
    out = tmp_path / "ev"
    code = main(
        ["eval", "--model", "tiny", "--env", "textcraft", "--split", "test", "--limit", "3",
         "--max-turns", "2", "--n", "2", "--temperature", "1.0", "--out", str(out), "max_tokens=8",
         "progress=false"]
    )  # fmt: skip
    assert code == 0
    report = _check_outputs(out, 3, k=2)
    assert report["mean_turns"] <= 2 and report["settings"]["temperature"] == 1.0
    tok = load_tokenizer("tiny")
    trajs = read_jsonl(out / "trajectories.jsonl")
    assert [t.group_id for t in trajs] == [0, 0, 1, 1, 2, 2]
    for t in trajs:
        check_trajectory(t, tok)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(last)["n_items"] == 3


def test_eval_from_yaml_config(tmp_path):
    config = tmp_path / "eval.yaml"
    out = tmp_path / "yaml_ev"
    config.write_text(f"model: tiny\nenv: [textcraft]\nlimit: 2\nmax_turns: 1\nmax_tokens: 4\nout: {out}\n")
    assert main(["eval", str(config), "progress=false"]) == 0
    report = _check_outputs(out, 2)
    assert report["settings"]["max_turns"] == 1 and report["settings"]["temperature"] == 0.0  # greedy default
    with pytest.raises(SystemExit, match="unknown setting"):
        main(["eval", str(config), "max_tokenz=3"])


def test_categories_filter_and_bf16_weights(tmp_path):
    out = tmp_path / "cat"
    args = ["eval", "--model", "tiny", "--env", "textcraft", "--limit", "2", "--max-turns", "1"]
    args += ["--dtype", "bfloat16", "--out", str(out), "max_tokens=4", "progress=false"]
    assert main([*args, "categories=[depth 3]"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["n_items"] == 2 and report["settings"]["dtype"] == "bfloat16"
    assert [t.category for t in read_jsonl(out / "trajectories.jsonl")] == ["depth 3", "depth 3"]
    with pytest.raises(SystemExit, match=r"no categories \['depth 9'\]; valid: depth 1, depth 2"):
        main([*args, "categories=[depth 9]"])


def test_cli_eval_through_a_running_env_server(tmp_path):
    server = ServeProcess("textcraft")
    try:
        out = tmp_path / "remote"
        code = main(
            ["eval", "--model", "tiny", "--env", "textcraft", "--limit", "2", "--max-turns", "2",
             "--server", server.url, "--out", str(out), "max_tokens=6", "progress=false"]
        )  # fmt: skip
        assert code == 0
        report = _check_outputs(out, 2)
        assert report["n_failed"] == 0 and report["settings"]["server"] == server.url
    finally:
        server.kill()


def test_env_server_killed_mid_eval_fails_the_episodes_and_the_report_is_written(tmp_path):
    server = ServeProcess("textcraft")
    tok = load_tokenizer("tiny")
    backend = ScriptedBackend(tok, lambda req: "Thought: check.\nAction: inventory")
    killed_at: list[int] = []

    def kill_after_first_round(round_no, live):
        if round_no == 1:
            server.kill()
            killed_at.append(len(live))

    try:
        settings = EvalSettings(
            model="scripted", env=["textcraft"], limit=3, max_turns=5, server=server.url, env_timeout_s=10,
            out=str(tmp_path), progress=False,
        )  # fmt: skip
        report = run_eval(settings, backend, on_round=kill_after_first_round)
    finally:
        server.kill()
    assert killed_at == [3]
    assert report["n_items"] == 3 and report["n_failed"] == 3 and report["success_rate"] == 0.0
    trajs = read_jsonl(tmp_path / "trajectories.jsonl")
    for t in trajs:
        assert t.failed and t.meta["stop_reason"] == "failed"
        assert server.url in (t.fail_reason or "") and "env step failed" in (t.fail_reason or "")
        assert t.num_turns == 2  # the first turn was played before the kill
        check_trajectory(t, tok)
    assert "| 3 |" in (tmp_path / "report.md").read_text()  # the failed column counts them
