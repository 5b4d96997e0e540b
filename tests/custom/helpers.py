"""Helpers for the custom-environment tests: processes that print a "ready on URL" line."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = Path(__file__).with_name("node")

# what `horizonrl train` needs to run one cheap GRPO step with the tiny random model
TINY_GRPO = [
    "model.path=tiny",
    "model.bf16=false",
    "data.batch_size=1",
    "rollout.n=2",
    "rollout.max_tokens=8",
    "rollout.max_response_length=256",
    "schedule.type=stepwise",
    "schedule.rounds=[2,3]",
    "schedule.every=1",
    "trainer.total_steps=1",
    "trainer.lr=1e-3",
    "algorithm.entropy_coef=0.01",  # the random model never solves an item: all advantages are 0
    "algorithm.filter_groups=false",  # (so no group is informative; keep them all in the update)
    "eval.at_end=false",
    "logging.console=false",
    "logging.tensorboard=false",
]


class ReadyProcess:
    """A subprocess whose first stdout line says `... ready on URL`; `url` is that URL."""

    def __init__(self, cmd: list[str], *, cwd: Path = ROOT, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, text=True, cwd=cwd, env={**os.environ, **(env or {})}
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "ready on " not in line:
            self.stop()
            raise RuntimeError(f"{cmd} did not start: {line!r}")
        self.url = line.split("ready on ")[1].strip()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def node_server(*, broken: bool = False) -> ReadyProcess:
    """tests/custom/node/server.js on a free port (`broken`: its deliberately broken mode)."""
    cmd = ["node", str(NODE_DIR / "server.js"), str(NODE_DIR / "items.jsonl"), "0"]
    return ReadyProcess(cmd, env={"BROKEN": "1" if broken else "0"})


def family_file(tmp: Path, url: str) -> Path:
    """guessjs.json pointing at `url`, with its items file beside it."""
    config = json.loads((NODE_DIR / "guessjs.json").read_text())
    config["url"] = url
    config["items"] = str(NODE_DIR / "items.jsonl")
    path = tmp / "guessjs.json"
    path.write_text(json.dumps(config))
    return path


def metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def trajectories(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]
