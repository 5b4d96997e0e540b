"""External families: an env server in any language, made a family by configuration alone.

A family file (JSON or YAML), or an entry of `env.external` in a training config:

    {"name": "guessjs", "url": "http://127.0.0.1:8080", "items": "items.jsonl",
     "protocol": "v1", "prompt": {"instruction": "Guess the number. Answer: Action: guess N"}}

- `name`: the family id (item ids are `<name>_<i>`); `url`: the server; `items`: an items file
  (`horizonrl.envs.items`: row i is item `<name>_i`, with its `split` and `category`), relative
  to the family file; `protocol`: `v1` (docs/protocol.md) or `agentgym` (the reference's
  routes); `prompt` (optional): fields of `FamilyPrompt`; `description` (optional).
- Its envs are `RemoteEnv` clients of that server, so `solve`, `eval`, `check-env`, `train` use
  it like any family (the server, not horizonrl, holds the env's state).

`resolve_family(text)` is what the CLI and the trainer call on anything a family name is
accepted for: a family name, a `module:SPEC` reference or a family file (`*.json`, `*.yaml`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from horizonrl.envs.items import ItemTable
from horizonrl.envs.registry import FamilySpec, get_family, register
from horizonrl.server.client import RemoteEnv

FAMILY_FILE_SUFFIXES = (".json", ".yaml", ".yml")
REQUIRED = ("name", "url", "items")
OPTIONAL = ("protocol", "prompt", "description", "timeout")


def external_spec(config: dict[str, Any], base_dir: str | Path = ".") -> FamilySpec:
    """The `FamilySpec` of an external family (see the module docstring); checks every key."""
    where = f"external family {config.get('name', '(no name)')!r}"
    if not isinstance(config, dict):
        raise ValueError(f"an external family is a mapping of {', '.join(REQUIRED)}; got {config!r:.80}")
    missing = [k for k in REQUIRED if not config.get(k)]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)} (needs {', '.join(REQUIRED)})")
    unknown = sorted(set(config) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}; valid: {', '.join(REQUIRED + OPTIONAL)}")
    name, url = str(config["name"]), str(config["url"]).rstrip("/")
    protocol = str(config.get("protocol", "v1"))
    if protocol not in ("v1", "agentgym"):
        raise ValueError(f"{where}: protocol must be 'v1' or 'agentgym', got {protocol!r}")
    prompt = config.get("prompt")
    if prompt is not None and not isinstance(prompt, dict):
        raise ValueError(f"{where}: prompt must be a mapping of FamilyPrompt fields (instruction, system)")
    timeout = float(config.get("timeout", 120.0))
    table = ItemTable.load(name, Path(base_dir) / str(config["items"]))

    def make_env(**kwargs: Any) -> RemoteEnv:
        return RemoteEnv(url, name, protocol=protocol, **{"timeout": timeout, **kwargs})  # type: ignore[arg-type]

    return FamilySpec(
        name=name,
        make_env=make_env,
        load_splits=table.splits,
        categories=table.categories,
        category_of=table.category_of,
        description=str(config.get("description", f"external {protocol} server at {url}")),
        prompt=dict(prompt) if prompt else None,
        extra={"external_url": url, "protocol": protocol},
    )


def register_external(config: dict[str, Any], base_dir: str | Path = ".", source: str = "") -> FamilySpec:
    """Register an external family (again with the same name replaces it: a config may move the URL)."""
    spec = external_spec(dict(config), base_dir)
    register(
        spec,
        overwrite=True,
        source=source or f"external {spec.extra['protocol']} server {spec.extra['external_url']}",
    )
    return spec


def is_family_file(text: str) -> bool:
    return text.endswith(FAMILY_FILE_SUFFIXES)


def load_family_file(path: str | Path) -> FamilySpec:
    """Register the external family a JSON/YAML file defines; its `items` path is relative to it."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"cannot read family file {path}: {exc}") from None
    config = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    return register_external(config, path.parent, source=f"external, {path}")


def resolve_family(text: str) -> FamilySpec:
    """The family a CLI argument or config entry names: a name, `module:SPEC`, or a family file."""
    if is_family_file(text):
        return load_family_file(text)
    return get_family(text)


def is_external(spec: FamilySpec) -> bool:
    """An external family is served by its own server; `horizonrl serve` never launches one."""
    return "external_url" in spec.extra
