"""Expert demos for a training run's missing trajectory files (`data.train_files`).

SFT, DPO, AgentEvol and the warm-started recipe read trajectory JSONL files. When one is
missing and its family has a scripted expert, `ensure_demos` writes it the way
`horizonrl solve FAMILY --split S --out FILE` does (the same function, not a subprocess),
so `horizonrl train configs/quickstart.yaml` works without running `solve` first.

The family of a file is the one its name starts with (`textcraft_train.jsonl`), else the
config's only `data.families` entry; the split is the one its name ends with
(`<family>_<split>.jsonl`), else `data.split`; a name ending in a count (`babyai_train_80.jsonl`)
holds the first that many items of the split, as `horizonrl solve ... --limit 80` writes them
(BabyAI's train split has 40,000 items). A file whose family cannot be told, or
whose family has no expert, stops the run with the `solve` command to run instead; so does
any missing file of a DPO run (its pairs need failed trajectories too, which demos lack).

`data.expert_kwargs` names an expert variant per family (`{textcraft: {worked: true}}`, as
`horizonrl solve --expert-kwargs`): missing files of that family are written by it, and an
existing file of that family (told as above) must have been written by it too (each demo's
`meta["expert_kwargs"]`), so a file left by another variant is not trained on unnoticed.
"""

from __future__ import annotations

import json
from pathlib import Path

from horizonrl.config import Config
from horizonrl.envs.registry import FamilySpec, family_names, get_family
from horizonrl.eval.solve import build_expert, other_expert_variants, solve_split
from horizonrl.rollout.trajectory import iter_jsonl


def demo_source(path: Path, cfg: Config) -> tuple[FamilySpec, str, int | None]:
    """`(family, split, limit)` whose expert demos `path` should hold; `ValueError` saying why not."""
    stem = path.name.removesuffix(".jsonl")
    head, _, tail = stem.rpartition("_")
    limit = int(tail) if head and tail.isdigit() and int(tail) > 0 else None
    stem = head if limit else stem
    named = [f for f in family_names() if stem == f or stem.startswith(f"{f}_")]
    if named:
        family = max(named, key=len)
    elif len(cfg.data.families) == 1:
        family = cfg.data.families[0]
    else:
        raise ValueError(
            f"its name does not start with a family and data.families is {list(cfg.data.families)}"
        )
    spec = get_family(family)
    if spec.make_expert is None:
        raise ValueError(f"family {family!r} has no scripted expert")
    split = stem.removeprefix(f"{family}_")
    return spec, split if split in spec.splits() else cfg.data.split, limit


def check_expert_variants(cfg: Config) -> None:
    """Stop the run when an existing `data.train_files` file of a family named in `data.expert_kwargs`
    was written by another expert variant (a file whose family cannot be told is not checked)."""
    for path in (Path(f) for f in cfg.data.train_files if Path(f).exists()):
        try:
            family = demo_source(path, cfg)[0].name
        except ValueError:
            continue
        if family not in cfg.data.expert_kwargs:
            continue
        asked = cfg.data.expert_kwargs[family]
        if held := other_expert_variants(iter_jsonl(path), asked):
            raise SystemExit(
                f"horizonrl {cfg.algorithm.name}: {path} was written by the {family} expert with kwargs "
                f"{held} but data.expert_kwargs.{family} is {json.dumps(asked, sort_keys=True)}; remove the "
                f"file (it is made again) or name another in data.train_files"
            )


def ensure_demos(cfg: Config) -> list[Path]:
    """Write expert demos for each missing file of `data.train_files`; return the files made.

    Stops with `SystemExit` (making nothing) when any missing file cannot be made, or when an
    existing one was written by another expert variant than `data.expert_kwargs` names.
    """
    name = cfg.algorithm.name
    check_expert_variants(cfg)
    missing = [Path(f) for f in cfg.data.train_files if not Path(f).exists()]
    plan = []
    for path in missing:
        try:
            if name == "dpo":
                raise ValueError("DPO pairs need failed trajectories too, and expert demos are all solved")
            spec, split, limit = demo_source(path, cfg)
            expert_kwargs = cfg.data.expert_kwargs.get(spec.name)
            build_expert(spec, expert_kwargs)  # kwargs its expert does not take stop the run here
            plan.append((path, spec, split, limit, expert_kwargs))
        except ValueError as why:
            raise SystemExit(
                f"horizonrl {name}: trajectory file {path} not found; expert demos are made with "
                f"`horizonrl solve FAMILY --split train --out {path}` (not made here: {why})"
            ) from None
    for path, spec, split, limit, expert_kwargs in plan:
        env_kwargs = dict(cfg.env.kwargs.get(spec.name, {}))
        trajectories = solve_split(
            spec, split, limit=limit, out=path, env_kwargs=env_kwargs, expert_kwargs=expert_kwargs
        )
        solved = sum(t.success for t in trajectories)
        options = f"--limit {limit} " if limit else ""
        options += f"--expert-kwargs '{json.dumps(expert_kwargs)}' " if expert_kwargs else ""
        print(
            f"horizonrl {name}: {path} was missing; wrote {len(trajectories)} expert demos of "
            f"{spec.name}/{split} there ({solved} solved), as `horizonrl solve {spec.name} --split {split} "
            f"{options}--out {path}` does",
            flush=True,
        )
    return [path for path, *_ in plan]
