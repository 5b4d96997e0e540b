"""A family in another language: the Node.js server written from docs/protocol.md is checked,
evaluated and trained on; its deliberately broken mode fails check-env naming each problem."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from horizonrl.cli import main
from tests.custom.helpers import (
    NODE_DIR,
    ROOT,
    TINY_GRPO,
    ReadyProcess,
    family_file,
    metrics,
    node_server,
    trajectories,
)

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")


@pytest.fixture(scope="module")
def js_server():
    server = node_server()
    yield server
    server.stop()


@needs_node
def test_node_server_passes_check_env(js_server, tmp_path, capsys):
    family = family_file(tmp_path, "http://127.0.0.1:9")  # the URL given by --server wins
    assert main(["check-env", str(family), "--server", js_server.url]) == 0
    out = capsys.readouterr().out
    assert "guessjs: 9 passed, 0 failed" in out
    for prop in ("v1 routes and fields", "v1 error statuses", "seed determinism", "invalid actions"):
        assert f"PASS  {prop}" in out


@needs_node
def test_broken_node_server_fails_check_env_naming_each_problem(tmp_path, capsys):
    broken = node_server(broken=True)
    try:
        family = str(family_file(tmp_path, broken.url))
        assert main(["check-env", family, "--server", broken.url, "--items", "1"]) == 1
    finally:
        broken.stop()
    lines = {line.split(":")[0].strip(): line for line in capsys.readouterr().out.splitlines()}
    # wrong fields: `done` instead of terminated / truncated
    assert "answer lacks 'terminated', 'truncated'" in lines["FAIL  v1 routes and fields"]
    assert "unexpected fields 'done'" in lines["FAIL  v1 routes and fields"]
    # 200-with-error
    assert "answered 200 with an error body; use HTTP status 404" in lines["FAIL  v1 error statuses"]
    # non-determinism
    assert "two resets with seed 0 gave different episodes" in lines["FAIL  seed determinism"]
    assert "PASS  info keys" in lines


@needs_node
def test_eval_and_one_grpo_step_on_the_node_server(js_server, tmp_path):
    fam = family_file(tmp_path, js_server.url)
    out = tmp_path / "eval"
    args = ["eval", "--model", "tiny", "--env", str(fam), "--split", "test", "--limit", "2"]
    assert main([*args, "--max-turns", "2", "--out", str(out), "max_tokens=8", "progress=false"]) == 0
    evaluated = trajectories(out / "trajectories.jsonl")
    assert len(evaluated) == 2 and not any(t["failed"] for t in evaluated)
    assert evaluated[0]["messages"][1]["content"].startswith("Find the hidden number.")  # the file's prompt

    run = tmp_path / "run"
    items = NODE_DIR / "items.jsonl"
    external = f'env.external=[{{name: guessjs, url: "{js_server.url}", items: "{items}"}}]'
    args = ["train", "configs/quickstart.yaml", *TINY_GRPO, "data.families=[guessjs]", "data.categories=[]"]
    args += ["data.train_files=[]", "sft.warmup_steps=0", external, f"trainer.output_dir={run}"]
    assert main(args) == 0
    [row] = metrics(run)
    assert row["loss/policy"] is not None and row["grad/norm"] is not None and not row.get("update/skipped")
    played = trajectories(run / "trajectories" / "step_1.jsonl")
    assert len(played) == 2 and all(t["item_id"].startswith("guessjs_") and not t["failed"] for t in played)


def test_an_external_family_over_the_agentgym_routes(tmp_path):
    """`protocol: agentgym`: a server with the reference's routes (here horizonrl's own)."""
    server = ReadyProcess(
        [sys.executable, "-m", "horizonrl.cli", "serve", "tests.envs.toy:TOY_SPEC", "--port", "0"]
    )
    try:
        rows = [
            {"split": "train" if i < 8 else "test", "category": ("even", "odd")[i % 2]} for i in range(10)
        ]
        (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        family = {"name": "toy", "url": server.url, "items": "items.jsonl", "protocol": "agentgym"}
        (tmp_path / "toy.json").write_text(json.dumps(family))
        cmd = [sys.executable, "-m", "horizonrl.cli", "check-env", str(tmp_path / "toy.json"), "--items", "2"]
        checked = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    finally:
        server.stop()
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert (
        "via " + server.url + " (agentgym)" in checked.stdout and "toy: 7 passed, 0 failed" in checked.stdout
    )
