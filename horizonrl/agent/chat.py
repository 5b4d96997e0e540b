"""Token-exact conversations: the trajectory holds the ids the model sampled, never re-encoded.

    fmt = ChatFormat(tokenizer)                        # separators derived from its chat template
    conv = TokenConversation(fmt, prompt.initial_messages(first_observation))
    conv.token_ids                                     # ids so far (ends with the generation prompt)
    conv.add_assistant(result.token_ids, result.logprobs)   # sampled ids, mask 1
    conv.add_observation("You got 1 oak log.")         # the template's user turn, mask 0

How the ids are laid out:

1. The prompt is `apply_chat_template(system + first user, add_generation_prompt=True)`.
2. A sampled turn is appended as sampled, with `loss_mask` 1 and its raw logprobs. The
   template's end-of-turn token counts as sampled only when the model emitted it.
3. Then the rest of the template's assistant closing (e.g. the "\\n" after `<|im_end|>`),
   or all of it when the turn was cut by `max_tokens`, with `loss_mask` 0.
4. An observation is the text the template puts between a closed assistant turn and the
   next assistant content: the user turn plus the generation prompt. It is found by
   rendering `[system, user, assistant(PLACEHOLDER)]` and the same plus `user(obs)` with
   `add_generation_prompt=True`, and taking what the second adds; only that text is
   tokenized. Any HF template works this way, with no per-model code.

Bounded context (`bound`): before a turn is sampled, the oldest turns may be dropped, so the
model sees the task (system + first user turn) and the last turns only. The new context is the
prompt's ids followed by each kept turn's own ids (sampled + closing + the observation after it),
the very ids already in the conversation: it is what `apply_chat_template` renders for the
kept messages. Every drop closes a *window* (`windows`): the ids of one context the model saw
as it grew, `loss_mask` 1 only on the turns sampled in it (kept turns are context there, 0).

So `decode(token_ids)` equals `apply_chat_template(messages, tokenize=False)` whenever the
template renders each turn independently of the others and keeps contents as given.
Known templates where it does not (tests report them): Llama-3's trims each content,
so a sampled turn with leading/trailing whitespace renders differently; templates that
rewrite earlier assistant turns (Qwen3 dropping `<think>` blocks) or insert per-position
text. The token ids are always what the model actually saw during the rollout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

PLACEHOLDER = "HORIZONRL_ASSISTANT_CONTENT_7f3a"
_PROBE_SYSTEM = "S"
_PROBE_USER = "U"


def render(tokenizer: Any, messages: Sequence[dict[str, str]], *, add_generation_prompt: bool) -> str:
    """The chat template's text for `messages`."""
    text: str = tokenizer.apply_chat_template(
        list(messages), tokenize=False, add_generation_prompt=add_generation_prompt
    )
    return text


