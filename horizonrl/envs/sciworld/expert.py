"""The SciWorld expert: replays ScienceWorld's own gold action path for the item.

ScienceWorld generates a gold path when a task is loaded with `generateGoldPath`. The
expert computes it in a JVM of its own, local to the process that runs the expert (one
JVM shared by every expert of the process, started on first use, closed at exit), then
plays it back against whatever env it is given, local or remote: the env never reveals
the answer. A path takes 0.2-7 s to generate (the JVM's first ones are the slowest).
Gold paths assume no simplifications (the env's default).

Thoughts are short, written from the action, so the trajectories read as demonstrations.
"""

from __future__ import annotations

import atexit
import re
import threading
from typing import Any

from horizonrl.envs.sciworld.jvm import SimulatorJVM
from horizonrl.envs.sciworld.tasks import item_of


class GoldPaths:
    """Gold action paths by item id, from one lazily started JVM (thread-safe, cached)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jvm: SimulatorJVM | None = None
        self._cache: dict[str, list[str]] = {}

    def get(self, item_id: str) -> list[str]:
        item = item_of(item_id)
        with self._lock:
            if item_id not in self._cache:
                if self._jvm is None or not self._jvm.alive:
                    self._jvm = SimulatorJVM()
                self._jvm.load(item.task.name, item.variation, "", gold_path=True)
                self._cache[item_id] = self._jvm.gold_actions()
            return list(self._cache[item_id])

    def close(self) -> None:
        with self._lock:
            if self._jvm is not None:
                self._jvm.close()
                self._jvm = None


GOLD_PATHS = GoldPaths()
atexit.register(GOLD_PATHS.close)

_THOUGHTS: tuple[tuple[str, str], ...] = (
    (r"^focus on (.+)$", "The task is about the {0}, so I focus on it."),
    (r"^go to (.+)$", "I need to be in the {0} next."),
    (r"^open (.+)$", "I open the {0} to get through or see what is inside."),
    (r"^close (.+)$", "I close the {0}."),
    (r"^pick up (.+)$", "I will need the {0}, so I pick it up."),
    (r"^move (.+) to (.+)$", "I put the {0} in the {1}."),
    (r"^pour (.+) in(?:to)? (.+)$", "I pour the {0} into the {1}."),
    (r"^(?:de)?activate (.+)$", "I switch the {0}."),
    (r"^connect (.+) to (.+)$", "I connect the {0} to the {1} to build the circuit."),
    (r"^use (.+) on (.+)$", "I use the {0} on the {1} to measure it."),
    (r"^look at (.+)$", "I check the {0}."),
    (r"^look around$", "I look around to see what is here."),
    (r"^mix (.+)$", "I mix the contents of the {0}."),
    (r"^wait1?$", "I wait for the process to take effect."),
    (r"^\d+$", "The request was ambiguous; option {0} is the one I mean."),
)


def thought_for(action: str) -> str:
    for pattern, template in _THOUGHTS:
        match = re.match(pattern, action)
        if match:
            return template.format(*(match.groups() or (action,)))
    return f"Next I {action}."


class SciWorldExpert:
    """Plays the gold path of the item; past its end it looks around (the episode should be over)."""

    def __init__(self, gold_paths: GoldPaths = GOLD_PATHS) -> None:
        self.gold_paths = gold_paths
        self.plan: list[str] = []
        self.position = 0

    def reset(self, item_id: str, observation: str, info: dict[str, Any]) -> None:
        self.plan = self.gold_paths.get(item_id)
        self.position = 0

    def act(self, observation: str) -> tuple[str, str]:
        if self.position >= len(self.plan):
            return "I have done every step of my plan.", "look around"
        action = self.plan[self.position]
        self.position += 1
        return thought_for(action), action
