"""BabyAI's `info["state_key"]` and `info["progress"]`: the env state, and the mission's sub-goals.

State key
    `"x,y,dir|carried|grid"`: the agent's pose, what it carries (`colour type` or `-`) and a
    64-bit blake2b hash of minigrid's grid encoding (every cell's type, colour and door/box
    state). What the agent has seen is not part of it: two visits of one pose in one layout are
    one state even if the agent has explored more in between.

Progress
    A mission is a tree of minigrid instructions: action clauses (go to, open, pick up, put
    next to) joined by `and`, `then` and `after you`. Each clause has sub-goals, in order of
    what the clause needs:

    =============== =====================================================================
    go to X         X seen (in view); the clause done
    open X          X seen; facing X; the clause done
    pick up X       X seen; facing X; the clause done
    put A next to B A seen; carrying A; B seen; the clause done
    =============== =====================================================================

    "X seen / facing X / carrying A" count any object that matches the clause's description
    (minigrid's own `obj_set`); "the clause done" is minigrid's verifier's `a_done`/`b_done`
    for clauses of a sequence. The mission's own completion is the outcome reward, not progress,
    so a mission with S sub-goals in all has N = S - 1 progress units, and each step reports
    `(units first reached this step) / N`, excluding the completion on the step that completes
    the mission. Sub-goals already true at reset are reached without progress. So the progress
    of an episode sums to at most 1 (exactly 1 when every unit was reached after the reset).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from minigrid.envs.babyai.core.roomgrid_level import RoomGridLevel
from minigrid.envs.babyai.core.verifier import (
    GoToInstr,
    Instr,
    ObjDesc,
    OpenInstr,
    PickupInstr,
    PutNextInstr,
    SeqInstr,
)


def state_key(env: RoomGridLevel) -> str:
    """The agent's pose, what it carries and a hash of the grid (see the module docstring)."""
    x, y = (int(v) for v in env.agent_pos)
    carried = f"{env.carrying.color} {env.carrying.type}" if env.carrying is not None else "-"
    grid = hashlib.blake2b(env.grid.encode().tobytes(), digest_size=8).hexdigest()
    return f"{x},{y},{int(env.agent_dir)}|{carried}|{grid}"


def _clauses(instr: Instr, done: bool) -> list[tuple[Instr, bool]]:
    """The action clauses of a mission with whether each is done (its sequence says so)."""
    if isinstance(instr, SeqInstr):
        a_done = done or instr.a_done == "success"  # type: ignore[attr-defined]  # set by reset_verifier
        b_done = done or instr.b_done == "success"  # type: ignore[attr-defined]
        return _clauses(instr.instr_a, a_done) + _clauses(instr.instr_b, b_done)
    return [(instr, done)]


def _mission(env: RoomGridLevel) -> Instr:
    """The level's instruction tree (minigrid sets `instrs` when it generates the mission)."""
    mission: Instr = env.instrs  # type: ignore[attr-defined]
    return mission


def _matches(desc: ObjDesc, obj: object) -> bool:
    return obj is not None and any(obj is o for o in desc.obj_set)


@dataclass
class MissionProgress:
    """The sub-goals of one episode's mission, reached so far (see the module docstring)."""

    reached: set[tuple[int, str]] = field(default_factory=set)
    units: int = 1
    """N: the mission's sub-goals less its own completion (at least 1, so the division is safe)."""

    @classmethod
    def start(cls, env: RoomGridLevel, visible: list[object]) -> MissionProgress:
        """Track `env`'s mission from its reset; what is true already is reached, without progress."""
        tracker = cls()
        clauses = _clauses(_mission(env), False)
        total = sum(len(cls._goals(clause, env, visible, done)) for clause, done in clauses)
        tracker.units = max(1, total - 1)
        tracker.update(env, visible, success=False)
        return tracker

    def update(self, env: RoomGridLevel, visible: list[object], *, success: bool) -> float:
        """Mark what holds now (`visible`: the objects in view); the progress of this step."""
        new = 0
        for k, (clause, done) in enumerate(_clauses(_mission(env), success)):
            for name, holds in self._goals(clause, env, visible, done).items():
                if holds and (k, name) not in self.reached:
                    self.reached.add((k, name))
                    new += 0 if success and name == "done" else 1
        return new / self.units

    @staticmethod
    def _goals(clause: Instr, env: RoomGridLevel, visible: list[object], done: bool) -> dict[str, bool]:
        """Sub-goal name -> whether it holds now, for one action clause."""
        front = env.grid.get(*env.front_pos)

        def seen(desc: ObjDesc) -> bool:
            return any(_matches(desc, obj) for obj in visible)

        if isinstance(clause, PutNextInstr):
            move, fixed = clause.desc_move, clause.desc_fixed
            return {
                "seen move": seen(move) or _matches(move, env.carrying),
                "carrying": _matches(move, env.carrying),
                "seen fixed": seen(fixed),
                "done": done,
            }
        if isinstance(clause, OpenInstr | PickupInstr):
            desc = clause.desc
            facing = _matches(desc, front) or _matches(desc, env.carrying)
            return {"seen": seen(desc), "facing": facing, "done": done}
        if isinstance(clause, GoToInstr):
            return {"seen": seen(clause.desc), "done": done}
        return {"done": done}
