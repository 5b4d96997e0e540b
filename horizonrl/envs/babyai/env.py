"""`BabyAIEnv`: one minigrid BabyAI level behind the text `TextEnv` API (see the package docstring)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from minigrid.core.actions import Actions
from minigrid.core.world_object import WorldObj
from minigrid.envs.babyai.core.roomgrid_level import RoomGridLevel

from horizonrl.envs.babyai import levels as lv
from horizonrl.envs.babyai.planner import plan_to_face
from horizonrl.envs.babyai.progress import MissionProgress, state_key
from horizonrl.envs.babyai.text import (
    NAMED_TYPES,
    ObjectNames,
    Pos,
    Seen,
    door_state,
    egocentric,
    is_locked,
    is_open,
    render,
    visible_cells,
    wall_distances,
)
from horizonrl.envs.babyai.view import grid_view
from horizonrl.envs.core import StepResult, make_info

INVALID = "Invalid action"
"""How the answer to an action that cannot be done begins (`info["invalid_action"]` then)."""
_COLOR = r"(?P<color>red|green|blue|purple|yellow|grey|gray)"
_OBJ = rf"(?:the |a |an )?{_COLOR} (?P<type>ball|box|key|door)(?: (?P<n>\d+))?"
_COMMANDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(rf"^(?:{pattern})$"))
    for name, pattern in (
        ("turn left", r"turn left|left"),
        ("turn right", r"turn right|right"),
        ("move forward", r"(?:move|go|step) (?:forward|ahead)|forward"),
        ("check", r"check (?:the )?(?:available )?actions|available actions"),
        ("drop", r"drop(?: (?:it|" + _OBJ + "))?"),
        ("toggle", r"toggle"),
        ("toggle through", rf"(?:toggle|open|unlock) and go through {_OBJ}"),
        ("go through", rf"go through {_OBJ}"),
        ("go to", rf"go to {_OBJ}"),
        ("pickup", rf"pick ?up {_OBJ}"),
        ("pickup front", r"pick ?up(?: it)?"),
    )
)


@dataclass
class _Episode:
    item_id: str
    level: lv.Level
    seed: int
    reward: float = 0.0
    success: bool = False
    terminated: bool = False
    truncated: bool = False


def normalize_action(action: str) -> str:
    text = " ".join(str(action).lower().replace("_", " ").split())
    return text.strip(" .!\"'`")


class BabyAIEnv:
    """Text BabyAI: observations describe the agent's view, macro actions are planned.

    `on_primitive`, when given, is called with each minigrid action right after it is
    executed (the expert uses it to keep minigrid's BabyAI bot in step with a macro).
    """

    def __init__(self, *, on_primitive: Callable[[int], None] | None = None) -> None:
        self.on_primitive = on_primitive
        self._levels: dict[int, RoomGridLevel] = {}
        self._env: RoomGridLevel | None = None
        self._ep: _Episode | None = None
        self._names = ObjectNames()
        self._where: dict[int, Pos] = {}
        self._known: set[Pos] = set()
        self._visible: list[Seen] = []
        self._visible_cells: set[Pos] = set()
        self._progress = MissionProgress()

    # -- TextEnv API ---------------------------------------------------------------------

    def reset(self, item_id: str, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start `item_id`. The level and its seed are fixed by the id; `seed` is accepted and ignored."""
        level, level_seed = lv.level_and_seed(item_id)
        if level.number not in self._levels:
            self._levels[level.number] = lv.make_level(level)
        self._env = self._levels[level.number]
        lv.reset_level(self._env, level_seed)
        self._ep = _Episode(item_id, level, level_seed)
        self._names, self._where, self._known = ObjectNames(), {}, set()
        self._look()
        self._progress = MissionProgress.start(self._env, [s.obj for s in self._visible])
        return self._render(), self._info()

    def step(self, action: str) -> StepResult:
        ep = self._episode()
        if ep.terminated or ep.truncated:
            return self._result("The episode is over; reset to play again.", 0.0)
        before = ep.reward
        text = normalize_action(action)
        for name, pattern in _COMMANDS:
            match = pattern.match(text)
            if match:
                feedback = self._dispatch(name, match)
                break
        else:
            shown = text if len(text) <= 60 else text[:60] + "..."
            feedback = f"{INVALID}: '{shown}' is not an action I know."
        progress = self._progress.update(self._minigrid(), [s.obj for s in self._visible], success=ep.success)
        extra = {"invalid_action": feedback.startswith(INVALID), "progress": progress}
        return self._result(feedback + self._ending(), ep.reward - before, **extra)

    def available_actions(self) -> list[str]:
        self._episode()
        env = self._minigrid()
        actions = ["turn left", "turn right"]
        if self._passable(self._front_pos()):
            actions.append("move forward")
        for seen in self._visible:
            if seen.obj.type == "door":
                actions.append(f"go to {seen.name}")
                if is_open(seen.obj):
                    actions.append(f"go through {seen.name}")
                elif not is_locked(seen.obj) or self._has_key_for(seen.obj):
                    actions.append(f"toggle and go through {seen.name}")
            else:
                actions.append(f"go to {seen.name}")
                if env.carrying is None:
                    actions.append(f"pickup {seen.name}")
        front = self._front()
        if env.carrying is not None and front is None:
            actions.append("drop")
        if front is not None and (
            front.type == "box"
            or (front.type == "door" and (not is_locked(front) or self._has_key_for(front)))
        ):
            actions.append("toggle")
        actions.append("check available actions")
        return actions

    def close(self) -> None:
        for env in self._levels.values():
            env.close()
        self._levels.clear()
        self._env = None

    # -- what the expert may ask ---------------------------------------------------------

    @property
    def minigrid(self) -> RoomGridLevel:
        """The running minigrid level (the expert's local copy drives minigrid's bot with it)."""
        return self._minigrid()

    def name_of(self, obj: WorldObj) -> str | None:
        """The name the agent knows `obj` by, or None if it has not seen it."""
        return self._names.name(obj) if self._names.known(obj) else None

    @property
    def known_cells(self) -> set[Pos]:
        """Cells the agent has seen this episode."""
        return set(self._known)

    def known_objects(self) -> list[tuple[str, WorldObj]]:
        """`(name, object)` of every object whose position the agent knows, in naming order."""
        found = [(name, self._names.get(name)) for name in self._names.names()]
        return [(name, obj) for name, obj in found if obj is not None and id(obj) in self._where]

    def plan_to(self, obj: WorldObj) -> list[Actions] | None:
        """Primitives that bring the agent to face the known object `obj`, or None."""
        pos = self._where.get(id(obj))
        if pos is None:
            return None
        env = self._minigrid()
        start = (int(env.agent_pos[0]), int(env.agent_pos[1]), int(env.agent_dir))
        return plan_to_face(start, pos, self._passable)

    # -- actions -------------------------------------------------------------------------

    def _dispatch(self, name: str, match: re.Match[str]) -> str:
        env = self._minigrid()
        if name == "turn left":
            self._do(Actions.left)
            return "You turned left."
        if name == "turn right":
            self._do(Actions.right)
            return "You turned right."
        if name == "move forward":
            if not self._passable(self._front_pos()):
                return f"{INVALID}: you cannot move forward, {self._front_text()} is in front of you."
            self._do(Actions.forward)
            return "You moved forward."
        if name == "check":
            return "You check the available actions."
        if name == "drop":
            if env.carrying is None:
                return f"{INVALID}: you are not carrying anything to drop."
            if self._front() is not None:
                return f"{INVALID}: you cannot drop here, {self._front_text()} is in front of you."
            carried = self._names.name(env.carrying)
            self._do(Actions.drop)
            return f"You dropped the {carried}."
        if name == "toggle":
            return self._toggle()
        if name == "pickup front":
            front = self._front()
            if front is None or not front.can_pickup():
                return f"{INVALID}: there is nothing to pick up in front of you ({self._front_text()})."
            return self._pickup(front)
        target, error = self._resolve(match)
        if target is None:
            return f"{INVALID}: {error}"
        if name == "go to":
            return self._go_to(target)
        if name == "pickup":
            return self._pickup(target)
        return self._go_through(target, toggle_first=name == "toggle through")

    def _toggle(self) -> str:
        front = self._front()
        if front is None or front.type not in ("door", "box"):
            return f"{INVALID}: there is nothing to toggle in front of you ({self._front_text()})."
        name = self._names.name(front)
        if front.type == "door" and is_locked(front) and not self._has_key_for(front):
            return f"{INVALID}: the {name} is locked; you need to carry a {front.color} key."
        was = door_state(front) if front.type == "door" else ""
        contents = getattr(front, "contains", None)
        self._do(Actions.toggle)
        if front.type == "box":
            inside = f"it held a {contents.color} {contents.type}" if contents is not None else "it was empty"
            return f"You opened the {name}; {inside}."
        verb = {"locked": "unlocked and opened", "closed": "opened", "open": "closed"}[was]
        return f"You {verb} the {name}."

    def _go_to(self, target: WorldObj) -> str:
        name = self._names.name(target)
        plan = self.plan_to(target)
        if plan is None:
            return f"{INVALID}: you know no free path to the {name} yet."
        if not plan:
            self._do(Actions.done)  # a no-op step, so that minigrid checks the mission
            return f"You are already facing the {name}."
        self._run(plan)
        return f"You went to the {name} ({len(plan)} steps)."

    def _pickup(self, target: WorldObj) -> str:
        env = self._minigrid()
        name = self._names.name(target)
        if not target.can_pickup():
            return f"{INVALID}: you cannot pick up the {name}."
        if env.carrying is not None:
            carried = self._names.name(env.carrying)
            return f"{INVALID}: you are already carrying the {carried}; drop it first."
        plan = self.plan_to(target)
        if plan is None:
            return f"{INVALID}: you know no free path to the {name} yet."
        if self._run(plan):
            self._do(Actions.pickup)
        return f"You picked up the {name}." if env.carrying is target else f"You went towards the {name}."

    def _go_through(self, door: WorldObj, *, toggle_first: bool) -> str:
        name = self._names.name(door)
        if door.type != "door":
            return f"{INVALID}: the {name} is not a door."
        if is_locked(door) and not self._has_key_for(door):
            return f"{INVALID}: the {name} is locked; you need to carry a {door.color} key."
        if not is_open(door) and not toggle_first:
            return f"{INVALID}: the {name} is {door_state(door)}; use 'toggle and go through {name}'."
        plan = self.plan_to(door)
        if plan is None:
            return f"{INVALID}: you know no free path to the {name} yet."
        if not self._run(plan):
            return f"You went towards the {name}."
        if not is_open(door):
            self._do(Actions.toggle)
        for _ in range(2):  # into the doorway, then one step beyond if it is free
            if self._over() or not self._passable(self._front_pos()):
                break
            self._do(Actions.forward)
        return f"You went through the {name}."

    def _resolve(self, match: re.Match[str]) -> tuple[WorldObj | None, str]:
        color = match["color"].replace("gray", "grey")
        type_, n = match["type"], match["n"]
        candidates = self._names.matching(color, type_)
        if n is not None:
            name = f"{color} {type_} {n}"
            if name not in candidates:
                return None, f"you have not seen a {name}."
        elif len(candidates) == 1:
            name = candidates[0]
        elif not candidates:
            return None, f"you have not seen a {color} {type_}."
        else:
            return None, f"which {color} {type_}? Say one of: {', '.join(candidates)}."
        obj = self._names.get(name)
        assert obj is not None
        if obj is self._minigrid().carrying:
            return None, f"you are carrying the {name}."
        if id(obj) not in self._where:
            return None, f"you do not know where the {name} is now."
        return obj, ""

    # -- primitives and state ------------------------------------------------------------

    def _run(self, plan: list[Actions]) -> bool:
        """Execute primitives until done or the episode ends; True if all were executed."""
        for action in plan:
            if self._over():
                return False
            self._do(action)
        return not self._over()

    def _do(self, action: Actions) -> None:
        ep, env = self._episode(), self._minigrid()
        _, reward, terminated, truncated, _ = env.step(action)
        ep.reward += float(reward)
        if terminated:
            ep.terminated, ep.success = True, float(reward) > 0
        elif truncated:
            ep.truncated = True
        self._look()
        if self.on_primitive is not None:
            self.on_primitive(int(action))

    def _look(self) -> None:
        """Update what the agent knows from what it sees now (names, positions, known cells)."""
        env = self._minigrid()
        cells = list(visible_cells(env))
        self._visible_cells = set(cells)
        self._known.update(cells)
        for key in [k for k, pos in self._where.items() if pos in self._visible_cells]:
            del self._where[key]
        if env.carrying is not None:
            self._names.name(env.carrying)
            self._where.pop(id(env.carrying), None)
        seen = []
        for pos in sorted(cells, key=lambda p: self._sort_key(env, p)):
            obj = env.grid.get(*pos)
            if obj is None or obj.type not in NAMED_TYPES:
                continue
            self._where[id(obj)] = pos
            forward, right = egocentric(env, pos)
            seen.append(Seen(self._names.name(obj), obj, pos, forward, right))
        self._visible = seen

    @staticmethod
    def _sort_key(env: RoomGridLevel, pos: Pos) -> tuple[int, int, int]:
        forward, right = egocentric(env, pos)
        return abs(forward) + abs(right), forward, right

    def _passable(self, pos: Pos) -> bool:
        env = self._minigrid()
        if pos not in self._known:
            return False
        cell = env.grid.get(*pos)
        return cell is None or (cell.type == "door" and is_open(cell))

    def _front_pos(self) -> Pos:
        env = self._minigrid()
        x, y = env.front_pos
        return int(x), int(y)

    def _front(self) -> WorldObj | None:
        return self._minigrid().grid.get(*self._front_pos())

    def _front_text(self) -> str:
        front = self._front()
        if front is None:
            return "nothing"
        if front.type in NAMED_TYPES:
            state = f" ({door_state(front)})" if front.type == "door" else ""
            return f"the {self._names.name(front)}{state}"
        return f"a {front.type}"

    def _has_key_for(self, door: WorldObj) -> bool:
        carrying = self._minigrid().carrying
        return carrying is not None and carrying.type == "key" and carrying.color == door.color

    def _over(self) -> bool:
        ep = self._episode()
        return ep.terminated or ep.truncated

    def _ending(self) -> str:
        ep = self._episode()
        if ep.success:
            return f" You completed the mission (reward {ep.reward:.3f})."
        if ep.terminated:
            return " The mission failed."
        if ep.truncated:
            return " You ran out of steps."
        return ""

    def _render(self, feedback: str = "") -> str:
        env = self._minigrid()
        front = self._front_text()
        if self._front() is None:
            front = "nothing, the way is free" if self._passable(self._front_pos()) else "nothing"
        carrying = f"the {self._names.name(env.carrying)}" if env.carrying is not None else None
        walls = wall_distances(env, self._visible_cells)
        return render(env.mission, self._visible, walls, front, carrying, self.available_actions(), feedback)

    def _info(self, **extra: Any) -> dict[str, Any]:
        ep, env = self._episode(), self._minigrid()
        return make_info(
            ep.success,
            ep.reward if ep.success else 0.0,
            ep.level.category,
            level=ep.level.name,
            level_seed=ep.seed,
            mission=str(env.mission),
            steps=int(env.step_count),
            max_steps=int(env.max_steps),
            grid=grid_view(env),
            state_key=state_key(env),
            **extra,
        )

    def _result(self, feedback: str, reward: float, **extra: Any) -> StepResult:
        ep = self._episode()
        info = self._info(**extra)
        return StepResult(self._render(feedback), float(reward), ep.terminated, ep.truncated, info)

    def _episode(self) -> _Episode:
        if self._ep is None:
            raise RuntimeError("call reset() before step()")
        return self._ep

    def _minigrid(self) -> RoomGridLevel:
        if self._env is None:
            raise RuntimeError("call reset() first")
        return self._env
