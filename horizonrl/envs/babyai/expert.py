"""The BabyAI expert: minigrid's BabyAI bot, translated into our text actions.

How it works from the TextEnv API alone: minigrid generates a level deterministically
from its seed, so the expert re-creates the item locally (its own `BabyAIEnv`, the
"shadow") and runs `minigrid.utils.baby_ai_bot.BabyAIBot` on the shadow's minigrid
level. Each turn it

1. checks that the observation it received equals the shadow's own observation (so a
   different minigrid version, or a missed step, is caught at once: `EnvError`);
2. asks the bot's plan what to do and phrases it as one text action, preferring macros:
   when the bot walks towards a known object or door, `go to <name>` (or
   `pickup <name>` when it means to pick it up); otherwise the bot's own primitive
   (`turn left`, `move forward`, `drop`, `toggle`, ...);
3. plays that action on the shadow, which reports every minigrid primitive the macro
   compiled to; each is fed back to the bot (`replan(action_taken)`, the bot's advising
   mode), so the bot's plan follows the path our planner took.

Two levels need help the bot lacks (its docstring names them): `PutNextS7N4Carrying`
(the agent starts carrying the object to move: the bot's "go to it and pick it up"
subgoals are dropped) and `KeyInBox` (the key is inside a box: the expert opens the box
first, then starts the bot).
"""

from __future__ import annotations

from typing import Any

from minigrid.core.actions import Actions
from minigrid.core.world_object import WorldObj
from minigrid.envs.babyai.core.verifier import ObjDesc, PutNextInstr
from minigrid.utils.baby_ai_bot import BabyAIBot, DropSubgoal, GoNextToSubgoal, OpenSubgoal, PickupSubgoal

from horizonrl.envs.babyai.env import BabyAIEnv
from horizonrl.envs.babyai.planner import plan_to_face
from horizonrl.envs.babyai.text import is_locked, is_open
from horizonrl.envs.core import EnvError

_PRIMITIVE_TEXT = {
    Actions.left: "turn left",
    Actions.right: "turn right",
    Actions.forward: "move forward",
    Actions.pickup: "pickup",
    Actions.drop: "drop",
    Actions.toggle: "toggle",
}


MAX_PUSHES_PER_REPLAN = 100
"""The bot can push subgoals forever in rare layouts; past this many in one replan it gives up."""


class _BoundedStack(list[object]):
    """The bot's subgoal stack, raising when one replan pushes more than `MAX_PUSHES_PER_REPLAN`."""

    pushes = 0

    def append(self, item: object) -> None:
        self.pushes += 1
        if self.pushes > MAX_PUSHES_PER_REPLAN:
            raise RuntimeError(f"the bot pushed {self.pushes} subgoals in one replan (a planning loop)")
        super().append(item)


