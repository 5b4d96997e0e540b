"""Expert demos of the BabyAI train items of the GoTo and Pickup groups (the strategy benchmark's SFT data).

    python benchmarks/babyai_demos.py 240 runs/demos/babyai_train.jsonl   # 240 items: 96 demos

Items are played one by one in this thread; one slower than 20 s is skipped (on this machine the
expert did not finish `babyai_246` within minutes, which stalls `horizonrl solve babyai --limit 400`).
"""

from __future__ import annotations

import signal
import sys

from horizonrl.envs.registry import get_family
from horizonrl.eval.solve import play_expert
from horizonrl.rollout.trajectory import Trajectory, write_jsonl


def _timeout(*_: object) -> None:
    raise TimeoutError


def main(limit: int, out: str, groups: tuple[str, ...] = ("GoTo", "Pickup")) -> None:
    spec = get_family("babyai")
    items = [i for i in spec.split("train")[:limit] if spec.category_of(i) in groups]
    signal.signal(signal.SIGALRM, _timeout)
    env, demos = spec.make_env(), list[Trajectory]()
    for item in items:
        signal.alarm(20)
        try:
            demos.append(play_expert(env, spec, item))
        except TimeoutError:
            print(f"skipped {item} (over 20 s)", flush=True)
            env = spec.make_env()
        finally:
            signal.alarm(0)
    write_jsonl(out, demos)
    print(f"{len(demos)} demos, {sum(t.success for t in demos)} successful -> {out}")


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
