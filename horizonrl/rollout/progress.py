"""A live progress line for rollouts on stderr: episodes done, live episodes, rounds, tokens/s.

On a terminal it is a rich progress bar; when stderr is a file or a pipe (logs, CI) it
prints one plain line every `interval` seconds instead, so long runs still show progress.
"""

from __future__ import annotations

import sys
import time
from typing import Any


class RolloutProgress:
    """`with RolloutProgress(total) as p: p.update(done=..., live=..., rounds=..., tokens_per_s=...)`.

    Disabled (`enabled=False`) it does nothing, for tests and library use.
    """

    def __init__(
        self, total: int, *, enabled: bool = True, description: str = "rollout", interval: float = 15.0
    ) -> None:
        self.total = total
        self.enabled = enabled
        self.description = description
        self.interval = interval
        self._progress: Any = None
        self._task: Any = None
        self._plain = False
        self._last = 0.0

    def __enter__(self) -> RolloutProgress:
        if not self.enabled:
            return self
        from rich.console import Console

        console = Console(stderr=True)
        if not console.is_terminal:
            self._plain, self._last = True, time.monotonic()
            return self
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            console=console,
        )
        self._progress.__enter__()
        self._task = self._progress.add_task(self.description, total=self.total, info="starting")
        return self

    def update(self, *, done: int, live: int, rounds: int, tokens_per_s: float, unit: str = "round") -> None:
        """`rounds`: the lock-step engine's rounds, or what `unit` names (the async engine: turns)."""
        info = f"live {live} | {unit} {rounds} | {tokens_per_s:.1f} tok/s"
        if self._progress is not None:
            self._progress.update(self._task, completed=done, info=info)
        elif self._plain and (time.monotonic() - self._last >= self.interval or done == self.total):
            self._last = time.monotonic()
            print(
                f"{self.description}: {done}/{self.total} episodes done | {info}", file=sys.stderr, flush=True
            )

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)
            self._progress = None
