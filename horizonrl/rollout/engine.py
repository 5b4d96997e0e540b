"""The lock-step rollout engine: many episodes at once, one batched generation per round, token-exact.

    backend = make_backend("hf", model="default")
    engine = RolloutEngine(backend, LocalEnvPool("textcraft"), EngineConfig(max_turns=30))
    trajectories = engine.run(["textcraft_0", "textcraft_1"], n=4)      # 4 samples per item

Each round:
1. admit waiting episodes up to `batch_size` live ones (continuous batching: a finished
   episode's slot is refilled at once) and reset their envs concurrently;
2. one `backend.generate` call for every live episode (in a worker thread);
3. parse each response; step the envs of the parsed actions concurrently (asyncio), each
   call bounded by `env_timeout_s`. A response without a parsable action is answered with
   the parse error as the observation, without stepping the env, and counts as a turn
   (as in the reference), with reward 0;
4. append the observations (token-exact, see `horizonrl.agent.chat`), finish episodes,
   drop their KV caches, release their envs. No sleeping anywhere.

Budgets, all enforced during the rollout: `max_tokens` per turn, lowered to what is left
of `max_response_length` (tokens after the prompt, sampled + observation + template) and of
the backend's `context_limit` (the whole sequence: vllm's `max_model_len`); an observation
that would not fit ends the episode as truncated (`stop_reason` "max_response_length" or
"context_limit") before it is appended, so no trajectory exceeds the budget and no request
overflows the model; and `max_turns` (truncated, "max_turns"). An env error or timeout marks
the episode `failed` with the reason and the others carry on.

The turn cap is counted here and only here: the engine's envs are not wrapped in
`horizonrl.envs.wrappers.TurnLimit` (that wrapper caps code that steps a `TextEnv` itself,
such as `horizonrl solve`), because a wrapper never sees the turns whose action did not
parse. An env that truncates on its own before the cap ends the episode as "env_truncated";
on the cap's turn the stop reason is "max_turns", whatever the env says.

`stop_reason` in `Trajectory.meta`: "terminated" (the env ended the task), "env_truncated"
(the env's own limit, e.g. BabyAI's step budget), "max_turns", "max_response_length",
"context_limit", or "failed".

One turn of one episode is `_request` (budget check, the request), the backend, `_take_result`
(the sampled turn, the parse) and, given an action, `_step` and `_take_outcome`; everything
but the scheduling (`_play`) is shared with `horizonrl.rollout.async_engine`, which plays each
episode as its own task instead of in rounds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from horizonrl.agent.chat import ChatFormat, MessageConversation, TokenConversation
from horizonrl.agent.prompts import FamilyPrompt, get_prompt
from horizonrl.agent.strategies import STRATEGIES, StrategyState, get_strategy
from horizonrl.envs.core import StepResult
from horizonrl.envs.registry import get_family
from horizonrl.rollout.backends.base import (
    GenerationRequest,
    GenerationResult,
    PolicyBackend,
    SamplingParams,
)
from horizonrl.rollout.envpool import AsyncEnv, EnvPool
from horizonrl.rollout.progress import RolloutProgress
from horizonrl.rollout.settings import RolloutSettings
from horizonrl.rollout.trajectory import Trajectory, record_state, record_turn, record_view


@dataclass(frozen=True)
class EngineConfig(RolloutSettings):
    """The engine's settings: `RolloutSettings` (budgets, sampling, concurrency) plus these."""

    max_turns: int = 30
    """Most assistant turns per episode (the ScalingInter schedule changes this). The engine is the
    one counter of a rollout's turns: every assistant turn counts, also one whose action did not
    parse and so never reached the env."""
    progress: bool = True
    """Show a live line on stderr (turns, live episodes, tokens/s)."""
    logprob_temperature: float | None = None
    """T of `softmax(logits / T)`, the distribution the trajectory's logprobs are under (None:
    the sampling temperature, 1 when greedy); recorded as `meta["logprob_temperature"]`."""
    show_available_actions: bool = False
    """Append the env's available actions (`Available actions: a, b, ...`) to the first and every
    later observation, for envs that list them (`available_actions()` not None), as the
    reference's agents can; envs with free-form actions are unaffected."""
    strategy: str = "react"
    """The agent strategy (`horizonrl.agent.strategies`: react, plan, reflect)."""
    context_max_turns_kept: int | None = None
    """Bounded context: the model sees the task and only the last k turns (None: all turns)."""
    context_max_tokens: int | None = None
    """Bounded context: drop the oldest turns until the context has at most this many tokens."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.max_turns}")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {sorted(STRATEGIES)}, got {self.strategy!r}")
        for name in ("context_max_turns_kept", "context_max_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 when set, got {value}")

    @classmethod
    def of(cls, settings: RolloutSettings, **engine: Any) -> EngineConfig:
        """`settings`' budgets and sampling with the engine's own fields (`max_turns=`, ...)."""
        shared = {f.name: getattr(settings, f.name) for f in fields(RolloutSettings)}
        return cls(**shared, **engine)


@dataclass
class Episode:
    """One live episode: its conversation, env and bookkeeping."""

    index: int
    traj: Trajectory
    conv: TokenConversation | MessageConversation | None = None
    env: AsyncEnv | None = None
    done: bool = False
    broken: bool = False
    observation: str = ""
    parse_errors: int = 0
    closed: bool = False
    max_tokens: int | None = None
    """Per-turn token cap of this episode (`arun(max_tokens=...)`); None: `config.max_tokens`."""
    agent: StrategyState | None = None
    """The strategy's state of this episode (set at reset)."""

    def finish(self, stop_reason: str, *, truncated: bool = False, terminated: bool = False) -> None:
        self.done = True
        self.traj.truncated = self.traj.truncated or truncated
        self.traj.terminated = self.traj.terminated or terminated
        self.traj.meta["stop_reason"] = stop_reason

    def fail(self, reason: str) -> None:
        self.done, self.broken = True, True
        self.traj.failed, self.traj.fail_reason = True, reason
        self.traj.meta["stop_reason"] = "failed"


