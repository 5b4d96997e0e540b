"""The openai backend against a real HTTP server speaking the chat-completions format."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from horizonrl.eval.evaluate import EvalSettings, run_eval
from horizonrl.rollout.backends.base import GenerationRequest, SamplingParams
from horizonrl.rollout.backends.openai import OpenAIBackend
from horizonrl.rollout.trajectory import read_jsonl
from tests.threaded_server import ThreadedServer

REPLY = "Thought: Let me look at what I carry.\nAction: inventory"


def _chat_app(seen: list[dict[str, Any]]) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> JSONResponse:
        body = await request.json()
        seen.append({"body": body, "auth": request.headers.get("authorization")})
        if body["model"] == "refused-model":
            return JSONResponse({"error": {"message": "model not found"}}, status_code=404)
        length = body["max_tokens"] < 5
        return JSONResponse(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "Thought: Let" if length else REPLY},
                        "finish_reason": "length" if length else "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 4 if length else 12, "total_tokens": 22},
            }
        )

    return app


@pytest.fixture(scope="module")
def chat_server():
    seen: list[dict[str, Any]] = []
    server = ThreadedServer(_chat_app(seen), lifespan="off")
    yield server, seen
    server.stop()


def test_generate_sends_messages_and_key(chat_server, monkeypatch):
    server, seen = chat_server
    monkeypatch.setenv("HORIZONRL_TEST_KEY", "sk-test")
    backend = OpenAIBackend("scripted", f"{server.url}/v1", api_key_env="HORIZONRL_TEST_KEY")
    messages = [{"role": "user", "content": "hi"}]
    res = backend.generate(
        [GenerationRequest(messages=messages), GenerationRequest(messages=messages, max_tokens=3)],
        SamplingParams(max_tokens=64, temperature=0.0, seed=5),
    )
    assert [r.text for r in res] == [REPLY, "Thought: Let"]
    assert [r.finish_reason for r in res] == ["stop", "length"]
    assert [r.num_tokens for r in res] == [12, 4] and res[0].token_ids == []
    bodies = [s["body"] for s in seen[-2:]]
    assert {b["max_tokens"] for b in bodies} == {64, 3}
    assert all(b["messages"] == messages and b["temperature"] == 0.0 and b["seed"] == 5 for b in bodies)
    assert seen[-1]["auth"] == "Bearer sk-test"
    backend.close()


def test_eval_of_an_api_model_on_textcraft(chat_server, tmp_path, monkeypatch):
    server, seen = chat_server
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings = EvalSettings(
        model="scripted", backend="openai", base_url=f"{server.url}/v1", env=["textcraft"], limit=2,
        max_turns=2, out=str(tmp_path), progress=False,
    )  # fmt: skip
    report = run_eval(settings)
    assert report["n_items"] == 2 and report["n_failed"] == 0 and report["mean_turns"] == 2.0
    trajs = read_jsonl(tmp_path / "trajectories.jsonl")
    for t in trajs:
        assert [m["role"] for m in t.messages] == ["system", "user", "assistant", "user", "assistant"]
        assert t.messages[2]["content"] == REPLY
        assert "Inventory" in t.messages[3]["content"] or "inventory" in t.messages[3]["content"].lower()
        assert t.token_ids == [] and t.loss_mask == [] and t.logprobs == []
    first = seen[-1]["body"]["messages"]
    assert first[0]["role"] == "system" and "Minecraft" in first[1]["content"]
    assert seen[-1]["auth"] is None  # no key in the environment: none sent


def test_refused_requests_fail_their_episodes_not_the_eval(chat_server, tmp_path):
    server, _ = chat_server
    settings = EvalSettings(
        model="refused-model", backend="openai", base_url=f"{server.url}/v1", env=["textcraft"], limit=2,
        max_turns=2, out=str(tmp_path), progress=False,
    )  # fmt: skip
    report = run_eval(settings)
    assert report["n_failed"] == 2 and report["success_rate"] == 0.0
    for t in read_jsonl(tmp_path / "trajectories.jsonl"):
        assert t.failed and "HTTP 404" in (t.fail_reason or "") and "model error" in (t.fail_reason or "")
