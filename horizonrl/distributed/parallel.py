"""The learner's data parallelism: one process, DDP or FSDP2, behind one small interface.

    parallel = make_parallel(cfg.resources.strategy, device, bf16=cfg.model.bf16)
    model = parallel.wrap(model)                 # DDP(...) / fully_shard per decoder layer + root
    for rows in parallel.micro_batches(rows, lengths, size): ...   # this rank's share, lock-step

Every rank holds the whole rollout batch (the same tensors: see `horizonrl.trainer.distributed`)
and trains on its share of each mini-batch. The loss that one process computes for a mini-batch M
of rows, split into micro-batches m, is

    L(M) = sum_m  w_m * L_m,        w_m = n(m) / n(M)

where `n` counts what the aggregation averages over: sampled tokens (`token-mean`) or rows with a
sampled token (the `seq-mean-*` modes), and `L_m` is the micro-batch's own aggregated loss (a mean
over its n(m) tokens or rows). So `sum_m w_m L_m` is the sum of every per-token (per-row) term over
the whole mini-batch divided by n(M): the mini-batch's token-mean (seq-mean), whatever the split.

On W ranks, rank r runs micro-batches m in its share S_r (the S_r partition M) with the SAME
weights w_m = n(m) / n(M) -- n(M) is known on every rank because every rank has the whole batch --
so rank r's loss is L_r = sum_{m in S_r} w_m L_m and sum_r L_r = L(M). DDP and FSDP2 average
gradients over ranks (all-reduce / reduce-scatter divided by W), which gives grad (1/W) sum_r L_r;
each rank therefore back-propagates W * L_r (`grad_scale`), and the averaged gradient is
grad L(M), the one-process gradient of the same batch. (Averaging per-rank token-means instead,
as a naive DDP loop does, weights a rank's tokens by 1/n(S_r) and biases the loss towards ranks
with few tokens.) Gradient clipping then sees the same global norm on every rank.

Padding micro-batches (a rank with fewer micro-batches than another runs a dummy one with w = 0)
keep the ranks in lock-step: FSDP2 all-gathers parameters in every forward, DDP all-reduces in
every backward. Only a micro-batch's last backward of a mini-batch synchronises gradients
(`DDP.no_sync` / FSDP2 `set_requires_gradient_sync`); earlier ones accumulate locally.

Mixed precision: with `model.bf16` the FSDP2 ranks compute in bf16 parameters and reduce gradients
in fp32 (`MixedPrecisionPolicy`); the fp32 sharded master weights are what the optimizer steps.
Activation checkpointing is the model's own (`model.gradient_checkpointing`), set before wrapping.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

import torch

from horizonrl.distributed.balance import rank_micro_batches
from horizonrl.distributed.launch import World, world

Tensor = torch.Tensor


class SingleProcess:
    """One learner process: nothing to wrap, nothing to synchronise."""

    lockstep = False
    """Whether every rank must run the same number of micro-batches (padding with dummies)."""
    grad_scale = 1.0
    """Factor on each rank's loss so the averaged gradient is the whole mini-batch's."""

    def __init__(self) -> None:
        self.world = World()

    def wrap(self, model: Any) -> Any:
        return model

    def wrap_frozen(self, model: Any) -> Any:
        return model

    def unwrap(self, model: Any) -> Any:
        return model

    def micro_batches(self, rows: Sequence[int], lengths: Sequence[int], size: int) -> list[list[int]]:
        """This rank's micro-batches (row lists; `[]` is a dummy), sorted by length."""
        ordered = sorted(rows, key=lambda r: int(lengths[r]))
        return [ordered[i : i + size] for i in range(0, len(ordered), size)]

    @contextmanager
    def grad_sync(self, model: Any, sync: bool) -> Iterator[None]:
        yield

    def clip_grad_norm(self, params: list[Tensor], max_norm: float) -> Tensor:
        return torch.nn.utils.clip_grad_norm_(params, max_norm)

    def all_reduce_sum(self, tensor: Tensor) -> Tensor:
        return tensor

    def all_gather_object(self, obj: Any) -> list[Any]:
        return [obj]

    def broadcast_object(self, obj: Any) -> Any:
        return obj

    def barrier(self) -> None:
        pass

    def check_same(self, tensor: Tensor, what: str) -> None:
        """Raise unless every rank holds the same `tensor` (ranks must agree on the batch)."""

    def sampling_copy(self, model: Any) -> Any:
        """A plain module the rollout can sample from without collectives (None: the model itself)."""
        return None

    def refresh_sampling_copy(self, model: Any, sampler: Any) -> None:
        pass


