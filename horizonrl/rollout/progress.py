"""A live progress line for rollouts on stderr: episodes done, live episodes, rounds, tokens/s."""

from __future__ import annotations

from typing import Any


class RolloutProgress:
    """`with RolloutProgress(total) as p: p.update(done=..., live=..., rounds=..., tokens_per_s=...)`.

    Disabled (`enabled=False`) it does nothing, for tests and library use.
    """

    def __init__(self, total: int, *, enabled: bool = True, description: str = "rollout") -> None:
        self.total = total
        self.enabled = enabled
        self.description = description
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> RolloutProgress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task(self.description, total=self.total, info="starting")
        return self

    def update(self, *, done: int, live: int, rounds: int, tokens_per_s: float) -> None:
        if self._progress is None:
            return
        info = f"live {live} | round {rounds} | {tokens_per_s:.1f} tok/s"
        self._progress.update(self._task, completed=done, info=info)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)
            self._progress = None
