"""Registry of environment families, by id, with their splits, categories and experts.

Each built-in family lives in `horizonrl.envs.<family>` and exposes a module-level
`SPEC: FamilySpec`. Families are imported lazily, so listing them does not start a JVM
or import torch. Users add their own with `register(FamilySpec(...))`.

    spec = get_family("textcraft")
    env = spec.make_env()
    spec.split("test")            # ["textcraft_3", ...]
    spec.category_of("textcraft_3")
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from horizonrl.envs.core import TextEnv, UnknownItemError, parse_item_id

# family id -> module that defines `SPEC`
BUILTIN_FAMILIES: dict[str, str] = {
    "textcraft": "horizonrl.envs.textcraft",
    "babyai": "horizonrl.envs.babyai",
    "sciworld": "horizonrl.envs.sciworld",
    "search": "horizonrl.envs.search",
    "web": "horizonrl.envs.web",
}

_REGISTERED: dict[str, FamilySpec] = {}


class Expert(Protocol):
    """A scripted player that solves items of one family (the source of demonstrations)."""

    def reset(self, item_id: str, observation: str, info: dict[str, Any]) -> None: ...

    def act(self, observation: str) -> tuple[str, str]:
        """Return `(thought, action)` for the current observation."""
        ...


@dataclass(frozen=True)
class FamilySpec:
    """Everything horizonrl needs to know about one environment family."""

    name: str
    """Family id, also the prefix of its item ids (`textcraft` -> `textcraft_12`)."""
    make_env: Callable[..., TextEnv]
    """Factory of one env instance; keyword arguments come from `env.kwargs` in configs."""
    load_splits: Callable[[], dict[str, list[str]]]
    """Returns item ids per split name (at least `train` and `test`), deterministically."""
    categories: tuple[str, ...]
    """Sub-task names used for the per-category breakdown, in report order."""
    category_of: Callable[[str], str]
    """Maps an item id to its category; raises `UnknownItemError` for an unknown id."""
    make_expert: Callable[[], Expert] | None = None
    """Factory of the family's scripted expert, if it has one."""
    isolate: bool = False
    """Run each session's env in its own worker process on the server (JVM, browser)."""
    default_port: int = 36000
    """Port `horizonrl serve <family>` binds when none is given."""
    host_services: Callable[[dict[str, Any]], AbstractContextManager[dict[str, Any]]] | None = None
    """Backends shared by every env of the family that must outlive any one of them (the web
    family's sites). The process that hosts the envs (the env server, a local env pool,
    `solve`) enters `host_services(env_kwargs)` once, before it makes envs, and leaves it after
    closing them; it yields env kwargs to add (e.g. how to reach the backends) for every env
    it makes, in this process or in worker processes. Use `services(env_kwargs)`."""
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    """Family-specific facts other modules may read (e.g. the AgentGym compat variant)."""

    def split(self, name: str) -> list[str]:
        splits = _cached_splits(self.name, self.load_splits)
        if name not in splits:
            raise KeyError(f"family {self.name!r} has no split {name!r}; splits: {sorted(splits)}")
        return list(splits[name])

    def splits(self) -> dict[str, list[str]]:
        return {k: list(v) for k, v in _cached_splits(self.name, self.load_splits).items()}

    @contextlib.contextmanager
    def services(self, env_kwargs: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """Run the family's `host_services` (if any) and yield `env_kwargs` with what they add."""
        kwargs = dict(env_kwargs or {})
        if self.host_services is None:
            yield kwargs
            return
        with self.host_services(kwargs) as extra:
            yield {**kwargs, **extra}

    def check_item(self, item_id: str) -> int:
        """Return the index of `item_id`, raising `UnknownItemError` if it is not ours."""
        family, index = parse_item_id(item_id)
        if family != self.name:
            raise UnknownItemError(f"item {item_id!r} does not belong to family {self.name!r}")
        return index


@functools.cache
def _cached_splits(name: str, loader: Callable[[], dict[str, list[str]]]) -> dict[str, tuple[str, ...]]:
    return {k: tuple(v) for k, v in loader().items()}


def register(spec: FamilySpec, *, overwrite: bool = False) -> None:
    """Register a family so `get_family`, the server, the CLI and the trainer can use it."""
    if spec.name in _REGISTERED and not overwrite:
        raise ValueError(f"family {spec.name!r} is already registered")
    _REGISTERED[spec.name] = spec


def family_names() -> list[str]:
    """All known family ids, built-in first."""
    return list(dict.fromkeys([*BUILTIN_FAMILIES, *_REGISTERED]))


def get_family(name: str) -> FamilySpec:
    """Return the `FamilySpec` of `name`, importing the built-in module on first use."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name not in BUILTIN_FAMILIES:
        raise KeyError(f"unknown environment family {name!r}; known: {', '.join(family_names())}")
    module = importlib.import_module(BUILTIN_FAMILIES[name])
    spec: FamilySpec = module.SPEC
    _REGISTERED[name] = spec
    return spec


def family_of(item_id: str) -> FamilySpec:
    """The family an item id belongs to (`"babyai_3"` -> the babyai spec)."""
    family, _ = parse_item_id(item_id)
    return get_family(family)


def read_item_file(path: str | Path) -> list[str]:
    """Read a Data-ID file: a JSON list of `{"item_id": ...}` (the reference's format)."""
    data = json.loads(Path(path).read_text())
    if not isinstance(data, list) or not all(isinstance(d, dict) and "item_id" in d for d in data):
        raise ValueError(f"{path}: expected a JSON list of objects with an 'item_id' key")
    return [str(d["item_id"]) for d in data]


def write_item_file(path: str | Path, item_ids: list[str]) -> None:
    """Write item ids in the reference's Data-ID format (`<task>_train.json` etc.)."""
    Path(path).write_text(json.dumps([{"item_id": i} for i in item_ids], indent=1) + "\n")
