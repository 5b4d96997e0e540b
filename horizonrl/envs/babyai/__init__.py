"""BabyAI: minigrid's BabyAI grid-world levels, seen and played through text.

Description
    The agent is in a grid of rooms with balls, boxes, keys and doors, and must carry out
    a mission in words ("put the red ball next to the blue key", "open the yellow door
    after you pick up a grey box"). `babyai_<i>` is level `i % 40` of a fixed list of 40
    BabyAI levels (the reference's level number `i % 40 + 1`) generated with seed
    `i // 40`, so the reference's Data-ID files mean the same layouts here. The list and
    the one substitution (`GoToObjS6` -> minigrid's `BabyAI-GoToObjS6-v1`) are in
    `levels.py` and docs/babyai.md.

Observation
    The mission ("Your goal: ..."), then only what the agent sees now (minigrid's 7x7
    egocentric view with its visibility mask: walls and closed doors hide what is behind
    them): each ball, box, key and door as `<colour> <type> <n>` with its position in
    steps forward / to the left / to the right, doors with their state (open, closed,
    locked), the nearest visible wall ahead, left and right, what is in front of the
    agent, what it carries, and the available actions. `n` numbers objects of one colour
    and type in the order the agent first saw them this episode, so names are stable.

Actions
    `turn left`, `turn right`, `move forward`, `go to <colour> <type> <n>`,
    `pickup <colour> <type> <n>` ("pick up" works too; bare `pickup` takes the object in
    front), `drop`, `toggle` (open/close/unlock the door in front, open the box in front),
    `go through <colour> door <n>`, `toggle and go through <colour> door <n>`,
    `check available actions`. `n` may be left out when only one such object is known.
    Macros are compiled to minigrid primitives by a shortest-path planner over the cells
    the agent has seen (never through unseen cells, objects or closed doors) and stop as
    soon as the mission ends. A macro may name any object seen earlier this episode, not
    only one in view. An action that cannot be done (unknown, no path, nothing to drop,
    locked door without its key, ...) takes no step and is answered with the reason, the
    current view and the list of valid actions.

Reward
    minigrid's: `1 - 0.9 * steps / max_steps` on the step that completes the mission, 0
    otherwise, where `steps` counts every primitive (a macro counts all its steps) and
    `max_steps` is the level's own limit. `info`: `success`, `score` (the success reward,
    else 0), `category`, plus `level`, `level_seed`, `mission`, `steps`, `max_steps` and `grid`
    (the agent's egocentric view, compact: `horizonrl.envs.babyai.view`; the viewer draws it),
    `state_key` (pose, carried object, grid hash) and after each step `invalid_action` (the
    action could not be done) and `progress` (the mission's sub-goals first reached: the object
    seen, faced, carried, each clause of a sequence done; `horizonrl.envs.babyai.progress`).

Termination
    The mission is completed (success) or failed for good (minigrid's verifier says
    "failure", e.g. a strict-order level's doors opened in the wrong order).

Truncation
    When minigrid's `max_steps` primitives are used up (`truncated=True`, never
    terminated). The text-turn cap is the rollout engine's `max_turns` (`TurnLimit` when
    the env is stepped directly).

Categories
    The reference's six groups, GoTo (levels 1-11), Pickup (17-21), ActionObjDoor (30),
    FindObj (31), OneRoom (33, the paper's "Room"), SynthLoc (36), and ours for the
    other levels: Open (12-16), Unlock (24-29, 32 KeyCorridor), PutNext (22, 23,
    34 MoveTwoAcross), Synth (35 SynthS5R2, 37 SynthSeq, 38-40 the boss levels).

Registered ids
    `babyai_<i>` for 0 <= i < 4,000,000 (seeds 0..99,999). Splits: `train` = indices
    below 40,000 (seeds 0..999 of every level); `test` = 90 items with seeds from 50,000
    on: one per level for GoTo (11) and Unlock (7), 9 for each other group, round-robin
    over the group's levels.
"""

from __future__ import annotations

from horizonrl.envs.babyai.env import BabyAIEnv
from horizonrl.envs.babyai.expert import BabyAIExpert
from horizonrl.envs.babyai.levels import CATEGORIES, LEVELS, category_of, load_splits
from horizonrl.envs.registry import FamilySpec

SPEC = FamilySpec(
    name="babyai",
    make_env=BabyAIEnv,
    load_splits=load_splits,
    categories=CATEGORIES,
    category_of=category_of,
    make_expert=BabyAIExpert,
    default_port=36002,
    description="minigrid BabyAI levels as text, with planned macro actions",
    extra={"levels": [level.name for level in LEVELS]},
)

__all__ = ["SPEC", "BabyAIEnv", "BabyAIExpert"]
