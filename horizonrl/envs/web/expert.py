"""`WebExpert`: replays a task's `horizonrl.solution` steps through the observations only.

A solution step names an element by accessibility role and name (the task author's view),
never by id: each turn the expert finds that element's line in the current observation's
tree and emits WebArena's action with its id, so its demonstrations read like a model's.

    {"op": "click", "role": "link", "name": "Next page"}           -> click [41]
    {"op": "type", "role": "searchbox", "name": "Search", "text": "blue tee", "enter": true}
                                                                   -> type [7] [blue tee] [1]
    {"op": "hover", "role": ..., "name": ...}                      -> hover [id]
    {"op": "goto", "url": "__SHOPPING__/cart"}                     -> goto [http://127.0.0.1:PORT/cart]
    {"op": "go_back"} / {"op": "go_forward"}                       -> go_back / go_forward
    {"op": "press", "key": "Enter"} / {"op": "scroll", "direction": "down"}
    {"op": "stop", "answer": "$24.00"}                             -> stop [$24.00]

`nth` (from 0) picks among several lines with the same role and name. A name is matched
exactly, else after stripping white space, else ignoring case. When the element is not on
the page the expert gives up with `stop []` (the episode scores 0, and the demonstration
says which element it missed). Placeholders in URLs are filled from the reset's
`info["site_urls"]`.
"""

from __future__ import annotations

from typing import Any

from horizonrl.envs.web.observation import TreeLine, parse_tree


def find_element(observation: str, role: str, name: str, nth: int = 0) -> TreeLine | None:
    """The `nth` line of `observation`'s tree with this role and name (see the module docstring)."""
    lines = [line for line in parse_tree(observation) if line.role == role]
    for same in (
        lambda a, b: a == b,
        lambda a, b: a.strip() == b.strip(),
        lambda a, b: a.strip().lower() == b.strip().lower(),
    ):
        matches = [line for line in lines if same(line.name, name)]
        if len(matches) > nth:
            return matches[nth]
    return None


class WebExpert:
    """Scripted player of the shipped web tasks (their `horizonrl.solution`)."""

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []
        self.position = 0

    def reset(self, item_id: str, observation: str, info: dict[str, Any]) -> None:
        from horizonrl.envs.web import tasks

        task = tasks.resolve(tasks.get_task(item_id), dict(info.get("site_urls") or {}))
        self.steps = list((task.get("horizonrl") or {}).get("solution") or [])
        self.position = 0

    def act(self, observation: str) -> tuple[str, str]:
        if self.position >= len(self.steps):
            return "The steps I know are done, so I stop.", "stop []"
        step = self.steps[self.position]
        self.position += 1
        op = step["op"]
        if op in ("click", "hover", "type"):
            role, name = str(step["role"]), str(step["name"])
            line = find_element(observation, role, name, int(step.get("nth", 0)))
            if line is None:
                self.position = len(self.steps)
                return f"I cannot find the {role} {name!r} on this page, so I give up.", "stop []"
            if op == "type":
                enter = bool(step.get("enter", True))
                text = str(step["text"])
                then = " and press Enter" if enter else ""
                return (
                    f"I type {text!r} into the {role} {name!r} [{line.id}]{then}.",
                    f"type [{line.id}] [{text}] [{int(enter)}]",
                )
            verb = "click" if op == "click" else "hover over"
            return f"I {verb} the {role} {name!r} [{line.id}].", f"{op} [{line.id}]"
        if op == "goto":
            return f"I go to {step['url']}.", f"goto [{step['url']}]"
        if op in ("go_back", "go_forward"):
            return f"I {op.replace('_', ' ')}.", op
        if op == "press":
            return f"I press {step['key']}.", f"press [{step['key']}]"
        if op == "scroll":
            direction = step.get("direction", "down")
            return f"I scroll {direction}.", f"scroll [{direction}]"
        if op == "stop":
            answer = str(step.get("answer", ""))
            thought = f"The answer is {answer}." if answer else "The task is done."
            return thought, f"stop [{answer}]"
        raise ValueError(f"unknown solution step {step!r}")
