"""Real run directories for the browser tests: short `RLTrainer.fit()` runs on the tiny model.

- `stepwise`: TextCraft in-process, the real rollout engine with a scripted backend that plays
  the expert's plan (sample 0 of each group follows it, sample 1 checks its inventory from turn
  2 on: groups with reward variance that first differ at turn 2), stepwise caps 3 -> 4, a final
  eval; the update's token stats saved.
- `fixed`: TextCraft items sampled by the tiny model itself (hf backend: rollout and learner
  logprobs agree), a fixed cap of 2, a curriculum (depth 1, then depth 1-2), token stats saved.
- `babyai`: one step of BabyAI with a scripted backend (the env's `info["grid"]` is kept).
"""

from __future__ import annotations

import json
from pathlib import Path

from horizonrl.agent.prompts import get_prompt
from horizonrl.config import load_config
from horizonrl.envs.textcraft import TextCraftExpert
from horizonrl.rollout.backends.base import GenerationRequest
from horizonrl.trainer.rl import RLTrainer
from tests.rollout.helpers import ScriptedBackend

SAMPLES = 2


def _config(out: Path, *extra: str):  # type: ignore[no-untyped-def]
    return load_config(
        None,
        [
            "model.path=tiny",
            "model.bf16=false",
            f"trainer.output_dir={out}",
            "trainer.micro_batch_size=4",
            "trainer.save_every=0",
            "data.batch_size=2",
            f"rollout.n={SAMPLES}",
            "rollout.temperature=1.0",
            "rollout.max_tokens=24",
            "logging.tensorboard=false",
            "logging.console=false",
            "logging.save_token_stats=true",
            *extra,
        ],
    )


def textcraft_reply(req: GenerationRequest) -> str:
    """The expert's next action for sample 0; `inventory` from turn 2 on for the other samples."""
    messages = req.messages or []
    first = next(m["content"] for m in messages if m["role"] == "user")
    turn = sum(m["role"] == "assistant" for m in messages)
    expert = TextCraftExpert()
    expert.reset("", first, {})
    plan = expert.plan + [("Nothing left to do.", "inventory")] * 10
    action = plan[turn][1]
    if turn >= 1 and int(req.cache_key or 0) % SAMPLES != 0:
        action = "inventory"
    return get_prompt("textcraft").format_response(f"Step {turn + 1} of my plan.", action)


def babyai_reply(req: GenerationRequest) -> str:
    turn = sum(m["role"] == "assistant" for m in req.messages or [])
    action = ["turn left", "move forward", "turn right"][turn % 3]
    return get_prompt("babyai").format_response("I look around.", action)


def _scripted(trainer: RLTrainer, reply) -> RLTrainer:  # type: ignore[no-untyped-def]
    rollout = trainer.rollout()
    rollout.backend = ScriptedBackend(trainer.learner.tokenizer, reply)  # type: ignore[attr-defined]
    return trainer


def write_runs(root: Path) -> Path:
    textcraft = ["data.families=[textcraft]", "data.categories=[depth 1]"]
    stepwise = _config(
        root / "stepwise",
        *textcraft,
        "trainer.total_steps=3",
        "schedule.type=stepwise",
        "schedule.rounds=[3,4]",
        "schedule.every=2",
        "rollout.max_tokens=48",
        "eval.at_end=true",
        "eval.limit=2",
        "eval.max_turns=4",
        "eval.max_tokens=48",
        "eval.categories=[depth 1]",
    )
    _scripted(RLTrainer(stepwise), textcraft_reply).fit()
    fixed = _config(
        root / "fixed",
        "data.families=[textcraft]",
        "data.curriculum.stages=[{categories: [depth 1]}, {categories: [depth 1, depth 2]}]",
        "data.curriculum.every=1",
        "trainer.total_steps=2",
        "schedule.type=fixed",
        "schedule.rounds=[2]",
        "rollout.max_tokens=6",
        "eval.at_end=false",
    )
    RLTrainer(fixed).fit()
    babyai = _config(
        root / "babyai",
        "data.families=[babyai]",
        "data.batch_size=1",
        "trainer.total_steps=1",
        "schedule.type=fixed",
        "schedule.rounds=[3]",
        "eval.at_end=false",
    )
    _scripted(RLTrainer(babyai), babyai_reply).fit()
    return root


def plant_web_run(root: Path) -> Path:
    """A web-family trajectory file whose turns point at screenshots (as the web env writes them)."""
    import struct
    import zlib

    def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
        raw = b"".join(b"\0" + bytes(rgb) * width for _ in range(height))

        def chunk(kind: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

        header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
        return (
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw))
            + chunk(b"IEND", b"")
        )

    folder = root / "web"
    (folder / "shots").mkdir(parents=True)
    (folder / "shots" / "turn_0.png").write_bytes(png(64, 40, (9, 105, 218)))
    (folder / "shots" / "turn_1.png").write_bytes(png(64, 40, (26, 127, 55)))
    (root.parent / "outside.png").write_bytes(png(4, 4, (0, 0, 0)))  # not under the viewer's root
    prompt = get_prompt("textcraft")
    record = {
        "item_id": "webshop_7",
        "category": "shopping",
        "success": True,
        "score": 1.0,
        "reward": 1.0,
        "num_turns": 2,
        "messages": [
            {"role": "system", "content": "You shop."},
            {"role": "user", "content": "Buy a red mug. [search box]"},
            {"role": "assistant", "content": prompt.format_response("Search first.", "search[red mug]")},
            {"role": "user", "content": "Results: red mug $9"},
            {"role": "assistant", "content": prompt.format_response("That one.", "click[red mug]")},
        ],
        "turn_rewards": [0.0, 1.0],
        "meta": {
            "final_observation": "Bought.",
            "views": {
                "0": {"screenshot": "shots/turn_0.png"},
                "1": {"screenshot": "shots/turn_1.png"},
                "2": {"screenshot": "../../outside.png"},
            },
        },
    }
    (folder / "trajectories.jsonl").write_text(json.dumps(record) + "\n")
    return folder
