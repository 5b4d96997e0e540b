"""The 40 BabyAI levels behind `babyai_<i>`, their categories, and the train/test splits.

Item `babyai_<i>` is level `LEVELS[i % 40]` (the reference's level number `i % 40 + 1`)
generated with seed `i // 40`, so the reference's Data-ID files work as they are.

Every level is built by instantiating its minigrid class directly with the kwargs that
gymnasium registers for `BabyAI-<name>-v0` (no `gym.make`: no passive env checker, no
order-enforcing wrapper), with stdout silenced while a level generates, because
minigrid prints "Sampling rejected: ..." on rejection sampling.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field
from typing import Any

from minigrid.envs import babyai as _babyai
from minigrid.envs.babyai.core.roomgrid_level import RoomGridLevel

from horizonrl.envs.core import UnknownItemError, parse_item_id

NUM_LEVELS = 40
MAX_SEED = 100_000
"""Seeds 0..MAX_SEED-1 are valid, so indices run over 0..NUM_LEVELS*MAX_SEED-1."""
TRAIN_SEEDS = 1000
"""The train split is every index below `NUM_LEVELS * TRAIN_SEEDS` (seeds 0..999)."""
TEST_SEED_OFFSET = 50_000
"""Test items use seeds from here on, far from any train seed."""


@dataclass(frozen=True)
class Level:
    number: int
    """The reference's level number (1..40)."""
    name: str
    """`BabyAI-<name>-v0` in the reference's list."""
    cls: str
    """The minigrid class in `minigrid.envs.babyai`."""
    category: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    @property
    def gym_id(self) -> str:
        return f"BabyAI-{self.name}-v0"


_L = Level
LEVELS: tuple[Level, ...] = (
    _L(1, "GoToRedBallGrey", "GoToRedBallGrey", "GoTo"),
    _L(2, "GoToRedBall", "GoToRedBall", "GoTo"),
    _L(3, "GoToRedBallNoDists", "GoToRedBallNoDists", "GoTo"),
    _L(
        4,
        "GoToObjS6",
        "GoToObj",
        "GoTo",
        {"room_size": 6},
        note="BabyAI-GoToObjS6-v0 is not registered by minigrid 3.x; its -v1 (GoToObj, room_size=6) is used",
    ),
    _L(5, "GoToLocalS8N7", "GoToLocal", "GoTo", {"room_size": 8, "num_dists": 7}),
    _L(6, "GoToObjMazeS7", "GoTo", "GoTo", {"num_dists": 1, "room_size": 7}),
    _L(7, "GoToImpUnlock", "GoToImpUnlock", "GoTo"),
    _L(8, "GoToSeqS5R2", "GoToSeq", "GoTo", {"room_size": 5, "num_rows": 2, "num_cols": 2, "num_dists": 4}),
    _L(9, "GoToRedBlueBall", "GoToRedBlueBall", "GoTo"),
    _L(10, "GoToDoor", "GoToDoor", "GoTo"),
    _L(11, "GoToObjDoor", "GoToObjDoor", "GoTo"),
    _L(12, "Open", "Open", "Open"),
    _L(13, "OpenRedDoor", "OpenRedDoor", "Open"),
    _L(14, "OpenDoorLoc", "OpenDoor", "Open", {"select_by": "loc"}),
    _L(
        15,
        "OpenRedBlueDoorsDebug",
        "OpenTwoDoors",
        "Open",
        {"first_color": "red", "second_color": "blue", "strict": True},
    ),
    _L(16, "OpenDoorsOrderN4Debug", "OpenDoorsOrder", "Open", {"debug": True, "num_doors": 4}),
    _L(17, "Pickup", "Pickup", "Pickup"),
    _L(18, "UnblockPickup", "UnblockPickup", "Pickup"),
    _L(19, "PickupLoc", "PickupLoc", "Pickup"),
    _L(20, "PickupDistDebug", "PickupDist", "Pickup", {"debug": True}),
    _L(21, "PickupAbove", "PickupAbove", "Pickup"),
    _L(22, "PutNextLocalS6N4", "PutNextLocal", "PutNext", {"room_size": 6, "num_objs": 4}),
    _L(
        23,
        "PutNextS7N4Carrying",
        "PutNext",
        "PutNext",
        {"room_size": 7, "objs_per_room": 4, "start_carrying": True},
    ),
    _L(24, "Unlock", "Unlock", "Unlock"),
    _L(25, "UnlockLocalDist", "UnlockLocal", "Unlock", {"distractors": True}),
    _L(26, "KeyInBox", "KeyInBox", "Unlock"),
    _L(27, "UnlockPickupDist", "UnlockPickup", "Unlock", {"distractors": True}),
    _L(28, "BlockedUnlockPickup", "BlockedUnlockPickup", "Unlock"),
    _L(29, "UnlockToUnlock", "UnlockToUnlock", "Unlock"),
    _L(30, "ActionObjDoor", "ActionObjDoor", "ActionObjDoor"),
    _L(31, "FindObjS7", "FindObjS5", "FindObj", {"room_size": 7}),
    _L(32, "KeyCorridorS6R3", "KeyCorridor", "Unlock", {"room_size": 6, "num_rows": 3}),
    _L(33, "OneRoomS20", "OneRoomS8", "OneRoom", {"room_size": 20}),
    _L(34, "MoveTwoAcrossS8N9", "MoveTwoAcross", "PutNext", {"room_size": 8, "objs_per_room": 9}),
    _L(35, "SynthS5R2", "Synth", "Synth", {"room_size": 5, "num_rows": 2}),
    _L(36, "SynthLoc", "SynthLoc", "SynthLoc"),
    _L(37, "SynthSeq", "SynthSeq", "Synth"),
    _L(38, "MiniBossLevel", "MiniBossLevel", "Synth"),
    _L(39, "BossLevel", "BossLevel", "Synth"),
    _L(40, "BossLevelNoUnlock", "BossLevelNoUnlock", "Synth"),
)
assert len(LEVELS) == NUM_LEVELS and [lv.number for lv in LEVELS] == list(range(1, NUM_LEVELS + 1))

