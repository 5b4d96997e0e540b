"""Environment families: the `TextEnv` contract, the registry, and what writing a family needs.

    from horizonrl.envs import FamilySpec, StepResult, TextEnv

`TextEnv` here is the base class with defaults (`horizonrl.envs.base`); the contract every env,
local or remote, satisfies is the Protocol `horizonrl.envs.core.TextEnv`.
"""

from horizonrl.envs.base import TextEnv
from horizonrl.envs.core import EnvError, StepResult, UnknownItemError, make_info
from horizonrl.envs.items import ItemTable
from horizonrl.envs.registry import FamilySpec, get_family, register

__all__ = [
    "EnvError",
    "FamilySpec",
    "ItemTable",
    "StepResult",
    "TextEnv",
    "UnknownItemError",
    "get_family",
    "make_info",
    "register",
]
