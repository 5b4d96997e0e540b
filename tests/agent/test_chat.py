"""Token-exact conversations against three chat templates: SmolLM2's own, Llama-3-style, Qwen2-style.

For each template, a conversation built turn by turn (real sampled turns from the tiny model
and scripted ones, stopped by the end-of-turn token or cut by max_tokens) must decode to the
same text that `apply_chat_template` renders for its messages, and its `loss_mask` must be 1
exactly on sampled tokens.
"""

from __future__ import annotations

import copy

import pytest
import torch

from horizonrl.agent.chat import ChatFormat, TokenConversation, render
from horizonrl.models import load_tokenizer, tiny_model_config
from horizonrl.rollout.backends.base import GenerationRequest, SamplingParams
from horizonrl.rollout.backends.hf import HFBackend

LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)

QWEN2_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. "
    "You are a helpful assistant.<|im_end|>\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first) "
    "or (message.role == 'assistant') %}"
    "{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"
)


def _tokenizer(kind: str):
    tok = copy.deepcopy(load_tokenizer("tiny"))
    if kind == "llama3":
        tok.add_special_tokens(
            {
                "bos_token": "<|begin_of_text|>",
                "additional_special_tokens": ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
            }
        )
        tok.eos_token = "<|eot_id|>"
        tok.chat_template = LLAMA3_TEMPLATE
    elif kind == "qwen2":
        tok.chat_template = QWEN2_TEMPLATE
    return tok


@pytest.fixture(scope="module", params=["smollm2", "llama3", "qwen2"])
def setup(request):
    tok = _tokenizer(request.param)
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    config = tiny_model_config(len(tok), eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    model = AutoModelForCausalLM.from_config(config)
    return request.param, tok, HFBackend(model, tok)


MESSAGES = [
    {"role": "system", "content": "You craft things."},
    {"role": "user", "content": "Goal: 1 stick.\nCommands: craft 4 stick using 2 planks"},
]


def _check(conv: TokenConversation, tok) -> None:
    """The invariants every trajectory must satisfy (also used by the engine tests)."""
    n = len(conv.token_ids)
    assert len(conv.loss_mask) == n and len(conv.logprobs) == n
    for mask, lp in zip(conv.loss_mask, conv.logprobs, strict=True):
        assert (mask == 1) == (lp is not None)
    assert sum(conv.loss_mask) == conv.sampled_tokens
    assert all(conv.loss_mask[i] == 1 for i in conv.turn_ends)
    assert conv.loss_mask[: conv.prompt_length] == [0] * conv.prompt_length


def test_template_separators_are_derived(setup):
    kind, tok, _ = setup
    fmt = ChatFormat(tok)
    chatml = ("<|im_end|>\n", "<|im_start|>user\nYou got 1 oak log.<|im_end|>\n<|im_start|>assistant\n")
    llama3 = (
        "<|eot_id|>",
        "<|start_header_id|>user<|end_header_id|>\n\nYou got 1 oak log.<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n",
    )
    close, obs = {"smollm2": chatml, "qwen2": chatml, "llama3": llama3}[kind]
    assert fmt.assistant_close_text == close
    assert fmt.observation_text("You got 1 oak log.") == obs
    assert tok.convert_ids_to_tokens(fmt.eot_id) == close.strip()


def test_sampled_conversation_decodes_to_the_template_text(setup):
    kind, tok, backend = setup
    fmt = ChatFormat(tok)
    conv = TokenConversation(fmt, MESSAGES)
    assert conv.token_ids == fmt.encode(render(tok, MESSAGES, add_generation_prompt=True))
    finishes = []
    for turn, obs in enumerate(["You got 2 planks.", "Crafted 4 stick.  Done? ", "ok"]):
        params = SamplingParams(max_tokens=12, temperature=1.0, seed=turn)
        [res] = backend.generate([GenerationRequest(token_ids=list(conv.token_ids), cache_key="ep")], params)
        finishes.append(res.finish_reason)
        content = conv.add_assistant(res.token_ids, res.logprobs, res.finish_reason, res.text)
        sampled_mask_end = conv.turn_ends[-1]
        assert (
            conv.token_ids[sampled_mask_end - len(res.token_ids) + 1 : sampled_mask_end + 1] == res.token_ids
        )
        assert content == fmt.content_of(res.token_ids, res.finish_reason)
        conv.add_observation(obs)
    # a scripted turn that stops with the end-of-turn token, and one cut by max_tokens
    said = fmt.encode("Thought: I have planks.\nAction: craft 4 stick using 2 oak planks")
    conv.add_assistant([*said, fmt.eot_id], [-0.5] * (len(said) + 1), "stop")
    assert conv.loss_mask[conv.turn_ends[-1]] == 1  # the EOT the model emitted is trained on
    assert conv.token_ids[conv.turn_ends[-1]] == fmt.eot_id
    conv.add_observation("Crafted 4 stick.")
    conv.add_assistant(said[:5], [-0.5] * 5, "length")
    # the cut turn gets the template's closing tokens, unmasked
    tail = conv.token_ids[conv.turn_ends[-1] + 1 :]
    assert tail == fmt.close_ids and conv.loss_mask[conv.turn_ends[-1] + 1 :] == [0] * len(tail)
    _check(conv, tok)
    rendered = render(tok, conv.messages, add_generation_prompt=False)
    decoded = fmt.decode(conv.token_ids)
    if kind == "llama3":
        # Llama-3 trims every content: the only difference allowed is whitespace at content edges.
        assert decoded.replace(" ", "").replace("\n", "") == rendered.replace(" ", "").replace("\n", "")
    else:
        assert decoded == rendered, f"{kind}: token ids do not decode to the template's rendering"


def test_llama3_trimming_is_the_one_reported_difference():
    tok = _tokenizer("llama3")
    fmt = ChatFormat(tok)
    conv = TokenConversation(fmt, MESSAGES)
    clean = fmt.encode("Thought: go.\nAction: inventory")
    conv.add_assistant([*clean, fmt.eot_id], [-1.0] * (len(clean) + 1), "stop")
    conv.add_observation("You carry nothing.")
    assert fmt.decode(conv.token_ids) == render(tok, conv.messages, add_generation_prompt=True)
    padded = fmt.encode("Thought: go.\nAction: inventory\n\n")
    conv.add_assistant([*padded, fmt.eot_id], [-1.0] * (len(padded) + 1), "stop")
    decoded, rendered = fmt.decode(conv.token_ids), render(tok, conv.messages, add_generation_prompt=False)
    assert decoded != rendered  # the template drops the trailing newlines the model really produced
    assert decoded.replace("inventory\n\n<|eot_id|>", "inventory<|eot_id|>") == rendered


def test_template_without_chat_template_is_refused():
    tok = copy.deepcopy(load_tokenizer("tiny"))
    tok.chat_template = None
    with pytest.raises(ValueError, match="chat_template"):
        ChatFormat(tok)