class BabyAIExpert:
    """Plays BabyAI items to success; see the module docstring for how it stays in sync."""

    def __init__(self) -> None:
        self.shadow = BabyAIEnv(on_primitive=self._after_primitive)
        self.bot: BabyAIBot | None = None
        self.suggested: int | None = None
        self.expected = ""
        self.broken: str | None = None
        self.unsticking = False

    def reset(self, item_id: str, observation: str, info: dict[str, Any]) -> None:
        self.bot, self.suggested, self.broken, self.unsticking = None, None, None, False
        self.expected, _ = self.shadow.reset(item_id)
        self._check_sync(observation)
        if self._key_box() is None:
            self._start_bot()

    def act(self, observation: str) -> tuple[str, str]:
        self._check_sync(observation)
        thought, action = self._choose()
        self.expected = self.shadow.step(action).observation
        return thought, action

    # -- choosing ------------------------------------------------------------------------

    def _choose(self) -> tuple[str, str]:
        box = self._key_box()
        if self.bot is None and box is not None:
            return self._open_key_box(box)
        if self.bot is None and self.broken is None:
            self._start_bot()
        if self.broken is not None or self.unsticking:  # unstick by hand, then restart the bot
            self.bot, self.broken = None, None
            thought, text = self._unstick()
            self.unsticking = text.startswith("pickup")  # next: unlock the door with that key
            return thought, text
        assert self.bot is not None
        action = self.suggested
        env = self.shadow.minigrid
        if action == Actions.done:  # the bot thinks it is done: a no-op lets minigrid check
            front = env.grid.get(*env.front_pos)
            name = self.shadow.name_of(front) if front is not None else None
            if name:
                return f"I face the {name}, which is what the mission asks.", f"go to {name}"
            return "I think the mission is done; I turn to check.", "turn left"
        subgoal = self.bot.stack[-1] if self.bot.stack else None
        if action in (Actions.left, Actions.right, Actions.forward) and isinstance(subgoal, GoNextToSubgoal):
            macro = self._macro(subgoal)
            if macro is not None:
                return macro
        if action == Actions.pickup:
            front = env.grid.get(*env.front_pos)
            name = self.shadow.name_of(front) if front is not None else None
            if name:
                return f"The {name} is right in front of me; I pick it up.", f"pickup {name}"
        if action is None or Actions(action) not in _PRIMITIVE_TEXT:
            return "I am not sure what to do; I look around.", "turn left"
        text = _PRIMITIVE_TEXT[Actions(action)]
        return _primitive_thought(text, subgoal), text

    def _macro(self, subgoal: GoNextToSubgoal) -> tuple[str, str] | None:
        """`go to X` / `pickup X` when the bot is walking to a known object X."""
        assert self.bot is not None
        if subgoal.reason not in (None, "Open"):
            return None
        target: WorldObj | None
        if isinstance(subgoal.datum, ObjDesc):
            target, _ = self.bot._find_obj_pos(subgoal.datum)
        elif isinstance(subgoal.datum, WorldObj):
            target = subgoal.datum
        else:
            target = self.shadow.minigrid.grid.get(*subgoal.datum)
        name = self.shadow.name_of(target) if target is not None else None
        if target is None or name is None or not self.shadow.plan_to(target):
            return None
        below = self.bot.stack[-2] if len(self.bot.stack) > 1 else None
        if (
            isinstance(below, OpenSubgoal)
            and target.type == "door"
            and not is_open(target)
            and (not is_locked(target) or self._carries_key_for(target))
        ):
            return f"I open the {name} and go through it.", f"toggle and go through {name}"
        if isinstance(below, PickupSubgoal) and target.can_pickup() and self.shadow.minigrid.carrying is None:
            return f"I need the {name}; I go and pick it up.", f"pickup {name}"
        why = "to open it" if subgoal.reason == "Open" else "it is where I need to be"
        return f"I go to the {name}: {why}.", f"go to {name}"

    def _carries_key_for(self, door: WorldObj) -> bool:
        carrying = self.shadow.minigrid.carrying
        return carrying is not None and carrying.type == "key" and carrying.color == door.color

    # -- the bot -------------------------------------------------------------------------

    def _start_bot(self) -> None:
        env = self.shadow.minigrid
        self.bot = BabyAIBot(env)
        self.bot.stack = _BoundedStack(self.bot.stack)
        for x, y in self.shadow.known_cells:  # a restarted bot remembers what the agent saw
            self.bot.vis_mask[x, y] = True
        instrs = getattr(env, "instrs", None)
        if (
            isinstance(instrs, PutNextInstr)
            and env.carrying is not None
            and any(obj is env.carrying for obj in instrs.desc_move.obj_set)
        ):
            # Already holding the object to move: skip "go to it" and "pick it up".
            del self.bot.stack[-2:]
        elif env.carrying is not None:  # a restarted bot: put down what we hold first
            drop_pos = self.bot._find_drop_pos()
            if drop_pos is not None:
                self.bot.stack.append(DropSubgoal(self.bot))
                self.bot.stack.append(GoNextToSubgoal(self.bot, drop_pos))
        self._replan(None)

    def _after_primitive(self, action: int) -> None:
        if self.bot is not None and self.broken is None:
            self._replan(action)

    def _replan(self, action: int | None) -> None:
        assert self.bot is not None
        if isinstance(self.bot.stack, _BoundedStack):
            self.bot.stack.pushes = 0
        try:
            self.suggested = self.bot.replan(action)
        except Exception as exc:  # the bot asserts when it gives up; play on without it
            self.broken = f"{type(exc).__name__}: {exc}"[:200]

    def _unstick(self) -> tuple[str, str]:
        """The bot looped (e.g. two locked doors, the nearer one's key behind the other):
        unlock a door whose key is known, else look around; the bot restarts afterwards."""
        known = self.shadow.known_objects()
        doors = [(name, obj) for name, obj in known if obj.type == "door" and is_locked(obj)]
        carrying = self.shadow.minigrid.carrying
        if carrying is not None and carrying.type == "key":
            for name, door in doors:
                if door.color == carrying.color and self.shadow.plan_to(door) is not None:
                    return (
                        f"I hold the key of the {name}; I unlock it and go through.",
                        f"toggle and go through {name}",
                    )
        if carrying is None:
            for name, door in doors:
                for key_name, key in known:
                    if key.type == "key" and key.color == door.color and self.shadow.plan_to(key) is not None:
                        return f"The {key_name} opens the locked {name}; I take it.", f"pickup {key_name}"
        return "I am stuck; I look around for another way.", "turn left"

    # -- KeyInBox ------------------------------------------------------------------------

    def _key_box(self) -> WorldObj | None:
        """A box on the grid that holds a key (KeyInBox), while the bot is not running."""
        if self.bot is not None:
            return None
        grid = self.shadow.minigrid.grid
        for obj in grid.grid:
            if obj is not None and obj.type == "box" and getattr(obj.contains, "type", None) == "key":
                return obj
        return None

    def _open_key_box(self, box: WorldObj) -> tuple[str, str]:
        env = self.shadow.minigrid
        name = self.shadow.name_of(box)
        if name is None:  # not seen yet: walk towards it over the local copy's true grid
            index = next(i for i, obj in enumerate(env.grid.grid) if obj is box)
            start = (int(env.agent_pos[0]), int(env.agent_pos[1]), int(env.agent_dir))
            plan = plan_to_face(
                start,
                (index % env.width, index // env.width),
                lambda pos: (cell := env.grid.get(*pos)) is None or (cell.type == "door" and is_open(cell)),
            )
            step = _PRIMITIVE_TEXT[plan[0]] if plan else "turn left"
            return "The key must be hidden in a box somewhere; I look for it.", step
        if env.grid.get(*env.front_pos) is box:
            return f"The key may be inside the {name}; I open it.", "toggle"
        return f"The key may be inside the {name}; I go to it.", f"go to {name}"

    def _check_sync(self, observation: str) -> None:
        if observation != self.expected:
            raise EnvError(
                "babyai expert lost sync with the env: its local copy of the level shows a different "
                "observation (different minigrid version, or a step it did not take?)"
            )


def _primitive_thought(action: str, subgoal: object) -> str:
    kind = type(subgoal).__name__ if subgoal is not None else ""
    if action == "drop":
        return "I put down what I am carrying here."
    if action == "toggle":
        return "I toggle what is in front of me."
    if kind == "GoNextToSubgoal" and getattr(subgoal, "reason", None) == "Explore":
        return f"I have not seen everything yet; I explore: {action}."
    return f"I move into position: {action}."
