"""Token-balanced rows per rank and per micro-batch (pure Python, no torch.distributed).

Multi-turn batches hold rows whose lengths vary 10x, so splitting rows evenly by count leaves one
rank with most of the tokens. `partition_rows` assigns rows to ranks longest first, each to the
rank with the fewest tokens so far (LPT greedy; ties go to the lower rank, then the lower row
index, so every rank computes the same partition from the same lengths). Each rank then splits its
rows into micro-batches of `size` rows of similar length (sorted by length, as one process does).

Every rank must run the same number of forward/backward passes (FSDP2 all-gathers parameters in
each forward; DDP all-reduces in each backward), so `rank_micro_batches` pads a rank's list with
empty micro-batches up to the largest count over ranks; the learner runs those on a dummy row with
weight 0.
"""

from __future__ import annotations

from collections.abc import Sequence


def partition_rows(rows: Sequence[int], lengths: Sequence[int], world: int) -> list[list[int]]:
    """`rows` split into `world` lists of similar token totals (`lengths[r]` tokens for row r)."""
    if world < 1:
        raise ValueError(f"world must be >= 1, got {world}")
    loads = [0] * world
    parts: list[list[int]] = [[] for _ in range(world)]
    for row in sorted(rows, key=lambda r: (-int(lengths[r]), r)):
        rank = min(range(world), key=lambda k: (loads[k], len(parts[k]), k))
        parts[rank].append(row)
        loads[rank] += int(lengths[row])
    return parts


def micro_chunks(rows: Sequence[int], lengths: Sequence[int], size: int) -> list[list[int]]:
    """`rows` sorted by length (then index), in chunks of `size` (what one process runs)."""
    ordered = sorted(rows, key=lambda r: (int(lengths[r]), r))
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def rank_micro_batches(
    rows: Sequence[int], lengths: Sequence[int], size: int, world: int, rank: int
) -> list[list[int]]:
    """This rank's micro-batches of `rows`, padded with `[]` to the largest count over ranks."""
    per_rank = [micro_chunks(part, lengths, size) for part in partition_rows(rows, lengths, world)]
    count = max(len(chunks) for chunks in per_rank)
    mine = per_rank[rank]
    return mine + [[] for _ in range(count - len(mine))]


def token_imbalance(rows: Sequence[int], lengths: Sequence[int], world: int) -> float:
    """Largest rank's tokens over the mean (1.0 is perfect balance)."""
    loads = [sum(int(lengths[r]) for r in part) for part in partition_rows(rows, lengths, world)]
    mean = sum(loads) / world
    return max(loads) / mean if mean else 1.0