@dataclass
class EngineStats:
    rounds: int = 0
    """Batched generations of the lock-step engine (0 for the async engine)."""
    turns: int = 0
    """Assistant turns sampled."""
    episodes: int = 0
    sampled_tokens: int = 0
    generate_seconds: float = 0.0
    env_seconds: float = 0.0
    wall_seconds: float = 0.0
    round_sizes: list[int] = field(default_factory=list)

    @property
    def tokens_per_second(self) -> float:
        return self.sampled_tokens / self.wall_seconds if self.wall_seconds else 0.0


RoundHook = Callable[[int, Sequence[Episode]], None]


class RolloutEngine:
    """Runs episodes of one env family with one backend (see the module docstring)."""

    def __init__(
        self,
        backend: PolicyBackend,
        pool: EnvPool,
        config: EngineConfig | None = None,
        *,
        prompt: FamilyPrompt | None = None,
    ) -> None:
        self.backend = backend
        self.pool = pool
        self.config = config or EngineConfig()
        self.prompt = prompt or get_prompt(pool.family)
        self.fmt = ChatFormat(backend.tokenizer) if backend.token_level else None
        self.strategy = get_strategy(self.config.strategy)
        self.stats = EngineStats()
        self._on_finish: Callable[[Trajectory], None] | None = None

    def run(self, item_ids: Sequence[str], **kwargs: Any) -> list[Trajectory]:
        """Play every item `n` times; returns trajectories in (item, sample) order (`arun`'s
        keywords). `on_round(round, live_episodes)` runs after each round; `on_finish(trajectory)`
        as each episode ends (e.g. to stream results to disk during a long eval)."""
        return asyncio.run(self.arun(item_ids, **kwargs))

    async def arun(
        self,
        item_ids: Sequence[str],
        *,
        n: int = 1,
        seed: int | Sequence[int] = 0,
        max_turns: int | Sequence[int] | None = None,
        max_tokens: int | Sequence[int] | None = None,
        group_offset: int = 0,
        on_round: RoundHook | None = None,
        on_finish: Callable[[Trajectory], None] | None = None,
    ) -> list[Trajectory]:
        """`run` inside a running event loop. `seed` (the env reset seed of each item's group),
        `max_turns` (mixed schedules) and `max_tokens` (per turn, at most `config.max_tokens`; the
        token schedule) take one value for all items or one per item."""
        cfg = self.config
        caps = _per_item("max_turns", item_ids, cfg.max_turns if max_turns is None else max_turns)
        token_caps = _per_item("max_tokens", item_ids, cfg.max_tokens if max_tokens is None else max_tokens)
        seeds = _per_item("seed", item_ids, seed)
        episodes = [
            Episode(
                index=g * n + k,
                traj=Trajectory(
                    item_id=item,
                    category=self._category(item),
                    max_turns=caps[g],
                    seed=seeds[g],
                    group_id=group_offset + g,
                    sample_index=k,
                ),
                max_tokens=token_caps[g],
            )
            for g, item in enumerate(item_ids)
            for k in range(n)
        ]
        start = time.perf_counter()
        progress = RolloutProgress(len(episodes), enabled=cfg.progress)
        self.backend.clear()
        self._on_finish = on_finish
        try:
            with progress:
                await self._play(episodes, progress, on_round, start)
        finally:
            for ep in episodes:
                if not ep.done:
                    ep.fail("rollout interrupted")
            await self._finish_done(episodes)
            await self.pool.aclose()
            self.stats.wall_seconds = time.perf_counter() - start
        self.stats.episodes += len(episodes)
        return [ep.traj for ep in episodes]

    async def _play(
        self, episodes: list[Episode], progress: RolloutProgress, on_round: RoundHook | None, start: float
    ) -> None:
        """Lock-step rounds until every episode is done (see the module docstring)."""
        waiting = list(reversed(episodes))
        live: list[Episode] = []
        while waiting or live:
            admitted: list[Episode] = []
            while waiting and len(live) + len(admitted) < self.config.batch_size:
                admitted.append(waiting.pop())
            await asyncio.gather(*(self._start(ep) for ep in admitted))
            live += admitted
            await self._finish_done(live)
            live = [ep for ep in live if not ep.done]
            if not live:
                continue
            await self._round(live)
            self.stats.rounds += 1
            self.stats.round_sizes.append(len(live))
            if on_round is not None:
                on_round(self.stats.rounds, live)
            await self._finish_done(live)
            live = [ep for ep in live if not ep.done]
            self.stats.wall_seconds = time.perf_counter() - start
            progress.update(
                done=sum(ep.done for ep in episodes),
                live=len(live),
                rounds=self.stats.rounds,
                tokens_per_s=self.stats.tokens_per_second,
            )

    async def _round(self, live: list[Episode]) -> None:
        """One batched generation for every live episode, then their env steps, concurrently."""
        asking = [(ep, req) for ep in live if (req := self._request(ep)) is not None]
        if not asking:
            return
        seed = None if self.config.temperature == 0 else hash((asking[0][0].traj.seed, self.stats.rounds))
        params = replace(self.sampling, seed=None if seed is None else seed % 2**31)
        t0 = time.perf_counter()
        results: list[GenerationResult] = await asyncio.to_thread(
            self.backend.generate, [req for _, req in asking], params
        )
        self.stats.generate_seconds += time.perf_counter() - t0
        stepping = [
            (ep, action)
            for (ep, _), result in zip(asking, results, strict=True)
            if (action := self._take_result(ep, result)) is not None
        ]
        t0 = time.perf_counter()
        outcomes = await asyncio.gather(*(self._step(ep, action) for ep, action in stepping))
        self.stats.env_seconds += time.perf_counter() - t0
        for (ep, _), outcome in zip(stepping, outcomes, strict=True):
            self._take_outcome(ep, outcome)

    # ------------------------------------------------------------------ one episode's turn
    # Both engines play a turn with these: `_request`, then the backend, `_take_result`, and when
    # it gives an action, `_step` and `_take_outcome`.

    async def _start(self, ep: Episode) -> None:
        cfg, traj = self.config, ep.traj
        try:
            ep.env = await asyncio.wait_for(self.pool.acquire(), cfg.env_timeout_s)
            observation, info = await asyncio.wait_for(
                ep.env.reset(traj.item_id, seed=traj.seed), cfg.env_timeout_s
            )
        except Exception as exc:  # noqa: BLE001 (any env failure fails this episode only)
            ep.fail(_reason("reset", exc, cfg.env_timeout_s))
            return
        traj.category = str(info.get("category", traj.category))
        traj.score, traj.success = float(info.get("score", 0.0)), bool(info.get("success", False))
        record_view(traj, info)
        record_state(traj, info)
        if cfg.show_available_actions:
            try:
                observation = await self._with_actions(ep.env, observation)
            except Exception as exc:  # noqa: BLE001
                ep.fail(_reason("available actions", exc, cfg.env_timeout_s))
                return
        messages = self.strategy.initial_messages(self.prompt, observation)
        ep.agent = self.strategy.start(self.prompt)
        ep.agent.last_observation = observation
        ep.conv = TokenConversation(self.fmt, messages) if self.fmt else MessageConversation(messages)

    def _request(self, ep: Episode) -> GenerationRequest | None:
        """The episode's next turn to generate, its `max_tokens` lowered to what is left of the
        response budget; None when nothing is left (the episode ends, truncated)."""
        assert ep.conv is not None
        cfg = self.config
        if self.bounded:
            ep.conv.bound(cfg.context_max_turns_kept, cfg.context_max_tokens)
        budget, reason = self._room(ep)
        if self.backend.token_level and budget < 1:
            ep.finish(reason, truncated=True)
            return None
        return GenerationRequest(
            token_ids=list(ep.conv.token_ids),
            messages=ep.conv.context_messages,
            max_tokens=min(ep.max_tokens or self.config.max_tokens, self.config.max_tokens, budget),
            cache_key=ep.index,
        )

    def _take_result(self, ep: Episode, result: GenerationResult) -> str | None:
        """Append the sampled turn; returns the action to step the env with, or None: the model
        failed (the episode fails) or the action did not parse (answered with the parse error)."""
        assert ep.conv is not None
        if result.error is not None:
            ep.fail(f"model error: {result.error}")
            return None
        self.stats.sampled_tokens += result.num_tokens
        self.stats.turns += 1
        content = ep.conv.add_assistant(result.token_ids, result.logprobs, result.finish_reason, result.text)
        ep.traj.num_turns += 1
        assert ep.agent is not None
        turn = ep.agent.read(content)
        if turn.is_plan:  # no env step: reward 0, not invalid, the state it was sampled in
            record_turn(ep.traj, 0.0)
            self._after_turn(ep, ep.agent.next_observation(turn.feedback))
            return None
        parsed = self.prompt.parse_action(turn.text)
        if parsed.action is None:
            ep.parse_errors += 1
            record_turn(ep.traj, 0.0, invalid=True)
            self._after_turn(ep, ep.agent.next_observation(str(parsed.error), failed=True))
        return parsed.action

    def _take_outcome(self, ep: Episode, outcome: StepResult | str) -> None:
        """Record an env step's result (a string: the env failed) and end the episode if it is over."""
        traj = ep.traj
        if isinstance(outcome, str):
            record_turn(traj, 0.0)
            ep.fail(outcome)
            return
        record_turn(traj, outcome.reward, outcome.info)
        traj.reward += float(outcome.reward)
        traj.success = bool(outcome.info.get("success", traj.success))
        traj.score = float(outcome.info.get("score", traj.score))
        record_view(traj, outcome.info)
        if outcome.terminated:
            ep.observation = outcome.observation
            ep.finish("terminated", terminated=True, truncated=outcome.truncated)
        elif outcome.truncated and traj.num_turns < self._cap(ep):
            ep.observation = outcome.observation
            ep.finish("env_truncated", truncated=True)
        else:  # the turn cap is counted here only: on its turn it is the stop reason
            assert ep.agent is not None
            self._after_turn(ep, ep.agent.next_observation(outcome.observation, info=outcome.info))

    async def _step(self, ep: Episode, action: str) -> StepResult | str:
        assert ep.env is not None
        try:
            result = await asyncio.wait_for(ep.env.step(action), self.config.env_timeout_s)
            if self.config.show_available_actions and not result.done:
                result.observation = await self._with_actions(ep.env, result.observation)
            return result
        except Exception as exc:  # noqa: BLE001
            return _reason("step", exc, self.config.env_timeout_s)

    async def _with_actions(self, env: AsyncEnv, observation: str) -> str:
        """`observation` followed by the env's available actions, when it lists them."""
        actions = await asyncio.wait_for(env.available_actions(), self.config.env_timeout_s)
        return f"{observation}\n\nAvailable actions: {', '.join(actions)}" if actions else observation

    def _after_turn(self, ep: Episode, observation: str) -> None:
        """Turn cap, then the budget check, then the observation turn."""
        assert ep.conv is not None
        ep.observation = observation
        if ep.traj.num_turns >= self._cap(ep):
            ep.finish("max_turns", truncated=True)
            return
        ids = self.fmt.observation_ids(observation) if self.fmt else None
        if ids is not None:
            room, reason = self._room(ep)
            if len(ids) + 1 > room:
                ep.finish(reason, truncated=True)
                return
        ep.conv.add_observation(observation, ids)

    def _room(self, ep: Episode) -> tuple[int, str]:
        """Tokens the episode's context may still grow by (keeping room for the template's end of
        turn), and the stop reason of the budget that binds: `max_response_length` (tokens after
        the prompt) or the backend's `context_limit` (the whole sequence)."""
        assert ep.conv is not None
        close = len(self.fmt.close_ids) if self.fmt else 0
        room = self.config.max_response_length - ep.conv.response_length - close
        limit = self.backend.context_limit
        if limit is not None and self.backend.token_level:
            in_context = limit - len(ep.conv.token_ids) - close
            if in_context < room:
                return in_context, "context_limit"
        return room, "max_response_length"

    async def _finish_done(self, episodes: Sequence[Episode]) -> None:
        """Write finished episodes' trajectories, drop their caches, give their envs back."""
        closing = []
        for ep in episodes:
            if not ep.done or ep.closed:
                continue
            ep.closed = True
            self.backend.release(ep.index)
            self._write(ep)
            if self._on_finish is not None:
                self._on_finish(ep.traj)
            if ep.env is not None:
                closing.append(self.pool.release(ep.env, broken=ep.broken))
                ep.env = None
        await asyncio.gather(*closing, return_exceptions=True)

    def _write(self, ep: Episode) -> None:
        traj, conv = ep.traj, ep.conv
        traj.meta.setdefault("stop_reason", "failed" if traj.failed else "terminated")
        traj.meta["parse_errors"] = ep.parse_errors
        traj.meta["logprob_temperature"] = self.sampling.reported_temperature
        traj.meta["final_observation"] = ep.observation
        if ep.agent is not None:
            traj.meta.update(ep.agent.meta())
        if conv is None:
            return
        traj.messages = conv.messages
        traj.token_ids, traj.loss_mask, traj.logprobs = conv.token_ids, conv.loss_mask, conv.logprobs
        traj.prompt_length, traj.turn_ends = conv.prompt_length, conv.turn_ends
        traj.meta["sampled_tokens"] = conv.sampled_tokens
        if self.bounded:  # the first context window here, the later ones as segments
            windows = conv.all_windows()
            if windows:
                first = windows[0]
                traj.token_ids, traj.loss_mask, traj.logprobs = (
                    first["token_ids"],
                    first["loss_mask"],
                    first["logprobs"],
                )
                traj.prompt_length, traj.turn_ends = first["prompt_length"], first["turn_ends"]
                traj.segments = windows[1:]
            traj.meta["context_tokens"] = conv.context_tokens

    # ------------------------------------------------------------------ helpers

    @property
    def bounded(self) -> bool:
        """Bounded context is on (`context_max_turns_kept` or `context_max_tokens` set)."""
        cfg = self.config
        return cfg.context_max_turns_kept is not None or cfg.context_max_tokens is not None

    def _cap(self, ep: Episode) -> int:
        """The episode's turn cap, plus its plan turns (which do not count against it)."""
        free = ep.agent.free_turns if ep.agent is not None else 0
        return (ep.traj.max_turns or self.config.max_turns) + free

    @property
    def sampling(self) -> SamplingParams:
        """How every turn is sampled (each round adds its own seed)."""
        cfg = self.config
        return SamplingParams(
            max_tokens=cfg.max_tokens,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            top_k=cfg.top_k,
            logprob_temperature=cfg.logprob_temperature,
        )

    def _category(self, item_id: str) -> str:
        try:
            return get_family(self.pool.family).category_of(item_id)
        except Exception:  # noqa: BLE001 (unknown locally: the env's info names it at reset)
            return "unknown"


def _per_item(name: str, item_ids: Sequence[str], value: int | Sequence[int]) -> list[int]:
    """`value` for every item, or the given list of one value per item (checked)."""
    if isinstance(value, int):
        return [value] * len(item_ids)
    if len(value) != len(item_ids):
        raise ValueError(f"{name} has {len(value)} values for {len(item_ids)} items")
    return [int(v) for v in value]


def _reason(what: str, exc: BaseException, timeout: float) -> str:
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return f"env {what} timed out after {timeout:g}s"
    return f"env {what} failed: {type(exc).__name__}: {exc}"
