"""The vLLM side of the `vllm` backend: one process running `vllm.LLM`, driven over a local socket.

vLLM pins its own transformers / fastapi / setuptools, which conflict with horizonrl's, so it
lives in its own virtualenv (`.venv-vllm/`, made by `scripts/install.sh`) and this file runs
with that venv's python, as a script (`python vllm_worker.py ADDRESS`): it imports the
standard library, torch and vllm only, never the horizonrl package.

Channel: `multiprocessing.connection` over a Unix socket at ADDRESS, authenticated with the
hex key in `$HORIZONRL_VLLM_AUTHKEY`. Messages are pickled dicts of plain values:

    -> {"op": "init", "engine": {LLM kwargs}}                 <- {"id": "init", "ok": True, "result": {...}}
    -> {"op": "generate", "id": ID, "prompt": [ids], "sampling": {SamplingParams kwargs},
        "lora": None | {"name", "id", "path"}}                  <- {"id": ID, "ok": True, "result": {
                                                                     "token_ids", "logprobs",
                                                                     "prompt_logprobs", "finish_reason",
                                                                     "cached_tokens"}}
    -> {"op": "call", "id": ID, "name": NAME, "kwargs": {...}}  <- {"id": ID, "ok": True, "result": ...}
    -> {"op": "shutdown"}

Generation requests go straight into vLLM's engine (`LLMEngine.add_request` + `step`), so
requests that arrive while others run join the running batch (continuous batching) and each
result is sent back as soon as its request finishes. A `call` (weight load, sleep, cache
reset) is a barrier: it runs once every request sent before it has finished, and requests
sent after it wait for it, so no request ever mixes two weight versions.

Logprobs come from vLLM's sampler in `processed_logprobs` mode: under the distribution the
token was sampled from (temperature, top-k, top-p applied; greedy: the raw softmax). Prompt
logprobs (`compute_logprobs`, the post-sync check) are raw (temperature 1) in every mode.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections import deque
from multiprocessing.connection import Client
from typing import Any

# Run as a script, this file's folder is sys.path[0], and its sibling vllm.py would shadow vLLM.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

CALLS = ("load_weights", "reset_prefix_cache", "sleep", "wake_up", "stats")


def _load_weights(worker: Any, path: str) -> int:
    """Runs inside vLLM's model worker: reload every `*.safetensors` tensor in `path` in place.

    vLLM's in-place reload (`Worker.reload_weights` with an iterator of checkpoint-format
    tensors) re-runs each layer's post-load processing; a bare `model.load_weights` would not
    (the CPU kernels repack weights after loading, leaving the checkpoint-shaped ones empty).
    """
    from safetensors.torch import safe_open

    files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
    if not files:
        raise FileNotFoundError(f"no .safetensors file in {path}")
    count = 0

    def weights() -> Any:
        nonlocal count
        for name in files:
            with safe_open(os.path.join(path, name), framework="pt") as f:
                for key in f.keys():  # noqa: SIM118 (safe_open is not a mapping)
                    count += 1
                    yield key, f.get_tensor(key)

    worker.reload_weights(weights_iterator=weights(), is_checkpoint_format=True)
    _refresh_cpu_embeddings(worker.model_runner.model)
    return count


def _refresh_cpu_embeddings(model: Any) -> None:
    """Re-pack the CPU GEMM copy of embedding-shaped weights after a reload.

    On CPU an embedding (and a tied LM head) keeps a packed copy of its weight for the logits
    GEMM (`cpu_linear`), made once after loading; the checkpoint skips a tied `lm_head`, so the
    reload never re-packs it and the logits would keep coming from the old embedding.
    """
    from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding

    inner = getattr(model, "model", None)
    embed = getattr(inner, "embed_tokens", None)
    head = getattr(model, "lm_head", None)
    config = getattr(model, "config", None)
    if embed is not None and head is not None and getattr(config, "tie_word_embeddings", False):
        head.weight = embed.weight  # a reload may have replaced the parameter the head was tied to
    for module in model.modules():
        if isinstance(module, VocabParallelEmbedding) and hasattr(module, "cpu_linear"):
            module.quant_method.process_weights_after_loading(module)


class Worker:
    """The engine, its in-flight requests and the message loop (see the module docstring)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.inbox: deque[dict[str, Any]] = deque()
        self.llm: Any = None
        self.on_cuda = False
        self.live: set[str] = set()  # ids of the requests the engine holds
        self.broken: str | None = None
        """vLLM's error once an engine step failed: every later request and call gets it."""

    def send(self, msg_id: str, ok: bool, result: Any = None, error: str | None = None) -> None:
        self.conn.send({"id": msg_id, "ok": ok, "result": result, "error": error})

    # --- engine -----------------------------------------------------------------------
    def start(self, engine_kwargs: dict[str, Any]) -> dict[str, Any]:
        import vllm
        from vllm import LLM
        from vllm.platforms import current_platform

        begin = time.perf_counter()
        if current_platform.is_cpu():
            # a chunked prefill discards the token sampled for the unfinished request and rewinds
            # its seeded generator (`set_offset`), which CPU generators lack: a batch of seeded
            # requests over `max_num_batched_tokens` (4096 on CPU) would fail the engine step
            # ("CPU Generator does not use offset"). Unchunked, a prompt that does not fit waits.
            engine_kwargs = {"enable_chunked_prefill": False, **engine_kwargs}
        self.llm = LLM(**engine_kwargs)
        self.on_cuda = bool(current_platform.is_cuda_alike())
        return {
            "vllm": vllm.__version__,
            "start_s": time.perf_counter() - begin,
            "device": "cuda" if self.on_cuda else str(current_platform.device_type),
            "pid": os.getpid(),
            "max_model_len": int(self.llm.llm_engine.model_config.max_model_len),
        }

    def add(self, msg: dict[str, Any]) -> None:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        lora = None
        if msg.get("lora"):
            from vllm.lora.request import LoRARequest

            spec = msg["lora"]
            lora = LoRARequest(spec["name"], int(spec["id"]), spec["path"])
        try:
            params = SamplingParams(**msg["sampling"])
            self.llm.llm_engine.add_request(
                msg["id"], TokensPrompt(prompt_token_ids=list(msg["prompt"])), params, lora_request=lora
            )
            self.live.add(msg["id"])
        except Exception as exc:  # a bad request (too long, bad params) fails alone
            self.send(msg["id"], False, error=f"{type(exc).__name__}: {exc}")

    def finished(self, out: Any) -> None:
        self.live.discard(out.request_id)
        completion = out.outputs[0]
        logprobs = []
        for token, entry in zip(completion.token_ids, completion.logprobs or [], strict=False):
            logprobs.append(float(entry[token].logprob))
        prompt_logprobs = None
        if out.prompt_logprobs is not None:
            ids = out.prompt_token_ids
            prompt_logprobs = [0.0] + [
                float(entry[tok].logprob) for tok, entry in zip(ids[1:], out.prompt_logprobs[1:], strict=True)
            ]
        self.send(
            out.request_id,
            True,
            {
                "token_ids": list(completion.token_ids),
                "logprobs": logprobs,
                "prompt_logprobs": prompt_logprobs,
                "finish_reason": completion.finish_reason or "length",
                "cached_tokens": int(getattr(out, "num_cached_tokens", 0) or 0),
            },
        )

    def call(self, name: str, kwargs: dict[str, Any]) -> Any:
        llm = self.llm
        if name == "load_weights":
            start = time.perf_counter()
            counts = llm.collective_rpc(_load_weights, args=(kwargs["path"],))
            llm.reset_prefix_cache()  # cached KV was computed with the old weights
            return {"tensors": counts[0], "seconds": time.perf_counter() - start}
        if name == "reset_prefix_cache":
            return bool(llm.reset_prefix_cache())
        if name in ("sleep", "wake_up"):
            if not self.on_cuda:  # vLLM's sleep mode frees GPU memory; nothing to free on CPU
                return {"skipped": "sleep mode is CUDA-only"}
            if name == "sleep":
                llm.sleep(level=int(kwargs.get("level", 1)))
            else:
                llm.wake_up()
            return {"done": name}
        if name == "stats":
            return {"pid": os.getpid(), "unfinished": llm.llm_engine.get_num_unfinished_requests()}
        raise ValueError(f"unknown call {name!r}; known: {', '.join(CALLS)}")

    # --- loop -------------------------------------------------------------------------
    def run(self) -> None:
        engine = None
        while True:
            busy = engine is not None and engine.has_unfinished_requests()
            if not self.inbox or busy:
                timeout = 0.0 if (busy or self.inbox) else None
                while self.conn.poll(timeout):
                    self.inbox.append(self.conn.recv())
                    timeout = 0.0
            while self.inbox:
                msg = self.inbox[0]
                op = msg.get("op")
                if op == "shutdown":
                    return
                if op == "init":
                    self.inbox.popleft()
                    try:
                        self.send("init", True, self.start(msg["engine"]))
                        engine = self.llm.llm_engine
                    except Exception:
                        self.send("init", False, error=traceback.format_exc())
                        return
                elif self.broken is not None:
                    self.inbox.popleft()
                    self.send(str(msg.get("id")), False, error=self.broken)
                elif op == "generate":
                    self.inbox.popleft()
                    self.add(msg)
                elif op == "call":
                    if engine is not None and engine.has_unfinished_requests():
                        break  # barrier: finish what was sent before the call first
                    self.inbox.popleft()
                    try:
                        self.send(msg["id"], True, self.call(msg["name"], msg.get("kwargs") or {}))
                    except Exception as exc:
                        self.send(msg["id"], False, error=f"{type(exc).__name__}: {exc}")
                else:
                    self.inbox.popleft()
                    self.send(str(msg.get("id")), False, error=f"unknown op {op!r}")
            if engine is not None and engine.has_unfinished_requests():
                try:
                    outputs = engine.step()
                except Exception as exc:
                    # the engine cannot go on (e.g. a model its kernels do not support): every request
                    # it held, and every one sent later (they may be on their way now), fails with
                    # vLLM's own error until the backend shuts this worker down
                    traceback.print_exc()
                    self.broken = f"vLLM's engine step failed: {type(exc).__name__}: {exc}"
                    for request_id in sorted(self.live):
                        self.send(request_id, False, error=self.broken)
                    self.live.clear()
                    engine = None
                    continue
                for out in outputs:
                    if out.finished:
                        self.finished(out)


def _exit_with_parent() -> None:
    """End this process (and vLLM's under it) when the backend's process is gone."""
    import threading

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main() -> None:
    _exit_with_parent()
    address = sys.argv[1]
    authkey = bytes.fromhex(os.environ.pop("HORIZONRL_VLLM_AUTHKEY"))
    conn = Client(address, family="AF_UNIX", authkey=authkey)
    try:
        Worker(conn).run()
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass  # the backend went away: exit quietly
    finally:
        conn.close()


if __name__ == "__main__":  # vLLM starts its own processes with spawn: guard the entry point
    main()
