"""The families a run names, resolved before anything looks them up.

A config may name a family by its name (built-in or an installed plugin's), by a reference
`module:SPEC`, or by an external family's file; `env.plugins` modules are imported first and
`env.external` families registered (their `items` paths relative to the working directory).
`resolve_config_families(cfg)` returns the config with every family written as its registered
name, which is what item ids, env pools and reports use.
"""

from __future__ import annotations

from dataclasses import replace

from horizonrl.config import Config
from horizonrl.envs.registry import PluginError, load_plugins
from horizonrl.server.external import register_external, resolve_family


def resolve_config_families(cfg: Config) -> Config:
    """`cfg` with `data.families`, `eval.families`, `data.expert_kwargs`, `env.servers` and `env.kwargs`
    keyed by names."""
    try:
        load_plugins(cfg.env.plugins)
        for entry in cfg.env.external:
            register_external(dict(entry))

        def name(family: str) -> str:
            return resolve_family(family).name

        return replace(
            cfg,
            data=replace(
                cfg.data,
                families=[name(f) for f in cfg.data.families],
                expert_kwargs={name(k): v for k, v in cfg.data.expert_kwargs.items()},
            ),
            eval=replace(cfg.eval, families=[name(f) for f in cfg.eval.families]),
            env=replace(
                cfg.env,
                servers={name(k): v for k, v in cfg.env.servers.items()},
                kwargs={name(k): v for k, v in cfg.env.kwargs.items()},
            ),
        )
    except (PluginError, KeyError, ValueError) as exc:
        raise SystemExit(f"horizonrl train: {exc.args[0] if exc.args else exc}") from None
