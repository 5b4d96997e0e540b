"""`horizonrl new-env NAME [--dir D]`: scaffold a pip-installable package holding a new family.

    horizonrl new-env guess --dir horizonrl-guess
    pip install -e horizonrl-guess
    horizonrl envs              # guess is listed: plugin guess_env:SPEC (horizonrl-guess 0.1.0)

The package (`D/`):
- `pyproject.toml`: the distribution `horizonrl-NAME`, with the entry point
  `[project.entry-points."horizonrl.envs"] NAME = "NAME_env:SPEC"` that makes it a plugin;
- `NAME_env/__init__.py`: the env (a number-guessing game on `horizonrl.envs.TextEnv`), its
  `SPEC` (`FamilySpec.from_items`) and its prompt;
- `NAME_env/items.jsonl`: the items, with their split and category;
- `NAME_env/expert.py`: a scripted expert (binary search), for `horizonrl solve` and SFT demos
  (left out with `--no-expert`);
- `tests/test_NAME.py`: pytest running the conformance checker and the expert;
- `train.yaml`: a GRPO run on the family with a ScalingInter-RL turn schedule.
Replace the game with your own: keep `reset` / `step`, edit the items file's fields.
"""

from __future__ import annotations

import argparse
import json
import keyword
import sys
from pathlib import Path

from horizonrl.envs.registry import BUILTIN_FAMILIES

PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "horizonrl-NAME"
version = "0.1.0"
description = "The NAME environment family for horizonrl."
requires-python = ">=3.10"
dependencies = ["horizonrl"]

[project.entry-points."horizonrl.envs"]
NAME = "NAME_env:SPEC"

[tool.setuptools]
packages = ["NAME_env"]

[tool.setuptools.package-data]
NAME_env = ["*.jsonl"]
"""

ENV = '''\
"""NAME: guess a whole number from 1 to `high`; each wrong guess is answered "higher" or "lower".

Observation: the task, then "No, higher." / "No, lower." after each guess.
Actions: `guess N`. Anything else is answered with the valid form.
Reward: 1.0 on the right guess (terminated), else 0.0. Categories: the items file's `category`.
"""

from __future__ import annotations

import re
from pathlib import Path

from horizonrl.envs import FamilySpec, StepResult, TextEnv
@@EXPERT_IMPORT@@

_GUESS = re.compile(r"^\\s*guess\\s+(-?\\d+)\\s*$", re.IGNORECASE)


class NAMEEnv(TextEnv):
    """One game per item: the item's `target` and `high` come from items.jsonl."""

    def reset(self, item_id, *, seed=None):
        self.begin(item_id)  # sets self.item (this item's row) and self.category
        task = f"I am thinking of a whole number from 1 to {self.item['high']}. Find it."
        return f"{task}\\nAnswer with: guess N", self.make_info()

    def step(self, action):
        match = _GUESS.match(action)
        if match is None:
            invalid = f"Invalid action {action[:40]!r}. Valid: guess N"
            return StepResult(invalid, 0.0, False, False, self.make_info())
        guess, target = int(match.group(1)), self.item["target"]
        if guess == target:
            return StepResult(f"Yes, it is {target}!", 1.0, True, False, self.make_info(success=True))
        hint = "higher" if guess < target else "lower"
        return StepResult(f"No, {hint}.", 0.0, False, False, self.make_info())


PROMPT = {
    "instruction": (
        "Find the hidden number. Each turn answer in this format:\\n"
        "Thought: <short reasoning>\\nAction: guess N"
    )
}

SPEC = FamilySpec.from_items(
    "NAME",
    Path(__file__).with_name("items.jsonl"),
    NAMEEnv,
    prompt=PROMPT,
@@EXPERT_FIELD@@
    description="Guess the hidden number with higher/lower hints.",
)
'''

EXPERT = '''\
"""A scripted expert for NAME: binary search over the hints (demonstrations for SFT)."""

from __future__ import annotations

import re


class NAMEExpert:
    def reset(self, item_id, observation, info):
        self.low, self.high = 1, int(re.search(r"from 1 to (\\d+)", observation).group(1))
        self.last = None

    def act(self, observation):
        if self.last is not None:
            if "higher" in observation:
                self.low = self.last + 1
            elif "lower" in observation:
                self.high = self.last - 1
        self.last = (self.low + self.high) // 2
        return f"The number is between {self.low} and {self.high}; I try the middle.", f"guess {self.last}"
'''

TEST = '''\
"""The NAME family passes horizonrl's conformance checker, and its expert solves every item."""

from NAME_env import SPEC

from horizonrl.envs.checker import run_checks


def test_conformance():
    spec = SPEC
    results = run_checks(spec.make_env(), spec, spec.split("test"))
    assert all(r.ok for r in results), [r.line() for r in results if not r.ok]


