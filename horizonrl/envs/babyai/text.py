"""What the BabyAI agent sees, in words: visible cells, object names, the observation text.

Positions are egocentric: `forward` counts cells straight ahead, `right` cells to the
right (negative: left). Visibility is minigrid's own: the 7x7 view in front of the agent
with `gen_obs_grid`'s mask, so walls and closed doors hide what lies behind them.

Objects are named `<colour> <type> <n>` (`red ball 1`, `grey door 2`): `n` numbers the
objects of the same colour and type in the order the agent first saw them in this
episode (nearest first when several appear at once), so a name never changes during an
episode, and actions use the same names as the observation.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from minigrid.core.world_object import WorldObj
from minigrid.minigrid_env import MiniGridEnv

Pos = tuple[int, int]

NAMED_TYPES = ("ball", "box", "key", "door")
"""Object types that get names and can be acted on."""


def egocentric(env: MiniGridEnv, pos: Pos) -> tuple[int, int]:
    """`(forward, right)` of world cell `pos` relative to the agent."""
    dx, dy = pos[0] - int(env.agent_pos[0]), pos[1] - int(env.agent_pos[1])
    fx, fy = (int(v) for v in env.dir_vec)
    rx, ry = (int(v) for v in env.right_vec)
    return dx * fx + dy * fy, dx * rx + dy * ry


def visible_cells(env: MiniGridEnv) -> Iterator[Pos]:
    """World positions the agent sees now (minigrid's view and visibility mask), agent cell excluded."""
    _, vis_mask = env.gen_obs_grid()
    view = env.agent_view_size
    f_vec, r_vec = np.asarray(env.dir_vec), np.asarray(env.right_vec)
    top_left = np.asarray(env.agent_pos) + f_vec * (view - 1) - r_vec * (view // 2)
    for vj in range(view):
        for vi in range(view):
            if not vis_mask[vi, vj] or (vi == view // 2 and vj == view - 1):
                continue
            x, y = (int(v) for v in top_left - f_vec * vj + r_vec * vi)
            if 0 <= x < env.width and 0 <= y < env.height:
                yield x, y


def describe_offset(forward: int, right: int) -> str:
    """`2 steps forward and 1 step to the left`, or `right in front of you`."""

    def steps(n: int) -> str:
        return f"{n} step{'s' if n != 1 else ''}"

    if forward == 1 and right == 0:
        return "right in front of you"
    parts = []
    if forward > 0:
        parts.append(f"{steps(forward)} forward")
    elif forward < 0:
        parts.append(f"{steps(-forward)} behind you")
    if right > 0:
        parts.append(f"{steps(right)} to the right")
    elif right < 0:
        parts.append(f"{steps(-right)} to the left")
    return " and ".join(parts) or "where you stand"


def is_open(obj: WorldObj) -> bool:
    return bool(getattr(obj, "is_open", False))


def is_locked(obj: WorldObj) -> bool:
    return bool(getattr(obj, "is_locked", False))


def door_state(obj: WorldObj) -> str:
    if is_locked(obj):
        return "locked"
    return "open" if is_open(obj) else "closed"


class ObjectNames:
    """Episode-stable `<colour> <type> <n>` names of the objects the agent has seen."""

    def __init__(self) -> None:
        self._by_obj: dict[int, str] = {}
        self._by_name: dict[str, WorldObj] = {}
        self._counts: dict[tuple[str, str], int] = {}

    def name(self, obj: WorldObj) -> str:
        """The object's name, given on first sight."""
        key = id(obj)
        if key not in self._by_obj:
            kind = (obj.color, obj.type)
            self._counts[kind] = self._counts.get(kind, 0) + 1
            name = f"{obj.color} {obj.type} {self._counts[kind]}"
            self._by_obj[key] = name
            self._by_name[name] = obj
        return self._by_obj[key]

    def known(self, obj: WorldObj) -> bool:
        return id(obj) in self._by_obj

    def get(self, name: str) -> WorldObj | None:
        return self._by_name.get(name)

    def names(self) -> list[str]:
        return list(self._by_name)

    def matching(self, color: str, type_: str) -> list[str]:
        """Names of known objects of that colour and type, in numbering order."""
        n = self._counts.get((color, type_), 0)
        return [f"{color} {type_} {i}" for i in range(1, n + 1)]


@dataclass(frozen=True)
class Seen:
    """One visible named object."""

    name: str
    obj: WorldObj
    pos: Pos
    forward: int
    right: int

    def describe(self) -> str:
        state = f" ({door_state(self.obj)})" if self.obj.type == "door" else ""
        return f"{self.name}{state}: {describe_offset(self.forward, self.right)}"


def wall_distances(env: MiniGridEnv, visible: set[Pos]) -> dict[str, int]:
    """Distance to the first visible wall straight ahead, to the left and to the right."""
    out = {}
    pos = np.asarray(env.agent_pos)
    for label, vec in (
        ("forward", env.dir_vec),
        ("to the left", -env.right_vec),
        ("to the right", env.right_vec),
    ):
        for k in range(1, env.agent_view_size):
            x, y = (int(v) for v in pos + k * np.asarray(vec))
            if (x, y) not in visible:
                break
            cell = env.grid.get(x, y)
            if cell is not None and cell.type == "wall":
                out[label] = k
                break
    return out


def render(
    mission: str,
    seen: Sequence[Seen],
    walls: dict[str, int],
    front: str,
    carrying: str | None,
    actions: Sequence[str],
    feedback: str = "",
) -> str:
    """The observation text shown to the agent."""
    lines = [feedback] if feedback else []
    lines.append(f"Your goal: {mission}")
    if seen:
        lines.append("You see:")
        lines += [f"- {s.describe()}" for s in seen]
    else:
        lines.append("You see no objects or doors.")
    if walls:
        lines.append(
            "Walls: "
            + ", ".join(f"{k} step{'s' if k != 1 else ''} {where}" for where, k in walls.items())
            + "."
        )
    lines.append(f"In front of you: {front}.")
    lines.append(f"You are carrying {carrying}." if carrying else "You are carrying nothing.")
    lines.append("Available actions: " + ", ".join(actions))
    return "\n".join(lines)