CATEGORIES: tuple[str, ...] = (
    # the reference's six sub-task groups, in the paper's order ...
    "GoTo",
    "Pickup",
    "ActionObjDoor",
    "FindObj",
    "OneRoom",
    "SynthLoc",
    # ... and our groups for the other levels
    "Open",
    "Unlock",
    "PutNext",
    "Synth",
)
assert set(CATEGORIES) == {lv.category for lv in LEVELS}

TEST_QUOTA: dict[str, int] = {
    "GoTo": 11,
    "Pickup": 9,
    "ActionObjDoor": 9,
    "FindObj": 9,
    "OneRoom": 9,
    "SynthLoc": 9,
    "Open": 9,
    "Unlock": 7,
    "PutNext": 9,
    "Synth": 9,
}
"""Test items per category (90 in all, the reference's test size): one item per level
for the two groups with 7+ levels, 9 for every other group, round-robin over its levels."""
assert sum(TEST_QUOTA.values()) == 90 and set(TEST_QUOTA) == set(CATEGORIES)


def item_index(level_number: int, seed: int) -> int:
    """The index `i` of `babyai_<i>` for a reference level number (1..40) and a seed."""
    return seed * NUM_LEVELS + (level_number - 1)


def level_and_seed(item_id: str) -> tuple[Level, int]:
    """`"babyai_41"` -> (level 2 `GoToRedBall`, seed 1); raise `UnknownItemError` if not ours."""
    family, index = parse_item_id(item_id)
    if family != "babyai":
        raise UnknownItemError(f"item {item_id!r} does not belong to family 'babyai'")
    if index >= NUM_LEVELS * MAX_SEED:
        raise UnknownItemError(
            f"babyai item index {index} out of range: valid indices are 0..{NUM_LEVELS * MAX_SEED - 1}"
        )
    return LEVELS[index % NUM_LEVELS], index // NUM_LEVELS


def category_of(item_id: str) -> str:
    return level_and_seed(item_id)[0].category


def load_splits() -> dict[str, list[str]]:
    """`train`: every index below 40 * TRAIN_SEEDS; `test`: 90 items from seeds >= TEST_SEED_OFFSET."""
    test: list[str] = []
    for category in CATEGORIES:
        levels = [lv for lv in LEVELS if lv.category == category]
        for k in range(TEST_QUOTA[category]):
            level = levels[k % len(levels)]
            seed = TEST_SEED_OFFSET + k // len(levels)
            test.append(f"babyai_{item_index(level.number, seed)}")
    train = [f"babyai_{i}" for i in range(NUM_LEVELS * TRAIN_SEEDS)]
    return {"train": train, "test": test}


def make_level(level: Level) -> RoomGridLevel:
    """A fresh minigrid env of `level` (not yet reset), without rendering."""
    cls = getattr(_babyai, level.cls)
    env: RoomGridLevel = cls(render_mode=None, **level.kwargs)
    return env


def reset_level(env: RoomGridLevel, seed: int) -> None:
    """Generate the level for `seed`; minigrid's rejection-sampling chatter is swallowed."""
    with contextlib.redirect_stdout(io.StringIO()):
        env.reset(seed=seed)