def test_expert_solves_every_item():
    spec = SPEC
    if spec.make_expert is None:
        return
    env = spec.make_env()
    for item_id in spec.split("train") + spec.split("test"):
        observation, info = env.reset(item_id, seed=0)
        expert = spec.make_expert()
        expert.reset(item_id, observation, info)
        for _ in range(20):
            result = env.step(expert.act(observation)[1])
            observation = result.observation
            if result.done:
                break
        assert result.info["success"], item_id
'''

TRAIN = """\
# Train a policy on NAME: GRPO with a ScalingInter-RL turn schedule (caps 4 -> 6 -> 8 turns).
#   horizonrl train train.yaml [dotted.key=value ...]
model:
  path: default           # SmolLM2-135M-Instruct; any HF model id or local path
  bf16: false
data:
  families: [NAME]
  train_files: []
  batch_size: 4           # items per step
rollout:
  n: 4                    # samples per item (the GRPO group)
  max_tokens: 48          # per turn
  max_response_length: 1024
  temperature: 0.8
algorithm:
  name: grpo
  kl_coef: 0.0
schedule:
  type: stepwise          # ScalingInter-RL: raise the turn cap every `every` steps
  rounds: [4, 6, 8]
  every: 10
trainer:
  total_steps: 30
  output_dir: runs/NAME
  lr: 2.0e-5
eval:
  at_end: true
  split: test
  max_turns: 8
"""

README = """\
# horizonrl-NAME

The `NAME` environment family for [horizonrl](https://github.com/): a plugin found through the
entry point `horizonrl.envs` in `pyproject.toml`.

    pip install -e .
    horizonrl envs                                   # NAME is listed
    horizonrl check-env NAME                         # conformance checker
    horizonrl solve NAME --split test                # the scripted expert
    horizonrl train train.yaml                       # GRPO with a ScalingInter-RL schedule
    python -m pytest tests

Edit `NAME_env/__init__.py` (the env) and `NAME_env/items.jsonl` (the items) to make it yours.
"""


def items(n_train: int = 12, n_test: int = 6) -> list[dict[str, object]]:
    """Deterministic games: `high` 8 (small) or 32 (large), targets spread over the range."""
    rows: list[dict[str, object]] = []
    for i in range(n_train + n_test):
        high = 8 if i % 2 == 0 else 32
        rows.append(
            {
                "split": "train" if i < n_train else "test",
                "category": "small" if high == 8 else "large",
                "target": (i * 5) % high + 1,
                "high": high,
            }
        )
    return rows


def check_name(name: str) -> None:
    if not name.isidentifier() or keyword.iskeyword(name) or name != name.lower():
        raise ValueError(f"family name {name!r} must be a lowercase Python identifier, e.g. guess or my_game")
    if name in BUILTIN_FAMILIES:
        raise ValueError(f"{name!r} is a built-in family; pick another name")


def scaffold(name: str, directory: str | Path, *, expert: bool = True) -> list[Path]:
    """Write the package for family `name` under `directory`; returns the files written."""
    check_name(name)
    root = Path(directory)
    if root.exists() and any(root.iterdir()):
        raise ValueError(f"{root} exists and is not empty; choose another --dir")
    package = root / f"{name}_env"
    env = ENV.replace("@@EXPERT_IMPORT@@\n", "from NAME_env.expert import NAMEExpert\n" if expert else "")
    env = env.replace("@@EXPERT_FIELD@@\n", "    make_expert=NAMEExpert,\n" if expert else "")
    files = {
        root / "pyproject.toml": PYPROJECT,
        root / "README.md": README,
        root / "train.yaml": TRAIN,
        package / "__init__.py": env,
        package / "items.jsonl": "".join(json.dumps(r) + "\n" for r in items()),
        root / "tests" / f"test_{name}.py": TEST,
    }
    if expert:
        files[package / "expert.py"] = EXPERT
    class_name = "".join(part.capitalize() for part in name.split("_"))
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        text = text.replace("NAMEEnv", f"{class_name}Env").replace("NAMEExpert", f"{class_name}Expert")
        path.write_text(text.replace("NAME", name))
    return sorted(files)


def new_env_main(args: argparse.Namespace) -> int:
    """Entry point of `horizonrl new-env` (arguments parsed in `horizonrl.cli`)."""
    directory = Path(args.dir or f"horizonrl-{args.name}")
    try:
        written = scaffold(args.name, directory, expert=not args.no_expert)
    except ValueError as exc:
        print(f"horizonrl new-env: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(f"  wrote {path}")
    print(
        f"next: pip install -e {directory} && horizonrl check-env {args.name} && "
        f"horizonrl train {directory / 'train.yaml'}"
    )
    return 0
