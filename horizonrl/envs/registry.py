"""Registry of environment families, by id, with their splits, categories and experts.

Each built-in family lives in `horizonrl.envs.<family>` and exposes a module-level
`SPEC: FamilySpec`. Families are imported lazily, so listing them does not start a JVM
or import torch.

    spec = get_family("textcraft")
    env = spec.make_env()
    spec.split("test")            # ["textcraft_3", ...]
    spec.category_of("textcraft_3")

A user's own family (DESIGN.md §9b) comes from one of:
- the entry-point group `horizonrl.envs` of any installed package, value `module:SPEC`
  (`[project.entry-points."horizonrl.envs"] guess = "guess_env:SPEC"`); the entry point's
  name must be the family's name. Found by name, loaded on first use;
- a reference `module:SPEC` wherever a family name is accepted (`get_family("guess_env:SPEC")`
  loads and registers it under `SPEC.name`);
- `load_plugins(["mypkg.envs"])` (configs: `env.plugins`): imports each module, which calls
  `register()` or defines a module-level `SPEC`;
- `register(FamilySpec(...))` from Python.

A plugin that fails to load (import error, wrong object, name mismatch) raises `PluginError`
with one line naming it; listing families and every other family keep working.
`family_source(name)` says where a family came from (`horizonrl envs` shows it).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.metadata
import json
import random
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from horizonrl.envs.core import TextEnv, UnknownItemError, parse_item_id
from horizonrl.envs.items import ItemTable

ENTRY_POINT_GROUP = "horizonrl.envs"

# family id -> module that defines `SPEC`
BUILTIN_FAMILIES: dict[str, str] = {
    "textcraft": "horizonrl.envs.textcraft",
    "babyai": "horizonrl.envs.babyai",
    "sciworld": "horizonrl.envs.sciworld",
    "search": "horizonrl.envs.search",
    "web": "horizonrl.envs.web",
}

_REGISTERED: dict[str, FamilySpec] = {}
_SOURCES: dict[str, str] = {}
"""Family -> where it came from (`family_source`)."""
_REFS: dict[str, str] = {}
"""Family -> the `module:SPEC` reference it was loaded by (what a subprocess can load it by)."""


class PluginError(RuntimeError):
    """A plugin family could not be loaded; the message is one line naming the plugin and why."""


class Expert(Protocol):
    """A scripted player that solves items of one family (the source of demonstrations)."""

    def reset(self, item_id: str, observation: str, info: dict[str, Any]) -> None: ...

    def act(self, observation: str) -> tuple[str, str]:
        """Return `(thought, action)` for the current observation."""
        ...


@dataclass(frozen=True)
class Detour:
    """A wrong move for an expert demo to recover from (`FamilySpec.detour`)."""

    thought: str
    """The wrong move's reasoning, as a learner would write it."""
    action: str
    """The wrong action; the env rejects it (`info["invalid_action"]`) and changes nothing."""
    lesson: str
    """What the rejection teaches, short: the recovering reply's whole thought."""


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
    make_expert: Callable[..., Expert] | None = None
    """Factory of the family's scripted expert, if it has one; its keyword arguments, if any, are
    variants (`horizonrl solve --expert-kwargs`)."""
    detour: Callable[[str, str, random.Random], Detour | None] | None = None
    """`detour(task, action, rng)`: a wrong move of a kind learners make in place of the expert's
    `action`, in the episode whose first observation is `task` (None: none for this action). What
    `horizonrl solve --detours P` plays to write demos that recover from a rejection."""
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
    prompt: Any = None
    """The agent's prompt: a `horizonrl.agent.prompts.FamilyPrompt`, or a dict of its fields
    (`{"instruction": ..., "system": ..., "action_style": ...}`); None: the default prompt (the
    env's first observation is the task, ReAct format). Built-in families keep theirs in
    `horizonrl.agent.prompts`."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Family-specific facts other modules may read (e.g. the AgentGym compat variant)."""

    @classmethod
    def from_items(
        cls,
        name: str,
        items: str | Path | ItemTable,
        make_env: Callable[..., TextEnv],
        **fields: Any,
    ) -> FamilySpec:
        """A family whose items are the rows of a JSON/JSONL file (see `horizonrl.envs.items`).

        Item `<name>_<i>` is row i; splits and categories come from the rows' `split` and
        `category` fields. Each env `make_env(**kwargs)` builds gets the table as `env.items`
        (what `horizonrl.envs.base.TextEnv.begin` reads). Other `FamilySpec` fields (expert,
        prompt, description, ...) pass through `fields`.
        """
        table = items if isinstance(items, ItemTable) else ItemTable.load(name, items)

        def make(**kwargs: Any) -> TextEnv:
            env = make_env(**kwargs)
            env.items = table  # type: ignore[attr-defined]
            return env

        return cls(
            name=name,
            make_env=make,
            load_splits=table.splits,
            categories=table.categories,
            category_of=table.category_of,
            **fields,
        )

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


