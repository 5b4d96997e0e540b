"""docs/custom_env.md runs as written: every file block is written, every bash block executed, in
order, in a fresh venv (its `pip install -e` must not touch this machine's site-packages)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from tests.custom.helpers import ROOT, metrics
from tests.threaded_server import ThreadedServer

TUTORIAL = ROOT / "docs" / "custom_env.md"
FENCE = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```", re.S | re.M)
MARK = "### tutorial block"


def blocks(text: str) -> list[tuple[str, str | None, str]]:
    """`(language, file or None, body)` of each fenced block, in order."""
    out = []
    for lang, info, body in FENCE.findall(text):
        match = re.search(r"file=(\S+)", info)
        out.append((lang, match.group(1) if match else None, body))
    return out


def script(text: str) -> str:
    """One bash script: file blocks become heredocs, bash blocks run as they are."""
    lines = ["set -euo pipefail", "trap 'kill $(jobs -p) 2>/dev/null || true; wait' EXIT"]
    for i, (lang, file, body) in enumerate(blocks(text)):
        if file is not None:
            lines += [f"mkdir -p $(dirname {file})", f"cat > {file} <<'TUTORIAL_EOF'", body + "TUTORIAL_EOF"]
        elif lang == "bash":
            lines += [f'echo "{MARK} {i} at $(date +%s)"', body]
    return "\n".join(lines) + "\n"


def _api_model() -> FastAPI:
    """An OpenAI-compatible chat endpoint whose "model" always guesses 4."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> JSONResponse:
        body: dict[str, Any] = await request.json()
        message = {"role": "assistant", "content": "Thought: the middle.\nAction: guess 4"}
        return JSONResponse(
            {
                "id": "c1",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 8, "total_tokens": 18},
            }
        )

    return app


def _venv(tmp: Path) -> Path:
    """A fresh venv whose `horizonrl` and `pip` run this checkout's horizonrl, offline."""
    venv = tmp / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True
    )
    python = venv / "bin" / "python"
    shims = {
        "horizonrl": f'exec {python} -m horizonrl.cli "$@"\n',
        # no index and no build isolation: CI has no network; the system's setuptools builds it
        "pip": f'[ "$1" = install ] && shift && exec {python} -m pip install --no-index '
        f'--no-build-isolation "$@"\nexec {python} -m pip "$@"\n',
    }
    for name, body in shims.items():
        path = venv / "bin" / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
    return venv


def test_the_minimal_environment_is_at_most_60_lines():
    [env_file] = [body for _, file, body in blocks(TUTORIAL.read_text()) if file == "guess/guess_env.py"]
    assert len(env_file.splitlines()) <= 60
    assert f"one file of {len(env_file.splitlines())} lines" in TUTORIAL.read_text()


@pytest.mark.slow  # the default model (eval), three training runs
@pytest.mark.timeout(1200)
def test_the_tutorial_runs_as_written(tmp_path):
    venv = _venv(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    api = ThreadedServer(_api_model())
    env = {
        **os.environ,
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "OMP_WAIT_POLICY": "PASSIVE",
        "HF_HUB_OFFLINE": "1",
        "OPENAI_BASE_URL": f"{api.url}/v1",
        "OPENAI_API_KEY": "test-key",
        "COLUMNS": "200",  # rich's table (horizonrl envs) at full width
    }
    try:
        done = subprocess.run(
            ["bash", "-c", script(TUTORIAL.read_text())],
            cwd=work, env=env, capture_output=True, text=True, timeout=1100,
        )  # fmt: skip
    finally:
        api.stop()
    out = done.stdout
    assert done.returncode == 0, f"{out[-4000:]}\n{done.stderr[-4000:]}"
    n_bash = sum(lang == "bash" and file is None for lang, file, _ in blocks(TUTORIAL.read_text()))
    assert out.count(MARK) == n_bash  # every bash block ran
    stamps = [int(line.rsplit(" ", 1)[1]) for line in out.splitlines() if line.startswith(MARK)]
    print("seconds per bash block:", [b - a for a, b in zip(stamps, stamps[1:], strict=False)])
    assert "plugin guess_env:SPEC (horizonrl-guess 0.1.0)" in out  # horizonrl envs
    assert "guess: 7 passed, 0 failed" in out and "guess: 9 passed, 0 failed" in out  # local, via serve
    solved = [json.loads(line) for line in out.splitlines() if line.startswith('{"family": "guess"')]
    assert solved[0]["split"] == "train" and solved[0]["success_rate"] == 1.0
    demos = (work / "demos" / "guess_train.jsonl").read_text().splitlines()
    assert len(demos) == 4 and all(json.loads(d)["success"] for d in demos)
    for name in ("guess-eval", "guess-eval-api"):
        report = json.loads((work / "runs" / name / "report.json").read_text())
        assert report["n_items"] == 2 and report["n_failed"] == 0, name
    grpo = [row for row in metrics(work / "runs" / "guess-grpo") if "schedule/max_turns" in row]
    assert [row["schedule/max_turns"] for row in grpo] == [2.0, 4.0]  # the ScalingInter schedule
    assert all(row["loss/policy"] is not None or row.get("update/skipped") for row in grpo)
    assert (work / "runs" / "guess-grpo" / "eval" / "final" / "report.md").exists()
    assert "guess-grpo" in out and "guess-sft" in out  # the viewer lists both runs
    assert (
        "guess_env"
        not in subprocess.run(  # pip installed into the venv only
            [sys.executable, "-m", "pip", "list"], capture_output=True, text=True
        ).stdout
    )
