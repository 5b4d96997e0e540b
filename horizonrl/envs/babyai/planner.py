"""Shortest primitive-action plans over the part of the grid the agent knows.

A macro action (`go to red ball 1`) is compiled into minigrid primitives (turn left,
turn right, move forward) by breadth-first search over agent states `(x, y, direction)`,
each primitive costing one step, so the plan uses the fewest steps minigrid will count.
Only cells the agent has seen are entered, and only when they are free or an open door:
the planner never walks through unseen space, objects or closed doors.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from minigrid.core.actions import Actions

Pos = tuple[int, int]
State = tuple[int, int, int]

DIR_TO_VEC: tuple[Pos, ...] = ((1, 0), (0, 1), (-1, 0), (0, -1))
"""minigrid's directions: 0 east, 1 south, 2 west, 3 north."""


def front_of(x: int, y: int, d: int) -> Pos:
    dx, dy = DIR_TO_VEC[d]
    return x + dx, y + dy


def plan_to_face(
    start: State, target: Pos, passable: Callable[[Pos], bool], *, max_states: int = 100_000
) -> list[Actions] | None:
    """Fewest primitives that leave the agent facing `target` from an adjacent cell.

    `passable(pos)` says whether the agent may stand on `pos`; the start cell always
    counts as passable. Returns `[]` when the agent already faces `target`, None when no
    plan exists over the known cells.
    """
    if front_of(*start) == target:
        return []
    parents: dict[State, tuple[State, Actions] | None] = {start: None}
    queue = deque([start])
    while queue and len(parents) < max_states:
        state = queue.popleft()
        x, y, d = state
        successors = (
            ((x, y, (d - 1) % 4), Actions.left),
            ((x, y, (d + 1) % 4), Actions.right),
            ((*front_of(x, y, d), d), Actions.forward),
        )
        for nxt, action in successors:
            if nxt in parents:
                continue
            if action == Actions.forward and (nxt[:2] == target or not passable(nxt[:2])):
                continue
            parents[nxt] = (state, action)
            if front_of(*nxt) == target:
                return _unwind(parents, nxt)
            queue.append(nxt)
    return None


def _unwind(parents: dict[State, tuple[State, Actions] | None], state: State) -> list[Actions]:
    actions: list[Actions] = []
    link = parents[state]
    while link is not None:
        state, action = link
        actions.append(action)
        link = parents[state]
    return actions[::-1]