def register(spec: FamilySpec, *, overwrite: bool = False, source: str = "registered") -> None:
    """Register a family so `get_family`, the server, the CLI and the trainer can use it."""
    if not isinstance(spec, FamilySpec):
        raise TypeError(f"register() takes a FamilySpec, got {type(spec).__name__}")
    if spec.name in _REGISTERED and not overwrite:
        raise ValueError(f"family {spec.name!r} is already registered ({family_source(spec.name)})")
    _REGISTERED[spec.name] = spec
    _SOURCES.setdefault(spec.name, source)


@functools.cache
def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """Installed plugin families by entry-point name (read once per process)."""
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)
    return found


def _entry_point_label(ep: importlib.metadata.EntryPoint) -> str:
    dist = ep.dist
    where = f"{dist.name} {dist.version}" if dist is not None else "an installed package"
    return f"plugin {ep.value} ({where})"


def _load_ref(ref: str, what: str) -> FamilySpec:
    """Import `module:ATTR` (ATTR may be dotted) and check that it is a `FamilySpec`."""
    module_name, _, attr = ref.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in (attr or "SPEC").split("."):
            obj = getattr(obj, part)
    except Exception as exc:  # noqa: BLE001 (any failure of the user's module is reported in one line)
        raise PluginError(f"{what}: cannot load {ref!r}: {type(exc).__name__}: {exc}") from exc
    if not isinstance(obj, FamilySpec):
        raise PluginError(f"{what}: {ref!r} is a {type(obj).__name__}, not a FamilySpec")
    return obj


def family_names() -> list[str]:
    """All known family ids: built-in first, then installed plugins, then registered ones."""
    return list(dict.fromkeys([*BUILTIN_FAMILIES, *_entry_points(), *_REGISTERED]))


def family_source(name: str) -> str:
    """Where family `name` comes from: `built-in`, `plugin mod:SPEC (dist version)`, `module mod:SPEC`, ..."""
    if name in BUILTIN_FAMILIES:
        return "built-in"
    if name in _SOURCES:
        return _SOURCES[name]
    if name in _entry_points():
        return _entry_point_label(_entry_points()[name])
    return "registered"


def family_ref(name: str) -> str:
    """What another process can pass to `get_family` to get this family (`module:SPEC` or the name)."""
    return _REFS.get(name, name)


def is_reference(name: str) -> bool:
    """`"mypkg.envs:SPEC"` is a reference to a spec; `"textcraft"` is a family name."""
    return ":" in name


def get_family(name: str) -> FamilySpec:
    """The `FamilySpec` of a family name or a `module:SPEC` reference (see the module docstring)."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    if is_reference(name):
        if name in _REFS.values():
            return _REGISTERED[next(k for k, v in _REFS.items() if v == name)]
        spec = _load_ref(name, f"family reference {name!r}")
        if spec.name in BUILTIN_FAMILIES:
            raise PluginError(f"family reference {name!r}: its name {spec.name!r} is a built-in family's")
        register(spec, source=f"module {name}")
        _REFS.setdefault(spec.name, name)
        return spec
    if name in BUILTIN_FAMILIES:
        module = importlib.import_module(BUILTIN_FAMILIES[name])
        spec = module.SPEC
        _REGISTERED[name] = spec
        return spec
    if name in _entry_points():
        ep = _entry_points()[name]
        label = _entry_point_label(ep)
        spec = _load_ref(ep.value, f"{label}, family {name!r}")
        if spec.name != name:
            raise PluginError(f"{label}: the entry point is named {name!r} but its spec is {spec.name!r}")
        register(spec, source=label)
        return spec
    raise KeyError(f"unknown environment family {name!r}; known: {', '.join(family_names())}")


def load_plugins(modules: Iterable[str]) -> list[FamilySpec]:
    """Import plugin modules (configs' `env.plugins`); returns the families they added.

    A module registers its families with `register()` when imported, or defines a module-level
    `SPEC`, which is registered here; a `module:SPEC` reference is loaded like `get_family`'s.
    """
    added: list[FamilySpec] = []
    for module in modules:
        if is_reference(module):
            added.append(get_family(module))
            continue
        before = set(_REGISTERED)
        try:
            imported = importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001
            raise PluginError(
                f"plugin module {module!r}: cannot import: {type(exc).__name__}: {exc}"
            ) from exc
        spec = getattr(imported, "SPEC", None)
        if isinstance(spec, FamilySpec) and spec.name not in _REGISTERED:
            register(spec, source=f"module {module}")
            _REFS.setdefault(spec.name, f"{module}:SPEC")
        new = [_REGISTERED[n] for n in _REGISTERED if n not in before]
        if not new and not isinstance(spec, FamilySpec):
            raise PluginError(f"plugin module {module!r} registered no family and defines no SPEC")
        for s in new:
            _SOURCES[s.name] = f"module {module}"
        added.extend(new)
    return added


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