class DataParallel(SingleProcess):
    """DDP or FSDP2 over the torchrun ranks (see the module docstring for the loss math)."""

    lockstep = True

    def __init__(self, strategy: str, device: torch.device, *, bf16: bool = False) -> None:
        import torch.distributed as dist

        if not dist.is_initialized():
            raise RuntimeError("DataParallel needs torch.distributed initialised (run under torchrun)")
        self.world = world()
        self.strategy = strategy
        self.device = device
        self.bf16 = bf16
        self.grad_scale = float(self.world.size)
        self._mesh: Any = None

    # --- wrapping ------------------------------------------------------------------------
    def _fully_shard(self, model: Any) -> Any:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        if self._mesh is None:
            self._mesh = init_device_mesh(self.device.type, (self.world.size,))
        mp = (
            MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            if self.bf16
            else None
        )
        kwargs: dict[str, Any] = {"mesh": self._mesh, **({"mp_policy": mp} if mp is not None else {})}
        blocks = set(getattr(model, "_no_split_modules", None) or ())
        for module in model.modules():  # one FSDP unit per decoder layer (HF names them)
            if type(module).__name__ in blocks:
                fully_shard(module, **kwargs)
        fully_shard(model, **kwargs)
        return model

    def wrap(self, model: Any) -> Any:
        if self.strategy == "fsdp":
            return self._fully_shard(model)
        from torch.nn.parallel import DistributedDataParallel

        ids = [self.device.index] if self.device.type == "cuda" else None
        # buffers (RoPE frequencies) are constants: no sync before each forward
        return DistributedDataParallel(model, device_ids=ids, forward_sync_buffers=False)

    def wrap_frozen(self, model: Any) -> Any:
        """A frozen model (the reference): sharded under FSDP2 (memory); DDP keeps a full copy."""
        return self._fully_shard(model) if self.strategy == "fsdp" else model

    def unwrap(self, model: Any) -> Any:
        from torch.nn.parallel import DistributedDataParallel

        return model.module if isinstance(model, DistributedDataParallel) else model

    # --- lock-step micro-batches -----------------------------------------------------------
    def micro_batches(self, rows: Sequence[int], lengths: Sequence[int], size: int) -> list[list[int]]:
        return rank_micro_batches(rows, lengths, size, self.world.size, self.world.rank)

    @contextmanager
    def grad_sync(self, model: Any, sync: bool) -> Iterator[None]:
        """Synchronise gradients in this backward only when `sync` (the mini-batch's last)."""
        if self.strategy == "fsdp":
            model.set_requires_gradient_sync(sync)
            yield
            return
        with nullcontext() if sync else model.no_sync():
            yield

    def clip_grad_norm(self, params: list[Tensor], max_norm: float) -> Tensor:
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        full = getattr(norm, "full_tensor", None)  # FSDP2: a DTensor over the mesh
        return full() if full is not None else norm

    # --- collectives ---------------------------------------------------------------------
    def all_reduce_sum(self, tensor: Tensor) -> Tensor:
        import torch.distributed as dist

        work = tensor.to(self.device)
        dist.all_reduce(work, op=dist.ReduceOp.SUM)
        return work.to(tensor.device)

    def all_gather_object(self, obj: Any) -> list[Any]:
        import torch.distributed as dist

        out: list[Any] = [None] * self.world.size
        dist.all_gather_object(out, obj)
        return out

    def broadcast_object(self, obj: Any) -> Any:
        import torch.distributed as dist

        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def barrier(self) -> None:
        import torch.distributed as dist

        dist.barrier()

    def check_same(self, tensor: Tensor, what: str) -> None:
        weights = torch.arange(1, tensor.numel() + 1, dtype=torch.float64).reshape(tensor.shape)
        mine = (tuple(tensor.shape), float((tensor.double() * weights).sum()))
        prints = self.all_gather_object(mine)
        if any(p != prints[0] for p in prints):
            raise RuntimeError(f"the ranks disagree on {what}: {prints}")

    # --- the rollout's weights -----------------------------------------------------------
    def sampling_copy(self, model: Any) -> Any:
        """FSDP2: a full, unsharded copy made before sharding (refreshed before each rollout);
        DDP: None (every rank's module is whole; sampling from `unwrap(model)` needs no collective)."""
        if self.strategy != "fsdp":
            return None
        return copy.deepcopy(model).eval().requires_grad_(False)

    @torch.no_grad()
    def refresh_sampling_copy(self, model: Any, sampler: Any) -> None:
        """Gather the full weights (a collective: every rank calls it) into `sampler`."""
        if sampler is None:
            return
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
        own = sampler.state_dict()
        for name, value in full.items():
            own[name].copy_(value)


def make_parallel(strategy: str, device: torch.device, *, bf16: bool = False) -> SingleProcess:
    """`DataParallel` under torchrun with more than one rank, else `SingleProcess`."""
    if world().size == 1:
        return SingleProcess()
    return DataParallel(strategy, device, bf16=bf16)