class ChatFormat:
    """A tokenizer's chat template, split into the pieces a token-exact rollout needs."""

    def __init__(self, tokenizer: Any, system: str = _PROBE_SYSTEM) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("the tokenizer has no chat_template; set tokenizer.chat_template first")
        self.tokenizer = tokenizer
        self._probe = [{"role": "system", "content": system}, {"role": "user", "content": _PROBE_USER}]
        closed = render(
            tokenizer,
            [*self._probe, {"role": "assistant", "content": PLACEHOLDER}],
            add_generation_prompt=False,
        )
        if closed.count(PLACEHOLDER) != 1:
            raise ValueError("the chat template does not render assistant contents verbatim")
        self._closed = closed
        self.assistant_close_text = closed[closed.index(PLACEHOLDER) + len(PLACEHOLDER) :]
        """Text the template puts after an assistant message's content (`<|im_end|>\\n` for ChatML)."""
        self.close_ids: list[int] = self.encode(self.assistant_close_text)
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        eot = self.close_ids[0] if self.close_ids else None
        if eot is None or (special and eot not in special):
            eot = tokenizer.eos_token_id
        self.eot_id: int | None = eot
        """The end-of-turn token the model emits to end a turn (`<|im_end|>`, `<|eot_id|>`)."""

    def encode(self, text: str) -> list[int]:
        ids: list[int] = self.tokenizer.encode(text, add_special_tokens=False)
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        text: str = self.tokenizer.decode(
            list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False
        )
        return text

    def prompt_ids(self, messages: Sequence[dict[str, str]]) -> list[int]:
        """Ids of the opening messages followed by the generation prompt."""
        return self.encode(render(self.tokenizer, messages, add_generation_prompt=True))

    def observation_text(self, observation: str) -> str:
        """Template text of a user turn after a closed assistant turn, up to the next assistant content."""
        opened = render(
            self.tokenizer,
            [
                *self._probe,
                {"role": "assistant", "content": PLACEHOLDER},
                {"role": "user", "content": observation},
            ],
            add_generation_prompt=True,
        )
        if not opened.startswith(self._closed):
            raise ValueError(
                "the chat template renders earlier turns differently once a user turn follows; "
                "token-exact observation turns cannot be derived from it"
            )
        return opened[len(self._closed) :]

    def observation_ids(self, observation: str) -> list[int]:
        return self.encode(self.observation_text(observation))

    def closing_ids(self, sampled: Sequence[int], finish_reason: str) -> list[int]:
        """Template ids closing a sampled turn (mask 0): all of them unless the model emitted the EOT."""
        if finish_reason == "stop" and sampled and sampled[-1] == self.eot_id and self.close_ids:
            return self.close_ids[1:]
        return list(self.close_ids)

    def content_of(self, sampled: Sequence[int], finish_reason: str) -> str:
        """The assistant message text of a sampled turn (the EOT token excluded)."""
        if finish_reason == "stop" and sampled and sampled[-1] == self.eot_id:
            sampled = sampled[:-1]
        return self.decode(sampled)


class TokenConversation:
    """One episode's conversation as token ids, loss mask and logprobs (see module docstring)."""

    def __init__(self, fmt: ChatFormat, messages: Sequence[dict[str, str]]) -> None:
        self.fmt = fmt
        self.messages: list[dict[str, str]] = [dict(m) for m in messages]
        self.token_ids: list[int] = fmt.prompt_ids(messages)
        self.loss_mask: list[int] = [0] * len(self.token_ids)
        self.logprobs: list[float | None] = [None] * len(self.token_ids)
        self.prompt_length = len(self.token_ids)
        self.turn_ends: list[int] = []
        self.sampled_tokens = 0
        self.context_tokens: list[int] = []
        """Tokens of the context each turn was sampled from."""
        self.windows: list[dict[str, Any]] = []
        """Closed context windows (bounded context), oldest first; see `all_windows`."""
        self._prompt_ids = list(self.token_ids)
        self._initial = len(self.messages)
        self._turn_ids: list[list[int]] = []
        """Each turn's ids: sampled + closing + the observation after it."""
        self._kept_from = 0
        """The first turn in the current context."""

    @property
    def response_length(self) -> int:
        return len(self.token_ids) - self.prompt_length

    @property
    def context_messages(self) -> list[dict[str, str]]:
        """The messages of the current context: the task and the kept turns."""
        return self.messages[: self._initial] + self.messages[self._initial + 2 * self._kept_from :]

    def bound(self, max_turns_kept: int | None, max_tokens: int | None) -> bool:
        """Drop the oldest turns so that at most `max_turns_kept` turns are in the context and it
        has at most `max_tokens` tokens (the last turn is always kept); True when some were."""
        total = len(self._turn_ids)
        first = self._kept_from
        if max_turns_kept is not None:
            first = max(first, total - max_turns_kept)
        if max_tokens is not None:
            size = len(self._prompt_ids) + sum(len(ids) for ids in self._turn_ids[first:])
            while size > max_tokens and first < total - 1:
                size -= len(self._turn_ids[first])
                first += 1
        if first == self._kept_from:
            return False
        self._close_window()
        self._kept_from = first
        self.token_ids = [*self._prompt_ids, *(i for ids in self._turn_ids[first:] for i in ids)]
        self.loss_mask = [0] * len(self.token_ids)
        self.logprobs = [None] * len(self.token_ids)
        self.turn_ends = []
        return True

    def _close_window(self) -> None:
        if self.turn_ends:  # a window in which nothing was sampled trains nothing
            self.windows.append(self._window())

    def _window(self) -> dict[str, Any]:
        return {
            "token_ids": self.token_ids,
            "loss_mask": self.loss_mask,
            "logprobs": self.logprobs,
            "prompt_length": self.prompt_length,
            "turn_ends": self.turn_ends,
        }

    def all_windows(self) -> list[dict[str, Any]]:
        """Every context window, the current one last (one window when nothing was dropped)."""
        if not self.windows:
            return [self._window()]
        return self.windows + ([self._window()] if self.turn_ends else [])

    def _extend(self, ids: Sequence[int], mask: int, logprobs: Sequence[float | None] | None = None) -> None:
        self.token_ids.extend(ids)
        self.loss_mask.extend([mask] * len(ids))
        self.logprobs.extend(logprobs if logprobs is not None else [None] * len(ids))

    def add_assistant(
        self, sampled: Sequence[int], logprobs: Sequence[float], finish_reason: str, text: str | None = None
    ) -> str:
        """Append a sampled turn and its closing; returns the assistant message text."""
        if not sampled:
            raise ValueError("a sampled turn has at least one token")
        if len(logprobs) != len(sampled):
            raise ValueError(f"{len(sampled)} sampled ids but {len(logprobs)} logprobs")
        self.context_tokens.append(len(self.token_ids))
        closing = self.fmt.closing_ids(sampled, finish_reason)
        self._turn_ids.append([*sampled, *closing])
        self._extend(sampled, 1, [float(x) for x in logprobs])
        self.turn_ends.append(len(self.token_ids) - 1)
        self.sampled_tokens += len(sampled)
        self._extend(closing, 0)
        content = self.fmt.content_of(sampled, finish_reason)
        self.messages.append({"role": "assistant", "content": content})
        return content

    def observation_cost(self, observation: str) -> int:
        """Tokens `add_observation(observation)` would append."""
        return len(self.fmt.observation_ids(observation))

    def add_observation(self, observation: str, ids: Sequence[int] | None = None) -> None:
        ids = list(ids) if ids is not None else self.fmt.observation_ids(observation)
        self._extend(ids, 0)
        if self._turn_ids:
            self._turn_ids[-1].extend(ids)
        self.messages.append({"role": "user", "content": observation})


