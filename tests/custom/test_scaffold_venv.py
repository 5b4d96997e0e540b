"""`horizonrl new-env`, then `pip install -e` into a fresh venv: the plugin is listed, passes
check-env locally and through `horizonrl serve`, and trains one GRPO step, without any change to
horizonrl's source (the venv runs this checkout's horizonrl through PYTHONPATH)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from horizonrl.cli import main
from tests.custom.helpers import ROOT, TINY_GRPO, ReadyProcess, metrics


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv python, package dir, run env) with the scaffolded `guess` package installed in the venv."""
    tmp = tmp_path_factory.mktemp("scaffold")
    package = tmp / "horizonrl-guess"
    assert main(["new-env", "guess", "--dir", str(package)]) == 0
    venv = tmp / "venv"
    # --without-pip: the venv then runs the system's pip and setuptools (a seeded venv's own older
    # setuptools cannot build an editable wheel without the `wheel` package); no network is used
    make_venv = [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)]
    subprocess.run(make_venv, check=True)
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-build-isolation", "-e"]
    subprocess.run([*pip, str(package)], check=True, cwd=tmp)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1"}
    return python, package, env, tmp


def _run(installed, *args: str) -> subprocess.CompletedProcess[str]:
    python, _, env, tmp = installed
    return subprocess.run(
        [python, "-m", "horizonrl.cli", *args], capture_output=True, text=True, env=env, cwd=tmp, timeout=600
    )


def test_the_installed_plugin_is_listed_with_its_source(installed):
    listed = _run(installed, "envs", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["family"]: row for row in json.loads(listed.stdout)}
    assert rows["guess"]["source"] == "plugin guess_env:SPEC (horizonrl-guess 0.1.0)"
    assert rows["guess"]["splits"] == {"train": 12, "test": 6}
    assert rows["guess"]["categories"] == ["small", "large"]
    assert rows["textcraft"]["source"] == "built-in"
    system = [sys.executable, "-m", "horizonrl.cli", "envs", "--json"]
    outside = subprocess.run(system, capture_output=True, text=True, cwd=installed[3])
    assert outside.returncode == 0, outside.stderr
    assert "guess" not in {row["family"] for row in json.loads(outside.stdout)}  # only the venv has it


def test_the_plugin_passes_check_env_locally_and_through_serve(installed):
    local = _run(installed, "check-env", "guess")
    assert local.returncode == 0, local.stdout + local.stderr
    assert "check-env guess (local)" in local.stdout and "guess: 7 passed, 0 failed" in local.stdout
    python, _, env, tmp = installed
    server = ReadyProcess([python, "-m", "horizonrl.cli", "serve", "guess", "--port", "0"], cwd=tmp, env=env)
    try:
        remote = _run(installed, "check-env", "guess", "--server", server.url)
    finally:
        server.stop()
    assert remote.returncode == 0, remote.stdout + remote.stderr
    assert "PASS  v1 error statuses" in remote.stdout and "guess: 9 passed, 0 failed" in remote.stdout


def test_the_scaffolded_tests_pass_in_the_venv(installed):
    python, package, env, tmp = installed
    result = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(package / "tests")],
        capture_output=True, text=True, env=env, cwd=tmp, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:]


def test_the_plugin_trains_one_grpo_step_from_its_own_config(installed):
    _, package, _, tmp = installed
    run = tmp / "run"
    result = _run(installed, "train", str(package / "train.yaml"), *TINY_GRPO, f"trainer.output_dir={run}")
    assert result.returncode == 0, result.stderr[-3000:]
    [row] = metrics(Path(run))
    assert row["loss/policy"] is not None and row["grad/norm"] is not None and not row.get("update/skipped")
    assert row["schedule/max_turns"] == 2.0  # the stepwise (ScalingInter) schedule's first cap
    assert (run / "checkpoints" / "step_1" / "model" / "model.safetensors").exists()
