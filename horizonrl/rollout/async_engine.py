"""The asynchronous rollout engine: each episode advances as soon as its own env step returns.

    engine = AsyncRolloutEngine(backend, LocalEnvPool("textcraft"), EngineConfig(max_turns=30))
    trajectories = engine.run(["textcraft_0", "textcraft_1"], n=4)      # same API as RolloutEngine

The lock-step `RolloutEngine` plays rounds: every live episode waits for the round's one
batched generation and then for the slowest env step of the round. Here each episode is its
own asyncio task looping generation -> env step -> next generation, so an episode whose env
answered in 50 ms asks for its next turn while another one's env still takes 2 s. Generation
requests go one per turn to `backend.agenerate`: backends with their own continuous batching
(vLLM) take each request as it comes; the default implementation coalesces the requests that
are waiting into the next `generate` batch as soon as the previous one returned (no round
barrier), so `hf` batches whatever episodes are between env steps.

Everything per episode is the lock-step engine's own code (`RolloutEngine._request`,
`_take_result`, `_step`, `_take_outcome`): the same budgets (`max_tokens` lowered to what is
left of `max_response_length`, the turn cap), the same token-exact conversation, failure
handling and trajectory fields. `batch_size` bounds the live episodes (`batch_size` worker
tasks take the episodes in order, refilling a slot as soon as its episode ends), so greedy
decoding gives the lock-step engine's trajectories (up to batch-shape rounding in the
backend's arithmetic, which the tests check does not flip a token on the tiny model).

Differences a user can see: `stats.rounds` stays 0 (there are no rounds; `stats.turns`
counts turns), `stats.generate_seconds` and `stats.env_seconds` are summed over episodes
(they overlap, so they add up to more than the wall time), `on_round(turns, [episode])` runs
after each turn of an episode, and with temperature > 0 the samples depend on which requests
shared a batch, i.e. on timing: reproducible sampling needs the lock-step engine or a backend
with per-request seeds.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import replace

from horizonrl.rollout.engine import Episode, RolloutEngine, RoundHook
from horizonrl.rollout.progress import RolloutProgress


class AsyncRolloutEngine(RolloutEngine):
    """`RolloutEngine` without round barriers (see the module docstring)."""

    async def _play(
        self, episodes: list[Episode], progress: RolloutProgress, on_round: RoundHook | None, start: float
    ) -> None:
        if not episodes:
            return
        waiting = deque(episodes)
        seed = None if self.config.temperature == 0 else hash((episodes[0].traj.seed, "async")) % 2**31
        params = replace(self.sampling, seed=seed)
        live = 0

        async def play_one(ep: Episode) -> None:
            nonlocal live
            live += 1
            await self._start(ep)
            while not ep.done:
                request = self._request(ep)
                if request is None:
                    break
                t0 = time.perf_counter()
                result = await self.backend.agenerate(request, params)
                self.stats.generate_seconds += time.perf_counter() - t0
                action = self._take_result(ep, result)
                if action is not None:
                    t0 = time.perf_counter()
                    outcome = await self._step(ep, action)
                    self.stats.env_seconds += time.perf_counter() - t0
                    self._take_outcome(ep, outcome)
                if on_round is not None:
                    on_round(self.stats.turns, [ep])
                self.stats.wall_seconds = time.perf_counter() - start
                progress.update(
                    done=sum(e.done for e in episodes),
                    live=live,
                    rounds=self.stats.turns,
                    tokens_per_s=self.stats.tokens_per_second,
                    unit="turns",
                )
            live -= 1
            await self._finish_done([ep])

        async def worker() -> None:
            while waiting:
                await play_one(waiting.popleft())

        workers = [asyncio.create_task(worker()) for _ in range(min(self.config.batch_size, len(episodes)))]
        try:
            await asyncio.gather(*workers)
        finally:  # one episode's exception (a backend that raised) ends the rollout, as lock-step
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
