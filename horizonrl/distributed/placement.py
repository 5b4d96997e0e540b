"""What goes where for a config's `resources:` section; `horizonrl train CONFIG --dry-run` prints it.

    print(format_placement(cfg))

Pure bookkeeping: nothing is started, no GPU or Ray cluster is needed, so the paper's 8-GPU
configs can be checked on a laptop. The plan lists the learner ranks (node, device), the rollout
engines (Ray actors with `rollout_workers: ray`; else the learner ranks themselves with the `hf`
backend, `rollout_tensor_parallel` GPUs each otherwise, on the learner's GPUs when
`rollout_colocated`), the env servers of every family the
run plays (Ray replicas, given URLs, launched subprocesses or in-process envs) and the commands
that start it.
"""

from __future__ import annotations

from dataclasses import dataclass

from horizonrl.config import Config


@dataclass(frozen=True)
class Slot:
    role: str
    """learner, rollout or env."""
    name: str
    where: str
    """Node and devices (or the URL / process)."""
    note: str = ""


def _families(cfg: Config) -> list[str]:
    return list(dict.fromkeys([*cfg.data.families, *(cfg.eval.families or cfg.data.families)]))


def learner_slots(cfg: Config) -> list[Slot]:
    r, t = cfg.resources, cfg.trainer
    per_node = r.nproc_per_node
    gpu = r.gpus_per_node > 0
    threads = t.num_threads if gpu else max(1, t.num_threads // per_node)
    kind = "single process" if r.learner_world_size == 1 else r.strategy
    slots = []
    for rank in range(r.learner_world_size):
        node, local = divmod(rank, per_node)
        device = f"cuda:{local}" if gpu else f"cpu, {threads} thread(s)"
        note = "writes metrics, trajectories, reports" if rank == 0 else ""
        slots.append(Slot("learner", f"rank {rank} ({kind})", f"node {node}, {device}", note))
    return slots


def rollout_slots(cfg: Config) -> list[Slot]:
    r = cfg.resources
    if r.rollout_workers == "ray":
        reserved = f", {r.rollout_tensor_parallel} GPU(s)" if r.gpus_per_node else ""
        free = "a GPU node with free GPUs" if r.gpus_per_node else "a node with free CPUs"
        return [
            Slot(
                "rollout",
                f"worker {k}",
                f"Ray actor, {r.rollout_worker_cpus:g} CPU{reserved}, {free}",
                f"{cfg.rollout.backend}; weights pushed at each sync; restarted if it dies",
            )
            for k in range(r.engines)
        ]
    if cfg.rollout.backend == "hf":
        return [
            Slot("rollout", f"engine {k}", f"= learner rank {k}", "hf backend: the rank's own weights")
            for k in range(r.engines)
        ]
    first = 0 if r.rollout_colocated else r.learner_world_size
    slots = []
    for k in range(r.engines):
        start = first + k * r.rollout_tensor_parallel
        node, local = divmod(start, max(1, r.gpus_per_node))
        gpus = ",".join(str(local + i) for i in range(r.rollout_tensor_parallel))
        where = f"node {node}, cuda:{gpus}" if r.gpus_per_node else "cpu"
        shared = "shares the learner's GPUs" if r.rollout_colocated else "GPUs of its own"
        slots.append(
            Slot(
                "rollout",
                f"engine {k}",
                where,
                f"{cfg.rollout.backend}, TP {r.rollout_tensor_parallel}, {shared}",
            )
        )
    return slots


def env_slots(cfg: Config) -> list[Slot]:
    r, e = cfg.resources, cfg.env
    slots = []
    for offset, family in enumerate(_families(cfg)):
        if family in e.servers:
            for url in e.servers[family].split(","):
                slots.append(Slot("env", f"{family}", url.strip(), "given URL"))
        if r.ray is not None:
            for k in range(int(r.env_replicas.get(family, 1))):
                where = f"Ray actor, {r.env_replica_cpus:g} CPU, a node with free CPUs"
                slots.append(
                    Slot("env", f"{family} replica {k}", where, f"ray={r.ray}; restarted if it dies")
                )
        elif family not in e.servers:
            if e.launch:
                url = f"http://{e.host}:{e.base_port + offset}"
                slots.append(Slot("env", family, f"node 0 (rank 0): {url}", "horizonrl serve subprocess"))
            else:
                slots.append(Slot("env", family, "in-process in every learner rank", "local envs"))
    return slots


def commands(cfg: Config, config_path: str) -> list[str]:
    r = cfg.resources
    base = f"horizonrl train {config_path}"
    if r.learner_world_size == 1:
        return [base]
    if r.nodes == 1:
        return [
            f"{base}    # relaunches itself as: torchrun --standalone --nproc_per_node {r.nproc_per_node} "
            f"-m horizonrl.cli train {config_path}"
        ]
    return [
        f"on node K of {r.nodes} (K = 0..{r.nodes - 1}): torchrun --nnodes {r.nodes} --nproc_per_node "
        f"{r.nproc_per_node} --node_rank K --rdzv_backend c10d --rdzv_endpoint NODE0_HOST:29500 "
        f"-m horizonrl.cli train {config_path}"
    ]


def format_placement(cfg: Config, config_path: str = "CONFIG") -> str:
    """The dry-run text: resources, one line per learner rank / engine / env server, commands."""
    r = cfg.resources
    gpus = r.nodes * r.gpus_per_node
    episodes = cfg.data.batch_size * cfg.rollout.n
    if r.rollout_workers == "ray":  # live episodes are balanced over the workers one by one
        share = f"~{-(-episodes // r.engines)} per Ray rollout worker"
    else:
        share = f"{-(-cfg.data.batch_size // r.engines) * cfg.rollout.n} per engine at most (whole groups)"
    lines = [
        f"resources: {r.nodes} node(s) x {r.gpus_per_node} GPU(s) = {gpus} GPU(s); learner world size "
        f"{r.learner_world_size} ({r.strategy if r.learner_world_size > 1 else 'one process'}); "
        f"{r.engines} rollout engine(s); ray: {r.ray or 'none'}",
        f"batch: {cfg.data.batch_size} items x {cfg.rollout.n} samples = {episodes} episodes per step, "
        + share,
    ]
    for slot in [*learner_slots(cfg), *rollout_slots(cfg), *env_slots(cfg)]:
        note = f"  ({slot.note})" if slot.note else ""
        lines.append(f"  {slot.role:<8} {slot.name:<24} {slot.where}{note}")
    lines.append("start with:")
    lines.extend(f"  {line}" for line in commands(cfg, config_path))
    return "\n".join(lines)