class MessageConversation:
    """The same interface for message-level backends (API models): messages only, no token fields."""

    def __init__(self, messages: Sequence[dict[str, str]]) -> None:
        self.messages: list[dict[str, str]] = [dict(m) for m in messages]
        self.token_ids: list[int] = []
        self.loss_mask: list[int] = []
        self.logprobs: list[float | None] = []
        self.prompt_length = 0
        self.turn_ends: list[int] = []
        self.sampled_tokens = 0
        self.context_tokens: list[int] = []
        self._initial = len(self.messages)
        self._kept_from = 0

    @property
    def response_length(self) -> int:
        return 0

    @property
    def context_messages(self) -> list[dict[str, str]]:
        return self.messages[: self._initial] + self.messages[self._initial + 2 * self._kept_from :]

    def bound(self, max_turns_kept: int | None, max_tokens: int | None) -> bool:
        """`TokenConversation.bound` by turns only (no tokenizer here: `max_tokens` is not applied)."""
        turns = (len(self.messages) - self._initial + 1) // 2
        if max_turns_kept is None or turns - self._kept_from <= max_turns_kept:
            return False
        self._kept_from = turns - max_turns_kept
        return True

    def all_windows(self) -> list[dict[str, Any]]:
        return []

    def add_assistant(
        self, sampled: Sequence[int], logprobs: Sequence[float], finish_reason: str, text: str | None = None
    ) -> str:
        content = text or ""
        self.sampled_tokens += len(sampled)
        self.messages.append({"role": "assistant", "content": content})
        return content

    def observation_cost(self, observation: str) -> int:
        return 0

    def add_observation(self, observation: str, ids: Sequence[int] | None = None) -> None:
        self.messages.append({"role": "user", "content": observation})
