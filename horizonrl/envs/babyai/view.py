"""The agent's view as a compact grid for `info["grid"]` (drawn by the viewer's replay).

    {"rows": ["WeWeWe....", ...], "agent": [3, 6], "carrying": "Ky"}

`rows` is minigrid's egocentric view (`agent_view_size` rows, farthest first; the agent sits at
column `agent[0]` of the last row, facing up), two characters per cell: the kind, then the
colour (`.` when it has none).

    kind   .  empty   W wall   F floor   D open door   C closed door   L locked door
           K key      A ball   B box     G goal        V lava          ?  not visible (colour ?)
    colour r red  g green  b blue  p purple  y yellow  e grey

`carrying` is the code of what the agent holds, or null. About 100 bytes per turn.
"""

from __future__ import annotations

from typing import Any

from minigrid.core.world_object import Door, WorldObj
from minigrid.minigrid_env import MiniGridEnv

_KINDS = {"wall": "W", "floor": "F", "key": "K", "ball": "A", "box": "B", "goal": "G", "lava": "V"}
_COLOURS = {"red": "r", "green": "g", "blue": "b", "purple": "p", "yellow": "y", "grey": "e"}


def cell_code(obj: WorldObj | None) -> str:
    if obj is None:
        return ".."
    if isinstance(obj, Door):
        kind = "D" if obj.is_open else "L" if obj.is_locked else "C"
    else:
        kind = _KINDS.get(obj.type, "?")
    return kind + _COLOURS.get(obj.color, ".")


def grid_view(env: MiniGridEnv) -> dict[str, Any]:
    """What the agent sees now, as `info["grid"]` (see the module docstring)."""
    grid, visible = env.gen_obs_grid()  # rotated so that the agent faces up
    size = grid.width
    agent = (size // 2, size - 1)
    rows = []
    for j in range(size):
        row = ""
        for i in range(size):
            if (i, j) == agent:
                row += ".."  # the agent's own cell (gen_obs_grid puts what it carries there)
            elif not visible[i, j]:
                row += "??"
            else:
                row += cell_code(grid.get(i, j))
        rows.append(row)
    return {
        "rows": rows,
        "agent": list(agent),
        "carrying": cell_code(env.carrying) if env.carrying is not None else None,
    }
