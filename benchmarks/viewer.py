"""How fast the viewer opens a large trajectory file: first listing (index), cached listing, one replay.

    python benchmarks/viewer.py --trajectories 512 --tokens 8000

Writes a fake `trajectories/step_1.jsonl` of that size in a temp folder (token ids, loss mask
and logprobs like a real rollout), then times the API through FastAPI's test client.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

from horizonrl.rollout.trajectory import Trajectory, write_jsonl
from horizonrl.viewer.app import create_app


def fake(i: int, tokens: int, turns: int) -> Trajectory:
    rng = random.Random(i)
    mask = [int(rng.random() < 0.4) for _ in range(tokens)]
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "obs " * 200}]
    for k in range(turns):
        messages += [{"role": "assistant", "content": f"Thought: t{k}\nAction: get 1 log"},
                     {"role": "user", "content": "obs " * 100}]  # fmt: skip
    return Trajectory(
        item_id=f"textcraft_{i}", category=f"depth {1 + i % 4}", messages=messages, success=i % 3 == 0,
        score=float(i % 3 == 0), num_turns=turns, turn_rewards=[0.0] * turns,
        token_ids=[rng.randrange(49152) for _ in range(tokens)], loss_mask=mask,
        logprobs=[-rng.random() * 3 if m else None for m in mask],
    )  # fmt: skip


def timed(fn):  # type: ignore[no-untyped-def]
    """(result, wall seconds, CPU seconds of this process): the CPU figure is what a quiet machine sees."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trajectories", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=8000)
    parser.add_argument("--turns", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        (run / "trajectories").mkdir(parents=True)
        (run / "metrics.jsonl").write_text('{"step": 1, "reward/mean": 0.5}\n')
        path = run / "trajectories" / "step_1.jsonl"
        write_jsonl(path, (fake(i, args.tokens, args.turns) for i in range(args.trajectories)))
        client = TestClient(create_app(Path(tmp)))
        url = "/api/runs/run/trajectories?source=step_1"
        first, wall, cpu = timed(lambda: client.get(url).json())
        mb = path.stat().st_size / 2**20
        print(
            f"file: {args.trajectories} trajectories x {args.tokens} tokens = {mb:.0f} MiB, "
            f"{first['total']} listed"
        )
        print(
            f"first listing (builds the index): wall {wall:.2f} s, CPU {cpu:.2f} s "
            f"({mb / cpu:.0f} MiB per CPU-s)"
        )
        for what, route in (
            ("filtered + sorted listing (cached index)", url + "&success=true&sort=score&order=desc"),
            (
                "one replay (seek + parse one line)",
                f"/api/runs/run/trajectories/step_1/{args.trajectories - 1}",
            ),
            ("token view of one trajectory", "/api/runs/run/trajectories/step_1/0/tokens"),
        ):
            _, wall, cpu = timed(lambda route=route: client.get(route).json())
            print(f"{what}: wall {1000 * wall:.1f} ms, CPU {1000 * cpu:.1f} ms")


if __name__ == "__main__":
    main()
