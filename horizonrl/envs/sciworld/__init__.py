"""SciWorld: ScienceWorld's elementary-science tasks (the `scienceworld` package, run on Java).

Description:
    The agent acts in a simulated house with a kitchen, workshop, greenhouse, etc. to do a
    science task: boil a substance, measure a melting point, build a circuit, find an
    animal, mix paints, order animals by lifespan. Each item is one (task, variation) of
    ScienceWorld; a variation fixes the substances, objects and layout. One JVM runs per
    env instance and is reused across resets (`SimulatorJVM`: heap capped at 256 MiB,
    ~1-2 s to start, ~0.1 s per reset); steps call the simulator directly, without the
    `scienceworld` wrapper's per-step look / inventory / valid-action calls.

Observation:
    At reset, the task description, a newline, and the result of `look around` (the
    reference's layout). After each action, ScienceWorld's own text for it.

Actions:
    ScienceWorld's grammar: `open OBJ`, `close OBJ`, `activate OBJ`, `deactivate OBJ`,
    `connect OBJ to OBJ`, `disconnect OBJ`, `use OBJ on OBJ`, `look around`, `look at OBJ`,
    `look in OBJ`, `read OBJ`, `move OBJ to OBJ`, `pick up OBJ`, `put down OBJ`,
    `pour OBJ in OBJ`, `dunk OBJ in OBJ`, `mix OBJ`, `go to LOC`, `eat OBJ`, `flush OBJ`,
    `focus on OBJ`, `wait`, `wait1`, `task`, `inventory`. When an action is ambiguous the
    simulator lists numbered options and the next action is the number. An action it does
    not understand is answered with "No known action matches that input." and the list
    of valid forms. `available_actions()` gives every valid concrete action in the
    current state (computed only when asked: ~50-100 ms); `action_templates()` the forms.

Reward:
    The change of `info["score"]`, which is ScienceWorld's score (0-100) / 100, with a
    failed episode (ScienceWorld's -100) counted as 0; so an episode's rewards sum to its
    final score. `info["success"]` is true when the score reaches 100. `info` also carries
    `raw_score` (ScienceWorld's own, -100..100), `task_name`, `task_id`, `variation`, and
    at reset `task_description`; after each step `invalid_action` (ScienceWorld matched no
    action) and `progress`, the score's rise above its best so far, except on the completing
    step (so an episode's progress sums to < 1). No `state_key`: a state would take extra
    simulator calls per step, so `gigpo` finds no step groups here.

Termination:
    When ScienceWorld reports the task completed, or its score goes negative (e.g. `focus
    on` the wrong object), which ends the episode with score 0.

Truncation:
    Never by the env (ScienceWorld's own 100-step limit is not applied); the turn cap is
    the rollout engine's `max_turns` (`TurnLimit` when the env is stepped directly).

Categories:
    Six groups of the 23 tasks the reference keeps (task ids in ScienceWorld's numbering):
    `matter` 1-1..1-4 (changes of state), `measurement` 2-1..2-3 (thermometer, melting
    points), `electricity` 3-1..3-4 (circuits, renewable energy, conductivity),
    `classification` 4-1..4-4 (find living / non-living things, plants, animals),
    `chemistry` 6-1..6-3 (mixing, paints), `life science` 7-1..7-3 and 8-1..8-2
    (lifespans, life stages). Left out, as in the reference: 5-1, 5-2 (growing plants and
    fruit), 9-1..9-3 (inclined planes), 10-1, 10-2 (Mendelian genetics).

Registered ids:
    `sciworld_<i>`, i in 0..4638: entry i of the list of (task, variation) pairs in
    ScienceWorld's task order, each task's variations 0..max-1, skipping the left-out
    tasks: the reference's numbering (`sciworld_0` = boil variation 0). Splits follow
    ScienceWorld's own variation splits: `train` (2312 items), `dev` (1156), `test_all`
    (1171), and `test`: 200 of the test-variation items spread over categories and tasks
    (35 matter, 35 measurement, 35 electricity, 35 classification, 26 chemistry, 34 life
    science; chemistry has only 26 test variations). Expert: replays ScienceWorld's gold
    path (`horizonrl.envs.sciworld.expert`).
"""

from __future__ import annotations

from typing import Any

from horizonrl.envs.registry import FamilySpec
from horizonrl.envs.sciworld.tasks import CATEGORIES, category_of, load_splits


def make_env(**kwargs: Any) -> Any:
    """A `SciWorldEnv` (starts its JVM); kwargs: `simplifications`, `heap_mb`, `java_opts`."""
    from horizonrl.envs.sciworld.env import SciWorldEnv

    return SciWorldEnv(**kwargs)


def make_expert() -> Any:
    from horizonrl.envs.sciworld.expert import SciWorldExpert

    return SciWorldExpert()


SPEC = FamilySpec(
    name="sciworld",
    make_env=make_env,
    load_splits=load_splits,
    categories=CATEGORIES,
    category_of=category_of,
    make_expert=make_expert,
    isolate=True,
    default_port=36003,
    description="ScienceWorld science tasks (Java), 23 tasks in 6 groups; score / 100, success at 100",
)
