"""Beyond one process: the learner under torchrun (DDP / FSDP2) and Ray placement of env servers.

- `launch`     process-group set-up, world info, relaunching `horizonrl train` under torchrun
- `balance`    token-balanced assignment of a batch's rows to ranks and micro-batches
- `parallel`   the learner's data-parallel strategy: wrapping (DDP, FSDP2 `fully_shard`), lock-step
               micro-batches, loss scaling, collectives (the math is in its docstring)
- `checkpoint` distributed checkpoints (`torch.distributed.checkpoint`) + a plain HF export
- `placement`  what goes where for a `resources:` section (`horizonrl train CONFIG --dry-run`)
- `ray_envs`   env-server replicas placed by Ray; `replica_pool` balances sessions over them

Nothing here imports the trainer; the trainer passes its tensors and models in.
"""
